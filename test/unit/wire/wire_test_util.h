// SPDX-License-Identifier: BSD-3-Clause
//
// Helpers for the wire tests: an independent checksum (RFC 1071, written out byte by byte, so the
// tests do not check DPDK's helpers against themselves), a hand-crafted reference frame, and
// rte_mbufs built by hand on static buffers (no EAL, no mempool).
#pragma once

#include <arpa/inet.h>
#include <rte_mbuf.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "wire/format.h"

namespace wire_test {

using namespace dpfab::wire;

/// The one's-complement sum of bytes (big-endian 16-bit words, odd byte padded), not complemented.
inline uint16_t ones_sum(const uint8_t* p, size_t n, uint32_t sum = 0) {
  for (size_t i = 0; i < n; i += 2) {
    uint32_t w = static_cast<uint32_t>(p[i]) << 8;
    if (i + 1 < n) w |= p[i + 1];
    sum += w;
    sum = (sum & 0xffff) + (sum >> 16);
  }
  return static_cast<uint16_t>(sum);
}

/// Recomputes the IPv4 header checksum (over IHL*4 bytes) and the UDP checksum (over the UDP
/// length from the UDP header, pseudo-header from the IPv4 header) of an Ethernet/IPv4/UDP frame,
/// whatever else is wrong with it. The UDP checksum is left 0 if it was 0.
inline void fix_checksums(std::vector<uint8_t>& f) {
  uint8_t* ip = f.data() + kEthHdrLen;
  const size_t ihl = (ip[0] & 0xf) * 4u;
  ip[10] = ip[11] = 0;
  const uint16_t ic = static_cast<uint16_t>(~ones_sum(ip, ihl));
  ip[10] = static_cast<uint8_t>(ic >> 8);
  ip[11] = static_cast<uint8_t>(ic);
  uint8_t* udp = ip + ihl;
  if (udp[6] == 0 && udp[7] == 0) return;
  const size_t udp_len = (udp[4] << 8) | udp[5];
  udp[6] = udp[7] = 0;
  uint8_t ph[12];
  std::memcpy(ph, ip + 12, 8);
  ph[8] = 0;
  ph[9] = 17;
  ph[10] = static_cast<uint8_t>(udp_len >> 8);
  ph[11] = static_cast<uint8_t>(udp_len);
  const size_t avail = f.size() - kEthHdrLen - ihl;
  uint16_t uc = static_cast<uint16_t>(
      ~ones_sum(udp, udp_len < avail ? udp_len : avail, ones_sum(ph, sizeof(ph))));
  if (uc == 0) uc = 0xffff;
  udp[6] = static_cast<uint8_t>(uc >> 8);
  udp[7] = static_cast<uint8_t>(uc);
}

/// A frame crafted by hand (scripted outside the code under test) and checked with tcpdump -vvv,
/// which reports "[udp sum ok]" and no bad IPv4 checksum:
///   02:00:00:00:00:01 > 02:00:00:00:00:02, 10.0.0.1.9228 > 10.0.0.2.9229, IP id 0x1234, DF,
///   TTL 64; dpfab wire version 2, DATA, flags HAS_CQ_DATA, src_ep 3, dst_ep 7, payload_len 12,
///   cq_data 0x1122334455667788, payload "hello dpfab!".
///   IPv4 checksum 0x147b, UDP checksum 0x1f30.
inline const std::vector<uint8_t> kGoldenFrame = {
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01,  //
    0x08, 0x00, 0x45, 0x00, 0x00, 0x3c, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11,  //
    0x14, 0x7b, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, 0x24, 0x0c,  //
    0x24, 0x0d, 0x00, 0x28, 0x1f, 0x30, 0x02, 0x01, 0x00, 0x01, 0x00, 0x03,  //
    0x00, 0x07, 0x00, 0x00, 0x00, 0x0c, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66,  //
    0x77, 0x88, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x20, 0x64, 0x70, 0x66, 0x61,  //
    0x62, 0x21,
};
inline constexpr uint16_t kGoldenIpId = 0x1234;
inline constexpr char kGoldenPayload[] = "hello dpfab!";

inline Route golden_route() {
  Route r;
  r.src_mac = {{0x02, 0, 0, 0, 0, 0x01}};
  r.dst_mac = {{0x02, 0, 0, 0, 0, 0x02}};
  r.src_ip_be = htonl(0x0a000001);
  r.dst_ip_be = htonl(0x0a000002);
  r.src_port_be = htons(9228);
  r.dst_port_be = htons(9229);
  return r;
}

inline Header golden_header() {
  Header h;
  h.type = Type::kData;
  h.flags = kHasCqData;
  h.src_ep = 3;
  h.dst_ep = 7;
  h.payload_len = 12;
  h.cq_data = 0x1122334455667788ull;
  return h;
}

/// An rte_mbuf on its own buffer, set up by hand as rte_pktmbuf_init/reset would (no mempool,
/// so it must never be freed through DPDK).
struct TestMbuf {
  static constexpr uint16_t kHeadroom = RTE_PKTMBUF_HEADROOM;
  rte_mbuf m;
  std::vector<uint8_t> buf;

  explicit TestMbuf(size_t room = 2048, uint16_t headroom = kHeadroom) : buf(room + headroom) {
    std::memset(&m, 0, sizeof(m));
    m.buf_addr = buf.data();
    m.buf_len = static_cast<uint16_t>(buf.size());
    m.data_off = headroom;
    m.refcnt = 1;
    m.nb_segs = 1;
    m.next = nullptr;
  }
  /// Appends bytes to this segment (and to pkt_len of this mbuf as a chain head).
  void append(const uint8_t* p, size_t n) {
    std::memcpy(static_cast<uint8_t*>(m.buf_addr) + m.data_off + m.data_len, p, n);
    m.data_len = static_cast<uint16_t>(m.data_len + n);
    m.pkt_len += static_cast<uint32_t>(n);
  }
};

/// A chain of TestMbufs holding `bytes` split at the given offsets (ascending).
struct TestChain {
  std::vector<std::unique_ptr<TestMbuf>> segs;
  TestChain(const std::vector<uint8_t>& bytes, const std::vector<size_t>& cuts,
            uint16_t headroom = TestMbuf::kHeadroom) {
    size_t from = 0;
    std::vector<size_t> ends = cuts;
    ends.push_back(bytes.size());
    for (size_t end : ends) {
      auto s = std::make_unique<TestMbuf>(end - from + 16, segs.empty() ? headroom : 0);
      s->append(bytes.data() + from, end - from);
      if (!segs.empty()) {
        segs.back()->m.next = &s->m;
        segs.front()->m.pkt_len += s->m.data_len;
        segs.front()->m.nb_segs++;
      }
      segs.push_back(std::move(s));
      from = end;
    }
  }
  rte_mbuf* head() { return &segs.front()->m; }
  /// The chain's bytes, concatenated.
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out;
    for (const rte_mbuf* s = &segs.front()->m; s; s = s->next) {
      const auto* p = rte_pktmbuf_mtod(s, const uint8_t*);
      out.insert(out.end(), p, p + s->data_len);
    }
    return out;
  }
};

}  // namespace wire_test
