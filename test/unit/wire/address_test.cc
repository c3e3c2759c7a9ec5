// SPDX-License-Identifier: BSD-3-Clause
#include "wire/address.h"

#include <arpa/inet.h>
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
