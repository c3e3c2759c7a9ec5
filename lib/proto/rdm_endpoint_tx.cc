// SPDX-License-Identifier: BSD-3-Clause
//
// RdmEndpoint's transmit side (rdm::CoreSink::transmit): the frames the core sends are built
// here, into mbufs gathered in txq_ and given to the port in one burst when the call ends
// (flush), or written into a same-host peer's ring (transmit_local).
//
// Data of at least Link::tx_extbuf_min() bytes is not copied into the mbuf on ports whose
// transmit copies every frame before it returns (memif, af_packet): the frame is a header
// mbuf with an external-buffer mbuf chained after it that points at the data where the core
// keeps it (the application's buffer, the inject copy, a region being read), which stays valid
// until the peer acknowledged it. Such a frame never outlives the burst that hands it over: one
// the port did not take is turned into a copy before the call ends (flush), so nothing refers
// to the application's memory once its operation can complete.
#include <rte_byteorder.h>
#include <rte_mbuf.h>

#include <cstring>

#include "common/counter.h"
#include "proto/rdm_endpoint.h"
#include "wire/encoder.h"
#include "wire/format.h"

namespace dpfab::proto {

void RdmEndpoint::flush() noexcept {
  if (!txq_n_) return;
  const uint16_t sent = link_->transmit(txq_, static_cast<uint16_t>(txq_n_));
  // Under mu_, the counters' only writer: no locked add (common/counter.h).
  bump(stats_.tx_frames, sent);
  if (sent < txq_n_) {
    bump(stats_.tx_deferred, txq_n_ - sent);
    std::memmove(txq_, txq_ + sent, (txq_n_ - sent) * sizeof(txq_[0]));
  }
  txq_n_ -= sent;
  if (txq_n_ != 0 && ext_min_ != 0) keep_no_references();  // the port was full: rare
}

namespace {

// An external buffer's shared info wants a free callback; the memory is the core's to keep.
void ext_unused(void*, void*) noexcept {}

// A frame not built after all: its mbufs go back (either may be null). @return false.
bool drop(rte_mbuf* m, rte_mbuf* x) noexcept {
  if (m) rte_pktmbuf_free(m);
  if (x) rte_pktmbuf_free(x);
  return false;
}

bool by_reference(const rte_mbuf* m) noexcept {
  for (; m != nullptr; m = m->next)
    if (RTE_MBUF_HAS_EXTBUF(m)) return true;
  return false;
}

}  // namespace

void RdmEndpoint::keep_no_references() noexcept {
  // Frames the port did not take wait for the next burst, by when their operation may have
  // completed (a retransmission, say, whose original was acknowledged meanwhile): those that
  // point at the core's memory become copies now. Rare: the port was full.
  uint32_t kept = 0;
  for (uint32_t k = 0; k < txq_n_; ++k) {
    rte_mbuf* m = txq_[k];
    if (by_reference(m)) {
      rte_mbuf* c = rte_pktmbuf_copy(m, link_->pool(), 0, UINT32_MAX);
      rte_pktmbuf_free(m);
      if (!c) {
        // No mbuf to copy into: the frame is dropped, as a full port would have lost it; the
        // core retransmits it.
        bump(stats_.tx_no_mbuf);
        continue;
      }
      bump(stats_.tx_by_reference_copied);
      m = c;
    }
    txq_[kept++] = m;
  }
  txq_n_ = kept;
}

rte_mbuf* RdmEndpoint::data_by_reference(std::span<const uint8_t> data) noexcept {
  rte_mbuf* x = nullptr;  // (not rte_pktmbuf_alloc: transmit's stays inlined as its only use)
  if (rte_pktmbuf_alloc_bulk(link_->pool(), &x, 1) != 0) return nullptr;
  // The mbuf's own buffer is unused while it points at `data`: it holds the external buffer's
  // shared info, which so lives exactly as long as the mbuf (freeing it detaches the data, calls
  // ext_unused and gives the buffer back).
  auto* sh = static_cast<rte_mbuf_ext_shared_info*>(x->buf_addr);
  sh->free_cb = ext_unused;
  sh->fcb_opaque = nullptr;
  rte_mbuf_ext_refcnt_set(sh, 1);
  const auto n = static_cast<uint16_t>(data.size());
  // The IOVA is never used: the ports that take such frames copy them by virtual address.
  rte_pktmbuf_attach_extbuf(x, const_cast<uint8_t*>(data.data()), RTE_BAD_IOVA, n, sh);
  x->data_len = n;
  x->pkt_len = n;
  return x;
}

wire::Route RdmEndpoint::route_to(const Peer& p) const noexcept {
  wire::Route route;
  route.src_mac = link_->mac();
  std::memcpy(route.dst_mac.addr_bytes, p.addr.mac, 6);
  route.src_ip_be = link_->ipv4_be();
  route.dst_ip_be = p.addr.ipv4_be;
  route.src_port_be = udp_port_be_;
  route.dst_port_be = p.addr.udp_port_be;
  return route;
}

wire::Header RdmEndpoint::outer_to(const Peer& p, uint32_t payload_len) const noexcept {
  return wire::rdm_outer_header(rte_be_to_cpu_16(ep_id_be_), rte_be_to_cpu_16(p.addr.ep_id_be),
                                payload_len);
}

bool RdmEndpoint::make_headers(Peer& p) noexcept {
  p.headers_ok = p.headers.init(route_to(p), outer_to(p, 0)) == 0;
  return p.headers_ok;
}

template <bool kByReference>
inline bool RdmEndpoint::transmit_port(Peer& p, const wire::RdmHeader& h,
                                       std::span<const uint8_t> data) noexcept {
  rte_mbuf* m = rte_pktmbuf_alloc(link_->pool());
  rte_mbuf* x = nullptr;  // kByReference: the data, chained after the headers in m
  if (m && kByReference) x = data_by_reference(data);
  if (!m || (kByReference && !x)) {
    bump(stats_.tx_no_mbuf);
    return drop(m, x);
  }
  const size_t hl = wire::rdm_header_len(h.kind);
  const size_t len = hl + data.size();
  const size_t copied = kByReference ? 0 : data.size();  // data bytes in m itself
  const bool templated = use_templates_ && len <= wire::kMaxPayload &&
                         rte_pktmbuf_tailroom(m) >= wire::kOverhead + hl + copied &&
                         (p.headers_ok || make_headers(p));
  if (templated) {
    // The peer's prepared headers (what encode_mbuf would write on this link), the RDM header,
    // the data (or, by reference, the mbuf that points at it).
    auto* f = reinterpret_cast<uint8_t*>(
        rte_pktmbuf_append(m, static_cast<uint16_t>(wire::kOverhead + hl + copied)));
    if (!f) return drop(m, x);  // the tailroom was checked: never
    p.headers.write(f, p.addr.mac, static_cast<uint32_t>(len), ip_id_++);
    wire::write_rdm_header(f + wire::kOverhead, h);  // the core's own header: valid (wire/rdm.h)
    if (copied) std::memcpy(f + wire::kOverhead + hl, data.data(), copied);
    if (kByReference) rte_pktmbuf_chain(m, x);
  } else {
    auto* b = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(hl + copied)));
    if (!b) return drop(m, x);
    wire::write_rdm_header(b, h);
    if (copied) std::memcpy(b + hl, data.data(), copied);
    if (kByReference) rte_pktmbuf_chain(m, x);
    // The outer headers; the UDP checksum, where the port wants one, summed over the chain.
    if (wire::encode_mbuf(m, route_to(p), outer_to(p, static_cast<uint32_t>(len)), ip_id_++,
                          link_->tx_caps()) != 0)
      return drop(m, nullptr);
  }
  txq_[txq_n_++] = m;
  if (kByReference) bump(stats_.tx_by_reference);
  return true;
}

