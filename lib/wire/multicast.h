// SPDX-License-Identifier: BSD-3-Clause
//
// IPv4 multicast on Ethernet: which addresses are groups, and the MAC a group's frames carry.
//   - An IPv4 group address is one in 224.0.0.0/4 (RFC 5771).
//   - Its frames go to the Ethernet group address 01:00:5e followed by the low 23 bits of the IPv4
//     address (RFC 1112 6.4), so 32 groups share one MAC; the receiver tells them apart by IP.
//   - Group MACs have the I/G bit (bit 0 of the first byte) set; so does broadcast.
//   - IGMPv2 (RFC 2236) membership reports and leave messages, for switches that snoop IGMP to
//     decide which ports get a group's frames (build_igmp_v2).
// Pure functions on addresses in network byte order, as wire::Address and wire::Frame keep them.
// No EAL, no state: any thread.
#pragma once

#include <rte_ether.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "wire/arp.h"

namespace dpfab::wire {

/// Whether `ipv4_be` (network byte order) is an IPv4 multicast group address (224.0.0.0/4).
constexpr bool is_multicast_ipv4(uint32_t ipv4_be) noexcept {
  // The first byte of the address is the lowest-addressed byte: the low byte of a little-endian
  // load, the high byte of a big-endian one.
  const uint8_t first = static_cast<uint8_t>(
      __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ipv4_be & 0xff : ipv4_be >> 24);
  return (first & 0xf0) == 0xe0;
}

/// Whether `ipv4_be` (network byte order) is a loopback address (127.0.0.0/8).
constexpr bool is_loopback_ipv4(uint32_t ipv4_be) noexcept {
  const uint8_t first = static_cast<uint8_t>(
      __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ipv4_be & 0xff : ipv4_be >> 24);
  return first == 127;
}

/// Whether `ipv4_be` is the limited broadcast address 255.255.255.255.
constexpr bool is_broadcast_ipv4(uint32_t ipv4_be) noexcept { return ipv4_be == 0xffffffffu; }

/// Whether `mac` is a group address (I/G bit set): multicast or broadcast.
inline bool is_group_mac(const rte_ether_addr& mac) noexcept {
  return (mac.addr_bytes[0] & 0x01) != 0;
}

/// The Ethernet address of IPv4 group `ipv4_be`: 01:00:5e + its low 23 bits. Meaningful only for
/// a multicast address (is_multicast_ipv4).
inline rte_ether_addr multicast_mac(uint32_t ipv4_be) noexcept {
  uint8_t ip[4];
  std::memcpy(ip, &ipv4_be, 4);
  return rte_ether_addr{{0x01, 0x00, 0x5e, static_cast<uint8_t>(ip[1] & 0x7f), ip[2], ip[3]}};
}

/// Whether `mac` is the Ethernet address of IPv4 group `ipv4_be` (multicast_mac).
inline bool is_multicast_mac_of(const rte_ether_addr& mac, uint32_t ipv4_be) noexcept {
  const rte_ether_addr want = multicast_mac(ipv4_be);
  return std::memcmp(&mac, &want, sizeof(want)) == 0;
}

/// IGMPv2 message types (RFC 2236 2.1).
enum class IgmpType : uint8_t {
  kReportV2 = 0x16,  ///< membership report: sent to the group itself
  kLeave = 0x17,     ///< leave group: sent to all-routers, 224.0.0.2
};
inline constexpr size_t kIgmpFrameLen = 14 + 24 + 8;  ///< Ethernet + IPv4 with Router Alert + IGMP

/// Builds, at the start of `frame`, an IGMPv2 message of `type` about group `group_be` from
/// `local`, as a host sends it (RFC 2236 2, 9): IPv4 TTL 1 with the Router Alert option (RFC 2113),
/// to the group (report) or to 224.0.0.2 (leave), at the destination's group MAC; padded with
/// zeros to kMinFrameLen.
/// @return the frame length (kMinFrameLen), or 0 when frame.size() < kMinFrameLen or `group_be`
///         is not a multicast address.
size_t build_igmp_v2(std::span<uint8_t> frame, const Local& local, IgmpType type,
                     uint32_t group_be) noexcept;

}  // namespace dpfab::wire
