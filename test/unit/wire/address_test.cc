// SPDX-License-Identifier: BSD-3-Clause
#include "wire/address.h"

#include <arpa/inet.h>
#include <endian.h>
#include <gtest/gtest.h>

#include <cstring>

using namespace dpfab::wire;

TEST(Address, FormatParseRoundTrip) {
  Address a;
  const uint8_t mac[6] = {0x02, 0x64, 0x70, 0xab, 0xcd, 0xef};
  std::copy(mac, mac + 6, a.mac);
  a.ipv4_be = htonl(0x0a000001);
  a.udp_port_be = htons(9228);
  a.ep_id_be = htons(3);
  std::string s = format_address(a);
  EXPECT_EQ(s, "fi_dpdk://02:64:70:ab:cd:ef/10.0.0.1:9228/3");
  auto b = parse_address(s);
  ASSERT_TRUE(b);
  EXPECT_EQ(0, std::memcmp(&a, &*b, sizeof(a)));
}

TEST(Address, ParseRejectsGarbage) {
  for (const char* bad :
       {"", "fi_dpdk://", "fi_dpdk://02:64:70:ab:cd:ef/10.0.0.1:9228",
        "fi_dpdk://02:64:70:ab:cd:ef/10.0.0.1:70000/1",
        "fi_dpdk://02:64:70:ab:cd:ef/10.0.0.1:1/1trailing",
        "fi_sockets://02:64:70:ab:cd:ef/10.0.0.1:1/1", "fi_dpdk://zz:64:70:ab:cd:ef/10.0.0.1:1/1"})
    EXPECT_FALSE(parse_address(bad)) << bad;
}

TEST(Address, ValidityChecksSizeAndVersion) {
  Address a;
  EXPECT_TRUE(valid_address(&a, sizeof(a)));
  EXPECT_FALSE(valid_address(&a, sizeof(a) - 1));
  EXPECT_FALSE(valid_address(nullptr, sizeof(a)));
  a.version = 9;
  EXPECT_FALSE(valid_address(&a, sizeof(a)));
}

TEST(Address, SockaddrInIsReadAsIpAndPortWithNoMac) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(0x0a000002);
  sin.sin_port = htons(4711);
  AddrFormat f = AddrFormat::kNative;
  auto a = read_address(&sin, sizeof(sin), &f);
  ASSERT_TRUE(a);
  EXPECT_EQ(f, AddrFormat::kSockaddrIn);
  EXPECT_EQ(a->ipv4_be, sin.sin_addr.s_addr);
  EXPECT_EQ(a->udp_port_be, sin.sin_port);
  EXPECT_EQ(a->ep_id_be, 0);
  for (uint8_t b : a->mac) EXPECT_EQ(b, 0);
  sin.sin_family = AF_INET6;  // not ours
  EXPECT_FALSE(read_address(&sin, sizeof(sin)));
  EXPECT_FALSE(read_address(&sin, sizeof(sin) - 1));
}

TEST(Address, NativeAddressIsReadAsItIs) {
  Address a;
  a.ipv4_be = htonl(0x0a000001);
  a.mac[5] = 7;
  AddrFormat f = AddrFormat::kSockaddrIn;
  auto b = read_address(&a, sizeof(a), &f);
  ASSERT_TRUE(b);
  EXPECT_EQ(f, AddrFormat::kNative);
  EXPECT_EQ(0, std::memcmp(&a, &*b, sizeof(a)));
  a.reserved = 1;  // a future layout: refused rather than misread
  EXPECT_FALSE(read_address(&a, sizeof(a)));
}

TEST(Address, WriteInEitherFormTruncatesAndReturnsTheFullSize) {
  Address a;
  a.ipv4_be = htonl(0x0a000003);
  a.udp_port_be = htons(9228);
  a.mac[0] = 2;
  sockaddr_in sin{};
  EXPECT_EQ(write_address(a, AddrFormat::kSockaddrIn, &sin, sizeof(sin)), sizeof(sin));
  EXPECT_EQ(sin.sin_family, AF_INET);
  EXPECT_EQ(sin.sin_addr.s_addr, a.ipv4_be);
  EXPECT_EQ(sin.sin_port, a.udp_port_be);
  uint8_t small[4] = {0xee, 0xee, 0xee, 0xee};
  EXPECT_EQ(write_address(a, AddrFormat::kNative, small, 2), kShortAddressLen) << "no host part";
  EXPECT_EQ(small[0], kAddressVersionShort);
  EXPECT_EQ(small[2], 0xee);  // nothing beyond the length given
  EXPECT_EQ(write_address(a, AddrFormat::kNative, nullptr, 0), kShortAddressLen);
  a.host_be = 1;
  a.node_be = htonl(1);
  EXPECT_EQ(write_address(a, AddrFormat::kNative, small, 2), sizeof(Address));
  EXPECT_EQ(small[0], kAddressVersion);
}

