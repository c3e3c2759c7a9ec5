// SPDX-License-Identifier: BSD-3-Clause
#include "proto/dgram.h"

#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include <algorithm>
#include <cstring>

#include "common/counter.h"
#include "common/log.h"
#include "wire/format.h"

namespace dpfab::proto {

namespace {

// An iov array the data calls may use: at most kMaxIov entries, an array when count > 0, and no
// entry with a length but no buffer (fi_msg(3): NULL is valid only for a zero-length transfer).
bool valid_iov(const iovec* iov, size_t count) noexcept {
  if (count > kMaxIov || (count && !iov)) return false;
  for (size_t i = 0; i < count; ++i)
    if (!iov[i].iov_base && iov[i].iov_len) return false;
  return true;
}

}  // namespace

Result<std::unique_ptr<DgramEndpoint>> DgramEndpoint::create(Link* link, const Config& cfg) {
  if (!link || !link->pool()) return make_error(-FI_ENODEV, "dgram: the port has no mempool");
  std::unique_ptr<DgramEndpoint> ep(new (std::nothrow) DgramEndpoint(link, cfg));
  if (!ep) return make_error(-FI_ENOMEM, "dgram: out of memory");
  // Ring capacity: the next power of two above rx_size (one slot stays empty).
  unsigned count = 1;
  while (count <= cfg.rx_size) count <<= 1;
  ssize_t bytes = rte_ring_get_memsize_elem(sizeof(RecvDesc), count);
  if (bytes < 0) return make_error(-FI_EINVAL, "dgram: rx_size too large");
  ep->ring_mem_.reset(new (std::nothrow) char[bytes + RTE_CACHE_LINE_SIZE]);
  if (!ep->ring_mem_) return make_error(-FI_ENOMEM, "dgram: out of memory");
  auto* r =
      reinterpret_cast<rte_ring*>(RTE_PTR_ALIGN_CEIL(ep->ring_mem_.get(), RTE_CACHE_LINE_SIZE));
  // Multi-producer (application threads post), single consumer (the RX owner).
  if (rte_ring_init(r, "dgram_rx", count, RING_F_SC_DEQ) != 0)
    return make_error(-FI_EINVAL, "dgram: rte_ring_init failed");
  ep->posted_ = r;
  try {
    ep->staged_.reserve(count);
  } catch (...) {
    return make_error(-FI_ENOMEM, "dgram: out of memory");
  }
  return ep;
}

DgramEndpoint::~DgramEndpoint() = default;

void DgramEndpoint::bind_cq(event::Cq* cq, bool tx, bool rx, bool selective) noexcept {
  if (tx) tx_cq_ = cq, tx_selective_ = selective;
  if (rx) rx_cq_ = cq, rx_selective_ = selective;
}

void DgramEndpoint::bind_cntr(event::Cntr* c, bool tx, bool rx) noexcept {
  if (tx) tx_cntr_ = c;
  if (rx) rx_cntr_ = c;
}

void DgramEndpoint::set_address(uint16_t udp_port_be, uint16_t ep_id_be) noexcept {
  udp_port_be_ = udp_port_be;
  ep_id_be_ = ep_id_be;
}

wire::Address DgramEndpoint::address() const noexcept {
  wire::Address a;
  std::memcpy(a.mac, link_->mac().addr_bytes, 6);
  a.ipv4_be = link_->ipv4_be();
  a.udp_port_be = udp_port_be_;
  a.ep_id_be = ep_id_be_;
  link_->set_host_part(a);
  return a;
}

ssize_t DgramEndpoint::post_recv(const iovec* iov, size_t count, void* context,
                                 uint64_t flags) noexcept {
  if (!valid_iov(iov, count)) return -FI_EINVAL;
  // Bounded by rx_size, not by the ring's power-of-two capacity (fi_endpoint(3): rx_attr->size).
  if (posted_count_.fetch_add(1, std::memory_order_relaxed) >= cfg_.rx_size) {
    posted_count_.fetch_sub(1, std::memory_order_relaxed);
    return -FI_EAGAIN;
  }
  RecvDesc d{};
  d.context = context;
  d.flags = flags;
  d.count = static_cast<uint32_t>(count);
  for (size_t i = 0; i < count; ++i) d.iov[i] = iov[i];
  if (rte_ring_mp_enqueue_elem(posted_, &d, sizeof(d)) != 0) {  // cannot happen: bounded above
    posted_count_.fetch_sub(1, std::memory_order_relaxed);
    return -FI_EAGAIN;
  }
  return 0;
}

bool DgramEndpoint::next_recv(RecvDesc* out) noexcept {
  if (staged_head_ < staged_.size()) {
    *out = staged_[staged_head_++];
    if (staged_head_ == staged_.size()) staged_.clear(), staged_head_ = 0;
    return true;
  }
  return rte_ring_sc_dequeue_elem(posted_, out, sizeof(*out)) == 0;
}

int DgramEndpoint::cancel_locked(void* context) noexcept {
  // Move every posted receive into the staged list (order kept), then take the one cancelled.
  RecvDesc d;
  while (rte_ring_sc_dequeue_elem(posted_, &d, sizeof(d)) == 0) staged_.push_back(d);
  for (size_t i = staged_head_; i < staged_.size(); ++i) {
    if (staged_[i].context != context) continue;
    RecvDesc c = staged_[i];
    staged_.erase(staged_.begin() + static_cast<ptrdiff_t>(i));
    posted_count_.fetch_sub(1, std::memory_order_relaxed);
    if (rx_cq_) {
      fi_cq_err_entry err{};
      err.op_context = c.context;
      err.flags = FI_RECV | FI_MSG;
      err.buf = c.count ? c.iov[0].iov_base : nullptr;
      err.err = FI_ECANCELED;
      err.prov_errno = -FI_ECANCELED;
      rx_cq_->write_error(err, nullptr, 0);
    }
    if (rx_cntr_) rx_cntr_->add_err(1);
    return 0;
  }
  return -FI_ENOENT;
}

void DgramEndpoint::complete_tx(void* context, uint64_t flags) noexcept {
  if (tx_cq_) tx_cq_->write(context, FI_SEND | FI_MSG | (flags & FI_REMOTE_CQ_DATA));
}

ssize_t DgramEndpoint::send(const iovec* iov, size_t count, const Destination& dst, void* context,
                            uint64_t flags, bool has_data, uint64_t data, bool inject) noexcept {
  if (!valid_iov(iov, count)) return -FI_EINVAL;
  size_t len = 0;
  for (size_t i = 0; i < count; ++i) len += iov[i].iov_len;
  if (len > (inject ? cfg_.inject_size : cfg_.max_msg)) return -FI_EMSGSIZE;
  bool complete = !inject && (!tx_selective_ || (flags & FI_COMPLETION));
  // Resource management: never start what could not complete.
  if (cfg_.rm_enabled && complete && tx_cq_ && !tx_cq_->would_fit(1)) return -FI_EAGAIN;

  rte_mbuf* m = rte_pktmbuf_alloc(link_->pool());
  if (!m) {
    link_->progress();  // frees mbufs held by the PMD on some ports
    m = rte_pktmbuf_alloc(link_->pool());
    if (!m) return -FI_EAGAIN;
  }
  char* p = rte_pktmbuf_append(m, static_cast<uint16_t>(len));
  if (!p) {
    rte_pktmbuf_free(m);
    return -FI_EMSGSIZE;
  }
  for (size_t i = 0; i < count; ++i) {
    if (!iov[i].iov_len) continue;  // a zero-length entry may have no buffer
    std::memcpy(p, iov[i].iov_base, iov[i].iov_len);
    p += iov[i].iov_len;
  }
  wire::Route route;
  route.src_mac = link_->mac();
  route.dst_mac = dst.mac;
  route.src_ip_be = link_->ipv4_be();
  route.dst_ip_be = dst.ipv4_be;
  route.src_port_be = udp_port_be_;
  route.dst_port_be = dst.udp_port_be;
  wire::Header h;
  h.type = wire::Type::kData;
  h.flags = has_data ? wire::kHasCqData : 0;
  h.src_ep = rte_be_to_cpu_16(ep_id_be_);
  h.dst_ep = rte_be_to_cpu_16(dst.ep_id_be);
  h.cq_data = data;
  // Our datagrams are atomic (DF set, never fragmented): RFC 6864 lets their IPv4 ID be any
  // value, so concurrent senders may race on it (relaxed load and store, no locked add).
  const uint16_t ip_id = ip_id_.load(std::memory_order_relaxed);
  ip_id_.store(static_cast<uint16_t>(ip_id + 1), std::memory_order_relaxed);
  if (int r = wire::encode_mbuf(m, route, h, ip_id, link_->tx_caps()); r != 0) {
    rte_pktmbuf_free(m);
    return r == -EMSGSIZE ? -FI_EMSGSIZE : -FI_EINVAL;
  }
  wire::Address to;
  to.ipv4_be = dst.ipv4_be;
  to.udp_port_be = dst.udp_port_be;
  to.ep_id_be = dst.ep_id_be;
  to.host_be = dst.host_be;
  to.node_be = dst.node_be;
  to.nonce_be = dst.nonce_be;
  const int sent = transmit_frame(link_, to, m);
  if (sent == 0) {
    rte_pktmbuf_free(m);
    return -FI_EAGAIN;
  }
  stats_.tx_frames.fetch_add(1, std::memory_order_relaxed);
  if (link_->is_local(to))
    (sent > 0 ? stats_.tx_local : stats_.tx_local_gone).fetch_add(1, std::memory_order_relaxed);
  // The payload was copied into the frame: the operation is complete.
  if (complete) complete_tx(context, has_data ? FI_REMOTE_CQ_DATA : 0);
  if (tx_cntr_) tx_cntr_->add(1);
  return 0;
}

bool DgramEndpoint::deliver(const wire::Frame& f, rte_mbuf* m) noexcept {
  if (f.header.type != wire::Type::kData) {  // an RDM frame on our port (or group): not ours
    bump(stats_.rx_not_dgram);
    return false;
  }
  bump(stats_.rx_frames);  // the RX owner only
  RecvDesc d;
  // In order: behind held-back frames; and only with CQ room (RM) and a posted receive.
  if (!has_backlog() && (!rx_cq_ || rx_cq_->would_fit(1)) && next_recv(&d)) {
    complete_rx(d, f, m);
    return false;
  }
  if (backlog_tail_ - backlog_head_ == kBacklog) {  // full: unreliable DGRAM drops, counted
    (rx_cq_ && !rx_cq_->would_fit(1) ? stats_.rx_cq_full : stats_.rx_no_buffer)
        .fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  // The port's receivers already hold their share of the pool: holding more would starve
  // transmit (every send needs an mbuf). Dropped and counted, as a full backlog is.
  if (!link_->try_hold_mbufs(m->nb_segs)) {
    bump(stats_.rx_held_limit);
    return false;
  }
  Held& h = backlog_[backlog_tail_++ % kBacklog];
  h.frame = f;
  h.mbuf = m;
  bump(stats_.rx_held);
  return true;
}

size_t DgramEndpoint::drain_backlog() noexcept {
  size_t done = 0;
  RecvDesc d;
  while (has_backlog() && (!rx_cq_ || rx_cq_->would_fit(1)) && next_recv(&d)) {
    Held& h = backlog_[backlog_head_++ % kBacklog];
    complete_rx(d, h.frame, h.mbuf);
    link_->release_held_mbufs(h.mbuf->nb_segs);
    rte_pktmbuf_free(h.mbuf);
    ++done;
  }
  return done;
}

void DgramEndpoint::clear_backlog_locked() noexcept {
  while (has_backlog()) {
    rte_mbuf* m = backlog_[backlog_head_++ % kBacklog].mbuf;
    link_->release_held_mbufs(m->nb_segs);
    rte_pktmbuf_free(m);
  }
}

void DgramEndpoint::complete_rx(const RecvDesc& d, const wire::Frame& f,
                                const rte_mbuf* m) noexcept {
  posted_count_.fetch_sub(1, std::memory_order_relaxed);
  // Scatter the payload into the posted buffers.
  size_t room = 0;
  for (uint32_t i = 0; i < d.count; ++i) room += d.iov[i].iov_len;
  const size_t total = f.payload_len;
  size_t copied = 0;
  for (uint32_t i = 0; i < d.count && copied < total; ++i) {
    size_t n = std::min(d.iov[i].iov_len, total - copied);
    if (n == 0) continue;  // a zero-length entry may have no buffer
    if (f.payload) {
      std::memcpy(d.iov[i].iov_base, f.payload + copied, n);
    } else {  // payload spans segments
      const void* src = rte_pktmbuf_read(m, f.payload_offset + static_cast<uint32_t>(copied),
                                         static_cast<uint32_t>(n), d.iov[i].iov_base);
      if (src != d.iov[i].iov_base) std::memcpy(d.iov[i].iov_base, src, n);
    }
    copied += n;
  }
  const bool has_data = f.header.flags & wire::kHasCqData;
  const uint64_t flags = FI_RECV | FI_MSG | (has_data ? FI_REMOTE_CQ_DATA : 0);
  void* buf = d.count ? d.iov[0].iov_base : nullptr;
  if (total > room) {
    bump(stats_.rx_truncated);
    if (rx_cq_) {
      fi_cq_err_entry err{};
      err.op_context = d.context;
      err.flags = flags;
      err.len = copied;
      err.buf = buf;
      err.data = has_data ? f.header.cq_data : 0;
      err.olen = total - copied;
      err.err = FI_ETRUNC;
      err.prov_errno = -FI_ETRUNC;
      rx_cq_->write_error(err, nullptr, 0);
    }
    if (rx_cntr_) rx_cntr_->add_err(1);
    return;
  }
  if (rx_cq_ && (!rx_selective_ || (d.flags & FI_COMPLETION))) {
    fi_addr_t src = FI_ADDR_NOTAVAIL;
    if (cfg_.source && source_lookup_)
      src = source_lookup_->reverse(f.src_ip_be, f.src_port_be, rte_cpu_to_be_16(f.header.src_ep));
    rx_cq_->write(d.context, flags, copied, buf, has_data ? f.header.cq_data : 0, 0, src);
  }
  if (rx_cntr_) rx_cntr_->add(1);
}

}  // namespace dpfab::proto
