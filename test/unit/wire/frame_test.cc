// SPDX-License-Identifier: BSD-3-Clause
//
// The frame format, encoder and decoder: byte-exact agreement with a hand-crafted frame, round
// trips of every field, checksums against an independent implementation, every reject reason with
// a crafted frame, and the mbuf front-ends on mbufs built by hand (single segment and chains,
// software checksums and offload preparation, NIC checksum verdicts).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <cerrno>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "wire/checksum.h"
#include "wire/decoder.h"
#include "wire/encoder.h"
#include "wire/multicast.h"
#include "wire_test_util.h"

using namespace dpfab::wire;
using namespace wire_test;

namespace {

std::vector<uint8_t> encode(const Route& r, const Header& h, const std::vector<uint8_t>& payload,
                            uint16_t ip_id) {
  std::vector<uint8_t> f(kOverhead + payload.size());
  std::copy(payload.begin(), payload.end(), f.begin() + kPayloadOffset);
  EXPECT_EQ(encode_frame(f, r, h, ip_id), 0);
  return f;
}

std::vector<uint8_t> golden_payload() {
  return std::vector<uint8_t>(kGoldenPayload, kGoldenPayload + 12);
}

std::vector<uint8_t> valid_frame(size_t payload_len = 12) {
  std::vector<uint8_t> payload(payload_len);
  for (size_t i = 0; i < payload_len; ++i) payload[i] = static_cast<uint8_t>(i * 7 + 1);
  Header h = golden_header();
  return encode(golden_route(), h, payload, kGoldenIpId);
}

Verdict decode(const std::vector<uint8_t>& f, Frame* out = nullptr, RxChecksums nic = {}) {
  DecodeStats stats;
  Frame tmp;
  Verdict v = decode_frame(f, out ? out : &tmp, stats, nic);
  EXPECT_EQ(stats.get(v), 1u);
  return v;
}

// Field offsets in a frame without IPv4 options.
constexpr size_t kIpTotalLenOff = kIpv4Offset + 2;
constexpr size_t kIpFragOff = kIpv4Offset + 6;
constexpr size_t kIpProtoOff = kIpv4Offset + 9;
constexpr size_t kUdpLenOff = kUdpOffset + 4;
constexpr size_t kUdpCksumOff = kUdpOffset + 6;

void put16(std::vector<uint8_t>& f, size_t off, uint16_t v) {
  f[off] = static_cast<uint8_t>(v >> 8);
  f[off + 1] = static_cast<uint8_t>(v);
}

}  // namespace

// ---- Format constants ----

TEST(Format, OverheadIsEthernetIpv4UdpAndThe32ByteHeader) {
  EXPECT_EQ(kOverhead, 74u);
  EXPECT_EQ(kHeaderLen, 32u);
  EXPECT_EQ(kL3Overhead, 60u);
  EXPECT_EQ(kPayloadOffset, 74u);
  EXPECT_EQ(max_payload(1500), 1440u);
  EXPECT_EQ(max_payload(9000), 8940u);
  EXPECT_EQ(max_payload(60), 0u);
  EXPECT_EQ(max_payload(61), 1u);
  EXPECT_EQ(max_payload(100000), kMaxPayload);
  EXPECT_EQ(kMaxPayload, 65535u - 60u);
}

