// SPDX-License-Identifier: BSD-3-Clause
//
// RdmCore's private state, shared by its translation units: rdm_core.cc (construction, sending,
// frames, timers and failure) and rdm_core_rx.cc (receiving: matching, unexpected messages,
// FI_PEEK / FI_CLAIM / FI_DISCARD, FI_MULTI_RECV, reassembly and the rendezvous receive side).
// Nothing outside the core includes it.
#pragma once

#include <algorithm>
#include <cstring>

#include "proto/rdm_core.h"

namespace dpfab::proto::rdm {

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
  bool issued = false;    // left the send queue (FI_FENCE waits for such earlier ones)
  // RMA and atomics: the target's answer (kRmaResp) is wanted / arrived, with its status; a read
  // counts the bytes that arrived.
  bool resp_wanted = false, resp_done = false, awaiting = false;
  int resp_err = 0;
  uint64_t received = 0;
};

// The RMA state of one peer, made on its first RMA operation or request (a peer that only
// exchanges messages costs a pointer): the write being placed (its segments come one after the
// other) and the reads being answered, in order; and our operations waiting for its answers.
struct RdmCore::PeerRma {
  bool w_active = false;
  uint32_t w_msg = 0;
  uint64_t w_total = 0, w_off = 0;
  int w_err = 0;
  IndexFifo<std::vector<Responder>> readq;
  bool read_turn = false;  // alternates read data with the peer's other queues
  // Initiator side: our reads, writes and atomics to the peer whose answer has not come (we wait
  // on the peer: keepalive).
  uint32_t awaiting_resp = 0;
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
  uint64_t remote = 0;    // rts with kRdmRef: the message's address in the sender's memory
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
  std::unique_ptr<PeerRma> rma;         // RMA state, made on first use
  uint32_t awaiting_cts = 0;            // our RTSs not yet answered
  bool rdv_turn = false;                // alternates eager and rendezvous packets
  bool active = false;                  // in RdmCore::active_
  uint8_t rdv_seg_shift = 0;  // rendezvous segments of 1 << this bytes (0: the config's seg_size)
  // The eager message being reassembled from this peer (segments never interleave). Bit-fields:
  // with rdv_seg_shift they share the word of the flags above, and a cold peer stays small
  // (unit-proto-memory); the core lock serialises every access.
  bool cur_active : 1 = false;
  bool cur_unexp : 1 = false;  // cur_idx is an Unexp (else an RxOp; kNone: dropped)
  bool lossless : 1 = false;   // set_peer_lossless(): kept across a fresh RdmPeer (fresh_rel)
  bool reads_us : 1 = false;   // set_peer_reads_us(): RTSs by reference (kRdmRef)
  bool same_host : 1 = false;  // set_peer_same_host(): eager up to eager_max_same_host
  uint32_t cur_idx = kNone;
  uint32_t cur_msg = 0;
  uint64_t cur_total = 0, cur_received = 0;
};

// The largest message sent eagerly to `p` (CoreConfig::eager_max_same_host, never 0 here).
inline uint64_t RdmCore::eager_max_to(const PeerState& p) const noexcept {
  return p.same_host ? cfg_.eager_max_same_host : cfg_.eager_max;
}

// Whether the last packet of `t` asks for an immediate ack: the send completes (CQ entry or
// counter) only when it is acked. A plain fi_inject reports nothing, so its ack may wait.
inline bool RdmCore::wants_ack(const TxOp& t) noexcept { return !t.op.inject || t.op.completion; }

inline void RdmCore::maybe_complete_tx(uint32_t i) noexcept {
  TxOp& t = tx_[i];
  if (!t.issued_all || t.unacked != 0) return;
  switch (t.op.kind) {
    case OpKind::kMsg:
      complete_tx(i, 0);
      return;
    case OpKind::kRead:
      // Complete when every byte arrived (the last kReadResp), or the target answered with an
      // error (even an empty read waits for the target's word).
      if (t.resp_done) complete_tx(i, t.resp_err);
      return;
    default:  // writes and atomics: on the target's answer when one was asked for
      if (!t.resp_wanted || t.resp_done) complete_tx(i, t.resp_err);
      return;
  }
}

// Copies `d` into the buffers of `iov` (count entries, or the single `buf` of `len` bytes when
// count is 0) at byte `offset` of their concatenation; what lies beyond them is dropped.
inline void scatter(void* buf, size_t len, const Iov* iov, uint8_t count, uint64_t offset,
                    std::span<const uint8_t> d) noexcept {
  if (d.empty()) return;
  if (count == 0) {
    if (offset >= len) return;
    std::memcpy(static_cast<uint8_t*>(buf) + offset, d.data(),
                std::min<uint64_t>(d.size(), len - offset));
    return;
  }
  const uint8_t* from = d.data();
  uint64_t n = d.size();
  for (uint8_t k = 0; k < count && n; ++k) {
    if (offset >= iov[k].len) {
      offset -= iov[k].len;
      continue;
    }
    const uint64_t c = std::min<uint64_t>(n, iov[k].len - offset);
    std::memcpy(static_cast<uint8_t*>(iov[k].base) + offset, from, c);
    from += c;
    n -= c;
    offset = 0;
  }
}

// Where byte `offset` of the buffers' concatenation lies (null beyond them), and in `room` how
// many bytes follow it in the same buffer.
inline uint8_t* rx_place(void* buf, size_t len, const Iov* iov, uint8_t count, uint64_t offset,
                         uint64_t* room = nullptr) noexcept {
  if (count == 0) {
    if (offset >= len) return nullptr;
    if (room) *room = len - offset;
    return static_cast<uint8_t*>(buf) + offset;
  }
  for (uint8_t k = 0; k < count; ++k) {
    if (offset < iov[k].len) {
      if (room) *room = iov[k].len - offset;
      return static_cast<uint8_t*>(iov[k].base) + offset;
    }
    offset -= iov[k].len;
  }
  return nullptr;
}

// Copies `n` bytes at `offset` of the buffers' concatenation out into `to`.
inline void gather(const void* buf, const Iov* iov, uint8_t count, uint64_t offset, uint8_t* to,
                   uint64_t n) noexcept {
  if (n == 0) return;
  if (count == 0) {
    std::memcpy(to, static_cast<const uint8_t*>(buf) + offset, n);
    return;
  }
  for (uint8_t k = 0; k < count && n; ++k) {
    if (offset >= iov[k].len) {
      offset -= iov[k].len;
      continue;
    }
    const uint64_t c = std::min<uint64_t>(n, iov[k].len - offset);
    std::memcpy(to, static_cast<const uint8_t*>(iov[k].base) + offset, c);
    to += c;
    n -= c;
    offset = 0;
  }
}

inline void RdmCore::copy_to_rx(RxOp& r, uint64_t offset, std::span<const uint8_t> d) noexcept {
  // Data already in place (rdv_placement: a same-host peer's bytes read straight into the
  // receive's buffer) is not copied onto itself.
  if (rx_place(r.op.buf, r.op.len, r.op.iov, r.op.iov_count, offset) == d.data()) return;
  scatter(r.op.buf, r.op.len, r.op.iov, r.op.iov_count, offset, d);
}

}  // namespace dpfab::proto::rdm
