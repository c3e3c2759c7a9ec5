// SPDX-License-Identifier: BSD-3-Clause
//
// RdmCore (rdm_core.h): construction, sending (eager and rendezvous), frames, timers and failure,
// and the end of an FI_EP_MSG connection. Receiving is in rdm_core_rx.cc; the private state both
// share is in rdm_core_internal.h.
#include "proto/rdm_core.h"

#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>
#include <random>
#include <stdexcept>
#include <string>

#include "proto/rdm_core_internal.h"

namespace dpfab::proto::rdm {

using wire::RdmHeader;
using wire::RdmKind;

namespace {
constexpr fi_addr_t kMaxPeers = fi_addr_t{1} << 20;
}  // namespace

// ---- construction ------------------------------------------------------------------------------

RdmCore::RdmCore(const CoreConfig& cfg, CoreSink* sink)
    : cfg_(cfg),
      sink_(sink),
      slots_(cfg.reorder_slots, cfg.seg_size),
      tx_(cfg.tx_ops),
      tx_free_(cfg.tx_ops),
      inject_mem_(new uint8_t[size_t{cfg.tx_ops} * std::max(cfg.inject_size, cfg.copy_max)]),
      rx_(cfg.rx_ops),
      rx_free_(cfg.rx_ops),
      unexp_(cfg.unexpected),
      unexp_free_(cfg.unexpected),
      unexp_mem_(new uint8_t[size_t{cfg.unexpected_slots} * cfg.eager_max]),
      unexp_slot_free_(cfg.unexpected_slots),
      responders_(cfg.mrs ? cfg.responders : 0),
      responder_free_(cfg.mrs ? cfg.responders : 0),
      stage_mem_(cfg.mrs ? new uint8_t[size_t{cfg.stage_slots} * cfg.seg_size] : nullptr),
      stage_free_(cfg.mrs ? cfg.stage_slots : 0),
      stage_owner_(cfg.mrs ? cfg.stage_slots : 0, FI_ADDR_NOTAVAIL) {
  // A peer the core knows but has not sent to or heard from costs this, its RdmPeer included, and
  // a pointer in peers_ and active_ (240 bytes in all, measured: unit-proto-memory). The endpoint
  // adds a peer on its first traffic, so an address only in the AV costs the core nothing.
  static_assert(sizeof(PeerState) <= 256, "cold per-peer state must stay small");
  // An atomic's operands are copied into its inject slot and go in one packet.
  cfg_.atomic_max = std::min(
      {cfg.atomic_max, cfg.inject_size, cfg.seg_size - static_cast<uint32_t>(wire::kRdmRmaLen)});
  if (cfg_.eager_max_same_host == 0) cfg_.eager_max_same_host = cfg_.eager_max;
  cfg_.copy_max = std::max(cfg.inject_size, cfg.copy_max);  // a copy slot's size (inject_mem_)
  shared_.host = this;
  shared_.cfg = cfg.rel;
  shared_.slots = &slots_;
  shared_.epoch = cfg.epoch;
  while (shared_.epoch == 0) shared_.epoch = std::random_device{}();
  cts_.reserve(size_t{cfg.rx_ops} + cfg.unexpected);
  resp_q_.reserve(cfg.resp_queue);
}

RdmCore::~RdmCore() = default;

Result<std::unique_ptr<RdmCore>> RdmCore::create(const CoreConfig& cfg, CoreSink* sink) {
  if (validate(cfg.rel) != 0) return Error{-FI_EINVAL, "rdm: bad reliability parameters"};
  if (sink == nullptr || cfg.seg_size == 0 || cfg.seg_size > wire::kMaxPayload ||
      cfg.max_msg_size > wire::kRdmMaxLength || cfg.eager_max > cfg.max_msg_size ||
      cfg.copy_max > 65536 || cfg.eager_max > (uint64_t{1} << 24) ||
      cfg.eager_max_same_host > cfg.eager_max || cfg.tx_ops == 0 || cfg.tx_ops > 65536 ||
      cfg.rx_ops == 0 || cfg.unexpected == 0 || cfg.unexpected_slots > cfg.unexpected ||
      cfg.min_multi_recv == 0 || cfg.seg_size <= wire::kRdmRmaLen ||
      (cfg.mrs && (cfg.stage_slots == 0 || cfg.responders == 0 || cfg.resp_queue == 0)))
    return Error{-FI_EINVAL, "rdm: bad configuration"};
  try {
    return std::unique_ptr<RdmCore>(new RdmCore(cfg, sink));
  } catch (const std::bad_alloc&) {
    return Error{-FI_ENOMEM, "rdm: out of memory"};
  } catch (const std::exception& e) {  // std::random_device without an entropy source
    return Error{-FI_EIO, std::string("rdm: ") + e.what()};
  }
}

int RdmCore::add_peer(fi_addr_t addr) noexcept {
  if (addr >= kMaxPeers) return -FI_EINVAL;
  try {
    if (addr >= peers_.size()) peers_.resize(addr + 1);
    if (!peers_[addr]) {
      // Room in active_ for every peer, grown geometrically: reserving exactly one more per new
      // peer reallocated (and copied) the whole array on every first contact.
      if (active_.capacity() < peer_count_ + 1)
        active_.reserve(std::max({2 * active_.capacity(), peer_count_ + 1, size_t{16}}));
      // Once the timer heap was needed (activate), room in it for every peer, grown as active_.
      if (shared_.timer_room() != 0 && shared_.timer_room() < peer_count_ + 1)
        shared_.reserve_timers(std::max(2 * shared_.timer_room(), peer_count_ + 1));
      peers_[addr] = std::make_unique<PeerState>(&shared_, addr);
      ++peer_count_;
    }
  } catch (const std::bad_alloc&) {
    return -FI_ENOMEM;
  }
  return 0;
}

RdmCore::PeerState* RdmCore::state(fi_addr_t a) noexcept {
  return a < peers_.size() ? peers_[a].get() : nullptr;
}

const RdmPeer* RdmCore::peer(fi_addr_t a) const noexcept {
  return a < peers_.size() && peers_[a] ? &peers_[a]->rel : nullptr;
}

size_t RdmCore::injected_unacked() const noexcept {
  size_t n = 0;
  for (const TxOp& t : tx_) n += t.in_use && t.op.inject && !t.op.completion;
  return n;
}

// ---- sending -----------------------------------------------------------------------------------

ssize_t RdmCore::send(const SendOp& op, fi_addr_t peer, uint64_t now) noexcept {
  now_ = now;
  PeerState* p = state(peer);
  if (p == nullptr) return -FI_EINVAL;
  if (op.len > cfg_.max_msg_size) return -FI_EMSGSIZE;
  // An inject fits inject_size; a message that completes once copied, the copy slot.
  if (op.inject &&
      op.len > (op.kind == OpKind::kMsg && op.complete_now ? cfg_.copy_max : cfg_.inject_size))
    return -FI_EMSGSIZE;
  if (op.iov_count > kMaxIov || op.result_count > kMaxIov) return -FI_EINVAL;
  if (op.kind == OpKind::kAtomic) {
    if (const int r = check_atomic(op); r != 0) return r;
  }
  if (p->rel.unreachable()) return -FI_EHOSTUNREACH;
  if (op.kind != OpKind::kMsg && !rma_of(*p)) return -FI_ENOMEM;  // its answers are counted there
  const uint32_t i = tx_free_.get();
  if (i == kNone) return -FI_EAGAIN;
  TxOp& t = tx_[i];
  copy_op(t.op, op);
  t.op.dest = peer;
  uint8_t* copy = inject_mem_.get() + size_t{i} * cfg_.copy_max;
  if (op.kind == OpKind::kAtomic) {
    // The operands (then the compare values) travel in one packet, from a copy: the atomic
    // carries them whatever becomes of the application's buffers. ATOMIC_READ has none (the
    // application may pass no buffer): its zeros only give the element count.
    if (op.atomic_op == FI_ATOMIC_READ)
      std::memset(copy, 0, op.len);
    else
      gather(op.buf, op.iov, op.iov_count, 0, copy, op.len);
    if (op.compare_op) std::memcpy(copy + op.len, op.compare, op.len);
    t.op.buf = copy;
    t.op.iov_count = 0;
  } else if (op.inject) {
    gather(op.buf, op.iov, op.iov_count, 0, copy, op.len);
    t.op.buf = copy;
    t.op.iov_count = 0;
  }
  ++t.gen;
  t.msg_id = (uint32_t{t.gen} << 16) | i;
  t.in_use = true;
  t.rendezvous = op.kind == OpKind::kMsg && op.len > eager_max_to(*p);
  t.issued_all = t.rts_sent = t.granted_known = t.issued = false;
  t.next_off = t.granted = 0;
  t.unacked = 0;
  t.resp_done = t.awaiting = false;
  t.resp_err = 0;
  t.received = 0;
  switch (op.kind) {
    case OpKind::kMsg:
      ++(t.rendezvous ? stats_.sent_rendezvous : stats_.sent_eager);
      break;
    case OpKind::kWrite:
      ++stats_.writes;
      break;
    case OpKind::kRead:
      ++stats_.reads;
      break;
    case OpKind::kAtomic:
      ++stats_.atomics;
      break;
  }
  // FI_INJECT_COMPLETE: the copy is the data now. The op stays until acknowledged, silently; its
  // completion is reported once the packet was given to the peer layer (below): the frame first.
  t.counted = op.inject && op.complete_now;
  const bool report_now = t.counted && reported(op.completion, kind_counted(op), true);
  if (t.counted) t.op.completion = false;
  // Reads and atomics always wait for the target's answer (their data, their status); a write
  // asks for one when its completion reports something (an error included).
  t.resp_wanted = op.kind == OpKind::kRead || op.kind == OpKind::kAtomic ||
                  (op.kind == OpKind::kWrite && !t.counted &&
                   reported(t.op.completion || !op.inject, kind_counted(op), true));
  // Fast path: a one-packet message to a peer with nothing queued (pump() would send it first,
  // and only it): sent at once. When it cannot go now (window full, RNR pause, the port refused
  // it), it is queued as below, and pump() would only have tried the same again.
  const uint64_t one = op.kind == OpKind::kMsg ? cfg_.seg_size : cfg_.seg_size - wire::kRdmRmaLen;
  const bool alone = cfg_.fast_paths && !t.rendezvous && !op.fence && t.op.iov_count == 0 &&
                     (op.kind != OpKind::kWrite || op.len <= one) &&
                     (op.kind != OpKind::kMsg || op.len <= one) && p->sendq.empty() &&
                     p->rdvq.empty();
  if (!alone || !try_send_now(*p, i, now)) {
    p->sendq.push_back(tx_, i);
    activate(*p);
    if (!alone) pump(*p, now);
  }
  if (report_now) {
    Completion c;
    c.context = op.context;
    c.flags = completion_flags(op);
    c.len = op.len;
    c.cq = op.completion;
    sink_->complete(c);
  }
  return 0;
}

bool RdmCore::try_send_now(PeerState& p, uint32_t i, uint64_t now) noexcept {
  if (!p.rel.can_send()) return false;  // pump() would not try either
  TxOp& t = tx_[i];
  if (t.op.kind != OpKind::kMsg) {
    // An RMA operation of one packet: what pump() would send first, and only it.
    const bool sent = send_rma(p, i, now);
    if (p.rma) p.rma->read_turn = true;  // as pump() after an attempt of the other queues
    p.rdv_turn = !p.rdv_turn;
    if (!sent) return false;
    activate(p);
    return true;
  }
  const RdmHeader h = eager_header(t, t.op.len);
  const bool sent = p.rel.send(h, {static_cast<const uint8_t*>(t.op.buf), t.op.len}, i, now) == 0;
  timers_moved(p.rel);
  p.rdv_turn = !p.rdv_turn;  // as pump() after an attempt
  if (p.rma) p.rma->read_turn = true;
  if (!sent) return false;
  ++t.unacked;
  t.next_off = t.op.len;
  t.issued_all = t.issued = true;
  activate(p);  // its RTO runs now
  ++stats_.fast_sends;
  return true;
}

std::span<const uint8_t> RdmCore::data_at(const TxOp& t, uint64_t off,
                                          uint64_t max) const noexcept {
  max = std::min<uint64_t>(max, t.op.len - off);
  if (t.op.iov_count == 0) return {static_cast<const uint8_t*>(t.op.buf) + off, max};
  for (uint8_t k = 0; k < t.op.iov_count; ++k) {
    const Iov& v = t.op.iov[k];
    if (off < v.len || (max == 0 && off == v.len))
      return {static_cast<const uint8_t*>(v.base) + off, std::min<uint64_t>(max, v.len - off)};
    off -= v.len;
  }
  return {};
}

bool RdmCore::earlier_incomplete(uint32_t op) const noexcept {
  const fi_addr_t dest = tx_[op].op.dest;
  for (uint32_t k = 0; k < tx_.size(); ++k)
    if (k != op && tx_[k].in_use && tx_[k].issued && tx_[k].op.dest == dest) return true;
  return false;
}

inline RdmHeader RdmCore::eager_header(const TxOp& t, uint64_t n) const noexcept {
  RdmHeader h;
  h.kind = RdmKind::kEager;
  h.msg_id = t.msg_id;
  h.flags = (t.op.tagged ? wire::kRdmTagged : 0) | (t.op.has_data ? wire::kRdmCqData : 0);
  h.tag = t.op.tagged ? t.op.tag : 0;
  h.cq_data = t.op.has_data ? t.op.data : 0;
  h.length = t.op.len;
  h.offset = t.next_off;
  if (t.next_off + n == t.op.len && wants_ack(t)) h.flags |= wire::kRdmAckReq;
  return h;
}

bool RdmCore::send_eager_segment(PeerState& p, uint32_t i, uint64_t now) noexcept {
  TxOp& t = tx_[i];
  if (t.op.kind != OpKind::kMsg) return send_rma(p, i, now);
  if (t.rendezvous) {
    RdmHeader h;
    h.kind = RdmKind::kRts;
    h.msg_id = t.msg_id;
    h.flags = (t.op.tagged ? wire::kRdmTagged : 0) | (t.op.has_data ? wire::kRdmCqData : 0);
    h.tag = t.op.tagged ? t.op.tag : 0;
    h.cq_data = t.op.has_data ? t.op.data : 0;
    h.length = t.op.len;
    if (p.reads_us && t.op.len <= kRefMax) {
      // The peer reads the message where it lies (one buffer) and answers with a zero grant.
      const std::span<const uint8_t> d = data_at(t, 0, t.op.len);
      if (d.size() == t.op.len && d.data() != nullptr) {
        h.flags |= wire::kRdmRef;
        h.offset = reinterpret_cast<uintptr_t>(d.data());
      }
    }
    const int r = p.rel.send(h, {}, i, now);
    timers_moved(p.rel);
    if (r != 0) return false;
    if (h.flags & wire::kRdmRef) ++stats_.ref_sent;
    ++t.unacked;
    ++p.awaiting_cts;
    t.rts_sent = t.issued = true;
    p.sendq.pop_front(tx_);
    return true;
  }
  const std::span<const uint8_t> d = data_at(t, t.next_off, cfg_.seg_size);
  const RdmHeader h = eager_header(t, d.size());
  const int r = p.rel.send(h, d, i, now);
  timers_moved(p.rel);
  if (r != 0) return false;
  ++t.unacked;
  t.next_off += d.size();
  if (t.next_off == t.op.len) {
    t.issued_all = t.issued = true;
    p.sendq.pop_front(tx_);
  }
  return true;
}

bool RdmCore::send_rdv_segment(PeerState& p, uint32_t i, uint64_t now) noexcept {
  TxOp& t = tx_[i];
  RdmHeader h;
  h.kind = RdmKind::kRdvData;
  h.msg_id = t.msg_id;
  h.offset = t.next_off;
  h.length = t.op.len;
  const uint64_t seg = p.rdv_seg_shift ? uint64_t{1} << p.rdv_seg_shift : cfg_.seg_size;
  const std::span<const uint8_t> d =
      data_at(t, t.next_off, std::min<uint64_t>(seg, t.granted - t.next_off));
  if (t.next_off + d.size() == t.granted && wants_ack(t)) h.flags |= wire::kRdmAckReq;
  const int r = p.rel.send(h, d, i, now);
  timers_moved(p.rel);
  if (r != 0) return false;
  ++t.unacked;
  t.next_off += d.size();
  p.rdvq.pop_front(tx_);
  if (t.next_off == t.granted) {
    t.issued_all = true;
  } else {
    p.rdvq.push_back(tx_, i);  // round robin between granted messages
  }
  return true;
}

void RdmCore::pump(PeerState& p, uint64_t now) noexcept {
  const bool reads = p.rma && !p.rma->readq.empty();
  if (p.sendq.empty() && p.rdvq.empty() && !reads) return;  // nothing to send (most calls)
  while (p.rel.can_send()) {
    // FI_FENCE: the operation at the head of the queue (and all behind it) waits until every
    // operation posted before it to this peer has completed.
    const bool held = !p.sendq.empty() && tx_[p.sendq.front()].op.fence &&
                      !tx_[p.sendq.front()].issued && tx_[p.sendq.front()].next_off == 0 &&
                      earlier_incomplete(p.sendq.front());
    const bool sendq = !p.sendq.empty() && !held;
    bool sent;
    // Data answering the peer's reads takes every other turn (when there is other work).
    if (p.rma && !p.rma->readq.empty() && (p.rma->read_turn || (!sendq && p.rdvq.empty()))) {
      sent = send_read_segment(p, now);
      p.rma->read_turn = false;
      if (!sent) break;
      continue;
    }
    if (p.rma) p.rma->read_turn = true;
    if (p.rdv_turn && !p.rdvq.empty()) {
      sent = send_rdv_segment(p, p.rdvq.front(), now);
    } else if (sendq) {
      sent = send_eager_segment(p, p.sendq.front(), now);
    } else if (!p.rdvq.empty()) {
      sent = send_rdv_segment(p, p.rdvq.front(), now);
    } else {
      break;
    }
    p.rdv_turn = !p.rdv_turn;
    if (!sent) break;
  }
}

void RdmCore::queue_cts(fi_addr_t peer, uint32_t msg_id, uint64_t granted) noexcept {
  // Reserved for the usual worst case (one per receive and per unexpected entry); beyond it (CTSs
  // of receives already completed still waiting for window) it grows: losing one would hang a
  // sender.
  try {
    cts_.push_back({peer, msg_id, granted});
  } catch (const std::bad_alloc&) {
    ++stats_.protocol_errors;
  }
}

void RdmCore::pump_cts(uint64_t now) noexcept {
  if (cts_.empty()) return;
  size_t keep = 0;
  for (size_t k = 0; k < cts_.size(); ++k) {
    const Cts c = cts_[k];
    PeerState* p = state(c.peer);
    if (p == nullptr || p->rel.unreachable()) continue;
    RdmHeader h;
    h.kind = RdmKind::kCts;
    h.msg_id = c.msg_id;
    h.length = c.granted;
    if (p->rel.can_send()) {
      const int r = p->rel.send(h, {}, kNone, now);
      timers_moved(p->rel);
      if (r == 0) {
        activate(*p);  // its RTO runs now
        continue;
      }
    }
    cts_[keep++] = c;
  }
  cts_.resize(keep);
}

void RdmCore::acked(fi_addr_t, uint32_t cookie) noexcept {
  if (cookie == kNone) return;  // a CTS, an answer without data
  if (cookie & kStageCookie) {  // read data or atomic results: the copy may go
    free_stage(cookie & ~kStageCookie);
    return;
  }
  TxOp& t = tx_[cookie];
  if (!t.in_use || t.unacked == 0) return;
  --t.unacked;
  maybe_complete_tx(cookie);
}

void RdmCore::complete_tx(uint32_t i, int err) noexcept {
  TxOp& t = tx_[i];
  if (t.awaiting) {
    t.awaiting = false;
    if (PeerState* p = state(t.op.dest); p && p->rma && p->rma->awaiting_resp)
      --p->rma->awaiting_resp;
  }
  // An error completes every send but a plain fi_inject (no context to report it with).
  const bool cq = err != 0 ? !t.op.inject || t.op.completion : t.op.completion;
  if (!reported(cq, !t.counted && kind_counted(t.op), true)) {  // nothing to tell
    t.in_use = false;
    tx_free_.put(i);
    return;
  }
  Completion c;
  c.context = t.op.context;
  c.flags = completion_flags(t.op);
  c.len = err ? 0 : t.op.len;
  c.err = err;
  c.cq = cq;
  c.count = !t.counted;
  t.in_use = false;
  tx_free_.put(i);
  sink_->complete(c);
}

// ---- frames, timers, failure -------------------------------------------------------------------

bool RdmCore::transmit(fi_addr_t peer, const RdmHeader& h, std::span<const uint8_t> d) noexcept {
  const bool ok = sink_->transmit(peer, h, d);
  tx_blocked_ |= !ok;
  return ok;
}

void RdmCore::on_frame(fi_addr_t src, const RdmHeader& h, std::span<const uint8_t> d,
                       uint64_t now) noexcept {
  now_ = now;
  PeerState* p = state(src);
  if (p == nullptr) {
    ++stats_.unknown_peer;
    return;
  }
  if (!cfg_.fast_paths || !try_receive_now(*p, h, d, now)) {
    if (p->rel.is_restart(h)) restart(*p, src, h);
    activate(*p);
    p->rel.on_frame(h, d, now);
    timers_moved(p->rel);
  }
  pump_cts(now);
  pump_resp(now);
  pump(*p, now);
  p->rel.keepalive(expecting(*p), now);
  timers_moved(p->rel);
}

bool RdmCore::try_receive_now(PeerState& p, const RdmHeader& h, std::span<const uint8_t> d,
                              uint64_t now) noexcept {
  // What the general path would do with this packet: the peer layer takes it in order and
  // delivers it at once (next_in_order); deliver_eager finds no message of this peer still
  // arriving, matches it to a posted receive that is not a multi-recv buffer (carving one takes
  // the general path), and completes it in one go (the whole message is in this packet).
  if (h.kind != RdmKind::kEager || h.offset != 0 || d.size() != h.length ||
      h.length > cfg_.eager_max || p.cur_active || gated(p) || !p.rel.next_in_order(h))
    return false;
  const fi_addr_t from = p.rel.addr();
  const bool tagged = h.flags & wire::kRdmTagged;
  auto& list = tagged ? posted_tagged_ : posted_msg_;
  const auto [r, prev] =
      list.find(rx_, [&](uint32_t k) { return matches(rx_[k].op.match, from, h.tag, tagged); });
  if (r == kNone || rx_[r].multi) return false;
  activate(p);
  // In on_frame's order: the packet's ack fields first (send completions; the sink does not call
  // back, so the receive found above stays posted), then the delivery, then the stream moves on.
  p.rel.take_next(h, now);
  timers_moved(p.rel);
  list.remove(rx_, r, prev);
  RxOp& x = rx_[r];
  x.from = from;
  x.tag = h.tag;
  x.data = h.cq_data;
  x.tagged = tagged;
  x.has_data = h.flags & wire::kRdmCqData;
  x.total = x.received = h.length;
  ++stats_.fast_receives;
  copy_to_rx(x, 0, d);
  complete_rx(r, 0);
  p.rel.delivered_next(h, now);
  timers_moved(p.rel);
  return true;
}

bool RdmCore::expecting(const PeerState& p) const noexcept {
  return p.cur_active || !p.rdv_rx.empty() || p.awaiting_cts != 0 ||
         (p.rma && p.rma->awaiting_resp != 0);
}

void RdmCore::progress(uint64_t now) noexcept {
  now_ = now;
  const bool retry = tx_blocked_ || starved_;
  tx_blocked_ = starved_ = false;  // set again below if the port still refuses
  ++stats_.timer_passes;
  if (shared_.heap_on && !retry && now < visit_at_) {
    due_pass(now);
    return;
  }
  visit_at_ = now + cfg_.timer_visit_ns;
  ++stats_.timer_visits;
  stats_.timer_peers += active_.size();
  // Only active peers: with thousands of AV entries the poll step must not visit them all.
  for (PeerState* p : active_) {
    p->rel.poll(now);
    p->rel.keepalive(expecting(*p), now);
    timers_moved(p->rel);
  }
  pump_cts(now);
  pump_resp(now);
  size_t keep = 0;
  for (PeerState* p : active_) {
    pump(*p, now);
    if (p->rel.next_deadline() == UINT64_MAX && p->sendq.empty() && p->rdvq.empty() &&
        !expecting(*p) && (!p->rma || p->rma->readq.empty())) {
      p->active = false;  // idle: nothing to time, send or wait for
      if (shared_.heap_on) shared_.untrack(&p->rel);
    } else {
      active_[keep++] = p;
    }
  }
  active_.resize(keep);
  if (shared_.heap_on && keep <= cfg_.timer_heap_from / 4) timer_heap_off();
}

void RdmCore::due_pass(uint64_t now) noexcept {
  // The timer heap is on: only the peers whose timers are due run them, in the heap's order
  // (an all-to-all's receiver may run a pass for up to every message as its peers' delayed acks
  // come due, and a visit of its active peers made that O(peers in flight) per message). The
  // others have nothing to do now: a peer's sends wait for its acks (whose frames pump it) or its
  // RNR timer, its probe for its keepalive timer (which on_frame arms). What a pass owes them
  // otherwise, the full visit does: after the port refused a frame or a read's data found no
  // copy slot (retry), and every timer_visit_ns, when idle peers leave the active ones.
  pump_cts(now);
  pump_resp(now);
  shared_.settle();
  // A peer taken out stays out until it is listed (timers_moved, below), so that each due peer
  // runs once per pass even when its timer is still due after (the port refused its ack: the
  // retry is a full visit).
  while (RdmPeer* r = shared_.take_due(now)) {
    PeerState& p = *state(r->addr());
    ++stats_.timer_peers;
    p.rel.poll(now);
    p.rel.keepalive(expecting(p), now);
    pump(p, now);
    shared_.list(&p.rel);  // back into the heap at the next settle, its timers moved or not
  }
}

void RdmCore::timer_heap_off() noexcept {
  if (!shared_.heap_on) return;
  for (PeerState* p : active_) shared_.untrack(&p->rel);
  shared_.turn_off();
}

// Out of line: next_deadline's usual path (a few peers, visited) saves no registers for it.
[[gnu::noinline]] uint64_t RdmCore::settled_earliest() noexcept {
  shared_.settle();
  return shared_.timers.earliest();
}

uint64_t RdmCore::next_deadline() noexcept {
  // RdmEndpoint::finish reads this after every call into the core: the peers' timers are kept in
  // order (RdmShared::timers) where this visited every active peer, O(peers in flight) per
  // message (an all-to-all of 64 ranks: 63 of them).
  uint64_t earliest = UINT64_MAX;
  if (!shared_.heap_on) [[likely]] {
    for (const PeerState* p : active_) earliest = std::min(earliest, p->rel.next_deadline());
  } else {
    earliest = settled_earliest();
  }
  const uint64_t d = tx_blocked_ ? now_ + cfg_.tx_retry_ns : UINT64_MAX;
  return std::min(d, earliest);
}

bool RdmCore::timers_consistent() noexcept {
  if (!shared_.heap_on) return true;
  // A timer is set only on an active peer (progress() runs only theirs), and the heap holds each
  // one as it is.
  uint64_t visit = UINT64_MAX;
  for (const PeerState* p : active_) visit = std::min(visit, p->rel.next_deadline());
  return settled_earliest() == visit;
}

void RdmCore::activate(PeerState& p) noexcept {
  if (p.active) return;
  p.active = true;
  active_.push_back(&p);  // reserved to the number of peers in add_peer: no allocation
  if (shared_.heap_on) {
    shared_.track(&p.rel);
  } else if (active_.size() > cfg_.timer_heap_from) {
    // Room for every peer, made the first time (24 bytes a peer: not spent on a core that never
    // has this many peers in flight). Without it, next_deadline keeps visiting the active peers.
    if (shared_.timer_room() < peer_count_) {
      try {
        shared_.reserve_timers(peer_count_);
      } catch (const std::bad_alloc&) {
        return;
      }
    }
    shared_.heap_on = true;
    for (PeerState* q : active_) shared_.track(&q->rel);
  }
}

void RdmCore::restart(PeerState& p, fi_addr_t addr, const RdmHeader& first) noexcept {
  ++stats_.peer_restarts;
  // What involved the old instance fails as if it had been found unreachable...
  if (!p.rel.unreachable()) unreachable(addr);
  // ...and the new one starts with fresh reliability state (its window, our stream to it).
  fresh_rel(p, addr);
  // The new instance may have taken the start of our stream to the old one (retransmissions
  // that reached it before it spoke): our stream goes on where it expects it to.
  p.rel.start_stream_at(first.ack);
  p.rdv_turn = false;
  p.awaiting_cts = 0;
  if (p.rma) p.rma->awaiting_resp = 0;
}

void RdmCore::flush_acks(uint64_t now) noexcept {
  now_ = now;
  for (auto& p : peers_)
    if (p) {
      p->rel.flush_ack(now);
      timers_moved(p->rel);
    }
}

void RdmCore::unreachable(fi_addr_t peer) noexcept { fail_peer(peer, FI_EHOSTUNREACH); }

void RdmCore::set_peer_rdv_segment(fi_addr_t peer, uint64_t bytes) noexcept {
  // A power of two kept as its shift (a byte of the peer state's padding: cold peers stay small).
  if (PeerState* p = state(peer))
    p->rdv_seg_shift = bytes ? static_cast<uint8_t>(std::bit_width(bytes) - 1) : 0;
}

void RdmCore::set_peer_lossless(fi_addr_t peer) noexcept {
  if (PeerState* p = state(peer)) {
    p->lossless = true;
    p->rel.set_lossless();
  }
}

void RdmCore::set_peer_same_host(fi_addr_t peer) noexcept {
  if (PeerState* p = state(peer)) p->same_host = true;
}

void RdmCore::set_peer_reads_us(fi_addr_t peer) noexcept {
  if (PeerState* p = state(peer)) p->reads_us = true;
}

void RdmCore::fresh_rel(PeerState& p, fi_addr_t addr) noexcept {
  p.rel.~RdmPeer();
  new (&p.rel) RdmPeer(&shared_, addr);
  if (p.lossless) p.rel.set_lossless();
  if (shared_.heap_on && p.active) shared_.track(&p.rel);  // activate() will not see it again
}

void RdmCore::renew_peer(fi_addr_t peer, uint64_t now) noexcept {
  PeerState* p = state(peer);
  if (p == nullptr) return;
  now_ = now;
  ++stats_.peer_restarts;
  if (!p->rel.unreachable()) unreachable(peer);  // as restart(): the old instance's work fails
  fresh_rel(*p, peer);
  p->rdv_turn = false;
  p->awaiting_cts = 0;
  p->rdv_seg_shift = 0;  // the new instance's link says again what it can read
  p->reads_us = false;
}

void RdmCore::lose_peer(fi_addr_t peer, uint64_t now) noexcept {
  now_ = now;
  if (PeerState* p = state(peer)) {
    p->rel.lose();
    timers_moved(p->rel);
  }
}

void RdmCore::fail_peer(fi_addr_t peer, int err) noexcept {
  PeerState* p = state(peer);
  if (p == nullptr) return;
  // Sends to it, queued or in flight.
  p->sendq = {};
  p->rdvq = {};
  p->awaiting_cts = 0;
  // What we were answering it: its reads, our answers, the copies its window held.
  drop_target_state(*p, peer);
  for (uint32_t i = 0; i < tx_.size(); ++i)
    if (tx_[i].in_use && tx_[i].op.dest == peer) complete_tx(i, err);
  // Receives bound to its messages.
  p->rdv_rx.for_each(rx_, [&](uint32_t r) { complete_rx(r, err); });
  p->rdv_rx = {};
  abandon_cur(*p, err);
  // Its unexpected messages that will never be whole (complete eager ones stay receivable).
  for (auto* list : {&unexp_msg_, &unexp_tagged_}) {
    uint32_t prev = kNone;
    for (uint32_t u = list->front(); u != kNone;) {
      const uint32_t next = unexp_[u].next;
      Unexp& e = unexp_[u];
      if (e.from == peer && !e.complete() && e.claimed) {
        // Claimed (FI_PEEK|FI_CLAIM): kept until its FI_CLAIM receive, which gets the error.
        if (!e.dead) {
          e.dead = true;
          e.dead_err = err;
        }
        if (e.slot != kNone) unexp_slot_free_.put(e.slot);
        e.slot = kNone;
        prev = u;
      } else if (e.from == peer && !e.complete()) {
        list->remove(unexp_, u, prev);
        if (e.bound_rx != kNone) complete_rx(e.bound_rx, err);
        free_unexpected(u);
      } else {
        prev = u;
      }
      u = next;
    }
  }
  // Partial unexpected messages already taken off the lists (bound or discarded).
  for (uint32_t u = 0; u < unexp_.size(); ++u) {
    Unexp& e = unexp_[u];
    if (e.in_use && e.from == peer && !e.complete() && (e.bound_rx != kNone || e.discard)) {
      if (e.bound_rx != kNone) complete_rx(e.bound_rx, err);
      free_unexpected(u);
    }
  }
  std::erase_if(cts_, [&](const Cts& c) { return c.peer == peer; });
}

// ---- FI_EP_MSG: the connection ended (msg_endpoint.h) --------------------------------------

void RdmCore::abort(int err) noexcept {
  // Receives still posted first: a FI_MULTI_RECV buffer with messages arriving into it is released
  // now, so that the last of them, failed below, reports FI_MULTI_RECV and frees it.
  for (auto* list : {&posted_msg_, &posted_tagged_})
    while (!list->empty()) {
      const uint32_t r = list->pop_front(rx_);
      RxOp& x = rx_[r];
      if (x.multi && x.children > 0) {
        x.released = true;
        continue;
      }
      x.tagged = x.op.match.tagged;
      x.has_data = false;
      x.tag = x.op.match.tag;
      complete_rx(r, err);
    }
  // What involves each peer fails as if it were unreachable, and nothing of it is resent: its
  // reliability state starts afresh (untracked: the timer heap is off until peers are active).
  timer_heap_off();
  for (fi_addr_t a = 0; a < peers_.size(); ++a) {
    PeerState* p = peers_[a].get();
    if (p == nullptr) continue;
    fail_peer(a, err);
    fresh_rel(*p, a);
    p->rdv_turn = false;
    p->active = false;
  }
  active_.clear();
  cts_.clear();
  // Complete unexpected messages nobody will receive now; a claimed one fails its claim.
  for (auto* list : {&unexp_msg_, &unexp_tagged_}) {
    uint32_t prev = kNone;
    for (uint32_t u = list->front(); u != kNone;) {
      const uint32_t next = unexp_[u].next;
      Unexp& e = unexp_[u];
      if (e.claimed) {
        if (!e.dead) {
          e.dead = true;
          e.dead_err = err;
        }
        if (e.slot != kNone) unexp_slot_free_.put(e.slot);
        e.slot = kNone;
        prev = u;
      } else {
        list->remove(unexp_, u, prev);
        free_unexpected(u);
      }
      u = next;
    }
  }
}

}  // namespace dpfab::proto::rdm
