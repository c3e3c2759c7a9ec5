// SPDX-License-Identifier: BSD-3-Clause
//
// IPv4 multicast on the wire: group addresses, their Ethernet mapping (RFC 1112 6.4), and what
// the decoder accepts and rejects for group frames (lib/wire/multicast.h, decoder.h "addresses").
#include "wire/multicast.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <vector>

#include "wire/decoder.h"
#include "wire/encoder.h"
#include "wire_test_util.h"

namespace {

using namespace dpfab::wire;

uint32_t ip(const char* s) {
  in_addr a{};
  EXPECT_EQ(inet_pton(AF_INET, s, &a), 1) << s;
  return a.s_addr;
}

rte_ether_addr mac(uint8_t a, uint8_t b, uint8_t c, uint8_t d, uint8_t e, uint8_t f) {
  return rte_ether_addr{{a, b, c, d, e, f}};
}

bool same(const rte_ether_addr& x, const rte_ether_addr& y) {
  return std::memcmp(&x, &y, sizeof(x)) == 0;
}

TEST(Multicast, GroupAddressesAreExactly224Slash4) {
  EXPECT_TRUE(is_multicast_ipv4(ip("224.0.0.0")));
  EXPECT_TRUE(is_multicast_ipv4(ip("224.0.0.1")));
  EXPECT_TRUE(is_multicast_ipv4(ip("239.255.255.255")));
  EXPECT_TRUE(is_multicast_ipv4(ip("232.1.2.3")));
  EXPECT_FALSE(is_multicast_ipv4(ip("223.255.255.255")));
  EXPECT_FALSE(is_multicast_ipv4(ip("240.0.0.0")));
  EXPECT_FALSE(is_multicast_ipv4(ip("10.0.0.1")));
  EXPECT_FALSE(is_multicast_ipv4(ip("0.0.0.0")));
  EXPECT_FALSE(is_multicast_ipv4(ip("255.255.255.255")));
  EXPECT_TRUE(is_broadcast_ipv4(ip("255.255.255.255")));
  EXPECT_FALSE(is_broadcast_ipv4(ip("10.255.255.255")));
}

TEST(Multicast, GroupMacIs01005eWithTheLow23BitsOfTheGroup) {
  // RFC 1112 6.4: "placing the low-order 23-bits of the IP address into the low-order 23 bits of
  // the Ethernet multicast address 01-00-5E-00-00-00".
  EXPECT_TRUE(same(multicast_mac(ip("224.0.0.1")), mac(0x01, 0x00, 0x5e, 0x00, 0x00, 0x01)));
  EXPECT_TRUE(same(multicast_mac(ip("239.1.2.3")), mac(0x01, 0x00, 0x5e, 0x01, 0x02, 0x03)));
  // The 24th bit is dropped: 224.128.x.y and 224.0.x.y share a MAC.
  EXPECT_TRUE(same(multicast_mac(ip("239.255.255.254")), mac(0x01, 0x00, 0x5e, 0x7f, 0xff, 0xfe)));
  EXPECT_TRUE(same(multicast_mac(ip("224.128.1.1")), multicast_mac(ip("224.0.1.1"))));
  EXPECT_TRUE(is_multicast_mac_of(mac(0x01, 0x00, 0x5e, 0x01, 0x02, 0x03), ip("239.1.2.3")));
  EXPECT_TRUE(is_multicast_mac_of(mac(0x01, 0x00, 0x5e, 0x01, 0x02, 0x03), ip("239.129.2.3")));
  EXPECT_FALSE(is_multicast_mac_of(mac(0x01, 0x00, 0x5e, 0x01, 0x02, 0x04), ip("239.1.2.3")));
  EXPECT_TRUE(is_group_mac(multicast_mac(ip("239.1.2.3"))));
  EXPECT_TRUE(is_group_mac(mac(0xff, 0xff, 0xff, 0xff, 0xff, 0xff)));
  EXPECT_FALSE(is_group_mac(mac(0x02, 0x00, 0x00, 0x00, 0x00, 0x01)));
}

// A dpfab frame with the given addresses (checksums right), decoded.
Verdict decode_with(const rte_ether_addr& src_mac, const rte_ether_addr& dst_mac, uint32_t src_ip,
                    uint32_t dst_ip, DecodeStats& stats, Frame* out) {
  Route r = wire_test::golden_route();
  r.src_mac = src_mac;
  r.dst_mac = dst_mac;
  r.src_ip_be = src_ip;
  r.dst_ip_be = dst_ip;
  std::vector<uint8_t> f(kOverhead + 5, 'x');
  EXPECT_EQ(encode_frame(f, r, wire_test::golden_header(), 1), 0);
  return decode_frame(f, out, stats);
}

const rte_ether_addr kUnicast = mac(0x02, 0, 0, 0, 0, 0x01);
const rte_ether_addr kBroadcast = mac(0xff, 0xff, 0xff, 0xff, 0xff, 0xff);

TEST(Decoder, AcceptsAGroupFrameSentToItsGroupMac) {
  DecodeStats stats;
  Frame f;
  const uint32_t group = ip("239.1.2.3");
  ASSERT_EQ(decode_with(kUnicast, multicast_mac(group), ip("10.0.0.1"), group, stats, &f),
            Verdict::kData);
  EXPECT_EQ(f.dst_ip_be, group);
  EXPECT_TRUE(same(f.dst_mac, multicast_mac(group)));
  EXPECT_EQ(stats.get(Verdict::kData), 1u);
  // Groups that share the MAC (the 24th bit): the MAC is right for both; the member check (by IP)
  // is the receiver's.
  ASSERT_EQ(
      decode_with(kUnicast, multicast_mac(group), ip("10.0.0.1"), ip("239.129.2.3"), stats, &f),
      Verdict::kData);
}

TEST(Decoder, RejectsAGroupFrameWithAUnicastOrForeignMac) {
  DecodeStats stats;
  Frame f;
  const uint32_t group = ip("239.1.2.3");
  EXPECT_EQ(decode_with(kUnicast, kUnicast, ip("10.0.0.1"), group, stats, &f),
            Verdict::kIpDestination);
  EXPECT_EQ(decode_with(kUnicast, multicast_mac(ip("239.1.2.4")), ip("10.0.0.1"), group, stats, &f),
            Verdict::kIpDestination);
  EXPECT_EQ(decode_with(kUnicast, kBroadcast, ip("10.0.0.1"), group, stats, &f),
            Verdict::kIpDestination);
  EXPECT_EQ(stats.get(Verdict::kIpDestination), 3u);
  EXPECT_EQ(stats.rejected(), 3u);
}

TEST(Decoder, RejectsAUnicastDatagramInAGroupOrBroadcastFrame) {
  // RFC 1122 3.3.6: a datagram received via link-layer broadcast/multicast without an IP
  // multicast destination is discarded.
  DecodeStats stats;
  Frame f;
  EXPECT_EQ(decode_with(kUnicast, multicast_mac(ip("239.1.2.3")), ip("10.0.0.1"), ip("10.0.0.2"),
                        stats, &f),
            Verdict::kIpDestination);
  EXPECT_EQ(decode_with(kUnicast, kBroadcast, ip("10.0.0.1"), ip("10.0.0.2"), stats, &f),
            Verdict::kIpDestination);
  EXPECT_EQ(decode_with(kUnicast, kBroadcast, ip("10.0.0.1"), ip("255.255.255.255"), stats, &f),
            Verdict::kIpDestination);
  EXPECT_EQ(stats.get(Verdict::kIpDestination), 3u);
}

TEST(Decoder, RejectsGroupSourceAddresses) {
  DecodeStats stats;
  Frame f;
  const rte_ether_addr dst = mac(0x02, 0, 0, 0, 0, 0x02);
  EXPECT_EQ(
      decode_with(multicast_mac(ip("239.1.2.3")), dst, ip("10.0.0.1"), ip("10.0.0.2"), stats, &f),
      Verdict::kIpSource);
  EXPECT_EQ(decode_with(kUnicast, dst, ip("239.1.2.3"), ip("10.0.0.2"), stats, &f),
            Verdict::kIpSource);
  EXPECT_EQ(decode_with(kUnicast, dst, ip("255.255.255.255"), ip("10.0.0.2"), stats, &f),
            Verdict::kIpSource);
  EXPECT_EQ(stats.get(Verdict::kIpSource), 3u);
  EXPECT_STREQ(verdict_name(Verdict::kIpSource), "ip-source");
  EXPECT_STREQ(verdict_name(Verdict::kIpDestination), "ip-destination");
}

TEST(Decoder, UnicastFramesAreUnaffected) {
  DecodeStats stats;
  Frame f;
  EXPECT_EQ(
      decode_with(kUnicast, mac(0x02, 0, 0, 0, 0, 0x02), ip("10.0.0.1"), ip("10.0.0.2"), stats, &f),
      Verdict::kData);
  EXPECT_EQ(stats.rejected(), 0u);
}

// RFC 2236 2 and 9: an IGMPv2 report goes to the group, a leave to 224.0.0.2, with TTL 1 and the
// Router Alert option; both checksums hold (checked with the tests' own one's-complement sum).
TEST(Igmp, ReportGoesToTheGroupAndLeaveToAllRoutersWithTtl1AndRouterAlert) {
  const uint32_t group = ip("239.1.2.3");
  Local local{kUnicast, ip("10.0.0.1")};
  for (IgmpType type : {IgmpType::kReportV2, IgmpType::kLeave}) {
    uint8_t f[kMinFrameLen];
    ASSERT_EQ(build_igmp_v2(f, local, type, group), kMinFrameLen);
    const uint32_t dst = type == IgmpType::kLeave ? ip("224.0.0.2") : group;
    const rte_ether_addr dst_mac = multicast_mac(dst);
    EXPECT_EQ(0, std::memcmp(f, &dst_mac, 6));
    EXPECT_EQ(0, std::memcmp(f + 6, &kUnicast, 6));
    EXPECT_EQ(f[12], 0x08);
    EXPECT_EQ(f[13], 0x00);
    const uint8_t* iph = f + 14;
    EXPECT_EQ(iph[0], 0x46);  // IHL 6: one option word
    EXPECT_EQ((iph[2] << 8) | iph[3], 32);
    EXPECT_EQ(iph[8], 1);  // TTL
    EXPECT_EQ(iph[9], 2);  // IGMP
    EXPECT_EQ(0, std::memcmp(iph + 12, &local.ip_be, 4));
    EXPECT_EQ(0, std::memcmp(iph + 16, &dst, 4));
    EXPECT_EQ(iph[20], 0x94);  // Router Alert
    EXPECT_EQ(iph[21], 0x04);
    EXPECT_EQ(wire_test::ones_sum(iph, 24), 0xffff);
    const uint8_t* igmp = iph + 24;
    EXPECT_EQ(igmp[0], static_cast<uint8_t>(type));
    EXPECT_EQ(igmp[1], 0);
    EXPECT_EQ(0, std::memcmp(igmp + 4, &group, 4));
    EXPECT_EQ(wire_test::ones_sum(igmp, 8), 0xffff);
    // The rest is padding.
    for (size_t i = 14 + 32; i < kMinFrameLen; ++i) EXPECT_EQ(f[i], 0) << i;
  }
}

TEST(Igmp, RefusesAShortBufferOrAUnicastGroup) {
  uint8_t f[kMinFrameLen];
  Local local{kUnicast, ip("10.0.0.1")};
  EXPECT_EQ(build_igmp_v2(std::span<uint8_t>(f, kMinFrameLen - 1), local, IgmpType::kReportV2,
                          ip("239.1.2.3")),
            0u);
  EXPECT_EQ(build_igmp_v2(f, local, IgmpType::kReportV2, ip("10.1.2.3")), 0u);
}

}  // namespace
