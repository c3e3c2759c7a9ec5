// SPDX-License-Identifier: BSD-3-Clause
//
// The frame encoder: writes the Ethernet, IPv4, UDP and dpfab headers (format.h) in front of a
// payload, with the checksums either computed in software or left to the NIC.
//
// Two front-ends share one header writer:
//   encode_frame  a raw buffer whose payload is already in place at kPayloadOffset (tests, fuzz,
//                 and any path that builds frames without mbufs);
//   encode_mbuf   an rte_mbuf (possibly a chain) that holds only the payload; the headers are
//                 prepended in the first segment's headroom.
// Both derive the payload length from the buffer (header.payload_len is ignored and written from
// the length), so a header can never disagree with the frame.
//
// Neither needs EAL: they use only DPDK's inline checksum and mbuf helpers.
// Thread safety: none needed; each call touches only its own buffer.
#pragma once

#include <cstdint>
#include <span>

#include "wire/format.h"

struct rte_mbuf;

namespace dpfab::wire {

/// Which checksums the NIC computes on transmit. Build it from the tx offloads the port was
/// *configured* with (rte_eth_conf.txmode.offloads), not merely those it is capable of.
struct TxChecksumCaps {
  bool ipv4 = false;  ///< RTE_ETH_TX_OFFLOAD_IPV4_CKSUM
  bool udp = false;   ///< RTE_ETH_TX_OFFLOAD_UDP_CKSUM
  /// No UDP checksum at all: the field stays 0, "none computed" (RFC 768), and receivers skip
  /// it. For links whose frames never leave this host's memory (memif, ring), where computing
  /// and verifying it cost a pass over every byte on each side and guard against nothing.
  bool udp_none = false;

  /// From a RTE_ETH_TX_OFFLOAD_* mask.
  static TxChecksumCaps from_offloads(uint64_t tx_offloads) noexcept;
};

/// Encodes a whole frame in a raw buffer: frame[kPayloadOffset, frame.size()) already holds the
/// payload; writes the kOverhead (62) header bytes in front of it with both checksums computed in
/// software.
/// IPv4: IHL 5, DF set, TTL 64, identification `ip_id`. `h` is written as given except
/// payload_len, which becomes frame.size() - kOverhead.
/// @return 0 on success; -EINVAL if frame.size() < kOverhead, if h.version != kVersion, h.type is
///         not type_accepted(), or h.flags has bits outside kKnownFlags (we never send what we
///         would reject); -EMSGSIZE if the payload exceeds kMaxPayload. Nothing is written on
///         error.
[[nodiscard]] int encode_frame(std::span<uint8_t> frame, const Route& route, const Header& h,
                               uint16_t ip_id) noexcept;

/// Prepends the kOverhead (62) header bytes to `m`, whose pkt_len bytes (in one segment or a
/// chain) are the payload. Checksums the NIC computes per `caps` are prepared for offload:
/// ol_flags gets RTE_MBUF_F_TX_IPV4 plus RTE_MBUF_F_TX_IP_CKSUM and/or RTE_MBUF_F_TX_UDP_CKSUM,
/// l2_len and l3_len are set, the IPv4 checksum field is left 0 and the UDP one holds the
/// pseudo-header sum (rte_ipv4_phdr_cksum); the others are computed in software (over the whole
/// chain). Other TX checksum flags in ol_flags are cleared. Fields as for encode_frame.
/// @return 0 on success; -EINVAL as for encode_frame (or m == nullptr); -ENOSPC when the first
///         segment has less than kOverhead bytes of headroom; -EMSGSIZE if the payload exceeds
///         kMaxPayload. `m` is unchanged on error.
[[nodiscard]] int encode_mbuf(rte_mbuf* m, const Route& route, const Header& h, uint16_t ip_id,
                              TxChecksumCaps caps) noexcept;

/// The header bytes of every frame of one route and dpfab header, prepared once, for links that
/// take no UDP checksum and no offload (TxChecksumCaps{.udp_none = true}: memif, ring): per frame
/// only the lengths, the IPv4 identification and checksum (from a precomputed partial sum) and
/// the destination MAC, which may change under a route (a re-resolved neighbour), are written.
/// write() produces the bytes encode_mbuf does there, in about a fifth of its instructions.
/// Plain data: any thread that owns it.
class HeaderTemplate {
 public:
  /// Prepares the headers of `route` (its dst_mac aside) and `h` (its payload_len aside).
  /// @return 0; -EINVAL as for encode_frame (a header we would reject).
  int init(const Route& route, const Header& h) noexcept;
  /// Writes the kOverhead (62) header bytes at `p` for a payload of `payload_len` <= kMaxPayload
  /// bytes to the 6-byte MAC `dst_mac` with identification `ip_id`; the UDP checksum is 0 ("none
  /// computed").
  void write(uint8_t* p, const uint8_t* dst_mac, uint32_t payload_len,
             uint16_t ip_id) const noexcept {
    std::memcpy(p, dst_mac, RTE_ETHER_ADDR_LEN);
    std::memcpy(p + RTE_ETHER_ADDR_LEN, bytes_ + RTE_ETHER_ADDR_LEN,
                kOverhead - RTE_ETHER_ADDR_LEN);
    uint8_t* ip = p + kIpv4Offset;
    const auto total = static_cast<uint16_t>(kL3Overhead + payload_len);
    store_be16(ip + 2, total);
    store_be16(ip + 4, ip_id);
    // The one's-complement sum in memory order, as rte_raw_cksum adds (rte_ipv4_cksum).
    uint32_t sum = ip_sum_ + load_raw16(ip + 2) + load_raw16(ip + 4);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    const auto cksum = static_cast<uint16_t>(~sum);
    std::memcpy(ip + 10, &cksum, 2);
    store_be16(p + kUdpOffset + 4, static_cast<uint16_t>(kUdpHdrLen + kHeaderLen + payload_len));
    store_be32(p + kHeaderOffset + kPayloadLenOffset, payload_len);  // the dpfab header's
  }

 private:
  alignas(16) uint8_t bytes_[kOverhead] = {};
  uint32_t ip_sum_ = 0;  // memory-order sum of the IPv4 header but its length, id and checksum
};

}  // namespace dpfab::wire