TEST(Format, HeaderIsWrittenInNetworkByteOrderAtTheDocumentedOffsets) {
  Header h = golden_header();
  uint8_t b[kHeaderLen];
  write_header(b, h);
  const uint8_t want[kHeaderLen] = {1,  1,  0,    1,    0,    3,    0,    7,    0,    0,   0,
                                    12, 1,  2,    3,    4,    5,    6,    7,    8,    9,   10,
                                    11, 12, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
  EXPECT_EQ(0, std::memcmp(b, want, kHeaderLen));
  EXPECT_EQ(read_header(b), h);
}

TEST(Format, OnlyDataRdmAndCmAreAcceptedTheReservedTypesAreNot) {
  EXPECT_FALSE(type_accepted(0));
  EXPECT_TRUE(type_accepted(static_cast<uint8_t>(Type::kData)));
  EXPECT_TRUE(type_accepted(static_cast<uint8_t>(Type::kRdm)));
  EXPECT_TRUE(type_accepted(static_cast<uint8_t>(Type::kCm)));
  EXPECT_FALSE(type_accepted(static_cast<uint8_t>(Type::kCm) + 1));
  for (Type t : {Type::kAck, Type::kNack, Type::kConnReq, Type::kConnResp, Type::kDisconnect})
    EXPECT_FALSE(type_accepted(static_cast<uint8_t>(t)));
  EXPECT_FALSE(type_accepted(255));
}

// ---- Encoder ----

TEST(Encoder, RawBufferMatchesTheHandCraftedFrameByteForByte) {
  auto f = encode(golden_route(), golden_header(), golden_payload(), kGoldenIpId);
  EXPECT_EQ(f, kGoldenFrame);
}

TEST(Encoder, PayloadLengthComesFromTheBufferNotTheHeader) {
  Header h = golden_header();
  h.payload_len = 9999;
  auto f = encode(golden_route(), h, golden_payload(), kGoldenIpId);
  EXPECT_EQ(f, kGoldenFrame);
}

TEST(Encoder, ChecksumsAgreeWithAnIndependentImplementationForEveryPayloadLength) {
  std::mt19937 rng(42);
  for (size_t len = 0; len <= 300; ++len) {
    std::vector<uint8_t> payload(len);
    for (auto& b : payload) b = static_cast<uint8_t>(rng());
    auto f = encode(golden_route(), golden_header(), payload, static_cast<uint16_t>(len));
    auto g = f;
    fix_checksums(g);
    EXPECT_EQ(f, g) << "payload length " << len;
  }
}

TEST(Encoder, ComputedUdpChecksumZeroIsSentAsAllOnes) {
  // Choose two payload bytes so that the one's-complement sum is 0xffff: the checksum computes
  // to 0, which RFC 768 transmits as 0xffff (0 would mean "no checksum").
  std::vector<uint8_t> payload = {0, 0, 0x12, 0x34};
  auto f = encode(golden_route(), golden_header(), payload, 1);
  const uint16_t c = static_cast<uint16_t>((f[kUdpCksumOff] << 8) | f[kUdpCksumOff + 1]);
  payload[0] = static_cast<uint8_t>(c >> 8);
  payload[1] = static_cast<uint8_t>(c);
  f = encode(golden_route(), golden_header(), payload, 1);
  EXPECT_EQ(f[kUdpCksumOff], 0xff);
  EXPECT_EQ(f[kUdpCksumOff + 1], 0xff);
  EXPECT_EQ(decode(f), Verdict::kData);
}

TEST(Encoder, WritesTtl64DfAndIhl5) {
  auto f = valid_frame();
  EXPECT_EQ(f[kIpv4Offset], 0x45);
  EXPECT_EQ(f[kIpv4Offset + 8], 64);
  EXPECT_EQ(f[kIpFragOff], 0x40);
  EXPECT_EQ(f[kIpFragOff + 1], 0x00);
  EXPECT_EQ(f[kIpProtoOff], 17);
  EXPECT_EQ(f[12], 0x08);
  EXPECT_EQ(f[13], 0x00);
}

TEST(Encoder, RefusesWhatTheDecoderWouldRejectAndWritesNothing) {
  std::vector<uint8_t> f(kOverhead + 4, 0xaa);
  const auto before = f;
  Header h = golden_header();
  h.version = 2;
  EXPECT_EQ(encode_frame(f, golden_route(), h, 0), -EINVAL);
  h = golden_header();
  h.type = Type::kAck;
  EXPECT_EQ(encode_frame(f, golden_route(), h, 0), -EINVAL);
  h = golden_header();
  h.flags = 0x8000;
  EXPECT_EQ(encode_frame(f, golden_route(), h, 0), -EINVAL);
  std::vector<uint8_t> small(kOverhead - 1);
  EXPECT_EQ(encode_frame(small, golden_route(), golden_header(), 0), -EINVAL);
  EXPECT_EQ(f, before);
  std::vector<uint8_t> big(kOverhead + kMaxPayload + 1);
  EXPECT_EQ(encode_frame(big, golden_route(), golden_header(), 0), -EMSGSIZE);
  std::vector<uint8_t> biggest(kOverhead + kMaxPayload);
  EXPECT_EQ(encode_frame(biggest, golden_route(), golden_header(), 0), 0);
  EXPECT_EQ(decode(biggest), Verdict::kData);
}

// ---- Decoder: valid frames ----

TEST(Decoder, DecodesEveryFieldOfTheHandCraftedFrame) {
  Frame fr;
  ASSERT_EQ(decode(kGoldenFrame, &fr), Verdict::kData);
  Route r = golden_route();
  EXPECT_EQ(0, std::memcmp(&fr.src_mac, &r.src_mac, 6));
  EXPECT_EQ(0, std::memcmp(&fr.dst_mac, &r.dst_mac, 6));
  EXPECT_EQ(fr.src_ip_be, r.src_ip_be);
  EXPECT_EQ(fr.dst_ip_be, r.dst_ip_be);
  EXPECT_EQ(fr.src_port_be, r.src_port_be);
  EXPECT_EQ(fr.dst_port_be, r.dst_port_be);
  EXPECT_EQ(fr.ip_id, kGoldenIpId);
  EXPECT_EQ(fr.header, golden_header());
  EXPECT_EQ(fr.payload_offset, kPayloadOffset);
  EXPECT_EQ(fr.payload_len, 12u);
  ASSERT_EQ(fr.payload, kGoldenFrame.data() + kPayloadOffset);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(fr.payload), 12), kGoldenPayload);
}