bool RdmEndpoint::transmit(fi_addr_t peer, const wire::RdmHeader& h,
                           std::span<const uint8_t> data) noexcept {
  if (Peer& p = peers_[peer]; p.addr.has_node() && link_->local()) {
    bool pending;
    if (shm::Conn* c = link_->local_route(p.addr, &pending))
      return transmit_local(p, static_cast<uint32_t>(peer), c, h, data);
    if (pending) return false;  // its link is being made: the core retries
  }
  if (h.flags & wire::kRdmRef) [[unlikely]] {
    // An RTS by reference to a peer whose same-host link is gone: a plain one (the receiver
    // grants and the data follows; a port peer refuses references).
    wire::RdmHeader plain = h;
    plain.flags &= ~wire::kRdmRef;
    plain.offset = 0;
    return transmit(peer, plain, data);
  }
  if (txq_n_ == kTxBurst) {
    flush();
    if (txq_n_ == kTxBurst) return false;  // the port is full: the core tries again later
  }
  // Data of ext_min_ bytes or more by reference (see the file comment), else copied.
  if (ext_min_ != 0 && data.size() >= ext_min_ && data.size() <= UINT16_MAX)
    return transmit_port<true>(peers_[peer], h, data);
  return transmit_port<false>(peers_[peer], h, data);
}

