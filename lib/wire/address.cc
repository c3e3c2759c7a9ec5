// SPDX-License-Identifier: BSD-3-Clause
#include "address.h"

#include <arpa/inet.h>
#include <endian.h>

#include <netinet/in.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "common/strings.h"

namespace dpfab::wire {

static_assert(sizeof(sockaddr_in) == kShortAddressLen);

std::string format_address(const Address& a, AddrFormat f) {
  char ip[INET_ADDRSTRLEN] = "?";
  in_addr in{a.ipv4_be};
  inet_ntop(AF_INET, &in, ip, sizeof(ip));
  char buf[160];
  if (f == AddrFormat::kSockaddrIn) {
    std::snprintf(buf, sizeof(buf), "fi_sockaddr_in://%s:%u", ip, ntohs(a.udp_port_be));
    return buf;
  }
  int n = std::snprintf(buf, sizeof(buf), "fi_dpdk://%02x:%02x:%02x:%02x:%02x:%02x/%s:%u/%u",
                        a.mac[0], a.mac[1], a.mac[2], a.mac[3], a.mac[4], a.mac[5], ip,
                        ntohs(a.udp_port_be), ntohs(a.ep_id_be));
  if (a.host_be != 0 && n > 0 && static_cast<size_t>(n) < sizeof(buf))
    std::snprintf(buf + n, sizeof(buf) - n, "/shm:%016llx:%u:%08x",
                  static_cast<unsigned long long>(be64toh(a.host_be)), ntohl(a.node_be),
                  ntohl(a.nonce_be));
  return buf;
}

namespace {

std::optional<Address> parse_sockaddr_in(std::string_view s) {
  char ip[INET_ADDRSTRLEN + 1] = {};
  unsigned port = 0;
  std::string text(s);
  int used = 0;
  if (std::sscanf(text.c_str(), "%15[0-9.]:%u%n", ip, &port, &used) != 2 ||
      static_cast<size_t>(used) != text.size() || port > 0xffff)
    return std::nullopt;
  in_addr in{};
  if (inet_pton(AF_INET, ip, &in) != 1) return std::nullopt;
  Address a;
  a.ipv4_be = in.s_addr;
  a.udp_port_be = htons(static_cast<uint16_t>(port));
  return a;
}

}  // namespace

std::optional<Address> parse_address(std::string_view s) {
  constexpr std::string_view kSockPrefix = "fi_sockaddr_in://";
  if (s.substr(0, kSockPrefix.size()) == kSockPrefix)
    return parse_sockaddr_in(s.substr(kSockPrefix.size()));
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
      port > 0xffff || ep > 0xffff)
    return std::nullopt;
  if (static_cast<size_t>(used) != text.size()) {
    // The host part: "/shm:<host, 16 hex digits>:<node>:<nonce, 8 hex digits>".
    unsigned long long host = 0;
    unsigned node = 0, nonce = 0;
    int tail = 0;
    const std::string rest = text.substr(static_cast<size_t>(used));
    if (std::sscanf(rest.c_str(), "/shm:%16llx:%u:%8x%n", &host, &node, &nonce, &tail) != 3 ||
        static_cast<size_t>(tail) != rest.size() || host == 0 || node == 0)
      return std::nullopt;
    a.host_be = htobe64(host);
    a.node_be = htonl(node);
    a.nonce_be = htonl(nonce);
  }
  in_addr in{};
  if (inet_pton(AF_INET, ip, &in) != 1) return std::nullopt;
  for (int i = 0; i < 6; ++i) a.mac[i] = static_cast<uint8_t>(m[i]);
  a.ipv4_be = in.s_addr;
  a.udp_port_be = htons(static_cast<uint16_t>(port));
  a.ep_id_be = htons(static_cast<uint16_t>(ep));
  return a;
}

std::optional<Address> read_address(const void* bytes, size_t len, AddrFormat* format,
                                    size_t* used) noexcept {
  if (!bytes || len < kShortAddressLen) return std::nullopt;
  Address a;
  const auto* b = static_cast<const uint8_t*>(bytes);
  if (b[0] == kAddressVersion && b[1] == 0) {
    if (len < sizeof(Address)) return std::nullopt;
    std::memcpy(&a, bytes, sizeof(a));
    if (format) *format = AddrFormat::kNative;
    if (used) *used = sizeof(Address);
    return a;
  }
  if (b[0] == kAddressVersionShort && b[1] == 0) {
    std::memcpy(static_cast<void*>(&a), bytes, kShortAddressLen);  // no host part
    a.version = kAddressVersion;
    if (format) *format = AddrFormat::kNative;
    if (used) *used = kShortAddressLen;
    return a;
  }
  sockaddr_in sin;
  std::memcpy(&sin, bytes, sizeof(sin));
  if (sin.sin_family != AF_INET) return std::nullopt;
  Address from;
  from.ipv4_be = sin.sin_addr.s_addr;
  from.udp_port_be = sin.sin_port;
  if (format) *format = AddrFormat::kSockaddrIn;
  if (used) *used = sizeof(sin);
  return from;
}

size_t write_address(const Address& a, AddrFormat f, void* out, size_t len) noexcept {
  if (out && len) {
    if (f == AddrFormat::kSockaddrIn) {
      sockaddr_in sin{};
      sin.sin_family = AF_INET;
      sin.sin_addr.s_addr = a.ipv4_be;
      sin.sin_port = a.udp_port_be;
      std::memcpy(out, &sin, std::min(len, sizeof(sin)));
    } else {
      Address w = a;
      if (w.host_be == 0) w.version = kAddressVersionShort;  // the 16-byte form
      std::memcpy(out, &w, std::min(len, address_len(a, f)));
    }
  }
  return address_len(a, f);
}

bool valid_address(const void* bytes, size_t len) noexcept {
  return read_address(bytes, len).has_value();
}

}  // namespace dpfab::wire