TEST(Decoder, RoundTripsEveryFieldOverRandomValues) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    Route r;
    for (auto& b : r.src_mac.addr_bytes) b = static_cast<uint8_t>(rng());
    for (auto& b : r.dst_mac.addr_bytes) b = static_cast<uint8_t>(rng());
    r.src_ip_be = static_cast<uint32_t>(rng());
    r.dst_ip_be = static_cast<uint32_t>(rng());
    r.src_port_be = static_cast<uint16_t>(rng());
    r.dst_port_be = static_cast<uint16_t>(rng());
    // Well-formed addresses (the decoder rejects the others): a unicast source, and a group
    // destination exactly when the destination IPv4 is one.
    r.src_mac.addr_bytes[0] &= 0xfe;
    r.src_ip_be &= htonl(0x7fffffff);
    if (is_multicast_ipv4(r.dst_ip_be))
      r.dst_mac = multicast_mac(r.dst_ip_be);
    else
      r.dst_mac.addr_bytes[0] &= 0xfe;
    Header h;
    h.flags = static_cast<uint16_t>(rng() & kKnownFlags);
    h.src_ep = static_cast<uint16_t>(rng());
    h.dst_ep = static_cast<uint16_t>(rng());
    h.seq = static_cast<uint32_t>(rng());
    h.ack = static_cast<uint32_t>(rng());
    h.msg_id = static_cast<uint32_t>(rng());
    h.cq_data = rng();
    std::vector<uint8_t> payload(rng() % 1500);
    for (auto& b : payload) b = static_cast<uint8_t>(rng());
    const auto ip_id = static_cast<uint16_t>(rng());
    auto f = encode(r, h, payload, ip_id);
    Frame fr;
    ASSERT_EQ(decode(f, &fr), Verdict::kData) << i;
    h.payload_len = static_cast<uint32_t>(payload.size());
    EXPECT_EQ(fr.header, h);
    EXPECT_EQ(0, std::memcmp(&fr.src_mac, &r.src_mac, 6));
    EXPECT_EQ(0, std::memcmp(&fr.dst_mac, &r.dst_mac, 6));
    EXPECT_EQ(fr.src_ip_be, r.src_ip_be);
    EXPECT_EQ(fr.dst_ip_be, r.dst_ip_be);
    EXPECT_EQ(fr.src_port_be, r.src_port_be);
    EXPECT_EQ(fr.dst_port_be, r.dst_port_be);
    EXPECT_EQ(fr.ip_id, ip_id);
    ASSERT_EQ(fr.payload_len, payload.size());
    if (!payload.empty()) {  // an empty vector's data() may be null, which memcmp may not get
      EXPECT_EQ(0, std::memcmp(fr.payload, payload.data(), payload.size()));
    }
  }
}

TEST(Decoder, AcceptsIpv4OptionsAndSkipsThem) {
  auto f = valid_frame();
  // Insert 8 bytes of options (NOP NOP NOP NOP, NOP NOP NOP EOL): IHL 7.
  const uint8_t opts[8] = {1, 1, 1, 1, 1, 1, 1, 0};
  f.insert(f.begin() + kUdpOffset, opts, opts + 8);
  f[kIpv4Offset] = 0x47;
  put16(f, kIpTotalLenOff, static_cast<uint16_t>(20 + 8 + 8 + 32 + 12));
  fix_checksums(f);
  Frame fr;
  ASSERT_EQ(decode(f, &fr), Verdict::kData);
  EXPECT_EQ(fr.payload_offset, kPayloadOffset + 8);
  EXPECT_EQ(fr.payload_len, 12u);
  EXPECT_EQ(fr.payload, f.data() + kPayloadOffset + 8);
  EXPECT_EQ(fr.src_port_be, htons(9228));
  EXPECT_EQ(fr.header, golden_header());
}

TEST(Decoder, IgnoresEthernetPaddingAfterTheIpv4TotalLength) {
  auto f = valid_frame(0);  // 74 bytes; pad as a switch would to 80
  f.resize(80, 0);
  Frame fr;
  ASSERT_EQ(decode(f, &fr), Verdict::kData);
  EXPECT_EQ(fr.payload_len, 0u);
}

TEST(Decoder, UdpChecksumZeroMeansNoneAndIsAccepted) {
  auto f = valid_frame();
  put16(f, kUdpCksumOff, 0);
  f[kPayloadOffset] ^= 0xff;  // nothing verifies the payload now
  EXPECT_EQ(decode(f), Verdict::kData);
}

TEST(Decoder, FramesWithDfClearAreAccepted) {
  auto f = valid_frame();
  put16(f, kIpFragOff, 0);
  fix_checksums(f);
  EXPECT_EQ(decode(f), Verdict::kData);
}

// ---- Decoder: every reject reason ----

TEST(Decoder, RejectsAFrameTruncatedAtEveryLength) {
  for (auto full : {valid_frame(0), valid_frame(12), valid_frame(301)}) {
    for (size_t n = 0; n < full.size(); ++n) {
      std::vector<uint8_t> f(full.begin(), full.begin() + static_cast<ptrdiff_t>(n));
      const Verdict want = n < 14   ? Verdict::kEthTruncated
                           : n < 34 ? Verdict::kIpTruncated
                                    : Verdict::kIpTotalLength;
      EXPECT_EQ(decode(f), want) << "length " << n;
    }
    EXPECT_EQ(decode(full), Verdict::kData);
  }
}

