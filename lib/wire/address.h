// SPDX-License-Identifier: BSD-3-Clause
//
// The fabric address of a dpfab endpoint: {MAC, IPv4, UDP port, endpoint id} and, when the
// same-host path is on, where on its host the endpoint lives {host identity, node id, node
// nonce} (shm/node.h): 32 bytes, all multi-byte fields in network byte order so that the bytes
// can be exchanged out of band between hosts as they are. addr_format is FI_FORMAT_UNSPEC;
// fi_av_straddr prints "fi_dpdk://aa:bb:cc:dd:ee:ff/10.0.0.1:9228/3", followed by
// "/shm:0123456789abcdef:5:1a2b3c4d" (host, node, nonce) when the address names its node.
//
// Versions. Version 3 is the 32-byte form above, written for an address with a host part;
// version 1 is the 16-byte form without it (the address of an endpoint whose same-host path is
// off, and of earlier builds), written for an address without one, so that a provider with the
// path off hands out the same 16-byte names as before. Both are read. A peer whose host part
// equals ours runs on this host: the endpoints reach it through shared memory (fi_dpdk(7),
// "Same-host peers"); any other peer, and every peer when the path is off, through the port.
//
// Applications that ask for FI_SOCKADDR_IN (or FI_SOCKADDR) get struct sockaddr_in instead: the
// IPv4 address and UDP port, which name an endpoint as well (endpoints are demultiplexed by UDP
// port; the endpoint id is then 0), with the MAC learned by ARP when the address is inserted.
// The forms cannot be confused: a native address starts with the version byte (3, or 1 for the
// 16-byte form) and a zero byte, a sockaddr_in (16 bytes) with sin_family (AF_INET, 2). Every
// entry point that takes an address accepts either; what the provider hands out follows the
// info's addr_format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dpfab::wire {

/// Never 2: a native address with version 2 would read as a sockaddr_in (sin_family AF_INET).
inline constexpr uint8_t kAddressVersion = 3;
/// The 16-byte form without host part (read, never written).
inline constexpr uint8_t kAddressVersionShort = 1;
inline constexpr size_t kShortAddressLen = 16;

struct Address {
  uint8_t version = kAddressVersion;
  uint8_t reserved = 0;
  uint8_t mac[6] = {};
  uint32_t ipv4_be = 0;      ///< network byte order
  uint16_t udp_port_be = 0;  ///< network byte order
  uint16_t ep_id_be = 0;     ///< network byte order
  uint64_t host_be = 0;      ///< host identity (shm::host_id), 0: none; network byte order
  uint32_t node_be = 0;      ///< node id on that host (0: none); network byte order
  uint32_t nonce_be = 0;     ///< the node instance's nonce; network byte order

  /// Whether the address names a node (a same-host path may reach it).
  bool has_node() const noexcept { return host_be != 0 && node_be != 0; }
};
static_assert(sizeof(Address) == 32, "the address is exchanged as 32 raw bytes");

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
/// null, `len` too small for its form, the version unknown or the family not AF_INET. `format`,
/// when given, receives the form found; `used`, the bytes it took (32, or 16 for a sockaddr_in
/// and the short native form).
std::optional<Address> read_address(const void* bytes, size_t len, AddrFormat* format = nullptr,
                                    size_t* used = nullptr) noexcept;

/// The size `a` takes in form `f`: 16 for kSockaddrIn; for kNative 32 with a host part, else 16
/// (the short form).
constexpr size_t address_len(const Address& a, AddrFormat f) noexcept {
  return f == AddrFormat::kNative && a.host_be != 0 ? sizeof(Address) : kShortAddressLen;
}

/// Writes `a` in form `f` into `out`, truncated to `len` bytes (nothing when `out` is null);
/// returns the full size it takes (address_len).
size_t write_address(const Address& a, AddrFormat f, void* out, size_t len) noexcept;

/// Whether read_address accepts the bytes.
bool valid_address(const void* bytes, size_t len) noexcept;

}  // namespace dpfab::wire
