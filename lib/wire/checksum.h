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

#include <cstdint>

struct rte_mbuf;
struct rte_ipv4_hdr;

namespace dpfab::wire {

/// The raw (non-complemented) one's-complement sum of bytes [off, off + len) of the packet in the
/// mbuf chain `m`, in the packet's byte order (as rte_raw_cksum).
/// @return 0 and *sum on success; -1 when the chain holds fewer than off + len bytes.
[[nodiscard]] int raw_cksum_mbuf(const rte_mbuf* m, uint32_t off, uint32_t len,
                                 uint16_t* sum) noexcept;

/// The UDP checksum to transmit for the datagram at offset `l4_off` of the chain `m`, whose IPv4
/// header is `ip` (contiguous; its total length gives the UDP length): complemented, 0 sent as
/// 0xffff (RFC 768). The UDP checksum field must be 0. Returns 0 if the chain is too short.
uint16_t ipv4_udp_cksum_mbuf(const rte_mbuf* m, const rte_ipv4_hdr* ip, uint32_t l4_off) noexcept;

}  // namespace dpfab::wire
