// SPDX-License-Identifier: BSD-3-Clause
#include "wire/checksum.h"

#include <rte_byteorder.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

namespace dpfab::wire {

int raw_cksum_mbuf(const rte_mbuf* m, uint32_t off, uint32_t len, uint16_t* sum) noexcept {
  if (off + len <= rte_pktmbuf_data_len(m)) {
    *sum = rte_raw_cksum(rte_pktmbuf_mtod_offset(m, const uint8_t*, off), len);
    return 0;
  }
  if (off + len > rte_pktmbuf_pkt_len(m)) return -1;
  const rte_mbuf* seg = m;
  while (seg != nullptr && off >= rte_pktmbuf_data_len(seg)) {
    off -= rte_pktmbuf_data_len(seg);
    seg = seg->next;
  }
  uint32_t total = 0;  // sum of the reduced per-segment sums
  uint32_t done = 0;
  while (done < len) {
    if (seg == nullptr) return -1;  // pkt_len claims more than the segments hold
    uint32_t n = rte_pktmbuf_data_len(seg) - off;
    if (n > len - done) n = len - done;
    uint16_t s = __rte_raw_cksum_reduce(
        __rte_raw_cksum(rte_pktmbuf_mtod_offset(seg, const uint8_t*, off), n, 0));
    // A segment that starts at an odd offset of the range has its bytes in the other lanes of
    // the 16-bit words: swap its (reduced) sum.
    if (done & 1) s = rte_bswap16(s);
    total += s;
    done += n;
    off = 0;
    seg = seg->next;
  }
  *sum = __rte_raw_cksum_reduce(total);
  return 0;
}

uint16_t ipv4_udp_cksum_mbuf(const rte_mbuf* m, const rte_ipv4_hdr* ip, uint32_t l4_off) noexcept {
  const uint32_t l4_len = rte_be_to_cpu_16(ip->total_length) - rte_ipv4_hdr_len(ip);
  uint16_t raw;
  if (raw_cksum_mbuf(m, l4_off, l4_len, &raw) != 0) return 0;
  uint32_t sum = static_cast<uint32_t>(raw) + rte_ipv4_phdr_cksum(ip, 0);
  uint16_t c = static_cast<uint16_t>(~__rte_raw_cksum_reduce(sum));
  return c == 0 ? 0xffff : c;
}

}  // namespace dpfab::wire
