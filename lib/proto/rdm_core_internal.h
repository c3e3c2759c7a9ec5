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
  uint8_t rdv_seg_shift = 0;  // rendezvous segments of 1 << this bytes (0: the config's seg_size)
  uint32_t awaiting_cts = 0;  // our RTSs not yet answered
  // The eager message being reassembled from this peer (segments never interleave).
  bool cur_active = false;
  bool cur_unexp = false;  // cur_idx is an Unexp (else an RxOp; kNone: dropped)
  uint32_t cur_idx = kNone;
  uint32_t cur_msg = 0;
  uint64_t cur_total = 0, cur_received = 0;
};

inline void RdmCore::maybe_complete_tx(uint32_t i) noexcept {
  if (tx_[i].issued_all && tx_[i].unacked == 0) complete_tx(i, 0);
}

inline void RdmCore::copy_to_rx(RxOp& r, uint64_t offset, std::span<const uint8_t> d) noexcept {
  if (offset >= r.op.len || d.empty()) return;
  const uint64_t n = std::min<uint64_t>(d.size(), r.op.len - offset);
  uint8_t* dst = static_cast<uint8_t*>(r.op.buf) + offset;
  if (dst != d.data()) std::memcpy(dst, d.data(), n);  // in place already: rdv_placement
}

}  // namespace dpfab::proto::rdm
