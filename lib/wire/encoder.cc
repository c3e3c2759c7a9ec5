// SPDX-License-Identifier: BSD-3-Clause
#include "wire/encoder.h"

#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include <cerrno>

#include "wire/checksum.h"

namespace dpfab::wire {

namespace {

int check(const Header& h, size_t payload_len) noexcept {
  if (h.version != kVersion || !type_accepted(static_cast<uint8_t>(h.type)) ||
      (h.flags & ~kKnownFlags) != 0)
    return -EINVAL;
  if (payload_len > kMaxPayload) return -EMSGSIZE;
  return 0;
}

// Writes the kOverhead (62) header bytes at p for a payload of payload_len bytes, both checksum
// fields 0.
void write_headers(uint8_t* p, const Route& r, const Header& h, uint32_t payload_len,
                   uint16_t ip_id) noexcept {
  std::memcpy(p, &r.dst_mac, RTE_ETHER_ADDR_LEN);
  std::memcpy(p + 6, &r.src_mac, RTE_ETHER_ADDR_LEN);
  store_be16(p + 12, kEtherTypeIpv4);

  uint8_t* ip = p + kIpv4Offset;
  ip[0] = 0x45;  // version 4, IHL 5
  ip[1] = 0;     // DSCP/ECN
  store_be16(ip + 2, static_cast<uint16_t>(kL3Overhead + payload_len));
  store_be16(ip + 4, ip_id);
  store_be16(ip + 6, RTE_IPV4_HDR_DF_FLAG);  // DF, offset 0
  ip[8] = kIpTtl;
  ip[9] = kIpProtoUdp;
  store_be16(ip + 10, 0);
  std::memcpy(ip + 12, &r.src_ip_be, 4);
  std::memcpy(ip + 16, &r.dst_ip_be, 4);

  uint8_t* udp = p + kUdpOffset;
  std::memcpy(udp, &r.src_port_be, 2);
  std::memcpy(udp + 2, &r.dst_port_be, 2);
  store_be16(udp + 4, static_cast<uint16_t>(kUdpHdrLen + kHeaderLen + payload_len));
  store_be16(udp + 6, 0);

  Header out = h;
  out.payload_len = payload_len;
  write_header(p + kHeaderOffset, out);
}

// The checksums are stored as computed: rte_* return them in the byte order of the packet.
void store_cksum(uint8_t* field, uint16_t cksum) noexcept { std::memcpy(field, &cksum, 2); }

}  // namespace

TxChecksumCaps TxChecksumCaps::from_offloads(uint64_t tx_offloads) noexcept {
  return {(tx_offloads & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) != 0,
          (tx_offloads & RTE_ETH_TX_OFFLOAD_UDP_CKSUM) != 0};
}

int encode_frame(std::span<uint8_t> frame, const Route& route, const Header& h,
                 uint16_t ip_id) noexcept {
  if (frame.size() < kOverhead) return -EINVAL;
  const size_t payload_len = frame.size() - kOverhead;
  if (int rc = check(h, payload_len); rc != 0) return rc;
  uint8_t* p = frame.data();
  write_headers(p, route, h, static_cast<uint32_t>(payload_len), ip_id);
  const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(p + kIpv4Offset);
  store_cksum(p + kIpv4Offset + 10, rte_ipv4_cksum(ip));
  store_cksum(p + kUdpOffset + 6, rte_ipv4_udptcp_cksum(ip, p + kUdpOffset));
  return 0;
}

int encode_mbuf(rte_mbuf* m, const Route& route, const Header& h, uint16_t ip_id,
                TxChecksumCaps caps) noexcept {
  if (m == nullptr) return -EINVAL;
  const size_t payload_len = rte_pktmbuf_pkt_len(m);
  if (int rc = check(h, payload_len); rc != 0) return rc;
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_prepend(m, kOverhead));
  if (p == nullptr) return -ENOSPC;
  write_headers(p, route, h, static_cast<uint32_t>(payload_len), ip_id);
  const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(p + kIpv4Offset);

  uint64_t ol = m->ol_flags & ~(RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IPV6 | RTE_MBUF_F_TX_IP_CKSUM |
                                RTE_MBUF_F_TX_L4_MASK | RTE_MBUF_F_TX_TCP_SEG);
  if (caps.ipv4 || caps.udp) {
    ol |= RTE_MBUF_F_TX_IPV4;
    if (caps.ipv4) ol |= RTE_MBUF_F_TX_IP_CKSUM;
    if (caps.udp) ol |= RTE_MBUF_F_TX_UDP_CKSUM;
    m->l2_len = kEthHdrLen;
    m->l3_len = kIpv4HdrLen;
  }
  m->ol_flags = ol;
  if (!caps.ipv4) store_cksum(p + kIpv4Offset + 10, rte_ipv4_cksum(ip));
  // udp_none: no checksum, write_headers left the field 0.
  if (caps.udp)
    store_cksum(p + kUdpOffset + 6, rte_ipv4_phdr_cksum(ip, ol));
  else if (!caps.udp_none && m->next == nullptr)
    store_cksum(p + kUdpOffset + 6, rte_ipv4_udptcp_cksum(ip, p + kUdpOffset));
  else if (!caps.udp_none)
    store_cksum(p + kUdpOffset + 6, ipv4_udp_cksum_mbuf(m, ip, kUdpOffset));
  return 0;
}

int HeaderTemplate::init(const Route& route, const Header& h) noexcept {
  if (int rc = check(h, 0); rc != 0) return rc;
  write_headers(bytes_, route, h, 0, 0);
  // write_headers left the IPv4 checksum 0; zero the total length too: write() adds both it and
  // the identification per frame.
  store_be16(bytes_ + kIpv4Offset + 2, 0);
  uint32_t sum = 0;
  for (size_t i = 0; i < kIpv4HdrLen; i += 2) sum += load_raw16(bytes_ + kIpv4Offset + i);
  ip_sum_ = sum;
  return 0;
}

}  // namespace dpfab::wire
