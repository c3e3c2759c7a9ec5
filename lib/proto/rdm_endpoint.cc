// SPDX-License-Identifier: BSD-3-Clause
#include "proto/rdm_endpoint.h"

#include <rte_byteorder.h>
#include <rte_mbuf.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <thread>

#include "common/clock.h"
#include "common/counter.h"
#include "common/lockcheck.h"
#include "common/log.h"
#include "wire/encoder.h"
#include "wire/format.h"

namespace dpfab::proto {

Result<std::unique_ptr<RdmEndpoint>> RdmEndpoint::create(Link* link, const Config& cfg) {
  if (!link || !link->pool()) return make_error(-FI_ENODEV, "rdm: the port has no mempool");
  std::unique_ptr<RdmEndpoint> ep(new (std::nothrow) RdmEndpoint(link, cfg));
  if (!ep) return make_error(-FI_ENOMEM, "rdm: out of memory");
  return ep;
}

RdmEndpoint::~RdmEndpoint() {
  // Unbound from the port by now: nobody else calls in. Frames never handed to the port go.
  if (txq_n_) rte_pktmbuf_free_bulk(txq_, txq_n_);
}

void RdmEndpoint::bind_cq(event::Cq* cq, bool tx, bool rx, bool selective) noexcept {
  if (tx) tx_cq_ = cq, tx_selective_ = selective;
  if (rx) rx_cq_ = cq, rx_selective_ = selective;
}

void RdmEndpoint::bind_cntr(event::Cntr* c, bool tx, bool rx) noexcept {
  if (tx) bind_cntr(c, CntrKind::kSend);
  if (rx) bind_cntr(c, CntrKind::kRecv);
}

void RdmEndpoint::bind_cntr(event::Cntr* c, CntrKind kind) noexcept {
  cntrs_[static_cast<size_t>(kind)] = c;
}

int RdmEndpoint::enable() noexcept {
  rdm::CoreConfig cfg;
  {
    CoreLock lock(mu_);
    if (core_) return 0;
    // Completions that write no CQ entry only matter to a bound counter (rdm::CoreConfig).
    cfg_.core.tx_counted = cntrs_[static_cast<size_t>(CntrKind::kSend)] != nullptr;
    cfg_.core.rx_counted = cntrs_[static_cast<size_t>(CntrKind::kRecv)] != nullptr;
    cfg_.core.write_counted = cntrs_[static_cast<size_t>(CntrKind::kWrite)] != nullptr;
    cfg_.core.read_counted = cntrs_[static_cast<size_t>(CntrKind::kRead)] != nullptr;
    cfg = cfg_.core;
  }
  // Made (and, should another thread have won, freed) outside the lock: it allocates.
  auto core = rdm::RdmCore::create(cfg, this);
  if (!core) {
    DPFAB_WARN(FI_LOG_EP_CTRL, "%s", core.error().message.c_str());
    return core.code();
  }
  CoreLock lock(mu_);
  if (!core_) core_ = std::move(core.value());
  return 0;
}

void RdmEndpoint::set_address(uint16_t udp_port_be, uint16_t ep_id_be) noexcept {
  CoreLock lock(mu_);
  udp_port_be_ = udp_port_be;
  ep_id_be_ = ep_id_be;
  const wire::TxChecksumCaps caps = link_->tx_caps();
  use_templates_ = caps.udp_none && !caps.ipv4 && !caps.udp;
  ext_min_ = link_->tx_extbuf_min();
  for (Peer& p : peers_) p.headers_ok = false;  // made again with our address
}

void RdmEndpoint::set_min_multi_recv(uint64_t v) noexcept {
  CoreLock lock(mu_);
  cfg_.core.min_multi_recv = v ? v : 1;
  if (core_) core_->set_min_multi_recv(v);
}

uint64_t RdmEndpoint::min_multi_recv() noexcept {
  CoreLock lock(mu_);
  return cfg_.core.min_multi_recv;
}

void RdmEndpoint::flush_acks() noexcept {
  CoreLock lock(mu_);
  if (!core_) return;
  core_->flush_acks(core_time(tx_clock_.now_ns()));
  finish();
}

bool RdmEndpoint::linger() noexcept {
  const uint64_t end = now_ns() + std::min(cfg_.core.rel.peer_timeout_ns, kCloseLingerMaxNs);
  for (;;) {
    {
      CoreLock lock(mu_);
      if (!core_ || (core_->injected_unacked() == 0 && txq_n_ == 0)) return true;
      // Frames the port refused before: try them now (the poll step does so only when due).
      flush();
    }
    if (now_ns() >= end) return false;
    // Our port's poll step delivers the acks and runs the retransmission timers (drain_backlog);
    // without the lock (the RX owner takes it). Nothing came: the peer or a retransmission
    // timer is some way off, or a worker lcore owns the receive side.
    if (link_->progress() == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

wire::Address RdmEndpoint::address() const noexcept {
  wire::Address a;
  std::memcpy(a.mac, link_->mac().addr_bytes, 6);
  a.ipv4_be = link_->ipv4_be();
  a.udp_port_be = udp_port_be_;
  a.ep_id_be = ep_id_be_;
  link_->set_host_part(a);
  return a;
}

uint64_t RdmEndpoint::now_ns() noexcept { return static_cast<uint64_t>(clock::mono_ns()); }

// ---- peers -------------------------------------------------------------------------------------

namespace {

// What may change about a known peer: its MAC, and its node (a same-host peer that restarted). A
// host part is never wiped by an address without one (an AV entry inserted in short form, a frame
// that came through the port): the peer stays where we reach it.
inline void refresh(wire::Address& have, const wire::Address& seen) noexcept {
  std::memcpy(have.mac, seen.mac, 6);
  if (seen.has_node()) {
    have.host_be = seen.host_be;
    have.node_be = seen.node_be;
    have.nonce_be = seen.nonce_be;
  }
}

}  // namespace

uint32_t RdmEndpoint::peer_id(const wire::Address& a) noexcept {
  const uint64_t key = key_of(a.ipv4_be, a.udp_port_be, a.ep_id_be);
  if (auto it = ids_.find(key); it != ids_.end()) {
    // The same endpoint behind a new MAC (a NIC replaced, a re-resolved neighbour) or on a new
    // node instance (a same-host peer that restarted): use the new.
    refresh(peers_[it->second].addr, a);
    mark_same_host(it->second);  // an address that now names its node
    return it->second;
  }
  if (peers_.size() >= cfg_.max_peers) return kNoPeer;
  const auto id = static_cast<uint32_t>(peers_.size());
  try {
    Peer p;
    p.addr = a;
    peers_.push_back(p);
    ids_.emplace(key, id);
  } catch (...) {
    if (peers_.size() > id) peers_.pop_back();
    return kNoPeer;
  }
  if (core_->add_peer(id) != 0) {
    ids_.erase(key);
    peers_.pop_back();
    return kNoPeer;
  }
  bump(stats_.peers);
  mark_same_host(id);
  return id;
}

void RdmEndpoint::mark_same_host(uint32_t id) noexcept {
  Peer& p = peers_[id];
  if (p.same_host || !link_->is_local(p.addr)) return;
  p.same_host = true;
  core_->set_peer_same_host(id);
}

uint32_t RdmEndpoint::peer_of(fi_addr_t a) noexcept {
  if (peer_) return a == 0 ? peer_from(*peer_) : kNoPeer;  // FI_EP_MSG: bind_peer
  const AvEntry* e = av_ ? av_->lookup(a) : nullptr;       // null once removed: not sent to
  if (!e) return kNoPeer;
  if (e == tx_entry_) {
    renew_if_new_instance(tx_peer_, e->addr);
    refresh(peers_[tx_peer_].addr, e->addr);  // as peer_id does
    return tx_peer_;
  }
  if (e->addr.has_node())
    if (auto it = ids_.find(key_of(e->addr.ipv4_be, e->addr.udp_port_be, e->addr.ep_id_be));
        it != ids_.end())
      renew_if_new_instance(it->second, e->addr);
  const uint32_t id = peer_id(e->addr);
  if (id != kNoPeer) tx_entry_ = e, tx_peer_ = id;
  return id;
}

void RdmEndpoint::renew_if_new_instance(uint32_t id, const wire::Address& a) noexcept {
  const wire::Address& have = peers_[id].addr;
  if (!have.has_node() || !a.has_node() ||
      (have.node_be == a.node_be && have.nonce_be == a.nonce_be && have.host_be == a.host_be))
    return;
  // The address of a same-host peer that restarted (another node instance): the old one's
  // operations fail now, and the new one is reachable at once (it need not send first).
  peers_[id].large_rdv = false;
  core_->renew_peer(id, core_time(last_now_));
}

uint32_t RdmEndpoint::peer_from(const wire::Address& a) noexcept {
  const uint64_t key = key_of(a.ipv4_be, a.udp_port_be, a.ep_id_be);
  if (key == rx_key_ && rx_peer_ != kNoPeer) {
    refresh(peers_[rx_peer_].addr, a);  // as peer_id does
    return rx_peer_;
  }
  const uint32_t id = peer_id(a);
  if (id != kNoPeer) rx_key_ = key, rx_peer_ = id;
  return id;
}

// ---- data path ---------------------------------------------------------------------------------

bool RdmEndpoint::cq_room(const event::Cq* cq) const noexcept {
  if (!cfg_.rm_enabled || !cq) return true;
  const size_t owed =
      (cq == tx_cq_ ? core_->tx_in_use() : 0) + (cq == rx_cq_ ? core_->rx_in_use() : 0) + 1;
  return cq->would_fit(owed);
}

ssize_t RdmEndpoint::send(const rdm::SendOp& op, fi_addr_t dest) noexcept {
  // ATOMIC_READ carries no operands (their bytes only count the elements).
  const bool no_operands = op.kind == rdm::OpKind::kAtomic && op.atomic_op == FI_ATOMIC_READ;
  if (!op.buf && op.len && op.iov_count == 0 && !no_operands) return -FI_EINVAL;
  CoreLock lock(mu_);
  if (!core_) return -FI_EOPBADSTATE;
  // The frames first, then the completions: an inject-complete send reports its completion in
  // the core call, after its packet (RdmCore::send); complete() gives the port what is queued
  // before it writes the CQ entry (a multi-producer ring enqueue the message would wait for).
  in_send_ = true;
  const ssize_t r = send_locked(op, dest, core_time(tx_clock_.now_ns()));
  in_send_ = false;
  finish();
  return r;
}

ssize_t RdmEndpoint::send_locked(const rdm::SendOp& op, fi_addr_t dest, uint64_t now) noexcept {
  const uint32_t peer = peer_of(dest);
  if (peer == kNoPeer) return -FI_EINVAL;
  // A plain inject never writes a CQ entry, not even an error (RdmCore::SendOp::completion).
  if ((op.completion || !op.inject) && !cq_room(tx_cq_)) return -FI_EAGAIN;
  return core_->send(op, peer, now);
}

ssize_t RdmEndpoint::trigger(const rdm::SendOp& op, event::Cntr* cntr,
                             uint64_t threshold) noexcept {
  const bool no_operands = op.kind == rdm::OpKind::kAtomic && op.atomic_op == FI_ATOMIC_READ;
  if (!cntr || (!op.buf && op.len && op.iov_count == 0 && !no_operands)) return -FI_EINVAL;
  CoreLock lock(mu_);
  if (!core_) return -FI_EOPBADSTATE;
  if (triggered_.size() >= kMaxTriggered) return -FI_EAGAIN;
  try {
    Triggered t{op, cntr, threshold, {}};
    if (op.compare_op && op.compare) {
      const auto* c = static_cast<const uint8_t*>(op.compare);
      t.compare.assign(c, c + op.len);
      t.op.compare = t.compare.data();  // the heap buffer moves with the vector's element
    }
    triggered_.push_back(std::move(t));
  } catch (...) {
    return -FI_ENOMEM;
  }
  fire_triggered(core_time(tx_clock_.now_ns()));
  finish();
  return 0;
}

void RdmEndpoint::fire_triggered(uint64_t now) noexcept {
  for (size_t k = 0; k < triggered_.size();) {
    Triggered& t = triggered_[k];
    if (t.cntr->value() < t.threshold) {
      ++k;
      continue;
    }
    const ssize_t r = send_locked(t.op, t.op.dest, now);
    if (r == -FI_EAGAIN) break;  // resources: this one and the later ones wait, in order
    if (r != 0) {                // refused now: reported as the operation's error
      rdm::Completion c;
      c.context = t.op.context;
      c.flags = rdm::RdmCore::completion_flags(t.op);
      c.err = static_cast<int>(-r);
      c.cq = true;
      complete(c);
    }
    triggered_.erase(triggered_.begin() + static_cast<ptrdiff_t>(k));
  }
}

ssize_t RdmEndpoint::recv(const rdm::RecvOp& in) noexcept {
  if (!in.buf && in.len && in.iov_count == 0) return -FI_EINVAL;
  CoreLock lock(mu_);
  if (!core_) return -FI_EOPBADSTATE;
  if (in.match.src == FI_ADDR_UNSPEC) return recv_locked(in);
  // A directed receive names its source by peer id in the core: that op is copied.
  const uint32_t peer = peer_of(in.match.src);
  if (peer == kNoPeer) return -FI_EINVAL;
  rdm::RecvOp op;
  rdm::copy_op(op, in);
  op.match.src = peer;
  return recv_locked(op);
}

ssize_t RdmEndpoint::recv_locked(const rdm::RecvOp& op) noexcept {
  if (!cq_room(rx_cq_)) return -FI_EAGAIN;
  // A receive that can send nothing now moves no timer either (rdm_core.h, recv_needs_time): no
  // clock read, nothing to flush, the deadline stays.
  if (!core_->recv_needs_time()) return core_->recv(op, last_now_);
  const ssize_t r = core_->recv(op, core_time(tx_clock_.now_ns()));
  finish();
  return r;
}

int RdmEndpoint::cancel(void* context) noexcept {
  CoreLock lock(mu_);
  if (!core_) return -FI_ENOENT;
  const int r = core_->cancel(context);
  finish();
  return r;
}

// ---- receive side ------------------------------------------------------------------------------

bool RdmEndpoint::deliver(const wire::Frame& f, rte_mbuf* m) noexcept {
  if (f.header.type != wire::Type::kRdm) {
    bump(stats_.rx_not_rdm);
    return false;
  }
  bump(stats_.rx_frames);
  if (f.src_link) {
    bump(stats_.local_rx);
    if (f.indirect) return deliver_indirect(f);
  }
  std::span<const uint8_t> payload;
  if (f.payload) {
    payload = {f.payload, f.payload_len};
  } else {  // spans segments: a frame larger than our mbufs (a peer with a larger MTU)
    // deliver() runs on whichever thread progresses the port: a buffer per thread, made on the
    // first such frame, that any payload fits (decode bounds payload_len by the IPv4 length).
    thread_local std::unique_ptr<uint8_t[]> copy;
    if (f.payload_len > wire::kMaxPayload) {
      bump(stats_.rx_rejected);
      return false;
    }
    if (!copy) copy.reset(new (std::nothrow) uint8_t[wire::kMaxPayload]);
    if (!copy) {
      bump(stats_.rx_rejected);
      return false;
    }
    bump(stats_.rx_segmented);
    const void* p = rte_pktmbuf_read(m, f.payload_offset, f.payload_len, copy.get());
    if (!p) return false;
    payload = {static_cast<const uint8_t*>(p), f.payload_len};
  }
  wire::RdmHeader h;
  std::span<const uint8_t> data;
  if (wire::decode_rdm(f.header, payload, &h, &data, decode_) != wire::RdmVerdict::kOk ||
      ((h.flags & wire::kRdmRef) && !f.src_link)) {  // a reference means nothing off a port
    bump(stats_.rx_rejected);
    return false;
  }
  // The time of this poll step's backlog pass, read just before the step received this frame;
  // a clock read only when there was none.
  const uint64_t step = link_->poll_step_count();  // 0: steps not counted
  const uint64_t now = step != 0 && rx_now_step_ == step ? rx_now_ : rx_clock_.now_ns();
  const wire::Address from = frame_source(f);
  CoreLock lock(mu_);
  if (!core_) return false;  // not enabled yet
  const uint32_t peer = peer_from(from);
  if (peer == kNoPeer) {
    bump(stats_.peers_refused);
    return false;
  }
  core_->on_frame(peer, h, data, core_time(now));
  finish();
  return false;  // the core copied what it keeps
}

bool RdmEndpoint::deliver_indirect(const wire::Frame& f) noexcept {
  shm::RdmIndirect ind;
  if (f.payload_len < sizeof(ind)) {
    bump(stats_.rx_rejected);
    return false;
  }
  std::memcpy(&ind, f.payload + f.payload_len - sizeof(ind), sizeof(ind));
  wire::RdmHeader h;
  if (wire::decode_rdm_detached({f.payload, f.payload_len - sizeof(ind)}, ind.len, &h, decode_) !=
          wire::RdmVerdict::kOk ||
      h.kind != wire::RdmKind::kRdvData || ind.len == 0 || ind.len > kMaxIndirect) {
    bump(stats_.rx_rejected);
    return false;
  }
  const uint64_t now = rx_clock_.now_ns();
  const wire::Address from = frame_source(f);
  CoreLock lock(mu_);
  if (!core_) return false;
  const uint32_t peer = peer_from(from);
  if (peer == kNoPeer) {
    bump(stats_.peers_refused);
    return false;
  }
  // Only a packet the core takes now, into the receive its message is bound to, is copied: a
  // duplicate (a retransmission) or one the protocol refuses is dropped as if it had been lost.
  bool scattered = false;
  std::span<uint8_t> dst = core_->rdv_placement(peer, h, ind.len, &scattered);
  // A receive of several buffers whose boundary this segment crosses: read into a copy the core
  // scatters (an allocation, on this rare path only: one buffer per receive is the common case).
  std::unique_ptr<uint8_t[]> copy;
  if (dst.empty() && scattered) {
    copy.reset(new (std::nothrow) uint8_t[ind.len]);
    if (copy) dst = {copy.get(), static_cast<size_t>(ind.len)};
  }
  if (dst.empty()) return false;
  {
    // The kernel's copy of the sender's bytes, in place of the memcpy on_frame makes for a
    // packet that carries them: the data path's own work, as long as that copy (not a wake-up:
    // nobody waits for another thread's syscall here but for this copy itself).
    lockcheck::Exempt copy("same-host rendezvous copy");
    if (static_cast<const shm::Conn*>(f.src_link)->read_peer(dst.data(), ind.addr, dst.size()) !=
        0) {
      // The peer's memory cannot be read (it is going away): dropped, as if lost; its link's end
      // or its retransmissions settle the message.
      bump(stats_.local_indirect_failed);
      return false;
    }
  }
  bump(stats_.local_indirect_rx);
  core_->on_frame(peer, h, dst, core_time(now));
  finish();
  return false;
}

int RdmEndpoint::read_peer(fi_addr_t peer, uint64_t addr, void* dst, size_t n) noexcept {
  // Under mu_, in the core call that matched the message (as deliver_indirect's copy).
  shm::Conn* c = peer < peers_.size() ? link_->local_route(peers_[peer].addr) : nullptr;
  if (c == nullptr || !c->cma()) {
    bump(stats_.local_indirect_failed);
    return FI_EHOSTUNREACH;  // its link is gone (or never let us read): so is the message
  }
  lockcheck::Exempt copy("same-host rendezvous copy");
  if (c->read_peer(dst, addr, n) != 0) {
    const int gone = errno == ESRCH;
    bump(stats_.local_indirect_failed);
    return gone ? FI_EHOSTUNREACH : FI_EIO;
  }
  bump(stats_.local_indirect_rx);
  return 0;
}

size_t RdmEndpoint::drain_backlog() noexcept {
  const uint64_t now = rx_clock_.now_ns();
  rx_now_ = now;
  rx_now_step_ = link_->poll_step_count();
  if (now < due_ns_.load(std::memory_order_relaxed)) return 0;
  // An application thread in a core call runs the timers' work soon enough; do not wait for it.
  wait::WakeBatch wakes;  // a poll step's batch: it is open already
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock() || !core_) return 0;
  core_->progress(core_time(now));
  finish();
  return 0;
}

void RdmEndpoint::finish() noexcept {
  if (!triggered_.empty()) fire_triggered(last_now_);
  flush();
  if (!large_rdv_.empty()) [[unlikely]] {
    for (uint32_t id : large_rdv_) {
      core_->set_peer_rdv_segment(id, kIndirectSegment);
      core_->set_peer_reads_us(id);
    }
    large_rdv_.clear();
  }
  if (!lossless_.empty()) [[unlikely]] {
    for (uint32_t id : lossless_) {
      core_->set_peer_lossless(id);
      mark_same_host(id);  // a record went to it (local_route): an address of this host
    }
    lossless_.clear();
  }
  if (!lost_.empty()) [[unlikely]] {
    const uint64_t now = core_time(last_now_);
    for (size_t i = 0; i < lost_.size(); ++i) core_->lose_peer(lost_[i], now);  // may add more
    bump(stats_.local_lost, lost_.size());
    lost_.clear();
    flush();
  }
  // Frames the port did not take go with the next poll step: due now. So do triggered
  // operations: their counters may move without a call into this endpoint.
  due_ns_.store(txq_n_ || !triggered_.empty() ? 0 : core_->next_deadline(),
                std::memory_order_relaxed);
}

// ---- rdm::CoreSink -----------------------------------------------------------------------------

void RdmEndpoint::link_lost(uint32_t node_be, uint32_t nonce_be) noexcept {
  wait::WakeBatch wakes;  // a poll step's batch: it is open already
  CoreLock lock(mu_);
  if (!core_) return;
  for (uint32_t id = 0; id < peers_.size(); ++id) {
    const wire::Address& a = peers_[id].addr;
    if (a.node_be == node_be && a.nonce_be == nonce_be && a.host_be != 0) {
      try {
        lost_.push_back(id);
      } catch (...) {
      }
    }
  }
  if (lost_.empty()) return;
  last_now_ = core_time(rx_clock_.now_ns());
  finish();
}

void RdmEndpoint::complete(const rdm::Completion& c) noexcept {
  if (in_send_ && txq_n_ != 0) flush();  // send(): the frames leave before the CQ entry is written
  // Which side and counter the completion is for: our sends, writes, reads and atomics (the
  // transmit CQ), our receives and the remote writes with CQ data at this target (the receive
  // CQ), the remote reads (counters only).
  const CntrKind kind = c.flags & FI_REMOTE_WRITE  ? CntrKind::kRemoteWrite
                        : c.flags & FI_REMOTE_READ ? CntrKind::kRemoteRead
                        : c.flags & FI_WRITE       ? CntrKind::kWrite
                        : c.flags & FI_READ        ? CntrKind::kRead
                        : c.flags & FI_SEND        ? CntrKind::kSend
                                                   : CntrKind::kRecv;
  const bool tx = kind == CntrKind::kSend || kind == CntrKind::kWrite || kind == CntrKind::kRead;
  event::Cq* cq = tx ? tx_cq_ : kind == CntrKind::kRemoteRead ? nullptr : rx_cq_;
  event::Cntr* cntr = cntrs_[static_cast<size_t>(kind)];
  // The region's own counter (fi_mr_bind) counts what reached it.
  if (c.region_cntr && c.count) static_cast<event::Cntr*>(c.region_cntr)->add(1);
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  const wire::Address* from = !tx && c.src < peers_.size() ? &peers_[c.src].addr : nullptr;
  if (from && cfg_.source && av_)
    src = av_->reverse(from->ipv4_be, from->udp_port_be, from->ep_id_be);
  // FI_SOURCE_ERR: a message from an address the AV does not hold is an error whose err_data is
  // that address (fi_cq(3)), so that the application can insert it.
  const bool unknown =
      !c.err && from && cfg_.source_err && src == FI_ADDR_NOTAVAIL && kind == CntrKind::kRecv;
  if (c.err || unknown) {
    if (cntr && c.count) cntr->add_err(1);
    if (!cq || !c.cq) return;
    fi_cq_err_entry e{};
    e.op_context = c.context;
    e.flags = c.flags;
    e.len = c.len;
    e.buf = c.buf;
    e.data = c.data;
    e.tag = c.tag;
    e.olen = c.olen;
    e.err = unknown ? FI_EADDRNOTAVAIL : c.err;
    e.prov_errno = -e.err;
    int w;
    if (unknown) {
      uint8_t addr[sizeof(wire::Address)];
      const size_t n = wire::write_address(*from, cfg_.format, addr, sizeof(addr));
      w = cq->write_error(e, addr, n);
    } else {
      w = cq->write_error(e, nullptr, 0);
    }
    if (w != 0) bump(stats_.cq_overrun);
    return;
  }
  if (cntr && c.count) cntr->add(1);
  if (src != FI_ADDR_NOTAVAIL) src = av_->completion_addr(src);  // FI_AV_USER_ID
  if (cq && c.cq && !cq->write(c.context, c.flags, c.len, c.buf, c.data, c.tag, src))
    bump(stats_.cq_overrun);
}

// ---- FI_EP_MSG ---------------------------------------------------------------------------------

void RdmEndpoint::bind_peer(const wire::Address& a) noexcept {
  CoreLock lock(mu_);
  peer_ = a;
}

void RdmEndpoint::abort(int err) noexcept {
  CoreLock lock(mu_);
  if (!core_) return;
  core_->abort(err);
  finish();
}

// ---- statistics --------------------------------------------------------------------------------

rdm::CoreStats RdmEndpoint::core_stats() noexcept {
  CoreLock lock(mu_);
  return core_ ? core_->stats() : rdm::CoreStats{};
}

rdm::ReliabilityStats RdmEndpoint::reliability_stats() noexcept {
  CoreLock lock(mu_);
  return core_ ? core_->reliability_stats() : rdm::ReliabilityStats{};
}

size_t RdmEndpoint::in_use() noexcept {
  CoreLock lock(mu_);
  return core_ ? core_->tx_in_use() + core_->rx_in_use() + core_->unexpected_in_use() : 0;
}

}  // namespace dpfab::proto