TEST(Decoder, RejectsATruncatedFrameWithIpv4Options) {
  auto f = valid_frame();
  const uint8_t opts[4] = {1, 1, 1, 0};
  f.insert(f.begin() + kUdpOffset, opts, opts + 4);
  f[kIpv4Offset] = 0x46;
  put16(f, kIpTotalLenOff, static_cast<uint16_t>(24 + 40 + 12));
  fix_checksums(f);
  ASSERT_EQ(decode(f), Verdict::kData);
  for (size_t n = 34; n < 38; ++n)
    EXPECT_EQ(decode(std::vector<uint8_t>(f.begin(), f.begin() + static_cast<ptrdiff_t>(n))),
              Verdict::kIpTruncated);
}

TEST(Decoder, ReportsArpAndRejectsVlanAndOtherEtherTypes) {
  auto f = valid_frame();
  put16(f, 12, 0x0806);
  Frame fr;
  ASSERT_EQ(decode(f, &fr), Verdict::kArp);
  EXPECT_EQ(fr.payload, f.data() + 14);
  EXPECT_EQ(fr.payload_len, f.size() - 14);
  put16(f, 12, 0x8100);
  EXPECT_EQ(decode(f), Verdict::kVlan);
  put16(f, 12, 0x88a8);
  EXPECT_EQ(decode(f), Verdict::kVlan);
  for (uint16_t t : {0x86dd, 0x0000, 0x88cc, 0x0801, 0xffff}) {
    put16(f, 12, t);
    EXPECT_EQ(decode(f), Verdict::kEtherType) << t;
  }
}

TEST(Decoder, RejectsIpVersionOtherThan4AndIhlBelow5) {
  auto f = valid_frame();
  f[kIpv4Offset] = 0x65;
  fix_checksums(f);
  EXPECT_EQ(decode(f), Verdict::kIpVersion);
  for (uint8_t ihl = 0; ihl < 5; ++ihl) {
    f[kIpv4Offset] = static_cast<uint8_t>(0x40 | ihl);
    EXPECT_EQ(decode(f), Verdict::kIpHeaderLength) << int(ihl);
  }
}

TEST(Decoder, RejectsABadIpv4ChecksumUnlessTheNicVerifiedIt) {
  auto f = valid_frame();
  f[kIpv4Offset + 10] ^= 0x01;
  EXPECT_EQ(decode(f), Verdict::kIpChecksum);
  EXPECT_EQ(decode(f, nullptr, {RxChecksum::kGood, RxChecksum::kUnknown}), Verdict::kData);
  auto good = valid_frame();
  EXPECT_EQ(decode(good, nullptr, {RxChecksum::kBad, RxChecksum::kUnknown}), Verdict::kIpChecksum);
}

TEST(Decoder, RejectsABadUdpChecksumUnlessTheNicVerifiedIt) {
  auto f = valid_frame();
  f[kPayloadOffset + 3] ^= 0x10;  // corrupt the payload: only the UDP checksum notices
  EXPECT_EQ(decode(f), Verdict::kUdpChecksum);
  EXPECT_EQ(decode(f, nullptr, {RxChecksum::kUnknown, RxChecksum::kGood}), Verdict::kData);
  auto good = valid_frame();
  EXPECT_EQ(decode(good, nullptr, {RxChecksum::kUnknown, RxChecksum::kBad}), Verdict::kUdpChecksum);
  good[kUdpCksumOff] ^= 0x80;
  EXPECT_EQ(decode(good), Verdict::kUdpChecksum);
}

TEST(Decoder, RejectsIpTotalLengthBeyondTheFrameOrTooShortForTheHeaders) {
  auto f = valid_frame();
  put16(f, kIpTotalLenOff, static_cast<uint16_t>(f.size() - 14 + 1));
  fix_checksums(f);
  EXPECT_EQ(decode(f), Verdict::kIpTotalLength);
  put16(f, kIpTotalLenOff, 20 + 8 + 32 - 1);
  fix_checksums(f);
  EXPECT_EQ(decode(f), Verdict::kIpTotalLength);
}

TEST(Decoder, RejectsFragments) {
  auto f = valid_frame();
  for (uint16_t frag : {0x2000 /* MF */, 0x6000 /* DF|MF */, 0x0001 /* offset 8 */,
                        0x1fff /* max offset */, 0x2001}) {
    put16(f, kIpFragOff, frag);
    fix_checksums(f);
    EXPECT_EQ(decode(f), Verdict::kIpFragment) << std::hex << frag;
  }
}

TEST(Decoder, RejectsProtocolsOtherThanUdp) {
  auto f = valid_frame();
  for (uint8_t proto : {1, 6, 132, 255}) {
    f[kIpProtoOff] = proto;
    fix_checksums(f);
    EXPECT_EQ(decode(f), Verdict::kIpProtocol) << int(proto);
  }
}

