// SPDX-License-Identifier: BSD-3-Clause
//
// The Internet checksum over a chain of mbuf segments.
//
// DPDK 22.11's rte_raw_cksum_mbuf (and so rte_ipv4_udptcp_cksum_mbuf and its _verify variant)
// returns a wrong sum when a segment after the first begins at an odd offset of the summed range:
// it truncates the segment's unreduced 32-bit sum to 16 bits before byte-swapping it
// (test/unit/wire/frame_test.cc shows it). raw_cksum_mbuf reduces first, then swaps. Everything
// else (rte_raw_cksum, rte_ipv4_cksum, rte_ipv4_phdr_cksum, rte_ipv4_udptcp_cksum on contiguous
// data) is DPDK's.
//
// Reentrant; inline DPDK helpers only (no EAL).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

struct rte_mbuf;
struct rte_ipv4_hdr;

namespace dpfab::wire {

/// The raw (non-complemented) one's-complement sum of bytes [off, off + len) of the packet in the
/// mbuf chain `m`, in the packet's byte order (as rte_raw_cksum).
/// @return 0 and *sum on success; -1 when the chain holds fewer than off + len bytes.
[[nodiscard]] int raw_cksum_mbuf(const rte_mbuf* m, uint32_t off, uint32_t len,
                                 uint16_t* sum) noexcept;

/// Whether the IPv4 header at `ip`, `ihl` bytes (20 to 60, a multiple of 4), sums to 0xffff: its
/// header checksum is right. The same answer as rte_raw_cksum(ip, ihl) == 0xffff, in about 40
/// instructions for a 20-byte header where that takes 64 (callgrind, hot-path's rx phase): the
/// one's-complement sum of 32-bit words folded to 16 bits is that of the 16-bit words, and 0xffff
/// reads the same in either byte order. The receive path runs it on every frame of a port that
/// does not check the header itself (memif, af_packet, net_ring).
inline bool ipv4_header_sum_ok(const uint8_t* ip, size_t ihl) noexcept {
  uint64_t sum = 0;
  for (size_t i = 0; i < ihl; i += 4) {
    uint32_t w;
    std::memcpy(&w, ip + i, 4);
    sum += w;
  }
  sum = (sum & 0xffffffff) + (sum >> 32);  // at most 33 bits
  sum = (sum & 0xffff) + (sum >> 16);      // at most 0x1fffe
  sum = (sum & 0xffff) + (sum >> 16);
  return (sum & 0xffff) + (sum >> 16) == 0xffff;
}

/// The UDP checksum to transmit for the datagram at offset `l4_off` of the chain `m`, whose IPv4
/// header is `ip` (contiguous; its total length gives the UDP length): complemented, 0 sent as
/// 0xffff (RFC 768). The UDP checksum field must be 0. Returns 0 if the chain is too short.
uint16_t ipv4_udp_cksum_mbuf(const rte_mbuf* m, const rte_ipv4_hdr* ip, uint32_t l4_off) noexcept;

}  // namespace dpfab::wire
