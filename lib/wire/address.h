// SPDX-License-Identifier: BSD-3-Clause
//
// The fabric address of a dpfab endpoint: {MAC, IPv4, UDP port, endpoint id}, 16 bytes, all
// multi-byte fields in network byte order so that the bytes can be exchanged out of band between
// hosts as they are. addr_format is FI_FORMAT_UNSPEC; fi_av_straddr prints
// "fi_dpdk://aa:bb:cc:dd:ee:ff/10.0.0.1:9228/3".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dpfab::wire {

inline constexpr uint8_t kAddressVersion = 1;

struct Address {
  uint8_t version = kAddressVersion;
  uint8_t reserved = 0;
  uint8_t mac[6] = {};
  uint32_t ipv4_be = 0;      ///< network byte order
  uint16_t udp_port_be = 0;  ///< network byte order
  uint16_t ep_id_be = 0;     ///< network byte order
};
static_assert(sizeof(Address) == 16, "the address is exchanged as 16 raw bytes");

/// "fi_dpdk://aa:bb:cc:dd:ee:ff/10.0.0.1:9228/3"
std::string format_address(const Address& a);

/// Parses what format_address prints. nullopt on anything else.
std::optional<Address> parse_address(std::string_view s);

/// Checks bytes received from an application or a peer: right size and version.
bool valid_address(const void* bytes, size_t len) noexcept;

}  // namespace dpfab::wire
