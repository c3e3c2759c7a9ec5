// SPDX-License-Identifier: BSD-3-Clause
#include "proto/rdm_core.h"

#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <random>
#include <stdexcept>
#include <string>

namespace dpfab::proto::rdm {

using wire::RdmHeader;
using wire::RdmKind;

namespace {
constexpr fi_addr_t kMaxPeers = fi_addr_t{1} << 20;
}  // namespace

struct RdmCore::TxOp {
  SendOp op;
  uint32_t next = kNone;
  uint32_t msg_id = 0;
  uint16_t gen = 0;
  bool in_use = false;
  bool rendezvous = false;
  bool issued_all = false;  // every packet handed to the peer layer
  bool rts_sent = false;
  bool granted_known = false;
  uint64_t next_off = 0;  // next byte to send
  uint64_t granted = 0;   // rendezvous: bytes the receiver granted
  uint32_t unacked = 0;   // packets sent and not yet acknowledged
  bool counted = false;   // completed early (SendOp::complete_now): counters have it
};

struct RdmCore::RxOp {
  RecvOp op;
  uint32_t next = kNone;
  bool in_use = false;
  // FI_MULTI_RECV: a parent buffer (multi) hands out parts of itself to child ops (parent).
  bool multi = false;
  bool released = false;  // multi: no longer posted; freed with its last child
  uint32_t parent = kNone;
  uint32_t children = 0;  // multi: parts not yet completed
  uint64_t used = 0;      // multi: bytes handed out
  fi_addr_t from = FI_ADDR_NOTAVAIL;
  uint32_t msg_id = 0;
  uint64_t total = 0;     // the message's length
  uint64_t received = 0;  // bytes of it that arrived
  uint64_t granted = 0;   // rendezvous: bytes asked for
  uint64_t tag = 0, data = 0;
  bool tagged = false, has_data = false;
};

struct RdmCore::Unexp {
  uint32_t next = kNone;
  bool in_use = false;
  bool rts = false;
  bool tagged = false, has_data = false;
  bool claimed = false;
  bool discard = false;  // eager, still arriving: dropped when its last segment is in
  bool dead = false;     // claimed, and will never be whole: its FI_CLAIM receive gets dead_err
  int dead_err = 0;
  fi_addr_t from = FI_ADDR_NOTAVAIL;
  uint64_t tag = 0, data = 0;
  uint32_t msg_id = 0;
  uint64_t total = 0, received = 0;
  uint32_t slot = kNone;  // eager data buffer
  void* claim_ctx = nullptr;
  uint32_t bound_rx = kNone;  // eager, still arriving: the receive that took it
  bool complete() const noexcept { return !rts && received == total; }
};

struct RdmCore::PeerState {
  PeerState(RdmShared* s, fi_addr_t a) : rel(s, a) {}
  RdmPeer rel;
  IndexFifo<std::vector<TxOp>> sendq;   // sends with eager segments or an RTS still to go, in order
  IndexFifo<std::vector<TxOp>> rdvq;    // granted rendezvous sends with data still to go
  IndexFifo<std::vector<RxOp>> rdv_rx;  // receives waiting for kRdvData from this peer
  bool rdv_turn = false;                // alternates eager and rendezvous packets
  bool active = false;                  // in RdmCore::active_
  uint32_t awaiting_cts = 0;            // our RTSs not yet answered
  // The eager message being reassembled from this peer (segments never interleave).
  bool cur_active = false;
  bool cur_unexp = false;  // cur_idx is an Unexp (else an RxOp; kNone: dropped)
  uint32_t cur_idx = kNone;
  uint32_t cur_msg = 0;
  uint64_t cur_total = 0, cur_received = 0;
};

// ---- construction ------------------------------------------------------------------------------

RdmCore::RdmCore(const CoreConfig& cfg, CoreSink* sink)
    : cfg_(cfg),
      sink_(sink),
      slots_(cfg.reorder_slots, cfg.seg_size),
      tx_(cfg.tx_ops),
      tx_free_(cfg.tx_ops),
      inject_mem_(new uint8_t[size_t{cfg.tx_ops} * cfg.inject_size]),
      rx_(cfg.rx_ops),
      rx_free_(cfg.rx_ops),
      unexp_(cfg.unexpected),
      unexp_free_(cfg.unexpected),
      unexp_mem_(new uint8_t[size_t{cfg.unexpected_slots} * cfg.eager_max]),
      unexp_slot_free_(cfg.unexpected_slots) {
  // A peer the core knows but has not sent to or heard from costs this, its RdmPeer included, and
  // a pointer in peers_ and active_ (240 bytes in all, measured: unit-proto-memory). The endpoint
  // adds a peer on its first traffic, so an address only in the AV costs the core nothing.
  static_assert(sizeof(PeerState) <= 256, "cold per-peer state must stay small");
  shared_.host = this;
  shared_.cfg = cfg.rel;
  shared_.slots = &slots_;
  shared_.epoch = cfg.epoch;
  while (shared_.epoch == 0) shared_.epoch = std::random_device{}();
  cts_.reserve(size_t{cfg.rx_ops} + cfg.unexpected);
}

RdmCore::~RdmCore() = default;

Result<std::unique_ptr<RdmCore>> RdmCore::create(const CoreConfig& cfg, CoreSink* sink) {
  if (validate(cfg.rel) != 0) return Error{-FI_EINVAL, "rdm: bad reliability parameters"};
  if (sink == nullptr || cfg.seg_size == 0 || cfg.seg_size > wire::kMaxPayload ||
      cfg.max_msg_size > wire::kRdmMaxLength || cfg.eager_max > cfg.max_msg_size ||
      cfg.eager_max > (uint64_t{1} << 24) || cfg.tx_ops == 0 || cfg.tx_ops > 65536 ||
      cfg.rx_ops == 0 || cfg.unexpected == 0 || cfg.unexpected_slots > cfg.unexpected ||
      cfg.min_multi_recv == 0)
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

size_t RdmCore::tx_in_use() const noexcept { return tx_.size() - tx_free_.available(); }
size_t RdmCore::injected_unacked() const noexcept {
  size_t n = 0;
  for (const TxOp& t : tx_) n += t.in_use && t.op.inject && !t.op.completion;
  return n;
}
size_t RdmCore::rx_in_use() const noexcept { return rx_.size() - rx_free_.available(); }
size_t RdmCore::unexpected_in_use() const noexcept {
  return unexp_.size() - unexp_free_.available();
}

// ---- sending -----------------------------------------------------------------------------------

ssize_t RdmCore::send(const SendOp& op, uint64_t now) noexcept {
  now_ = now;
  PeerState* p = state(op.dest);
  if (p == nullptr) return -FI_EINVAL;
  if (op.len > cfg_.max_msg_size || (op.inject && op.len > cfg_.inject_size)) return -FI_EMSGSIZE;
  if (p->rel.unreachable()) return -FI_EHOSTUNREACH;
  const uint32_t i = tx_free_.get();
  if (i == kNone) return -FI_EAGAIN;
  TxOp& t = tx_[i];
  t.op = op;
  if (op.inject) {
    uint8_t* copy = inject_mem_.get() + size_t{i} * cfg_.inject_size;
    if (op.len) std::memcpy(copy, op.buf, op.len);
    t.op.buf = copy;
  }
  ++t.gen;
  t.msg_id = (uint32_t{t.gen} << 16) | i;
  t.in_use = true;
  t.rendezvous = op.len > cfg_.eager_max;
  t.issued_all = t.rts_sent = t.granted_known = false;
  t.next_off = t.granted = 0;
  t.unacked = 0;
  ++(t.rendezvous ? stats_.sent_rendezvous : stats_.sent_eager);
  if (op.inject && op.complete_now) {
    // FI_INJECT_COMPLETE: the copy is the data now. The op stays until acknowledged, silently.
    t.op.completion = false;
    t.counted = true;
    if (reported(op.completion, true, true)) {
      Completion c;
      c.context = op.context;
      c.flags = FI_SEND | (op.tagged ? FI_TAGGED : FI_MSG);
      c.len = op.len;
      c.cq = op.completion;
      sink_->complete(c);
    }
  } else {
    t.counted = false;
  }
  // Fast path: a one-packet message to a peer with nothing queued (pump() would send it first,
  // and only it): sent at once. When it cannot go now (window full, RNR pause, the port refused
  // it), it is queued as below, and pump() would only have tried the same again.
  const bool alone = cfg_.fast_paths && !t.rendezvous && op.len <= cfg_.seg_size &&
                     p->sendq.empty() && p->rdvq.empty();
  if (alone && try_send_now(*p, i, now)) return 0;
  p->sendq.push_back(tx_, i);
  activate(*p);
  if (!alone) pump(*p, now);
  return 0;
}

bool RdmCore::try_send_now(PeerState& p, uint32_t i, uint64_t now) noexcept {
  if (!p.rel.can_send()) return false;  // pump() would not try either
  TxOp& t = tx_[i];
  const RdmHeader h = eager_header(t, t.op.len);
  const bool sent = p.rel.send(h, {static_cast<const uint8_t*>(t.op.buf), t.op.len}, i, now) == 0;
  p.rdv_turn = !p.rdv_turn;  // as pump() after an attempt
  if (!sent) return false;
  ++t.unacked;
  t.next_off = t.op.len;
  t.issued_all = true;
  activate(p);  // its RTO runs now
  ++stats_.fast_sends;
  return true;
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
  const auto* buf = static_cast<const uint8_t*>(t.op.buf);
  if (t.rendezvous) {
    RdmHeader h;
    h.kind = RdmKind::kRts;
    h.msg_id = t.msg_id;
    h.flags = (t.op.tagged ? wire::kRdmTagged : 0) | (t.op.has_data ? wire::kRdmCqData : 0);
    h.tag = t.op.tagged ? t.op.tag : 0;
    h.cq_data = t.op.has_data ? t.op.data : 0;
    h.length = t.op.len;
    if (p.rel.send(h, {}, i, now) != 0) return false;
    ++t.unacked;
    ++p.awaiting_cts;
    t.rts_sent = true;
    p.sendq.pop_front(tx_);
    return true;
  }
  const uint64_t n = std::min<uint64_t>(cfg_.seg_size, t.op.len - t.next_off);
  const RdmHeader h = eager_header(t, n);
  if (p.rel.send(h, {buf + t.next_off, n}, i, now) != 0) return false;
  ++t.unacked;
  t.next_off += n;
  if (t.next_off == t.op.len) {
    t.issued_all = true;
    p.sendq.pop_front(tx_);
  }
  return true;
}

// Whether the last packet of `t` asks for an immediate ack: the send completes (CQ entry or
// counter) only when it is acked. A plain fi_inject reports nothing, so its ack may wait.
inline bool RdmCore::wants_ack(const TxOp& t) noexcept { return !t.op.inject || t.op.completion; }

bool RdmCore::send_rdv_segment(PeerState& p, uint32_t i, uint64_t now) noexcept {
  TxOp& t = tx_[i];
  RdmHeader h;
  h.kind = RdmKind::kRdvData;
  h.msg_id = t.msg_id;
  h.offset = t.next_off;
  h.length = t.op.len;
  const uint64_t n = std::min<uint64_t>(cfg_.seg_size, t.granted - t.next_off);
  if (t.next_off + n == t.granted && wants_ack(t)) h.flags |= wire::kRdmAckReq;
  const auto* buf = static_cast<const uint8_t*>(t.op.buf);
  if (p.rel.send(h, {buf + t.next_off, n}, i, now) != 0) return false;
  ++t.unacked;
  t.next_off += n;
  p.rdvq.pop_front(tx_);
  if (t.next_off == t.granted) {
    t.issued_all = true;
  } else {
    p.rdvq.push_back(tx_, i);  // round robin between granted messages
  }
  return true;
}

void RdmCore::pump(PeerState& p, uint64_t now) noexcept {
  if (p.sendq.empty() && p.rdvq.empty()) return;  // nothing to send (most calls)
  while (p.rel.can_send()) {
    bool sent;
    if (p.rdv_turn && !p.rdvq.empty()) {
      sent = send_rdv_segment(p, p.rdvq.front(), now);
    } else if (!p.sendq.empty()) {
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
    if (p->rel.can_send() && p->rel.send(h, {}, kNone, now) == 0) {
      activate(*p);  // its RTO runs now
      continue;
    }
    cts_[keep++] = c;
  }
  cts_.resize(keep);
}

void RdmCore::acked(fi_addr_t, uint32_t cookie) noexcept {
  if (cookie == kNone) return;  // a CTS
  TxOp& t = tx_[cookie];
  if (!t.in_use || t.unacked == 0) return;
  --t.unacked;
  maybe_complete_tx(cookie);
}

inline void RdmCore::maybe_complete_tx(uint32_t i) noexcept {
  if (tx_[i].issued_all && tx_[i].unacked == 0) complete_tx(i, 0);
}

void RdmCore::complete_tx(uint32_t i, int err) noexcept {
  TxOp& t = tx_[i];
  // An error completes every send but a plain fi_inject (no context to report it with).
  const bool cq = err != 0 ? !t.op.inject || t.op.completion : t.op.completion;
  if (!reported(cq, !t.counted, true)) {  // nothing to tell: an fi_inject acknowledged
    t.in_use = false;
    tx_free_.put(i);
    return;
  }
  Completion c;
  c.context = t.op.context;
  c.flags = FI_SEND | (t.op.tagged ? FI_TAGGED : FI_MSG);
  c.len = err ? 0 : t.op.len;
  c.err = err;
  c.cq = cq;
  c.count = !t.counted;
  t.in_use = false;
  tx_free_.put(i);
  sink_->complete(c);
}

// ---- receiving ---------------------------------------------------------------------------------

ssize_t RdmCore::recv(const RecvOp& op, uint64_t now) noexcept {
  now_ = now;
  const uint64_t special = op.flags & (FI_PEEK | FI_CLAIM | FI_DISCARD);
  if (special && !op.match.tagged) return -FI_EINVAL;
  if (op.flags & FI_MULTI_RECV) {
    if (op.match.tagged || special || op.len < cfg_.min_multi_recv) return -FI_EINVAL;
    return post_multi(op);
  }
  if ((special & FI_DISCARD) && !(special & (FI_PEEK | FI_CLAIM))) return -FI_EINVAL;
  auto& list = op.match.tagged ? unexp_tagged_ : unexp_msg_;

  if (special & FI_PEEK) {
    auto [u, prev] = list.find(unexp_, [&](uint32_t k) {
      const Unexp& e = unexp_[k];
      return !e.claimed && matches(op.match, e.from, e.tag, e.tagged);
    });
    Completion c;
    c.context = op.context;
    c.flags = FI_RECV | FI_TAGGED;
    if (u == kNone) {
      c.tag = op.match.tag;
      c.err = FI_ENOMSG;
      sink_->complete(c);
      return 0;
    }
    Unexp& e = unexp_[u];
    c.flags |= e.has_data ? FI_REMOTE_CQ_DATA : 0;
    c.len = e.total;
    c.data = e.data;
    c.tag = e.tag;
    c.src = e.from;
    if (special & FI_DISCARD) {
      list.remove(unexp_, u, prev);
      discard_unexpected(u);
      pump_cts(now);
    } else if (special & FI_CLAIM) {
      e.claimed = true;
      e.claim_ctx = op.context;
    }
    sink_->complete(c);
    return 0;
  }

  auto [u, prev] = (special & FI_CLAIM)
                       ? list.find(unexp_,
                                   [&](uint32_t k) {
                                     return unexp_[k].claimed && unexp_[k].claim_ctx == op.context;
                                   })
                       : list.find(unexp_, [&](uint32_t k) {
                           const Unexp& e = unexp_[k];
                           return !e.claimed && matches(op.match, e.from, e.tag, e.tagged);
                         });
  if ((special & FI_CLAIM) && u == kNone) return -FI_EINVAL;  // nothing claimed with this context
  if (special & FI_DISCARD) {
    Completion c;
    c.context = op.context;
    c.flags = FI_RECV | FI_TAGGED;
    c.tag = unexp_[u].tag;
    c.src = unexp_[u].from;
    list.remove(unexp_, u, prev);
    discard_unexpected(u);
    pump_cts(now);
    sink_->complete(c);
    return 0;
  }
  const uint32_t r = rx_free_.get();
  if (r == kNone) return -FI_EAGAIN;
  init_rx(r, op);
  if (u != kNone) {
    list.remove(unexp_, u, prev);
    take_unexpected(u, r);
    pump_cts(now);
  } else {
    (op.match.tagged ? posted_tagged_ : posted_msg_).push_back(rx_, r);
  }
  return 0;
}

void RdmCore::init_rx(uint32_t r, const RecvOp& op) noexcept {
  RxOp& x = rx_[r];
  x.op = op;
  x.in_use = true;
  x.from = FI_ADDR_NOTAVAIL;
  x.received = x.total = x.granted = 0;
  x.tag = x.data = 0;
  x.tagged = op.match.tagged;
  x.has_data = false;
  x.multi = x.released = false;
  x.parent = kNone;
  x.children = 0;
  x.used = 0;
}

ssize_t RdmCore::post_multi(const RecvOp& op) noexcept {
  const uint32_t r = rx_free_.get();
  if (r == kNone) return -FI_EAGAIN;
  init_rx(r, op);
  rx_[r].multi = true;
  // Unexpected messages that match go in first, in arrival order.
  for (;;) {
    auto [u, prev] = unexp_msg_.find(unexp_, [&](uint32_t k) {
      const Unexp& e = unexp_[k];
      return !e.claimed && matches(op.match, e.from, e.tag, e.tagged);
    });
    if (u == kNone) break;
    const uint32_t child = carve(r, unexp_[u].total);
    if (child == kNone) break;  // no receive op for it now: it waits for the next one
    const bool released = rx_[r].released;
    unexp_msg_.remove(unexp_, u, prev);
    take_unexpected(u, child);  // may complete the child, and free a released parent
    if (released) {
      pump_cts(now_);
      return 0;
    }
  }
  posted_msg_.push_back(rx_, r);
  pump_cts(now_);
  return 0;
}

uint32_t RdmCore::carve(uint32_t parent, uint64_t total) noexcept {
  const uint32_t c = rx_free_.get();
  if (c == kNone) return kNone;
  RxOp& p = rx_[parent];
  init_rx(c, p.op);
  RxOp& x = rx_[c];
  x.op.flags = 0;
  x.op.buf = static_cast<uint8_t*>(p.op.buf) + p.used;
  x.op.len = std::min<uint64_t>(total, p.op.len - p.used);
  x.parent = parent;
  p.used += x.op.len;
  ++p.children;
  if (p.op.len - p.used < cfg_.min_multi_recv) p.released = true;
  return c;
}

int RdmCore::cancel(void* context) noexcept {
  for (auto* list : {&posted_msg_, &posted_tagged_}) {
    auto [r, prev] = list->find(rx_, [&](uint32_t k) { return rx_[k].op.context == context; });
    if (r == kNone) continue;
    list->remove(rx_, r, prev);
    RxOp& x = rx_[r];
    if (x.multi && x.children > 0) {
      x.released = true;  // the last message still arriving into it reports FI_MULTI_RECV
      return 0;
    }
    x.tagged = x.op.match.tagged;
    x.has_data = false;
    x.tag = x.op.match.tag;
    complete_rx(r, FI_ECANCELED);
    return 0;
  }
  return -FI_ENOENT;
}

uint32_t RdmCore::match_posted(fi_addr_t from, uint64_t tag, bool tagged, uint64_t total,
                               bool* refuse) noexcept {
  *refuse = false;
  auto& list = tagged ? posted_tagged_ : posted_msg_;
  auto [r, prev] =
      list.find(rx_, [&](uint32_t k) { return matches(rx_[k].op.match, from, tag, tagged); });
  if (r == kNone || !rx_[r].multi) {
    if (r != kNone) list.remove(rx_, r, prev);
    return r;
  }
  const uint32_t c = carve(r, total);
  if (c == kNone) {
    *refuse = true;  // back-pressure until a receive op frees up
    return kNone;
  }
  if (rx_[r].released) list.remove(rx_, r, prev);
  return c;
}

inline void RdmCore::copy_to_rx(RxOp& r, uint64_t offset, std::span<const uint8_t> d) noexcept {
  if (offset >= r.op.len || d.empty()) return;
  const uint64_t n = std::min<uint64_t>(d.size(), r.op.len - offset);
  std::memcpy(static_cast<uint8_t*>(r.op.buf) + offset, d.data(), n);
}

void RdmCore::complete_rx(uint32_t i, int err) noexcept {
  RxOp& x = rx_[i];
  Completion c;
  c.context = x.op.context;
  c.flags = FI_RECV | (x.tagged ? FI_TAGGED : FI_MSG) | (x.has_data ? FI_REMOTE_CQ_DATA : 0);
  c.buf = x.op.buf;
  c.data = x.data;
  c.tag = x.tag;
  c.src = x.from;
  c.err = err;
  c.cq = x.op.completion || err != 0;
  if (err == 0 || err == FI_ETRUNC) {
    c.len = std::min<uint64_t>(x.total, x.op.len);
    if (x.total > x.op.len) {
      c.err = FI_ETRUNC;
      c.olen = x.total - x.op.len;
      ++stats_.truncated;
    }
    ++stats_.received;
  }
  if (x.multi) {  // a multi-recv buffer cancelled with nothing arriving into it
    c.flags |= FI_MULTI_RECV;
  } else if (x.parent != kNone) {
    RxOp& p = rx_[x.parent];
    if (--p.children == 0 && p.released) {
      c.flags |= FI_MULTI_RECV;  // the buffer's last completion
      p.in_use = false;
      rx_free_.put(x.parent);
    }
  }
  x.in_use = false;
  rx_free_.put(i);
  if (reported(c.cq, c.count, false)) sink_->complete(c);
}

void RdmCore::free_unexpected(uint32_t u) noexcept {
  Unexp& e = unexp_[u];
  if (e.slot != kNone) unexp_slot_free_.put(e.slot);
  e.slot = kNone;
  e.in_use = false;
  unexp_free_.put(u);
}

void RdmCore::discard_unexpected(uint32_t u) noexcept {
  Unexp& e = unexp_[u];
  if (e.dead) {
    free_unexpected(u);
  } else if (e.rts) {
    queue_cts(e.from, e.msg_id, 0);  // a zero grant: the sender completes without sending data
    free_unexpected(u);
  } else if (e.complete()) {
    free_unexpected(u);
  } else {
    e.discard = true;  // freed when its last segment arrives
  }
}

void RdmCore::start_rdv_rx(uint32_t r, fi_addr_t from, uint32_t msg_id, uint64_t total) noexcept {
  RxOp& x = rx_[r];
  x.from = from;
  x.msg_id = msg_id;
  x.total = total;
  x.received = 0;
  x.granted = std::min<uint64_t>(total, x.op.len);
  queue_cts(from, msg_id, x.granted);
  if (x.granted == 0) {
    complete_rx(r, 0);
  } else if (PeerState* p = state(from)) {
    p->rdv_rx.push_back(rx_, r);
    activate(*p);  // we wait on it now (keepalive)
  }
}

void RdmCore::take_unexpected(uint32_t u, uint32_t r) noexcept {
  Unexp& e = unexp_[u];
  RxOp& x = rx_[r];
  x.from = e.from;
  x.tag = e.tag;
  x.data = e.data;
  x.tagged = e.tagged;
  x.has_data = e.has_data;
  x.total = e.total;
  if (e.dead) {
    const int err = e.dead_err;
    free_unexpected(u);
    complete_rx(r, err);
  } else if (e.rts) {
    const uint32_t msg_id = e.msg_id;
    free_unexpected(u);
    start_rdv_rx(r, x.from, msg_id, x.total);
  } else if (e.complete()) {
    copy_to_rx(x, 0, {unexp_mem_.get() + size_t{e.slot} * cfg_.eager_max, e.total});
    x.received = e.total;
    free_unexpected(u);
    complete_rx(r, 0);
  } else {
    e.bound_rx = r;  // completes when its last segment arrives
  }
}

bool RdmCore::deliver(fi_addr_t peer, const RdmHeader& h, std::span<const uint8_t> d) noexcept {
  PeerState* p = state(peer);
  if (p == nullptr) return true;
  switch (h.kind) {
    case RdmKind::kEager:
      return deliver_eager(*p, h, d);
    case RdmKind::kRts:
      return deliver_rts(*p, h);
    case RdmKind::kCts:
      deliver_cts(*p, h);
      return true;
    case RdmKind::kRdvData:
      deliver_rdv_data(*p, h, d);
      return true;
    default:
      return true;
  }
}

bool RdmCore::deliver_eager(PeerState& p, const RdmHeader& h, std::span<const uint8_t> d) noexcept {
  const fi_addr_t from = p.rel.addr();
  if (h.offset == 0) {
    if (p.cur_active) {  // a new message before the last one ended
      ++stats_.protocol_errors;
      abandon_cur(p, FI_EIO);
    }
    const bool tagged = h.flags & wire::kRdmTagged;
    const bool has_data = h.flags & wire::kRdmCqData;
    uint32_t idx = kNone;
    bool unexp = false;
    if (h.length > cfg_.eager_max) {
      ++stats_.protocol_errors;  // the sender should have used a rendezvous: dropped
    } else if (bool refuse;
               (idx = match_posted(from, h.tag, tagged, h.length, &refuse)) != kNone || refuse) {
      if (refuse) {
        ++stats_.unexpected_refused;
        return false;
      }
      RxOp& x = rx_[idx];
      x.from = from;
      x.tag = h.tag;
      x.data = h.cq_data;
      x.tagged = tagged;
      x.has_data = has_data;
      x.total = h.length;
      x.received = 0;
      if (cfg_.fast_paths && d.size() == h.length) {
        // Fast path: the whole message in this packet (every message of at most seg_size
        // bytes), matched by a receive: complete now, without the reassembly state below.
        ++stats_.fast_receives;
        copy_to_rx(x, 0, d);
        x.received = h.length;
        complete_rx(idx, 0);
        return true;
      }
    } else {
      const uint32_t u = unexp_free_.get();
      const uint32_t slot = u != kNone && h.length > 0 ? unexp_slot_free_.get() : kNone;
      if (u == kNone || (h.length > 0 && slot == kNone)) {
        if (u != kNone) unexp_free_.put(u);
        ++stats_.unexpected_refused;
        return false;  // back-pressure: the sender retries after a back-off
      }
      queue_unexpected(u, from, h, slot, false);
      idx = u;
      unexp = true;
    }
    p.cur_active = true;
    p.cur_unexp = unexp;
    p.cur_idx = idx;
    p.cur_msg = h.msg_id;
    p.cur_total = h.length;
    p.cur_received = 0;
  } else if (!p.cur_active || h.msg_id != p.cur_msg || h.offset != p.cur_received) {
    ++stats_.protocol_errors;  // not the next segment of the current message
    abandon_cur(p, FI_EIO);
    return true;
  }

  if (p.cur_idx != kNone) {
    if (!p.cur_unexp) {
      copy_to_rx(rx_[p.cur_idx], h.offset, d);
    } else if (!d.empty() && !unexp_[p.cur_idx].discard) {
      std::memcpy(unexp_mem_.get() + size_t{unexp_[p.cur_idx].slot} * cfg_.eager_max + h.offset,
                  d.data(), d.size());
    }
  }
  p.cur_received += d.size();
  if (p.cur_received < p.cur_total) return true;

  // The message is complete.
  p.cur_active = false;
  const uint32_t idx = p.cur_idx;
  if (idx == kNone) return true;
  if (!p.cur_unexp) {
    rx_[idx].received = p.cur_total;
    complete_rx(idx, 0);
    return true;
  }
  Unexp& e = unexp_[idx];
  e.received = e.total;
  if (e.discard) {
    free_unexpected(idx);
  } else if (e.bound_rx != kNone) {
    const uint32_t r = e.bound_rx;
    copy_to_rx(rx_[r], 0, {unexp_mem_.get() + size_t{e.slot} * cfg_.eager_max, e.total});
    rx_[r].received = e.total;
    free_unexpected(idx);
    complete_rx(r, 0);
  }
  return true;
}

void RdmCore::abandon_cur(PeerState& p, int err) noexcept {
  if (!p.cur_active) return;
  p.cur_active = false;
  const uint32_t idx = p.cur_idx;
  if (idx == kNone) return;
  if (!p.cur_unexp) {
    complete_rx(idx, err);
    return;
  }
  Unexp& e = unexp_[idx];
  if (e.bound_rx != kNone) {
    const uint32_t r = e.bound_rx;
    free_unexpected(idx);
    complete_rx(r, err);
  } else if (e.discard) {
    free_unexpected(idx);
  } else if (e.claimed) {
    e.dead = true;  // stays listed for its FI_CLAIM receive, which gets the error
    e.dead_err = err;
    if (e.slot != kNone) unexp_slot_free_.put(e.slot);
    e.slot = kNone;
  } else {
    auto& list = e.tagged ? unexp_tagged_ : unexp_msg_;
    auto [u, prev] = list.find(unexp_, [&](uint32_t k) { return k == idx; });
    if (u != kNone) list.remove(unexp_, u, prev);
    free_unexpected(idx);
  }
}

bool RdmCore::deliver_rts(PeerState& p, const RdmHeader& h) noexcept {
  const fi_addr_t from = p.rel.addr();
  const bool tagged = h.flags & wire::kRdmTagged;
  const bool has_data = h.flags & wire::kRdmCqData;
  bool refuse;
  const uint32_t r = match_posted(from, h.tag, tagged, h.length, &refuse);
  if (refuse) {
    ++stats_.unexpected_refused;
    return false;
  }
  if (r != kNone) {
    RxOp& x = rx_[r];
    x.tag = h.tag;
    x.data = h.cq_data;
    x.tagged = tagged;
    x.has_data = has_data;
    start_rdv_rx(r, from, h.msg_id, h.length);
    return true;
  }
  const uint32_t u = unexp_free_.get();
  if (u == kNone) {
    ++stats_.unexpected_refused;
    return false;
  }
  queue_unexpected(u, from, h, kNone, true);
  return true;
}

void RdmCore::queue_unexpected(uint32_t u, fi_addr_t from, const RdmHeader& h, uint32_t slot,
                               bool rts) noexcept {
  Unexp& e = unexp_[u];
  e = Unexp{};
  e.in_use = true;
  e.rts = rts;
  e.tagged = h.flags & wire::kRdmTagged;
  e.has_data = h.flags & wire::kRdmCqData;
  e.from = from;
  e.tag = h.tag;
  e.data = h.cq_data;
  e.msg_id = h.msg_id;
  e.total = h.length;
  e.slot = slot;
  (e.tagged ? unexp_tagged_ : unexp_msg_).push_back(unexp_, u);
  ++stats_.unexpected;
}

void RdmCore::deliver_cts(PeerState& p, const RdmHeader& h) noexcept {
  const uint32_t i = h.msg_id & 0xffff;
  if (i >= tx_.size()) {
    ++stats_.protocol_errors;
    return;
  }
  TxOp& t = tx_[i];
  if (!t.in_use || t.msg_id != h.msg_id || t.op.dest != p.rel.addr() || !t.rts_sent ||
      t.granted_known) {
    ++stats_.protocol_errors;
    return;
  }
  t.granted_known = true;
  --p.awaiting_cts;
  t.granted = std::min<uint64_t>(h.length, t.op.len);
  t.next_off = 0;
  if (t.granted == 0) {
    t.issued_all = true;
    maybe_complete_tx(i);
  } else {
    p.rdvq.push_back(tx_, i);
  }
}

void RdmCore::deliver_rdv_data(PeerState& p, const RdmHeader& h,
                               std::span<const uint8_t> d) noexcept {
  auto [r, prev] = p.rdv_rx.find(rx_, [&](uint32_t k) { return rx_[k].msg_id == h.msg_id; });
  if (r == kNone) {
    ++stats_.protocol_errors;
    return;
  }
  RxOp& x = rx_[r];
  if (h.offset != x.received || h.offset + d.size() > x.granted) {
    ++stats_.protocol_errors;  // not the next granted bytes: the message is lost
    p.rdv_rx.remove(rx_, r, prev);
    complete_rx(r, FI_EIO);
    return;
  }
  copy_to_rx(x, h.offset, d);
  x.received += d.size();
  if (x.received == x.granted) {
    p.rdv_rx.remove(rx_, r, prev);
    complete_rx(r, 0);
  }
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
  }
  pump_cts(now);
  pump(*p, now);
  p->rel.keepalive(expecting(*p), now);
}

bool RdmCore::try_receive_now(PeerState& p, const RdmHeader& h, std::span<const uint8_t> d,
                              uint64_t now) noexcept {
  // What the general path would do with this packet: the peer layer takes it in order and
  // delivers it at once (next_in_order); deliver_eager finds no message of this peer still
  // arriving, matches it to a posted receive that is not a multi-recv buffer (carving one takes
  // the general path), and completes it in one go (the whole message is in this packet).
  if (h.kind != RdmKind::kEager || h.offset != 0 || d.size() != h.length ||
      h.length > cfg_.eager_max || p.cur_active || !p.rel.next_in_order(h))
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
  return true;
}

bool RdmCore::expecting(const PeerState& p) const noexcept {
  return p.cur_active || !p.rdv_rx.empty() || p.awaiting_cts != 0;
}

void RdmCore::progress(uint64_t now) noexcept {
  now_ = now;
  tx_blocked_ = false;  // set again below if the port still refuses
  // Only active peers: with thousands of AV entries the poll step must not visit them all.
  for (PeerState* p : active_) {
    p->rel.poll(now);
    p->rel.keepalive(expecting(*p), now);
  }
  pump_cts(now);
  size_t keep = 0;
  for (PeerState* p : active_) {
    pump(*p, now);
    if (p->rel.next_deadline() == UINT64_MAX && p->sendq.empty() && p->rdvq.empty() &&
        !expecting(*p)) {
      p->active = false;  // idle: nothing to time, send or wait for
    } else {
      active_[keep++] = p;
    }
  }
  active_.resize(keep);
}

uint64_t RdmCore::next_deadline() const noexcept {
  uint64_t d = tx_blocked_ ? now_ + cfg_.tx_retry_ns : UINT64_MAX;
  for (const PeerState* p : active_) d = std::min(d, p->rel.next_deadline());
  return d;
}

void RdmCore::activate(PeerState& p) noexcept {
  if (p.active) return;
  p.active = true;
  active_.push_back(&p);  // reserved to the number of peers in add_peer: no allocation
}

void RdmCore::restart(PeerState& p, fi_addr_t addr, const RdmHeader& first) noexcept {
  ++stats_.peer_restarts;
  // What involved the old instance fails as if it had been found unreachable...
  if (!p.rel.unreachable()) unreachable(addr);
  // ...and the new one starts with fresh reliability state (its window, our stream to it).
  p.rel.~RdmPeer();
  new (&p.rel) RdmPeer(&shared_, addr);
  // The new instance may have taken the start of our stream to the old one (retransmissions
  // that reached it before it spoke): our stream goes on where it expects it to.
  p.rel.start_stream_at(first.ack);
  p.rdv_turn = false;
  p.awaiting_cts = 0;
}

void RdmCore::flush_acks(uint64_t now) noexcept {
  now_ = now;
  for (auto& p : peers_)
    if (p) p->rel.flush_ack(now);
}

void RdmCore::unreachable(fi_addr_t peer) noexcept { fail_peer(peer, FI_EHOSTUNREACH); }

void RdmCore::fail_peer(fi_addr_t peer, int err) noexcept {
  PeerState* p = state(peer);
  if (p == nullptr) return;
  // Sends to it, queued or in flight.
  p->sendq = {};
  p->rdvq = {};
  p->awaiting_cts = 0;
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
  // reliability state starts afresh.
  for (fi_addr_t a = 0; a < peers_.size(); ++a) {
    PeerState* p = peers_[a].get();
    if (p == nullptr) continue;
    fail_peer(a, err);
    p->rel.~RdmPeer();
    new (&p->rel) RdmPeer(&shared_, a);
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