TEST(Decoder, RejectsUdpLengthMismatchesBothWays) {
  auto f = valid_frame();
  const uint16_t udp_len = static_cast<uint16_t>(8 + 32 + 12);
  for (uint16_t bad : {uint16_t(udp_len + 1), uint16_t(udp_len - 1), uint16_t(0), uint16_t(8)}) {
    put16(f, kUdpLenOff, bad);
    fix_checksums(f);
    EXPECT_EQ(decode(f), Verdict::kUdpLength) << bad;
  }
  // Padding after the datagram does not make a short UDP length acceptable: IPv4 total length
  // and UDP length must agree.
  auto p = valid_frame();
  p.resize(p.size() + 4, 0);
  put16(p, kIpTotalLenOff, static_cast<uint16_t>(20 + udp_len + 4));
  fix_checksums(p);
  EXPECT_EQ(decode(p), Verdict::kUdpLength);
}

TEST(Decoder, RejectsABadHeaderVersionTypeOrFlags) {
  auto f = valid_frame();
  for (uint8_t v : {0, 2, 255}) {
    auto g = f;
    g[kHeaderOffset] = v;
    fix_checksums(g);
    EXPECT_EQ(decode(g), Verdict::kHeaderVersion) << int(v);
  }
  for (uint8_t t : {0, 2, 3, 4, 5, 6, 9, 200, 255}) {
    auto g = f;
    g[kHeaderOffset + 1] = t;
    fix_checksums(g);
    EXPECT_EQ(decode(g), Verdict::kHeaderType) << int(t);
  }
  for (uint16_t fl : {0x0002, 0x8000, 0xffff}) {
    auto g = f;
    put16(g, kHeaderOffset + 2, fl);
    fix_checksums(g);
    EXPECT_EQ(decode(g), Verdict::kHeaderFlags) << fl;
  }
}

TEST(Decoder, RejectsAPayloadLengthThatDisagreesWithTheUdpLengthBothWays) {
  auto f = valid_frame();
  for (uint32_t len : {11u, 13u, 0u, 0xffffffffu}) {
    auto g = f;
    g[kHeaderOffset + 8] = static_cast<uint8_t>(len >> 24);
    g[kHeaderOffset + 9] = static_cast<uint8_t>(len >> 16);
    g[kHeaderOffset + 10] = static_cast<uint8_t>(len >> 8);
    g[kHeaderOffset + 11] = static_cast<uint8_t>(len);
    fix_checksums(g);
    EXPECT_EQ(decode(g), Verdict::kPayloadLength) << len;
  }
}

TEST(Decoder, CountsEveryVerdictOnce) {
  DecodeStats stats;
  Frame fr;
  auto good = valid_frame();
  auto bad = good;
  bad[kIpv4Offset + 10] ^= 1;
  std::vector<uint8_t> empty;
  EXPECT_EQ(decode_frame(good, &fr, stats), Verdict::kData);
  EXPECT_EQ(decode_frame(good, &fr, stats), Verdict::kData);
  EXPECT_EQ(decode_frame(bad, &fr, stats), Verdict::kIpChecksum);
  EXPECT_EQ(decode_frame(empty, &fr, stats), Verdict::kEthTruncated);
  EXPECT_EQ(stats.get(Verdict::kData), 2u);
  EXPECT_EQ(stats.get(Verdict::kIpChecksum), 1u);
  EXPECT_EQ(stats.get(Verdict::kEthTruncated), 1u);
  EXPECT_EQ(stats.get(Verdict::kUdpChecksum), 0u);
  EXPECT_EQ(stats.rejected(), 2u);
}

TEST(Decoder, EveryVerdictHasADistinctName) {
  std::set<std::string> names;
  for (size_t i = 0; i < static_cast<size_t>(Verdict::kCount); ++i) {
    std::string n = verdict_name(static_cast<Verdict>(i));
    EXPECT_NE(n, "?");
    names.insert(n);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(Verdict::kCount));
  EXPECT_STREQ(verdict_name(Verdict::kCount), "?");
}

// ---- HeaderTemplate: encode_mbuf's headers for udp_none links, prepared once ----

