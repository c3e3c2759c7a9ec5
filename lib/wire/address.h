// SPDX-License-Identifier: BSD-3-Clause
//
// The fabric address of a dpfab endpoint: {MAC, IPv4, UDP port, endpoint id}, 16 bytes, all
// multi-byte fields in network byte order so that the bytes can be exchanged out of band between
// hosts as they are. addr_format is FI_FORMAT_UNSPEC; fi_av_straddr prints
// "fi_dpdk://aa:bb:cc:dd:ee:ff/10.0.0.1:9228/3".
//
// Applications that ask for FI_SOCKADDR_IN (or FI_SOCKADDR) get struct sockaddr_in instead: the
// IPv4 address and UDP port, which name an endpoint as well (endpoints are demultiplexed by UDP
// port; the endpoint id is then 0), with the MAC learned by ARP when the address is inserted.
// Both forms are 16 bytes and cannot be confused: a native address starts with the version byte
// (1) and a zero byte, a sockaddr_in with sin_family (AF_INET, 2). Every entry point that takes
// an address accepts either; what the provider hands out follows the info's addr_format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dpfab::wire {

/// Never 2: a native address with version 2 would read as a sockaddr_in (sin_family AF_INET).
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

/// The form addresses take across the API.
enum class AddrFormat : uint8_t {
  kNative,      ///< FI_FORMAT_UNSPEC: the 16-byte Address above
  kSockaddrIn,  ///< FI_SOCKADDR_IN / FI_SOCKADDR: struct sockaddr_in (IPv4 and UDP port)
};

/// "fi_dpdk://aa:bb:cc:dd:ee:ff/10.0.0.1:9228/3", or for kSockaddrIn
/// "fi_sockaddr_in://10.0.0.1:9228" (libfabric's own form for that format).
std::string format_address(const Address& a, AddrFormat f = AddrFormat::kNative);

/// Parses either form format_address prints. nullopt on anything else.
std::optional<Address> parse_address(std::string_view s);

/// Reads an address an application or a peer handed in, in either form: nullopt when `bytes` is
/// null, `len` too small, the version unknown or the family not AF_INET. `format`, when given,
/// receives the form found.
std::optional<Address> read_address(const void* bytes, size_t len,
                                    AddrFormat* format = nullptr) noexcept;

/// Writes `a` in form `f` into `out`, truncated to `len` bytes (nothing when `out` is null);
/// returns the full size, 16 for both forms.
size_t write_address(const Address& a, AddrFormat f, void* out, size_t len) noexcept;

/// Whether read_address accepts the bytes.
bool valid_address(const void* bytes, size_t len) noexcept;

}  // namespace dpfab::wire
