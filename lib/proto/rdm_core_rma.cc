// SPDX-License-Identifier: BSD-3-Clause
//
// RdmCore (rdm_core.h), RMA and atomics: the initiator's writes, reads and atomics and their
// answers, and the target's side: checks against the domain's regions (mr_table.h), placement,
// read data, atomic execution (atomic.h), answers and the remote events. The message path is in
// rdm_core.cc and rdm_core_rx.cc; the private state they share is in rdm_core_internal.h.
#include <rdma/fi_atomic.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "proto/atomic.h"
#include "proto/rdm_core_internal.h"

namespace dpfab::proto::rdm {

using wire::RdmHeader;
using wire::RdmKind;

namespace {

atomic::Kind kind_of(const SendOp& op) noexcept {
  return op.fetch        ? atomic::Kind::kFetch
         : op.compare_op ? atomic::Kind::kCompare
                         : atomic::Kind::kWrite;
}

}  // namespace

// ---- initiator ---------------------------------------------------------------------------------

uint64_t RdmCore::completion_flags(const SendOp& op) noexcept {
  switch (op.kind) {
    case OpKind::kWrite:
      return FI_RMA | FI_WRITE;
    case OpKind::kRead:
      return FI_RMA | FI_READ;
    case OpKind::kAtomic:
      return FI_ATOMIC | (op.fetch || op.compare_op ? FI_READ : FI_WRITE);
    default:
      return FI_SEND | (op.tagged ? FI_TAGGED : FI_MSG);
  }
}

int RdmCore::check_atomic(const SendOp& op) const noexcept {
  if (op.fetch && op.compare_op) return -FI_EINVAL;
  const size_t size = atomic::datatype_size(op.datatype);
  if (size == 0 || !atomic::valid(op.atomic_op, op.datatype, kind_of(op))) return -FI_EINVAL;
  if (op.len == 0 || op.len % size != 0) return -FI_EINVAL;
  if ((op.compare_op ? 2 * op.len : op.len) > cfg_.atomic_max) return -FI_EMSGSIZE;
  if (op.compare_op && !op.compare) return -FI_EINVAL;
  if (op.fetch || op.compare_op) {
    uint64_t room = 0;
    for (uint8_t k = 0; k < op.result_count; ++k) {
      if (!op.result[k].base && op.result[k].len) return -FI_EINVAL;
      room += op.result[k].len;
    }
    if (room < op.len) return -FI_EINVAL;
  }
  return 0;
}

RdmHeader RdmCore::write_header(const TxOp& t, uint64_t n) const noexcept {
  RdmHeader h;
  h.kind = RdmKind::kWrite;
  h.msg_id = t.msg_id;
  h.offset = t.next_off;
  h.length = t.op.len;
  if (t.op.has_data) {
    h.flags = wire::kRdmCqData;
    h.cq_data = t.op.data;
  }
  h.rkey = t.op.rkey;
  h.raddr = t.op.raddr + t.next_off;
  if (t.next_off + n == t.op.len) {
    // The last segment: the target answers once the write is placed, when a completion wants
    // that answer; else only the ack tells (at once, when the completion waits for it).
    if (t.resp_wanted)
      h.flags |= wire::kRdmRespReq;
    else if (wants_ack(t))
      h.flags |= wire::kRdmAckReq;
  }
  return h;
}

bool RdmCore::send_rma(PeerState& p, uint32_t i, uint64_t now) noexcept {
  TxOp& t = tx_[i];
  RdmHeader h;
  std::span<const uint8_t> d;
  switch (t.op.kind) {
    case OpKind::kWrite:
      d = data_at(t, t.next_off, cfg_.seg_size - wire::kRdmRmaLen);
      h = write_header(t, d.size());
      break;
    case OpKind::kRead:
      h.kind = RdmKind::kReadReq;
      h.msg_id = t.msg_id;
      h.length = t.op.len;
      h.rkey = t.op.rkey;
      h.raddr = t.op.raddr;
      break;
    case OpKind::kAtomic:
      h.kind = RdmKind::kAtomic;
      h.msg_id = t.msg_id;
      h.flags = t.op.fetch ? wire::kRdmFetch : t.op.compare_op ? wire::kRdmCompare : 0;
      h.length = t.op.compare_op ? 2 * t.op.len : t.op.len;
      h.rkey = t.op.rkey;
      h.raddr = t.op.raddr;
      h.atomic_op = t.op.atomic_op;
      h.datatype = t.op.datatype;
      d = {static_cast<const uint8_t*>(t.op.buf), h.length};  // the copy send() made
      break;
    default:
      return false;
  }
  const int sent = p.rel.send(h, d, i, now);
  timers_moved(p.rel);
  if (sent != 0) return false;
  ++t.unacked;
  if (t.op.kind == OpKind::kWrite) t.next_off += d.size();
  if (t.op.kind == OpKind::kWrite && t.next_off < t.op.len) return true;
  t.issued_all = t.issued = true;
  if (!p.sendq.empty() && p.sendq.front() == i) p.sendq.pop_front(tx_);  // not on the fast path
  if (t.resp_wanted) {  // we wait on the peer now (keepalive) until it answers
    t.awaiting = true;
    ++p.rma->awaiting_resp;  // made by send()
  }
  return true;
}

void RdmCore::deliver_read_resp(PeerState& p, const RdmHeader& h,
                                std::span<const uint8_t> d) noexcept {
  const uint32_t i = h.msg_id & 0xffff;
  if (i >= tx_.size()) {
    ++stats_.protocol_errors;
    return;
  }
  TxOp& t = tx_[i];
  if (!t.in_use || t.msg_id != h.msg_id || t.op.dest != p.rel.addr() ||
      t.op.kind != OpKind::kRead || t.resp_done) {
    ++stats_.protocol_errors;  // a read that completed (or never was): dropped
    return;
  }
  if (h.length != t.op.len || h.offset != t.received) {
    ++stats_.protocol_errors;  // not the next bytes of this read: it fails
    t.resp_done = true;
    t.resp_err = FI_EIO;
    maybe_complete_tx(i);
    return;
  }
  scatter(const_cast<void*>(t.op.buf), t.op.len, t.op.iov, t.op.iov_count, h.offset, d);
  t.received += d.size();
  if (t.received == t.op.len) t.resp_done = true;
  maybe_complete_tx(i);
}

void RdmCore::deliver_rma_resp(PeerState& p, const RdmHeader& h,
                               std::span<const uint8_t> d) noexcept {
  const uint32_t i = h.msg_id & 0xffff;
  if (i >= tx_.size()) {
    ++stats_.protocol_errors;
    return;
  }
  TxOp& t = tx_[i];
  if (!t.in_use || t.msg_id != h.msg_id || t.op.dest != p.rel.addr() || t.op.kind == OpKind::kMsg ||
      t.resp_done || (t.op.kind == OpKind::kRead && !h.status)) {
    // Answers to operations that completed already (a write whose completion did not wait for
    // it, an inject) or never were: dropped.
    if (!t.in_use || t.msg_id != h.msg_id) return;
    ++stats_.protocol_errors;
    return;
  }
  t.resp_done = true;
  t.resp_err = static_cast<int>(h.status);
  if (t.op.kind == OpKind::kAtomic && !h.status && (t.op.fetch || t.op.compare_op)) {
    if (d.size() == t.op.len)
      scatter(nullptr, 0, t.op.result, t.op.result_count, 0, d);
    else
      t.resp_err = FI_EIO;  // not the old values of our elements
  }
  maybe_complete_tx(i);
}

// ---- target ------------------------------------------------------------------------------------

RdmCore::PeerRma* RdmCore::rma_of(PeerState& p) noexcept {
  if (!p.rma) p.rma.reset(new (std::nothrow) PeerRma);
  return p.rma.get();
}

bool RdmCore::gated(const PeerState& p) const noexcept { return p.rma && !p.rma->readq.empty(); }

void RdmCore::remote_event(fi_addr_t peer, uint64_t flags, uint64_t len, uint64_t data, bool cq,
                           void* region_cntr) noexcept {
  Completion c;
  c.flags = flags;
  c.len = len;
  c.data = data;
  c.src = peer;
  c.cq = cq;
  c.region_cntr = region_cntr;
  sink_->complete(c);
}

bool RdmCore::queue_resp(fi_addr_t peer, uint32_t msg_id, int status, uint32_t stage,
                         uint32_t len) noexcept {
  if (!resp_room()) return false;
  resp_q_.push_back({peer, msg_id, static_cast<uint32_t>(status), stage, len});
  if (stage != kNone) stage_owner_[stage] = peer;
  return true;
}

void RdmCore::free_stage(uint32_t slot) noexcept {
  if (slot >= stage_owner_.size() || stage_owner_[slot] == FI_ADDR_NOTAVAIL) return;
  stage_owner_[slot] = FI_ADDR_NOTAVAIL;
  stage_free_.put(slot);
}

void RdmCore::pump_resp(uint64_t now) noexcept {
  if (resp_q_.empty()) return;
  size_t keep = 0, k = 0;
  for (; k < resp_q_.size(); ++k) {
    const Resp r = resp_q_[k];
    PeerState* p = state(r.peer);
    if (p == nullptr || p->rel.unreachable()) {
      if (r.stage != kNone) free_stage(r.stage);
      continue;
    }
    if (!p->rel.can_send()) {  // its window is full: it and its later answers wait, in order
      resp_q_[keep++] = r;
      continue;
    }
    RdmHeader h;
    h.kind = RdmKind::kRmaResp;
    h.msg_id = r.msg_id;
    h.status = r.status;
    h.length = r.stage != kNone ? r.len : 0;
    const std::span<const uint8_t> d = r.stage != kNone
                                           ? std::span<const uint8_t>(stage_mem(r.stage), r.len)
                                           : std::span<const uint8_t>();
    const int sent = p->rel.send(h, d, r.stage != kNone ? kStageCookie | r.stage : kNone, now);
    timers_moved(p->rel);
    if (sent != 0) break;  // the port refused it: this one and the rest wait
    activate(*p);          // its RTO runs now
  }
  for (; k < resp_q_.size(); ++k) resp_q_[keep++] = resp_q_[k];
  resp_q_.resize(keep);
}

bool RdmCore::deliver_write(PeerState& p, const RdmHeader& h, std::span<const uint8_t> d) noexcept {
  PeerRma* r = rma_of(p);
  if (r == nullptr) return false;
  if (gated(p)) {
    ++stats_.target_gated;
    return false;
  }
  // Room for the answer (or error), and for the error of a write this one cuts short.
  if (resp_q_.size() + 2 > cfg_.resp_queue) return false;
  const fi_addr_t from = p.rel.addr();
  MrTable::Ref ref;  // the range [raddr, ...) of this segment (of the whole write on the first)
  if (h.offset == 0) {
    if (r->w_active) {  // a write before the last one ended: that one is lost
      ++stats_.protocol_errors;
      (void)queue_resp(from, r->w_msg, FI_EIO, kNone, 0);
    }
    r->w_active = true;
    r->w_msg = h.msg_id;
    r->w_total = h.length;
    r->w_off = 0;
    // The whole write is checked before any byte of it lands.
    const int e = cfg_.mrs ? cfg_.mrs->acquire(h.rkey, h.raddr, h.length, FI_REMOTE_WRITE,
                                               cfg_.ep_token, &ref)
                           : -FI_EKEYREJECTED;
    r->w_err = -e;
  } else if (!r->w_active || h.msg_id != r->w_msg || h.offset != r->w_off) {
    ++stats_.protocol_errors;  // not the next segment of the write in progress: dropped
    return true;
  } else if (r->w_err == 0) {
    // Each segment against its own range: the region may have closed since the first.
    const int e =
        cfg_.mrs->acquire(h.rkey, h.raddr, d.size(), FI_REMOTE_WRITE, cfg_.ep_token, &ref);
    r->w_err = -e;
  }
  if (r->w_err == 0 && !d.empty()) ref.copy_in(0, d.data(), d.size());
  r->w_off += d.size();
  if (r->w_off < r->w_total) return true;
  r->w_active = false;
  if (r->w_err) {
    ++stats_.target_refused;
    (void)queue_resp(from, h.msg_id, r->w_err, kNone, 0);
    return true;
  }
  ++stats_.target_writes;
  const bool cq_data = h.flags & wire::kRdmCqData;
  remote_event(from, FI_RMA | FI_REMOTE_WRITE | (cq_data ? FI_REMOTE_CQ_DATA : 0), r->w_total,
               h.cq_data, cq_data, ref.held() ? ref.counter(true) : nullptr);
  if (h.flags & wire::kRdmRespReq) (void)queue_resp(from, h.msg_id, 0, kNone, 0);
  return true;
}

bool RdmCore::deliver_read_req(PeerState& p, const RdmHeader& h) noexcept {
  PeerRma* r = rma_of(p);
  if (r == nullptr || !resp_room()) return false;
  const fi_addr_t from = p.rel.addr();
  MrTable::Ref ref;
  const int e =
      cfg_.mrs ? cfg_.mrs->acquire(h.rkey, h.raddr, h.length, FI_REMOTE_READ, cfg_.ep_token, &ref)
               : -FI_EKEYREJECTED;
  if (e) {
    ++stats_.target_refused;
    (void)queue_resp(from, h.msg_id, -e, kNone, 0);
    return true;
  }
  ref.release();
  const uint32_t k = responder_free_.get();
  if (k == kNone) return false;  // every responder busy: the peer resends later
  Responder& x = responders_[k];
  x.in_use = true;
  x.peer = from;
  x.msg_id = h.msg_id;
  x.key = h.rkey;
  x.addr = h.raddr;
  x.len = h.length;
  x.off = 0;
  r->readq.push_back(responders_, k);
  activate(p);
  ++stats_.target_reads;
  return true;
}

bool RdmCore::send_read_segment(PeerState& p, uint64_t now) noexcept {
  PeerRma& r = *p.rma;
  const uint32_t k = r.readq.front();
  Responder& x = responders_[k];
  const uint64_t n = std::min<uint64_t>(cfg_.seg_size, x.len - x.off);
  uint32_t slot = kNone;
  if (n) {
    slot = stage_free_.get();
    if (slot == kNone) {  // every copy in flight: wait for acks (any peer's: progress visits all)
      starved_ = true;
      return false;
    }
  }
  MrTable::Ref ref;
  const int e = cfg_.mrs->acquire(x.key, x.addr + x.off, n, FI_REMOTE_READ, cfg_.ep_token, &ref);
  const auto finish = [&] {
    r.readq.pop_front(responders_);
    x.in_use = false;
    responder_free_.put(k);
  };
  if (e) {  // the region closed during the read: it fails
    if (slot != kNone) stage_free_.put(slot);
    if (!queue_resp(x.peer, x.msg_id, -e, kNone, 0)) return false;
    ++stats_.target_refused;
    finish();
    pump_resp(now);
    return true;
  }
  if (n) ref.copy_out(0, stage_mem(slot), n);
  RdmHeader h;
  h.kind = RdmKind::kReadResp;
  h.msg_id = x.msg_id;
  h.offset = x.off;
  h.length = x.len;
  // The reader completes on the last segment; its ack frees our copies at once.
  if (x.off + n == x.len) h.flags = wire::kRdmAckReq;
  const std::span<const uint8_t> d =
      n ? std::span<const uint8_t>(stage_mem(slot), n) : std::span<const uint8_t>();
  const int sent = p.rel.send(h, d, n ? kStageCookie | slot : kNone, now);
  timers_moved(p.rel);
  if (sent != 0) {
    if (slot != kNone) stage_free_.put(slot);
    return false;
  }
  if (slot != kNone) stage_owner_[slot] = x.peer;
  x.off += n;
  if (x.off == x.len) {
    remote_event(x.peer, FI_RMA | FI_REMOTE_READ, x.len, 0, false, ref.counter(false));
    finish();
  }
  return true;
}

bool RdmCore::deliver_atomic(PeerState& p, const RdmHeader& h,
                             std::span<const uint8_t> d) noexcept {
  if (gated(p)) {
    ++stats_.target_gated;
    return false;
  }
  if (!resp_room()) return false;
  const fi_addr_t from = p.rel.addr();
  const atomic::Kind kind = h.flags & wire::kRdmFetch     ? atomic::Kind::kFetch
                            : h.flags & wire::kRdmCompare ? atomic::Kind::kCompare
                                                          : atomic::Kind::kWrite;
  const size_t size = atomic::datatype_size(h.datatype);
  const uint64_t bytes = kind == atomic::Kind::kCompare ? d.size() / 2 : d.size();
  const auto refuse = [&](int err) {
    ++stats_.target_refused;
    (void)queue_resp(from, h.msg_id, err, kNone, 0);
    return true;
  };
  if (size == 0 || bytes == 0 || bytes % size || (kind == atomic::Kind::kCompare && d.size() % 2) ||
      !atomic::valid(h.atomic_op, h.datatype, kind))
    return refuse(FI_EOPNOTSUPP);
  if (!cfg_.mrs) return refuse(FI_EKEYREJECTED);
  uint32_t slot = kNone;
  if (kind != atomic::Kind::kWrite) {
    if (bytes > cfg_.seg_size - wire::kRdmRmaLen) return refuse(FI_EMSGSIZE);
    slot = stage_free_.get();
    if (slot == kNone) return false;  // every copy in flight: the peer resends later
  }
  MrTable::Ref ref;
  const int e = cfg_.mrs->acquire(h.rkey, h.raddr, bytes, atomic::rights(h.atomic_op, kind),
                                  cfg_.ep_token, &ref);
  uint8_t* dst = e ? nullptr : ref.contiguous(0, bytes);
  if (!dst) {
    if (slot != kNone) stage_free_.put(slot);
    // An element range across two iovs of a vectored region cannot be updated atomically.
    return refuse(e ? -e : FI_EINVAL);
  }
  atomic::execute(h.atomic_op, h.datatype, kind, dst, d.data(),
                  kind == atomic::Kind::kCompare ? d.data() + bytes : nullptr,
                  slot != kNone ? stage_mem(slot) : nullptr, bytes / size);
  ++stats_.target_atomics;
  const bool reads_only = h.atomic_op == FI_ATOMIC_READ;
  remote_event(from, FI_ATOMIC | (reads_only ? FI_REMOTE_READ : FI_REMOTE_WRITE), bytes, 0, false,
               ref.counter(!reads_only));
  (void)queue_resp(from, h.msg_id, 0, slot, slot != kNone ? static_cast<uint32_t>(bytes) : 0);
  return true;
}

void RdmCore::drop_target_state(PeerState& p, fi_addr_t peer) noexcept {
  if (p.rma) {
    p.rma->readq.for_each(responders_, [&](uint32_t k) {
      responders_[k].in_use = false;
      responder_free_.put(k);
    });
    p.rma->readq = {};
    p.rma->w_active = false;
  }
  std::erase_if(resp_q_, [&](const Resp& r) { return r.peer == peer; });
  for (uint32_t s = 0; s < stage_owner_.size(); ++s)
    if (stage_owner_[s] == peer) free_stage(s);
}

size_t RdmCore::target_in_use() const noexcept {
  return resp_q_.size() + responder_free_.in_use() + stage_free_.in_use();
}

}  // namespace dpfab::proto::rdm
