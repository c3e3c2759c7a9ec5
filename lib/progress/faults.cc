// SPDX-License-Identifier: BSD-3-Clause
#include "progress/faults.h"

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include <algorithm>
#include <cstring>

#include "wire/checksum.h"

namespace dpfab::progress {
namespace {

// splitmix64's output function (Steele, Lea, Flood 2014).
uint64_t mix64(uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ULL;
constexpr uint32_t kIpOffset = sizeof(rte_ether_hdr);

// Whether every segment may be written by us alone (not shared with a sender that keeps it).
bool writable(const rte_mbuf* m) noexcept {
  for (; m; m = m->next)
    if (!RTE_MBUF_DIRECT(m) || rte_mbuf_refcnt_read(m) != 1) return false;
  return true;
}

// An IPv4/UDP frame (Ops::span said so) whose UDP checksum is 0 gets it computed: a frame too
// short or malformed for it is left as it is (the decoder rejects it anyway).
void add_udp_checksum(rte_mbuf* m) noexcept {
  const auto* ip = rte_pktmbuf_mtod_offset(m, rte_ipv4_hdr*, kIpOffset);
  const uint32_t ihl = rte_ipv4_hdr_len(ip);
  const uint32_t l4 = kIpOffset + ihl;
  const uint32_t total = rte_be_to_cpu_16(ip->total_length);
  if (ihl < sizeof(rte_ipv4_hdr) || total < ihl + sizeof(rte_udp_hdr) ||
      rte_pktmbuf_data_len(m) < l4 + sizeof(rte_udp_hdr) ||
      kIpOffset + total > rte_pktmbuf_pkt_len(m))
    return;
  auto* udp = rte_pktmbuf_mtod_offset(m, rte_udp_hdr*, l4);
  if (udp->dgram_cksum == 0) udp->dgram_cksum = wire::ipv4_udp_cksum_mbuf(m, ip, l4);
}

}  // namespace

// ---- FaultDice ---------------------------------------------------------------------------

FaultDice::FaultDice(const config::FaultConfig& f, uint64_t stream) noexcept
    // Streams of one seed start far apart (seed + k * gamma would give shifted copies of one
    // sequence).
    : state_(mix64(f.seed ^ mix64(stream + kGamma))),
      loss_(threshold(f.loss)),
      corrupt_(threshold(f.corrupt)),
      dup_(threshold(f.dup)),
      reorder_(threshold(f.reorder)) {}

uint64_t FaultDice::threshold(double p) noexcept {
  constexpr double kOne = 9007199254740992.0;  // 2^53
  if (!(p > 0)) return 0;                      // NaN too
  if (p >= 1) return 1ULL << 53;
  return static_cast<uint64_t>(p * kOne);
}

uint64_t FaultDice::next() noexcept { return mix64(state_ += kGamma); }

FaultDice::Decision FaultDice::decide(uint32_t span) noexcept {
  Decision d;
  d.drop = draw(loss_);
  d.corrupt = draw(corrupt_) && span != 0;
  d.dup = draw(dup_);
  d.hold = draw(reorder_);
  const uint64_t where = next();
  d.byte = static_cast<uint32_t>(((where >> 32) * span) >> 32);  // uniform in [0, span)
  d.bit = static_cast<uint8_t>(where & 7);
  if (d.drop) d.corrupt = d.dup = d.hold = false;
  return d;
}

// ---- FaultInjector ----------------------------------------------------------------------

FaultInjector::FaultInjector(const config::FaultConfig& f, uint16_t port_id, rte_mempool* pool,
                             FaultStats* stats) noexcept
    : ops_{pool}, faulter_(f, port_id, stats) {}

FaultInjector::~FaultInjector() { faulter_.free_held(ops_); }

uint16_t FaultInjector::apply_burst_st(rte_mbuf** pkts, uint16_t n, uint16_t cap,
                                       uint16_t* received) noexcept {
  uint16_t out = faulter_.apply_burst_st(pkts, n, cap, ops_);
  if (faulter_.held() != 0) *received = cap;
  return out;
}

// IPv4/UDP frames only (faults.h): the bytes of the IPv4 packet, as far as the frame holds them.
uint32_t FaultInjector::Ops::span(rte_mbuf* m, uint32_t* first) noexcept {
  constexpr uint32_t kNeed = kIpOffset + sizeof(rte_ipv4_hdr);
  if (rte_pktmbuf_data_len(m) < kNeed) return 0;
  const auto* eth = rte_pktmbuf_mtod(m, const rte_ether_hdr*);
  if (eth->ether_type != RTE_BE16(RTE_ETHER_TYPE_IPV4)) return 0;
  const auto* ip = rte_pktmbuf_mtod_offset(m, const rte_ipv4_hdr*, kIpOffset);
  if ((ip->version_ihl >> 4) != 4 || ip->next_proto_id != IPPROTO_UDP) return 0;
  *first = kIpOffset;
  return std::min<uint32_t>(rte_be_to_cpu_16(ip->total_length), rte_pktmbuf_pkt_len(m) - kIpOffset);
}

bool FaultInjector::Ops::flip(rte_mbuf*& m, uint32_t offset, uint8_t bit) noexcept {
  if (!writable(m)) {
    rte_mbuf* c = copy(m);
    if (!c) return false;
    rte_pktmbuf_free(m);
    m = c;
  }
  // A NIC's verdict on the checksums no longer holds: the decoder checks in software.
  m->ol_flags &= ~(RTE_MBUF_F_RX_IP_CKSUM_MASK | RTE_MBUF_F_RX_L4_CKSUM_MASK);
  // A frame sent with no UDP checksum (udp_checksum = auto on memif and ring: such links do not
  // corrupt) gets the one a sender on a wire would have computed, so that the flip is caught.
  add_udp_checksum(m);
  for (rte_mbuf* seg = m; seg; seg = seg->next) {
    if (offset < seg->data_len) {
      *rte_pktmbuf_mtod_offset(seg, uint8_t*, offset) ^= static_cast<uint8_t>(1u << bit);
      return true;
    }
    offset -= seg->data_len;
  }
  return false;  // not reached: offset < span <= pkt_len
}

rte_mbuf* FaultInjector::Ops::copy(rte_mbuf* m) noexcept {
  return rte_pktmbuf_copy(m, pool, 0, UINT32_MAX);
}

void FaultInjector::Ops::free(rte_mbuf* m) noexcept { rte_pktmbuf_free(m); }

}  // namespace dpfab::progress