TEST(HeaderTemplate, WritesTheBytesEncodeMbufWritesOnALinkWithoutUdpChecksum) {
  std::mt19937_64 rng(11);
  TxChecksumCaps caps;
  caps.udp_none = true;
  for (int i = 0; i < 3000; ++i) {
    Route r;
    for (auto& b : r.src_mac.addr_bytes) b = static_cast<uint8_t>(rng());
    for (auto& b : r.dst_mac.addr_bytes) b = static_cast<uint8_t>(rng());
    r.src_ip_be = static_cast<uint32_t>(rng());
    r.dst_ip_be = static_cast<uint32_t>(rng());
    r.src_port_be = static_cast<uint16_t>(rng());
    r.dst_port_be = static_cast<uint16_t>(rng());
    Header h;
    h.type = rng() & 1 ? Type::kRdm : Type::kData;
    h.flags = h.type == Type::kData ? static_cast<uint16_t>(rng() & kKnownFlags) : 0;
    h.src_ep = static_cast<uint16_t>(rng());
    h.dst_ep = static_cast<uint16_t>(rng());
    if (h.type == Type::kData) {
      h.seq = static_cast<uint32_t>(rng());
      h.cq_data = rng();
    }
    h.payload_len = static_cast<uint32_t>(rng());  // ignored: the payload's length counts
    HeaderTemplate t;
    ASSERT_EQ(t.init(r, h), 0);
    // Lengths from empty to the largest payload, the extremes often; any identification.
    const size_t len = i % 7 == 0 ? kMaxPayload : i % 7 == 1 ? 0 : rng() % (kMaxPayload + 1);
    const auto ip_id = static_cast<uint16_t>(i % 5 == 0 ? 0xffff : rng());
    std::vector<uint8_t> payload(len);
    for (auto& b : payload) b = static_cast<uint8_t>(rng());
    TestMbuf mb(kMaxPayload + kOverhead);
    if (len) mb.append(payload.data(), len);
    ASSERT_EQ(encode_mbuf(&mb.m, r, h, ip_id, caps), 0);
    std::vector<uint8_t> got(kOverhead);
    // A route's destination MAC is the caller's to give per frame (it may change).
    t.write(got.data(), r.dst_mac.addr_bytes, static_cast<uint32_t>(len), ip_id);
    ASSERT_EQ(0, std::memcmp(got.data(), rte_pktmbuf_mtod(&mb.m, const uint8_t*), kOverhead))
        << "frame " << i << ", payload " << len << ", id " << ip_id;
  }
}

TEST(HeaderTemplate, RefusesAHeaderTheDecoderWouldReject) {
  HeaderTemplate t;
  Header bad = golden_header();
  bad.flags = 0x8000;
  EXPECT_EQ(t.init(golden_route(), bad), -EINVAL);
  bad = golden_header();
  bad.version = 9;
  EXPECT_EQ(t.init(golden_route(), bad), -EINVAL);
}

// ---- mbuf front-ends (rte_mbufs built by hand, no EAL) ----

TEST(EncoderMbuf, SoftwareChecksumsMatchTheHandCraftedFrame) {
  TestMbuf mb;
  auto payload = golden_payload();
  mb.append(payload.data(), payload.size());
  mb.m.ol_flags = RTE_MBUF_F_TX_TCP_CKSUM;  // stale flags are cleared
  ASSERT_EQ(encode_mbuf(&mb.m, golden_route(), golden_header(), kGoldenIpId, {}), 0);
  ASSERT_EQ(mb.m.pkt_len, kGoldenFrame.size());
  ASSERT_EQ(mb.m.data_len, kGoldenFrame.size());
  EXPECT_EQ(0,
            std::memcmp(rte_pktmbuf_mtod(&mb.m, void*), kGoldenFrame.data(), kGoldenFrame.size()));
  EXPECT_EQ(mb.m.ol_flags, 0u);
}

TEST(EncoderMbuf, ChecksumOffloadSetsFlagsLengthsAndThePseudoHeaderSum) {
  for (auto caps :
       {TxChecksumCaps{true, true}, TxChecksumCaps{true, false}, TxChecksumCaps{false, true}}) {
    TestMbuf mb;
    auto payload = golden_payload();
    mb.append(payload.data(), payload.size());
    ASSERT_EQ(encode_mbuf(&mb.m, golden_route(), golden_header(), kGoldenIpId, caps), 0);
    const auto* p = rte_pktmbuf_mtod(&mb.m, const uint8_t*);
    uint64_t want = RTE_MBUF_F_TX_IPV4;
    if (caps.ipv4) want |= RTE_MBUF_F_TX_IP_CKSUM;
    if (caps.udp) want |= RTE_MBUF_F_TX_UDP_CKSUM;
    EXPECT_EQ(mb.m.ol_flags, want);
    EXPECT_EQ(mb.m.l2_len, 14u);
    EXPECT_EQ(mb.m.l3_len, 20u);
    // IPv4 checksum: 0 when offloaded, else the hand-crafted value.
    EXPECT_EQ(p[kIpv4Offset + 10], caps.ipv4 ? 0 : kGoldenFrame[kIpv4Offset + 10]);
    EXPECT_EQ(p[kIpv4Offset + 11], caps.ipv4 ? 0 : kGoldenFrame[kIpv4Offset + 11]);
    // UDP checksum: the non-complemented pseudo-header sum when offloaded (computed here
    // independently: src, dst, zero, protocol, UDP length), else the full checksum.
    uint8_t ph[12] = {10, 0, 0, 1, 10, 0, 0, 2, 0, 17, 0, 8 + 32 + 12};
    const uint16_t phs = ones_sum(ph, sizeof(ph));
    const uint16_t got = static_cast<uint16_t>((p[kUdpCksumOff] << 8) | p[kUdpCksumOff + 1]);
    EXPECT_EQ(got, caps.udp ? phs : 0xfbed);
    // Everything else is the hand-crafted frame.
    std::vector<uint8_t> f(p, p + mb.m.data_len);
    std::vector<uint8_t> g = kGoldenFrame;
    for (size_t off : {kIpv4Offset + 10, kIpv4Offset + 11, kUdpCksumOff, kUdpCksumOff + 1})
      f[off] = g[off] = 0;
    EXPECT_EQ(f, g);
  }
}

