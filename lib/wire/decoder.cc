// SPDX-License-Identifier: BSD-3-Clause
#include "wire/decoder.h"

#include <rte_branch_prediction.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include "wire/checksum.h"
#include "wire/multicast.h"

namespace dpfab::wire {

namespace {

constexpr const char* kVerdictNames[] = {
    "data",           "arp",
    "eth-truncated",  "vlan",
    "ethertype",      "ip-truncated",
    "ip-version",     "ip-header-length",
    "ip-checksum",    "ip-total-length",
    "ip-fragment",    "ip-protocol",
    "udp-length",     "udp-checksum",
    "header-version", "old-version",
    "header-type",    "header-flags",
    "payload-length", "segmented-header",
    "ip-source",      "ip-destination",
};
static_assert(std::size(kVerdictNames) == static_cast<size_t>(Verdict::kCount));

// Smallest IPv4 total length we accept beyond the IPv4 header: UDP header + dpfab header.
constexpr size_t kMinL4 = kUdpHdrLen + kHeaderLen;

// Whether the `len` dpfab bytes at `hdr` (UDP length - 8; the first kHeaderLen of them readable)
// are a frame of wire version 1 (format.h): its version, one of the types it sent (the same
// numbers as ours), and its payload_len, at the offset version 2 keeps, agreeing with the UDP
// length under the 32-byte header. A datagram of someone else's protocol that merely starts
// with a 1 is not taken for an old dpfab.
inline bool is_v1_frame(const uint8_t* hdr, size_t len) noexcept {
  static_assert(kPayloadLenOffset + 4 <= kHeaderLen, "v1's payload_len lies in our header");
  return hdr[0] == v1::kVersion && type_accepted(hdr[1]) && len >= v1::kHeaderLen &&
         load_be32(hdr + kPayloadLenOffset) == len - v1::kHeaderLen;
}

// The one decoder. `p` points at the frame; its first `head_len` bytes are contiguous; the frame
// is `frame_len` bytes in all (head_len == frame_len for a flat buffer). `l4_sum(off, len, &sum)`
// returns the raw (non-complemented) one's-complement sum of frame bytes [off, off + len), or
// false if it cannot.
template <class L4Sum>
inline Verdict decode_core(const uint8_t* p, size_t head_len, size_t frame_len, RxChecksums nic,
                           Frame* f, L4Sum&& l4_sum) noexcept {
  // Ethernet.
  if (unlikely(frame_len < kEthHdrLen)) return Verdict::kEthTruncated;
  if (unlikely(head_len < kEthHdrLen)) return Verdict::kSegmentedHeader;
  const uint16_t ether_type = load_be16(p + 12);
  if (unlikely(ether_type != kEtherTypeIpv4)) {
    if (ether_type == kEtherTypeArp) {
      std::memcpy(&f->dst_mac, p, RTE_ETHER_ADDR_LEN);
      std::memcpy(&f->src_mac, p + 6, RTE_ETHER_ADDR_LEN);
      f->payload = p + kEthHdrLen;
      f->payload_len = static_cast<uint32_t>(head_len - kEthHdrLen);
      f->payload_offset = kEthHdrLen;
      return Verdict::kArp;
    }
    if (ether_type == kEtherTypeVlan || ether_type == kEtherTypeQinQ) return Verdict::kVlan;
    return Verdict::kEtherType;
  }

  // IPv4.
  const uint8_t* ip = p + kEthHdrLen;
  const size_t l3_avail = frame_len - kEthHdrLen;
  if (unlikely(l3_avail < kIpv4HdrLen)) return Verdict::kIpTruncated;
  if (unlikely(head_len < kEthHdrLen + kIpv4HdrLen)) return Verdict::kSegmentedHeader;
  const uint8_t version_ihl = ip[0];
  if (unlikely((version_ihl >> 4) != 4)) return Verdict::kIpVersion;
  const size_t ihl = static_cast<size_t>(version_ihl & 0x0f) * 4;
  if (unlikely(ihl < kIpv4HdrLen)) return Verdict::kIpHeaderLength;
  if (unlikely(l3_avail < ihl)) return Verdict::kIpTruncated;
  if (unlikely(head_len < kEthHdrLen + ihl)) return Verdict::kSegmentedHeader;
  if (nic.ip != RxChecksum::kGood) {
    if (unlikely(nic.ip == RxChecksum::kBad || !ipv4_header_sum_ok(ip, ihl)))
      return Verdict::kIpChecksum;
  }
  const size_t total_len = load_be16(ip + 2);
  if (unlikely(total_len > l3_avail || total_len < ihl + kMinL4)) return Verdict::kIpTotalLength;
  if (unlikely((load_be16(ip + 6) & (RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK)) != 0))
    return Verdict::kIpFragment;
  if (unlikely(ip[9] != kIpProtoUdp)) return Verdict::kIpProtocol;

  // Addresses: a group frame is exactly one whose IPv4 destination is a group, sent to that
  // group's MAC; nobody sends from a group address.
  {
    rte_ether_addr dst_mac, src_mac;
    std::memcpy(&dst_mac, p, RTE_ETHER_ADDR_LEN);
    std::memcpy(&src_mac, p + 6, RTE_ETHER_ADDR_LEN);
    const uint32_t src_ip = load_raw32(ip + 12);
    if (unlikely(is_group_mac(src_mac) || is_multicast_ipv4(src_ip) || is_broadcast_ipv4(src_ip)))
      return Verdict::kIpSource;
    const uint32_t dst_ip = load_raw32(ip + 16);
    if (unlikely(is_group_mac(dst_mac)) || unlikely(is_multicast_ipv4(dst_ip))) {
      if (!is_multicast_ipv4(dst_ip) || !is_multicast_mac_of(dst_mac, dst_ip))
        return Verdict::kIpDestination;
    }
  }

  // UDP.
  const size_t l4_off = kEthHdrLen + ihl;
  const size_t payload_off = l4_off + kMinL4;
  if (unlikely(head_len < payload_off)) return Verdict::kSegmentedHeader;
  const uint8_t* udp = p + l4_off;
  const size_t udp_len = load_be16(udp + 4);
  if (unlikely(udp_len != total_len - ihl)) return Verdict::kUdpLength;
  if (nic.l4 != RxChecksum::kGood) {
    if (unlikely(nic.l4 == RxChecksum::kBad)) return Verdict::kUdpChecksum;
    if (load_raw16(udp + 6) != 0) {  // 0: the sender computed no checksum (RFC 768)
      uint16_t raw;
      if (unlikely(!l4_sum(l4_off, udp_len, &raw))) return Verdict::kUdpChecksum;
      uint32_t sum = raw + rte_ipv4_phdr_cksum(reinterpret_cast<const rte_ipv4_hdr*>(ip), 0);
      sum = (sum & 0xffff) + (sum >> 16);
      sum = (sum & 0xffff) + (sum >> 16);
      if (unlikely(sum != 0xffff)) return Verdict::kUdpChecksum;
    }
  }

  // dpfab header: the version first, before anything of this version's layout is read.
  const uint8_t* hdr = udp + kUdpHdrLen;
  if (unlikely(hdr[0] != kVersion)) {
    if (!is_v1_frame(hdr, udp_len - kUdpHdrLen)) return Verdict::kHeaderVersion;
    // Whom to tell: the old peer's addresses.
    std::memcpy(&f->dst_mac, p, RTE_ETHER_ADDR_LEN);
    std::memcpy(&f->src_mac, p + 6, RTE_ETHER_ADDR_LEN);
    f->src_ip_be = load_raw32(ip + 12);
    f->dst_ip_be = load_raw32(ip + 16);
    f->src_port_be = load_raw16(udp);
    f->dst_port_be = load_raw16(udp + 2);
    return Verdict::kOldVersion;
  }
  if (unlikely(!type_accepted(hdr[1]))) return Verdict::kHeaderType;
  f->header = read_header(hdr);
  if (unlikely((f->header.flags & ~kKnownFlags) != 0)) return Verdict::kHeaderFlags;
  const size_t payload_len = udp_len - kMinL4;
  if (unlikely(f->header.payload_len != payload_len)) return Verdict::kPayloadLength;

  std::memcpy(&f->dst_mac, p, RTE_ETHER_ADDR_LEN);
  std::memcpy(&f->src_mac, p + 6, RTE_ETHER_ADDR_LEN);
  f->ip_id = load_be16(ip + 4);
  f->src_ip_be = load_raw32(ip + 12);
  f->dst_ip_be = load_raw32(ip + 16);
  f->src_port_be = load_raw16(udp);
  f->dst_port_be = load_raw16(udp + 2);
  f->payload_offset = static_cast<uint32_t>(payload_off);
  f->payload_len = static_cast<uint32_t>(payload_len);
  f->payload = payload_off + payload_len <= head_len ? p + payload_off : nullptr;
  return Verdict::kData;
}

}  // namespace

const char* verdict_name(Verdict v) noexcept {
  auto i = static_cast<size_t>(v);
  return i < std::size(kVerdictNames) ? kVerdictNames[i] : "?";
}

RxChecksums RxChecksums::from_ol_flags(uint64_t ol) noexcept {
  auto map = [](uint64_t bits, uint64_t good, uint64_t bad, uint64_t none) {
    if (bits == good || bits == none) return RxChecksum::kGood;
    if (bits == bad) return RxChecksum::kBad;
    return RxChecksum::kUnknown;
  };
  return {map(ol & RTE_MBUF_F_RX_IP_CKSUM_MASK, RTE_MBUF_F_RX_IP_CKSUM_GOOD,
              RTE_MBUF_F_RX_IP_CKSUM_BAD, RTE_MBUF_F_RX_IP_CKSUM_NONE),
          map(ol & RTE_MBUF_F_RX_L4_CKSUM_MASK, RTE_MBUF_F_RX_L4_CKSUM_GOOD,
              RTE_MBUF_F_RX_L4_CKSUM_BAD, RTE_MBUF_F_RX_L4_CKSUM_NONE)};
}

Verdict decode_frame(std::span<const uint8_t> bytes, Frame* out, DecodeStats& stats,
                     RxChecksums nic) noexcept {
  const uint8_t* p = bytes.data();
  Verdict v = decode_core(p, bytes.size(), bytes.size(), nic, out,
                          [p](size_t off, size_t len, uint16_t* sum) {
                            *sum = rte_raw_cksum(p + off, len);
                            return true;
                          });
  stats.bump(v);
  return v;
}

Verdict decode_mbuf(const rte_mbuf* m, Frame* out, DecodeStats& stats) noexcept {
  const auto* p = rte_pktmbuf_mtod(m, const uint8_t*);
  const size_t head_len = rte_pktmbuf_data_len(m);
  Verdict v = decode_core(
      p, head_len, rte_pktmbuf_pkt_len(m), RxChecksums::from_ol_flags(m->ol_flags), out,
      [m, p, head_len](size_t off, size_t len, uint16_t* sum) {
        if (off + len <= head_len) {
          *sum = rte_raw_cksum(p + off, len);
          return true;
        }
        return raw_cksum_mbuf(m, static_cast<uint32_t>(off), static_cast<uint32_t>(len), sum) == 0;
      });
  stats.bump(v);
  return v;
}

}  // namespace dpfab::wire