bool RdmEndpoint::transmit_local(Peer& p, uint32_t id, shm::Conn* c, const wire::RdmHeader& h,
                                 std::span<const uint8_t> data) noexcept {
  // Rendezvous data to a peer that can read our memory stays where it is (the application's
  // buffer, valid until the peer acknowledges it): the peer copies it once, with
  // process_vm_readv, straight into its receive (deliver_indirect).
  if (!p.lossless) [[unlikely]] {
    // The rings lose nothing they took: the core's RTO for this peer gets the lossless floor.
    try {
      lossless_.push_back(id);
      p.lossless = true;
    } catch (...) {
    }
  }
  if (!p.large_rdv && c->peer_reads_us()) [[unlikely]] {
    // From now on rendezvous by reference (RTS with kRdmRef, large kRdmIndirect segments):
    // finish() tells the core, which may not be called here.
    try {
      large_rdv_.push_back(id);
      p.large_rdv = true;
    } catch (...) {
    }
  }
  const bool by_ref =
      h.kind == wire::RdmKind::kRdvData && data.size() >= kIndirectMin && c->peer_reads_us();
  uint8_t hdr[wire::kRdmRmaHeaderLen + sizeof(shm::RdmIndirect)];
  size_t hl = wire::write_rdm_header(hdr, h);  // the core's own header: valid (wire/rdm.h)
  if (by_ref) {
    const shm::RdmIndirect ind{reinterpret_cast<uint64_t>(data.data()), data.size()};
    std::memcpy(hdr + hl, &ind, sizeof(ind));
    hl += sizeof(ind);
    data = {};
  }
  const shm::RecordHeader rh{0,
                             by_ref ? shm::RecordKind::kRdmIndirect : shm::RecordKind::kRdm,
                             0,
                             rte_be_to_cpu_16(ep_id_be_),
                             udp_port_be_,
                             p.addr.udp_port_be,
                             rte_be_to_cpu_16(p.addr.ep_id_be),
                             0};
  switch (c->send(rh, {hdr, hl}, data)) {
    case 0:
      bump(stats_.tx_frames);
      bump(stats_.local_tx);
      if (by_ref || (h.flags & wire::kRdmRef)) bump(stats_.local_indirect_tx);
      return true;
    case -FI_EHOSTUNREACH:
      // The peer's process is gone (or never was there): its operations fail once this core call
      // is over (finish), as link_lost would have them.
      if (std::find(lost_.begin(), lost_.end(), id) == lost_.end()) {
        try {
          lost_.push_back(id);
        } catch (...) {
        }
      }
      return true;  // taken: nothing is resent to a peer that is gone
    default:
      return false;  // the ring is full or the link is coming up: the core tries again soon
  }
}

}  // namespace dpfab::proto
