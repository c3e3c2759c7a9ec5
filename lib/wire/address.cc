// SPDX-License-Identifier: BSD-3-Clause
#include "address.h"

#include <arpa/inet.h>

#include <cstdio>
#include <cstring>

#include "common/strings.h"

namespace dpfab::wire {

std::string format_address(const Address& a) {
  char ip[INET_ADDRSTRLEN] = "?";
  in_addr in{a.ipv4_be};
  inet_ntop(AF_INET, &in, ip, sizeof(ip));
  char buf[96];
  std::snprintf(buf, sizeof(buf), "fi_dpdk://%02x:%02x:%02x:%02x:%02x:%02x/%s:%u/%u", a.mac[0],
                a.mac[1], a.mac[2], a.mac[3], a.mac[4], a.mac[5], ip, ntohs(a.udp_port_be),
                ntohs(a.ep_id_be));
  return buf;
}

std::optional<Address> parse_address(std::string_view s) {
  constexpr std::string_view kPrefix = "fi_dpdk://";
  if (s.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  s.remove_prefix(kPrefix.size());
  Address a;
  unsigned m[6];
  char ip[INET_ADDRSTRLEN + 1] = {};
  unsigned port = 0, ep = 0;
  std::string text(s);
  int used = 0;
  if (std::sscanf(text.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x/%15[0-9.]:%u/%u%n", &m[0], &m[1], &m[2],
                  &m[3], &m[4], &m[5], ip, &port, &ep, &used) != 9 ||
      static_cast<size_t>(used) != text.size() || port > 0xffff || ep > 0xffff)
    return std::nullopt;
  in_addr in{};
  if (inet_pton(AF_INET, ip, &in) != 1) return std::nullopt;
  for (int i = 0; i < 6; ++i) a.mac[i] = static_cast<uint8_t>(m[i]);
  a.ipv4_be = in.s_addr;
  a.udp_port_be = htons(static_cast<uint16_t>(port));
  a.ep_id_be = htons(static_cast<uint16_t>(ep));
  return a;
}

bool valid_address(const void* bytes, size_t len) noexcept {
  if (!bytes || len < sizeof(Address)) return false;
  Address a;
  std::memcpy(&a, bytes, sizeof(a));
  return a.version == kAddressVersion;
}

}  // namespace dpfab::wire