// memif and ring ports (udp_checksum = auto): no UDP checksum, the field stays 0 ("none
// computed", RFC 768), and the decoder takes such a frame without verifying it.
TEST(EncoderMbuf, WithoutUdpChecksumTheFieldIsZeroAndTheDecoderAcceptsIt) {
  TestMbuf mb;
  auto payload = golden_payload();
  mb.append(payload.data(), payload.size());
  TxChecksumCaps caps;
  caps.udp_none = true;
  ASSERT_EQ(encode_mbuf(&mb.m, golden_route(), golden_header(), kGoldenIpId, caps), 0);
  const auto* p = rte_pktmbuf_mtod(&mb.m, const uint8_t*);
  EXPECT_EQ(mb.m.ol_flags, 0u);
  EXPECT_EQ(p[kUdpCksumOff], 0);
  EXPECT_EQ(p[kUdpCksumOff + 1], 0);
  std::vector<uint8_t> f(p, p + mb.m.data_len);
  std::vector<uint8_t> g = kGoldenFrame;
  g[kUdpCksumOff] = g[kUdpCksumOff + 1] = 0;
  EXPECT_EQ(f, g) << "everything else, the IPv4 checksum included, is the hand-crafted frame";
  DecodeStats stats;
  Frame out;
  EXPECT_EQ(decode_frame(f, &out, stats), Verdict::kData);
}

TEST(EncoderMbuf, ComputesTheUdpChecksumOverAChainOfSegments) {
  std::vector<uint8_t> payload(1001);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 13 + 5);
  const auto flat = encode(golden_route(), golden_header(), payload, 77);
  for (auto cuts : std::vector<std::vector<size_t>>{{1}, {500}, {333, 334, 1000}, {999}}) {
    TestChain c(payload, cuts);
    ASSERT_EQ(encode_mbuf(c.head(), golden_route(), golden_header(), 77, {}), 0);
    EXPECT_EQ(c.head()->pkt_len, flat.size());
    EXPECT_EQ(c.bytes(), flat);
  }
}

TEST(EncoderMbuf, FailsWithoutHeadroomAndLeavesTheMbufUnchanged) {
  TestMbuf mb(64, kOverhead - 1);
  const uint8_t b[4] = {1, 2, 3, 4};
  mb.append(b, 4);
  EXPECT_EQ(encode_mbuf(&mb.m, golden_route(), golden_header(), 0, {}), -ENOSPC);
  EXPECT_EQ(mb.m.data_off, kOverhead - 1);
  EXPECT_EQ(mb.m.pkt_len, 4u);
  Header bad = golden_header();
  bad.type = static_cast<Type>(9);
  TestMbuf ok;
  ok.append(b, 4);
  EXPECT_EQ(encode_mbuf(&ok.m, golden_route(), bad, 0, {}), -EINVAL);
  EXPECT_EQ(ok.m.pkt_len, 4u);
  EXPECT_EQ(encode_mbuf(nullptr, golden_route(), golden_header(), 0, {}), -EINVAL);
}

TEST(DecoderMbuf, DecodesASingleSegmentLikeTheFlatBuffer) {
  TestMbuf mb;
  mb.append(kGoldenFrame.data(), kGoldenFrame.size());
  DecodeStats stats;
  Frame fr;
  ASSERT_EQ(decode_mbuf(&mb.m, &fr, stats), Verdict::kData);
  EXPECT_EQ(fr.header, golden_header());
  EXPECT_EQ(fr.payload, rte_pktmbuf_mtod(&mb.m, const uint8_t*) + kPayloadOffset);
  EXPECT_EQ(stats.get(Verdict::kData), 1u);
}

TEST(DecoderMbuf, VerifiesTheChecksumOverAChainAndGivesThePayloadOffset) {
  std::vector<uint8_t> payload(700);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i ^ 0x5a);
  const auto flat = encode(golden_route(), golden_header(), payload, 3);
  DecodeStats stats;
  for (auto cuts :
       std::vector<std::vector<size_t>>{{kOverhead}, {kOverhead + 1}, {100, 101, 500}}) {
    TestChain c(flat, cuts);
    Frame fr;
    ASSERT_EQ(decode_mbuf(c.head(), &fr, stats), Verdict::kData);
    EXPECT_EQ(fr.payload, nullptr);  // the payload crosses segments
    EXPECT_EQ(fr.payload_offset, kPayloadOffset);
    EXPECT_EQ(fr.payload_len, payload.size());
    auto corrupt = flat;
    corrupt[flat.size() - 1] ^= 1;
    TestChain d(corrupt, cuts);
    EXPECT_EQ(decode_mbuf(d.head(), &fr, stats), Verdict::kUdpChecksum);
  }
  TestChain whole(flat, {flat.size() - 0});  // an empty last segment
  Frame fr;
  ASSERT_EQ(decode_mbuf(whole.head(), &fr, stats), Verdict::kData);
  EXPECT_EQ(fr.payload, rte_pktmbuf_mtod(whole.head(), const uint8_t*) + kPayloadOffset);
}

