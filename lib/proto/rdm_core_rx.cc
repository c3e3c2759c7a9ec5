// SPDX-License-Identifier: BSD-3-Clause
//
// RdmCore, receiving (rdm_core.h): posted receives and their matching, the unexpected-message
// queue, FI_PEEK / FI_CLAIM / FI_DISCARD, FI_MULTI_RECV buffers, eager reassembly and the
// receive side of the rendezvous. The rest of the core is in rdm_core.cc.
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <cstring>

#include "proto/rdm_core_internal.h"

namespace dpfab::proto::rdm {

using wire::RdmHeader;
using wire::RdmKind;

// ---- receiving ---------------------------------------------------------------------------------

ssize_t RdmCore::recv(const RecvOp& op, uint64_t now) noexcept {
  now_ = now;
  const uint64_t special = op.flags & (FI_PEEK | FI_CLAIM | FI_DISCARD);
  if (special && !op.match.tagged) return -FI_EINVAL;
  if (op.iov_count > kMaxIov) return -FI_EINVAL;
  if (op.flags & FI_MULTI_RECV) {
    if (op.match.tagged || special || op.len < cfg_.min_multi_recv || op.iov_count > 1)
      return -FI_EINVAL;
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
  copy_op(x.op, op);
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

int RdmCore::read_ref(const RxOp& x, fi_addr_t from, uint64_t remote) noexcept {
  // Buffer by buffer of the receive (most have one): the sender's message is one buffer.
  for (uint64_t off = 0; off < x.granted;) {
    uint64_t room = 0;
    uint8_t* at = rx_place(x.op.buf, x.op.len, x.op.iov, x.op.iov_count, off, &room);
    if (at == nullptr || room == 0) return FI_EIO;
    const uint64_t n = std::min<uint64_t>(room, x.granted - off);
    if (const int err = sink_->read_peer(from, remote + off, at, n); err != 0) return err;
    off += n;
  }
  ++stats_.ref_received;
  return 0;
}

void RdmCore::start_rdv_rx(uint32_t r, fi_addr_t from, uint32_t msg_id, uint64_t total,
                           uint64_t remote) noexcept {
  RxOp& x = rx_[r];
  x.from = from;
  x.msg_id = msg_id;
  x.total = total;
  x.received = 0;
  x.granted = std::min<uint64_t>(total, x.op.len);
  if (remote != 0) {
    // By reference (kRdmRef): the message is copied now, out of the sender's memory, which stays
    // valid until our zero grant completes its send. A copy that failed fails the receive (the
    // sender's process is gone, or named memory we cannot read); the grant still goes, so a
    // sender that is there completes.
    const int err = read_ref(x, from, remote);
    queue_cts(from, msg_id, 0);
    if (err == 0) x.received = x.granted;
    complete_rx(r, err);
    return;
  }
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
    const uint64_t remote = e.remote;
    free_unexpected(u);
    start_rdv_rx(r, x.from, msg_id, x.total, remote);
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
      // A message posted after a read waits until the read's data is all copied out (SAR).
      if (h.offset == 0 && gated(*p)) {
        ++stats_.target_gated;
        return false;
      }
      return deliver_eager(*p, h, d);
    case RdmKind::kRts:
      if (gated(*p)) {
        ++stats_.target_gated;
        return false;
      }
      return deliver_rts(*p, h);
    case RdmKind::kWrite:
      return deliver_write(*p, h, d);
    case RdmKind::kReadReq:
      return deliver_read_req(*p, h);
    case RdmKind::kReadResp:
      deliver_read_resp(*p, h, d);
      return true;
    case RdmKind::kAtomic:
      return deliver_atomic(*p, h, d);
    case RdmKind::kRmaResp:
      deliver_rma_resp(*p, h, d);
      return true;
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
  const uint64_t ref = h.flags & wire::kRdmRef ? h.offset : 0;  // validated: not 0 with the flag
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
    start_rdv_rx(r, from, h.msg_id, h.length, ref);
    return true;
  }
  const uint32_t u = unexp_free_.get();
  if (u == kNone) {
    ++stats_.unexpected_refused;
    return false;
  }
  queue_unexpected(u, from, h, kNone, true);
  unexp_[u].remote = ref;
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

std::span<uint8_t> RdmCore::rdv_placement(fi_addr_t peer, const RdmHeader& h, uint64_t n,
                                          bool* scattered) noexcept {
  if (scattered) *scattered = false;
  PeerState* p = state(peer);
  if (!p || h.kind != RdmKind::kRdvData || !p->rel.next_in_order(h)) return {};
  auto [r, prev] = p->rdv_rx.find(rx_, [&](uint32_t k) { return rx_[k].msg_id == h.msg_id; });
  if (r == kNone) return {};
  const RxOp& x = rx_[r];
  // As deliver_rdv_data: the next granted bytes, inside the buffer (granted never exceeds it).
  if (h.offset != x.received || h.offset + n > x.granted || h.offset + n > x.op.len) return {};
  uint64_t room = 0;
  uint8_t* at = rx_place(x.op.buf, x.op.len, x.op.iov, x.op.iov_count, h.offset, &room);
  if (!at || room < n) {  // across two of the receive's buffers: on_frame scatters a copy
    if (scattered) *scattered = true;
    return {};
  }
  return {at, static_cast<size_t>(n)};
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

}  // namespace dpfab::proto::rdm