TEST(Address, SockaddrInStringFormRoundTrips) {
  Address a;
  a.ipv4_be = htonl(0x0a000004);
  a.udp_port_be = htons(5000);
  const std::string s = format_address(a, AddrFormat::kSockaddrIn);
  EXPECT_EQ(s, "fi_sockaddr_in://10.0.0.4:5000");
  auto b = parse_address(s);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->ipv4_be, a.ipv4_be);
  EXPECT_EQ(b->udp_port_be, a.udp_port_be);
  for (const char* bad : {"fi_sockaddr_in://10.0.0.4", "fi_sockaddr_in://10.0.0.4:70000",
                          "fi_sockaddr_in://10.0.0:1", "fi_sockaddr_in://10.0.0.4:1x"})
    EXPECT_FALSE(parse_address(bad)) << bad;
}

TEST(Address, HostPartRoundTripsInBytesAndText) {
  Address a;
  const uint8_t mac[6] = {0x06, 0x64, 0x70, 0x00, 0x00, 0x05};
  std::copy(mac, mac + 6, a.mac);
  a.ipv4_be = htonl(5);  // 0.0.0.5: a process without a port (shm::Node derive_address)
  a.udp_port_be = htons(49152);
  a.host_be = htobe64(0x0123456789abcdefull);
  a.node_be = htonl(5);
  a.nonce_be = htonl(0x1a2b3c4d);
  EXPECT_TRUE(a.has_node());
  const std::string s = format_address(a);
  EXPECT_EQ(s, "fi_dpdk://06:64:70:00:00:05/0.0.0.5:49152/0/shm:0123456789abcdef:5:1a2b3c4d");
  auto b = parse_address(s);
  ASSERT_TRUE(b);
  EXPECT_EQ(0, std::memcmp(&a, &*b, sizeof(a)));
  uint8_t bytes[sizeof(Address)];
  size_t used = 0;
  ASSERT_EQ(write_address(a, AddrFormat::kNative, bytes, sizeof(bytes)), 32u);
  auto c = read_address(bytes, sizeof(bytes), nullptr, &used);
  ASSERT_TRUE(c);
  EXPECT_EQ(used, 32u);
  EXPECT_EQ(0, std::memcmp(&a, &*c, sizeof(a)));
  EXPECT_FALSE(read_address(bytes, 16)) << "the 32-byte form cut short";
  for (const char* bad : {"fi_dpdk://06:64:70:00:00:05/0.0.0.5:49152/0/shm:",
                          "fi_dpdk://06:64:70:00:00:05/0.0.0.5:49152/0/shm:0:5:1",
                          "fi_dpdk://06:64:70:00:00:05/0.0.0.5:49152/0/shm:12:0:1",
                          "fi_dpdk://06:64:70:00:00:05/0.0.0.5:49152/0/shm:12:5:1x"})
    EXPECT_FALSE(parse_address(bad)) << bad;
}

TEST(Address, ShortFormOfEarlierBuildsIsReadWithoutHostPart) {
  uint8_t v1[16] = {1, 0, 2, 0x64, 0x70, 1, 2, 3, 10, 0, 0, 1, 0x24, 0x0c, 0, 3};
  AddrFormat f = AddrFormat::kSockaddrIn;
  size_t used = 0;
  auto a = read_address(v1, sizeof(v1), &f, &used);
  ASSERT_TRUE(a);
  EXPECT_EQ(f, AddrFormat::kNative);
  EXPECT_EQ(used, 16u);
  EXPECT_EQ(a->version, kAddressVersion);
  EXPECT_EQ(a->ipv4_be, htonl(0x0a000001));
  EXPECT_EQ(a->udp_port_be, htons(9228));
  EXPECT_EQ(a->ep_id_be, htons(3));
  EXPECT_FALSE(a->has_node());
  EXPECT_EQ(address_len(*a, AddrFormat::kNative), 16u) << "no host part: the short form";
  EXPECT_EQ(address_len(*a, AddrFormat::kSockaddrIn), 16u);
  uint8_t out[sizeof(Address)] = {};
  ASSERT_EQ(write_address(*a, AddrFormat::kNative, out, sizeof(out)), 16u);
  EXPECT_EQ(out[0], kAddressVersionShort);
  EXPECT_EQ(0, std::memcmp(out + 1, v1 + 1, 15));
}