TEST(DecoderMbuf, RejectsHeadersSplitAcrossSegments) {
  const auto flat = valid_frame(100);
  DecodeStats stats;
  Frame fr;
  for (size_t cut : {size_t(0), size_t(13), size_t(14), size_t(30), size_t(42), kOverhead - 1}) {
    TestChain c(flat, {cut});
    EXPECT_EQ(decode_mbuf(c.head(), &fr, stats), Verdict::kSegmentedHeader) << cut;
  }
  EXPECT_EQ(stats.get(Verdict::kSegmentedHeader), 6u);
}

TEST(DecoderMbuf, TakesTheNicChecksumVerdictsFromOlFlags) {
  auto bad_ip = valid_frame();
  bad_ip[kIpv4Offset + 10] ^= 1;
  auto bad_udp = valid_frame();
  bad_udp[kPayloadOffset] ^= 1;
  auto good = valid_frame();
  struct Case {
    const std::vector<uint8_t>* f;
    uint64_t ol;
    Verdict want;
  } cases[] = {
      {&bad_ip, 0, Verdict::kIpChecksum},
      {&bad_ip, RTE_MBUF_F_RX_IP_CKSUM_GOOD, Verdict::kData},
      {&bad_ip, RTE_MBUF_F_RX_IP_CKSUM_NONE, Verdict::kData},
      {&good, RTE_MBUF_F_RX_IP_CKSUM_BAD, Verdict::kIpChecksum},
      {&bad_udp, 0, Verdict::kUdpChecksum},
      {&bad_udp, RTE_MBUF_F_RX_L4_CKSUM_GOOD, Verdict::kData},
      {&bad_udp, RTE_MBUF_F_RX_L4_CKSUM_NONE, Verdict::kData},
      {&good, RTE_MBUF_F_RX_L4_CKSUM_BAD, Verdict::kUdpChecksum},
      {&good, RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_L4_CKSUM_GOOD, Verdict::kData},
  };
  for (const auto& c : cases) {
    TestMbuf mb;
    mb.append(c.f->data(), c.f->size());
    mb.m.ol_flags = c.ol;
    DecodeStats stats;
    Frame fr;
    EXPECT_EQ(decode_mbuf(&mb.m, &fr, stats), c.want) << std::hex << c.ol;
  }
}

TEST(Encoder, TxChecksumCapsComeFromTheOffloadMask) {
  auto c = TxChecksumCaps::from_offloads(RTE_ETH_TX_OFFLOAD_IPV4_CKSUM);
  EXPECT_TRUE(c.ipv4);
  EXPECT_FALSE(c.udp);
  c = TxChecksumCaps::from_offloads(RTE_ETH_TX_OFFLOAD_UDP_CKSUM | RTE_ETH_TX_OFFLOAD_TCP_CKSUM);
  EXPECT_FALSE(c.ipv4);
  EXPECT_TRUE(c.udp);
  c = TxChecksumCaps::from_offloads(0);
  EXPECT_FALSE(c.ipv4 || c.udp);
}

TEST(Checksum, ChainSumIsRightForEveryCutAndOffsetIncludingOddOnes) {
  // DPDK 22.11's rte_raw_cksum_mbuf gets segments at odd offsets wrong (checksum.h); ours must
  // agree with the independent sum for every split point, start offset and length parity.
  std::vector<uint8_t> d(301);
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint8_t>(i * 29 + 0xa7);
  for (size_t cut = 0; cut <= d.size(); ++cut) {
    for (size_t second : {size_t(0), size_t(1), size_t(7), size_t(150)}) {
      std::vector<size_t> cuts = {cut};
      if (cut + second < d.size() && second != 0) cuts.push_back(cut + second);
      TestChain c(d, cuts);
      for (uint32_t off : {0u, 1u, 2u, 3u, 100u}) {
        for (uint32_t len : {0u, 1u, 2u, 199u, static_cast<uint32_t>(d.size()) - off}) {
          if (off + len > d.size()) continue;
          uint16_t got;
          ASSERT_EQ(raw_cksum_mbuf(c.head(), off, len, &got), 0);
          const uint16_t want = ones_sum(d.data() + off, len);
          EXPECT_EQ(got, static_cast<uint16_t>((want >> 8) | (want << 8)))
              << "cut " << cut << " off " << off << " len " << len;
        }
      }
      uint16_t s;
      EXPECT_EQ(raw_cksum_mbuf(c.head(), 1, static_cast<uint32_t>(d.size()), &s), -1);
    }
  }
}
