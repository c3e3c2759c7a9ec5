// SPDX-License-Identifier: BSD-3-Clause
#include "proto/rdm_peer.h"

#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace dpfab::proto::rdm {

using wire::RdmHeader;
using wire::RdmKind;
using wire::seq_le;
using wire::seq_lt;

namespace {
constexpr uint32_t kRing = 64;  // window entries; config window <= kRing
}  // namespace

int validate(const ReliabilityConfig& c) noexcept {
  if (c.window == 0 || c.window > kRing) return -FI_EINVAL;
  if (c.rto_min_ns == 0 || c.rto_min_ns > c.rto_max_ns) return -FI_EINVAL;
  if (c.rto_init_ns < c.rto_min_ns || c.rto_init_ns > c.rto_max_ns) return -FI_EINVAL;
  if (c.rnr_backoff_min_ns == 0 || c.rnr_backoff_min_ns > c.rnr_backoff_max_ns) return -FI_EINVAL;
  if (c.ack_every == 0 || c.dupthresh == 0 || c.dupthresh > kMaxDupthresh) return -FI_EINVAL;
  if (c.keepalive_ns == 0) return -FI_EINVAL;
  return 0;
}

// ---- RxSlotPool -----------------------------------------------------------------------------

RxSlotPool::RxSlotPool(size_t count, size_t slot_bytes)
    : slot_bytes_(slot_bytes),
      bytes_(new uint8_t[count * slot_bytes]),
      headers_(count),
      lens_(count) {
  free_.reserve(count);
  for (size_t i = count; i-- > 0;) free_.push_back(static_cast<int32_t>(i));
}

int32_t RxSlotPool::get() noexcept {
  if (free_.empty()) return -1;
  int32_t i = free_.back();
  free_.pop_back();
  return i;
}

void RxSlotPool::put(int32_t i) noexcept { free_.push_back(i); }  // capacity reserved: no throw

// ---- RdmPeer ----------------------------------------------------------------------------------

RdmPeer::RdmPeer(RdmShared* shared, fi_addr_t addr) noexcept
    : sh_(shared),
      addr_(addr),
      snd_una_(shared->cfg.initial_seq),
      snd_nxt_(shared->cfg.initial_seq),
      rcv_nxt_(shared->cfg.initial_seq),
      peer_window_(shared->cfg.window),
      rto_(shared->cfg.rto_init_ns),
      rnr_backoff_(shared->cfg.rnr_backoff_min_ns) {
  static_assert(sizeof(RdmPeer) <= 256, "cold per-peer state must stay small");
}

RdmPeer::~RdmPeer() {
  // restart(): the new instance starts without timers.
  if (timer_state_ == kListed || timer_state_ == kListedIdle) std::erase(sh_->moved, this);
  sh_->timers.set(this, UINT64_MAX);
  if (!hot_) return;
  for (int32_t& s : hot_->rx_slot)
    if (s >= 0) sh_->slots->put(s);
}

inline bool RdmPeer::ensure_hot() noexcept {
  if (hot_) return true;
  hot_.reset(new (std::nothrow) Hot);
  if (!hot_) return false;
  for (int32_t& s : hot_->rx_slot) s = -1;
  return true;
}

inline void RdmPeer::fill_ack(RdmHeader& h) const noexcept {
  h.epoch = sh_->epoch;
  h.ack = rcv_nxt_;
  // The window is at most 64, so the held packets (seqs rcv_nxt + 1 .. rcv_nxt + window - 1)
  // fit the 64 SACK bits.
  h.sack = held_;
  h.window = sh_->cfg.window;
}

bool RdmPeer::transmit_entry(TxEntry& e, uint64_t now) noexcept {
  fill_ack(e.h);  // fresh ack fields on every (re)transmission
  if (!sh_->host->transmit(addr_, e.h, {e.data, e.len})) {
    ++sh_->stats.tx_refused;
    return false;
  }
  e.sent_ns = now;
  e.xmit = hot_->xmits++;
  ++e.tx_count;
  // The frame carried our ack: no separate one is due.
  unacked_rx_ = 0;
  ack_deadline_ = UINT64_MAX;
  return true;
}

int RdmPeer::send(const RdmHeader& proto, std::span<const uint8_t> data, uint32_t cookie,
                  uint64_t now) noexcept {
  if (unreachable_) return -FI_EHOSTUNREACH;
  if (!can_send()) return -FI_EAGAIN;
  if (!ensure_hot()) return -FI_ENOMEM;
  TxEntry& e = hot_->tx[snd_nxt_ % kRing];
  e.h = proto;
  e.h.seq = snd_nxt_;
  e.data = data.data();
  e.len = static_cast<uint32_t>(data.size());
  e.cookie = cookie;
  e.tx_count = 0;
  e.sacked = false;
  if (!transmit_entry(e, now)) return -FI_EAGAIN;  // nothing recorded: the seq is still free
  if (snd_una_ == snd_nxt_) stall_since_ = now;
  ++snd_nxt_;
  if (rto_deadline_ == UINT64_MAX) rto_deadline_ = now + rto_ns();
  ++sh_->stats.tx_packets;
  return 0;
}

void RdmPeer::send_ack(uint64_t now, uint16_t flags) noexcept {
  RdmHeader h;
  h.kind = RdmKind::kAck;
  h.flags = flags;
  h.msg_id = peer_epoch_;  // the stream we acknowledge: stale acks are told apart by it
  fill_ack(h);
  if (!sh_->host->transmit(addr_, h, {})) {
    ++sh_->stats.tx_refused;
    ack_deadline_ = now + sh_->cfg.ack_delay_ns;  // try again
    return;
  }
  ++sh_->stats.tx_acks;
  unacked_rx_ = 0;
  ack_deadline_ = UINT64_MAX;
}

inline void RdmPeer::rtt_sample(uint64_t r) noexcept {
  // RFC 6298 2.2/2.3 with alpha = 1/8, beta = 1/4; G (clock granularity) taken as rto_min.
  ++sh_->stats.rtt_samples;
  sh_->stats.rtt_sample_max_ns = std::max(sh_->stats.rtt_sample_max_ns, r);
  if (srtt_ == 0) {
    srtt_ = r ? r : 1;
    rttvar_ = r / 2;
  } else {
    uint64_t diff = srtt_ > r ? srtt_ - r : r - srtt_;
    rttvar_ = (3 * rttvar_ + diff) / 4;
    srtt_ = (7 * srtt_ + r) / 8;
  }
  rto_ = std::clamp(srtt_ + 4 * rttvar_, sh_->cfg.rto_min_ns, sh_->cfg.rto_max_ns);
  if (hot_) hot_->min_rtt = std::min(hot_->min_rtt, r);
  sh_->stats.rto_estimate_max_ns = std::max(sh_->stats.rto_estimate_max_ns, rto_);
}

// Loss detection's view of what an ack reports delivered: the latest send time of the packets
// delivered (acked or SACKed), and, walking down the window, the k latest transmissions among
// the SACKed packets above the one in hand.
class RdmPeer::Delivered {
 public:
  explicit Delivered(uint32_t k) : k_(k) {}
  void delivered(uint64_t sent_ns) noexcept {
    latest_ns_ = std::max(latest_ns_, sent_ns);
    any_ = true;
  }
  bool any() const noexcept { return any_; }
  void sacked_above(uint32_t xmit) noexcept {
    for (uint32_t i = 0; i < n_; ++i)
      if (wire::seq_lt(latest_[i], xmit)) std::swap(xmit, latest_[i]);
    if (n_ < k_) latest_[n_++] = xmit;
  }
  /// Whether a packet last transmitted as `xmit` at `sent_ns` is lost: k packets above it
  /// transmitted after it were SACKed, or a packet sent `reo_wnd` or more after it arrived.
  bool overtaken(uint32_t xmit, uint64_t sent_ns, uint64_t reo_wnd) const noexcept {
    return (n_ == k_ && wire::seq_lt(xmit, latest_[k_ - 1])) || latest_ns_ >= sent_ns + reo_wnd;
  }

 private:
  uint32_t k_;
  uint32_t n_ = 0;
  uint32_t latest_[kMaxDupthresh] = {};  // descending
  uint64_t latest_ns_ = 0;
  bool any_ = false;
};

inline bool RdmPeer::dated(const TxEntry& e, uint64_t now) const noexcept {
  // What an ack tells of a packet's send time (RFC 8985 6.2 step 2): a retransmitted packet acked
  // sooner than the smallest round trip after its last transmission was acked for an earlier
  // one (the retransmission was spurious: a late ack, a slow peer). Taking the retransmission's
  // time would declare lost every packet sent an RTO before it: a burst of spurious resends.
  // Before the first RTT sample there is nothing to tell them apart: the ack is taken as the
  // retransmission's.
  return e.tx_count == 1 || now - e.sent_ns >= hot_->min_rtt || hot_->min_rtt == UINT64_MAX;
}

inline void RdmPeer::acked_through(uint32_t ack, uint64_t now, Delivered* delivered) noexcept {
  // Karn: sample the newest packet acked that was sent exactly once (and not SACKed before: its
  // ack waited for a hole below it, which is not its round trip).
  uint64_t sample = UINT64_MAX;
  while (snd_una_ != ack) {
    TxEntry& e = hot_->tx[snd_una_ % kRing];
    if (e.tx_count == 1 && !e.sacked) sample = now - e.sent_ns;
    if (delivered && dated(e, now)) delivered->delivered(e.sent_ns);
    ++snd_una_;
    sh_->host->acked(addr_, e.cookie);
  }
  if (sample != UINT64_MAX) rtt_sample(sample);
  timeouts_ = 0;
  // The backoff ends with a sample, or with progress while packets are still in flight (a
  // stream under loss gives few samples). Acked up to the last packet without a sample (each
  // was resent or SACKed), it stays for the next packets until one gives a sample (Karn): a
  // peer whose acks come later than the RTO, every time, is not resent every packet.
  if (sample != UINT64_MAX || snd_una_ != snd_nxt_) backoff_ = 0;
  stall_since_ = now;
  if (rnr_paused_) {
    rnr_paused_ = false;
    rnr_deadline_ = UINT64_MAX;
    rnr_backoff_ = sh_->cfg.rnr_backoff_min_ns;
  }
  rto_deadline_ = snd_una_ == snd_nxt_ ? UINT64_MAX : now + rto_ns();
}

void RdmPeer::process_ack(const RdmHeader& h, uint64_t now) noexcept {
  // At least 1: a packet in flight keeps the RTO (and so liveness) running; a receiver without
  // buffers says so with RNR, not with a zero window that would stall us with nothing to time.
  peer_window_ = std::clamp<uint16_t>(h.window, 1, static_cast<uint16_t>(kRing));
  if (!hot_ || snd_una_ == snd_nxt_) return;
  if (h.ack == snd_nxt_ && !(h.flags & wire::kRdmRnr)) {
    // Everything in flight arrived (the common case: a reply acknowledges the request). What
    // follows below would find nothing more to do: no SACK bit to read (no seq above the ack was
    // sent), nothing left that could be lost.
    acked_through(h.ack, now, nullptr);
    return;
  }
  Delivered delivered(sh_->cfg.dupthresh);
  const auto dated = [&](const TxEntry& e) { return this->dated(e, now); };
  const auto was_delivered = [&](const TxEntry& e) {
    if (dated(e)) delivered.delivered(e.sent_ns);
  };
  if (seq_lt(snd_una_, h.ack)) acked_through(h.ack, now, &delivered);  // cumulative progress
  // The packet at the cumulative ack has not arrived (or was refused), whatever an older SACK said:
  // a receiver that refuses a packet it held drops it (it reneges on its SACK).
  if (h.ack == snd_una_ && snd_una_ != snd_nxt_) hot_->tx[snd_una_ % kRing].sacked = false;
  if (h.flags & wire::kRdmRnr) {
    // The peer has the packets below h.ack and refused h.ack itself: resend it after a back-off.
    ++sh_->stats.rnr_received;
    if (h.ack == snd_una_ && snd_una_ != snd_nxt_ && !rnr_paused_) {
      rnr_paused_ = true;
      rnr_deadline_ = now + rnr_backoff_;
      rnr_backoff_ = std::min(rnr_backoff_ * 2, sh_->cfg.rnr_backoff_max_ns);
      rto_deadline_ = UINT64_MAX;  // waiting on the receiver is not a loss
    }
    return;
  }
  // SACK: mark what arrived beyond the cumulative ack (a receiver may drop what it SACKed when it
  // refuses it later, so a bit that is gone clears the mark again).
  for (uint32_t s = snd_una_; seq_lt(s, snd_nxt_); ++s) {
    uint32_t bit = s - h.ack - 1;  // seqs above h.ack only
    if (!seq_lt(h.ack, s) || bit >= 64) continue;
    TxEntry& e = hot_->tx[s % kRing];
    e.sacked = (h.sack >> bit) & 1;
    if (e.sacked) was_delivered(e);
  }
  // Nothing delivered (a duplicate ack): nothing can have been overtaken.
  if (!delivered.any() || rnr_paused_ || snd_una_ == snd_nxt_) return;
  // Loss detection, in the spirit of RACK (RFC 8985): a packet neither acked nor SACKed is lost
  // when dupthresh packets above it, transmitted after its last transmission, were SACKed, or when
  // a packet sent an RTO (the estimate) or more after it was delivered: the reordering window is
  // that wide because the port's reordering holds a frame back until the next one, however late
  // that comes, and an application may space its sends by more than any fraction of the RTT. A
  // retransmission is a new transmission, so one that is lost again is found the same way; and
  // after an RTO resent only the oldest packet, its ack finds what is still missing of those sent
  // long before it, without another RTO. Packets above the highest SACKed only go by time: a
  // retransmission that overtook them says nothing of their fate within the reordering window.
  const uint64_t reo_wnd = rto_;
  for (uint32_t s = snd_nxt_ - 1;; --s) {
    TxEntry& e = hot_->tx[s % kRing];
    if (e.sacked) {
      if (dated(e)) delivered.sacked_above(e.xmit);
    } else if (delivered.overtaken(e.xmit, e.sent_ns, reo_wnd)) {
      ++sh_->stats.tx_fast_retransmits;
      transmit_entry(e, now);
    }
    if (s == snd_una_) break;
  }
}

void RdmPeer::on_frame(const RdmHeader& h, std::span<const uint8_t> data, uint64_t now) noexcept {
  if (unreachable_) return;
  // An ack for another instance of us (a closed endpoint that had our address) is stale.
  if (h.kind == RdmKind::kAck && h.msg_id != 0 && h.msg_id != sh_->epoch) {
    ++sh_->stats.rx_stale_epoch;
    return;
  }
  if (peer_epoch_ == 0) {
    // The first frame from this peer. A sequenced packet past the start of its stream belongs to
    // a stream it began with an earlier instance of us (a restarted endpoint at our address that
    // the peer has not noticed yet): taking it would splice that stream's tail into a new one
    // (its packets held, delivered once the new stream fills the hole, and SACKed so that the
    // new stream's packets at those seqs would be dropped as duplicates). Dropped; the peer fails
    // that stream (our first packet, or its timeout) and starts a new one at initial_seq.
    if (h.kind != RdmKind::kAck && h.seq != sh_->cfg.initial_seq) {
      ++sh_->stats.rx_stale_epoch;
      return;
    }
    peer_epoch_ = h.epoch;
  } else if (h.epoch != peer_epoch_) {
    ++sh_->stats.rx_stale_epoch;
    return;
  }
  // An ack of something we never sent is not from this conversation: drop the whole frame.
  if (seq_lt(snd_nxt_, h.ack)) {
    ++sh_->stats.rx_bad_ack;
    return;
  }
  if (h.kind == RdmKind::kAck) {
    heard(h, now);
    if (h.flags & wire::kRdmAckReq) send_ack(now, 0);
    return;
  }
  take_next(h, now);          // a sequenced packet: counted whatever becomes of it
  if (!ensure_hot()) return;  // as if lost
  const uint32_t s = h.seq;
  if (seq_lt(s, rcv_nxt_)) {
    ++sh_->stats.rx_duplicates;
    send_ack(now, 0);  // our ack was probably lost
    return;
  }
  if (s - rcv_nxt_ >= sh_->cfg.window) {
    ++sh_->stats.rx_beyond_window;
    send_ack(now, 0);
    return;
  }
  if (s == rcv_nxt_) {
    deliver_in_order(h, data, now);
    return;
  }
  // Out of order, inside the window: hold a copy until the hole fills.
  int32_t& slot = hot_->rx_slot[s % kRing];
  if (slot >= 0) {
    ++sh_->stats.rx_duplicates;
  } else if (data.size() > sh_->slots->slot_bytes() || (slot = sh_->slots->get()) < 0) {
    slot = -1;
    ++sh_->stats.rx_no_slot;
  } else {
    ++sh_->stats.rx_out_of_order;
    held_ |= uint64_t{1} << (s - rcv_nxt_ - 1);
    sh_->slots->header(slot) = h;
    sh_->slots->len(slot) = static_cast<uint32_t>(data.size());
    if (!data.empty()) std::memcpy(sh_->slots->data(slot), data.data(), data.size());
  }
  send_ack(now, 0);  // at once: the sender needs the SACK
}

inline void RdmPeer::heard(const RdmHeader& h, uint64_t now) noexcept {
  last_heard_ = now;
  probes_ = 0;
  probe_deadline_ = UINT64_MAX;
  process_ack(h, now);
}

void RdmPeer::take_next(const RdmHeader& h, uint64_t now) noexcept {
  heard(h, now);
  ++sh_->stats.rx_packets;
}

void RdmPeer::deliver_in_order(const RdmHeader& h, std::span<const uint8_t> data,
                               uint64_t now) noexcept {
  if (!sh_->host->deliver(addr_, h, data)) {
    ++sh_->stats.rx_refused;
    send_ack(now, wire::kRdmRnr);
    return;
  }
  delivered_next(h, now);
}

void RdmPeer::delivered_next(const RdmHeader& h, uint64_t now) noexcept {
  ++rcv_nxt_;
  held_ >>= 1;  // bit 0 was rcv_nxt + 1: now the next expected, held or not
  ++unacked_rx_;
  bool ack_now = h.flags & wire::kRdmAckReq;
  bool filled_hole = false;
  for (;;) {
    int32_t& slot = hot_->rx_slot[rcv_nxt_ % kRing];
    if (slot < 0) break;
    filled_hole = true;
    const int32_t i = slot;
    slot = -1;
    const bool ok =
        sh_->host->deliver(addr_, sh_->slots->header(i), {sh_->slots->data(i), sh_->slots->len(i)});
    ack_now |= sh_->slots->header(i).flags & wire::kRdmAckReq;
    sh_->slots->put(i);
    if (!ok) {
      // Dropped: the sender's SACK mark goes with the next ack and it resends after the RNR wait.
      ++sh_->stats.rx_refused;
      send_ack(now, wire::kRdmRnr);
      return;
    }
    ++rcv_nxt_;
    held_ >>= 1;
    ++unacked_rx_;
  }
  if (ack_now || filled_hole || unacked_rx_ >= sh_->cfg.ack_every) {
    send_ack(now, 0);
  } else if (ack_deadline_ == UINT64_MAX) {
    ack_deadline_ = now + sh_->cfg.ack_delay_ns;
  }
}

void RdmPeer::declare_unreachable() noexcept {
  unreachable_ = true;
  ++sh_->stats.unreachable;
  snd_una_ = snd_nxt_;
  rto_deadline_ = ack_deadline_ = rnr_deadline_ = probe_deadline_ = UINT64_MAX;
  if (hot_) {
    for (int32_t& s : hot_->rx_slot) {
      if (s >= 0) sh_->slots->put(s);
      s = -1;
    }
  }
  held_ = 0;
  sh_->host->unreachable(addr_);
}

void RdmPeer::poll(uint64_t now) noexcept {
  if (unreachable_) return;
  if (now >= ack_deadline_) send_ack(now, 0);
  if (now >= rnr_deadline_) {
    rnr_deadline_ = UINT64_MAX;
    rnr_paused_ = false;
    if (snd_una_ != snd_nxt_) {
      TxEntry& e = hot_->tx[snd_una_ % kRing];
      ++sh_->stats.tx_retransmits;
      transmit_entry(e, now);
      rto_deadline_ = now + rto_ns();
    }
  }
  if (now >= rto_deadline_) {
    if (snd_una_ == snd_nxt_) {
      rto_deadline_ = UINT64_MAX;
      return;
    }
    ++sh_->stats.rto_expiries;
    if (++timeouts_ > sh_->cfg.max_retries && now - stall_since_ >= sh_->cfg.peer_timeout_ns) {
      declare_unreachable();
      return;
    }
    timeouts_ = std::min(timeouts_, sh_->cfg.max_retries + 1);
    backoff_ = static_cast<uint16_t>(std::min(backoff_ + 1, 20));  // the RTO doubles (rto_ns)
    // Only the oldest packet goes again (RFC 6298 5.4). The peer may only have been slow (a
    // descheduled process under manual progress): then the others arrive and nothing is sent
    // twice. If they were lost, the ack of this one makes loss detection resend them.
    TxEntry& e = hot_->tx[snd_una_ % kRing];
    ++sh_->stats.tx_retransmits;
    transmit_entry(e, now);
    rto_deadline_ = now + rto_ns();
  }
}

void RdmPeer::keepalive(bool waiting, uint64_t now) noexcept {
  if (unreachable_) return;
  if (!waiting || snd_una_ != snd_nxt_) {  // nothing to wait on, or the RTO watches the peer
    probes_ = 0;
    probe_deadline_ = UINT64_MAX;
    return;
  }
  if (probe_deadline_ == UINT64_MAX) probe_deadline_ = last_heard_ + sh_->cfg.keepalive_ns;
  if (now < probe_deadline_) return;
  if (probes_ >= sh_->cfg.max_retries && now - last_heard_ >= sh_->cfg.peer_timeout_ns) {
    declare_unreachable();
    return;
  }
  probes_ = std::min(probes_ + 1, sh_->cfg.max_retries);
  ++sh_->stats.probes;
  send_ack(now, wire::kRdmAckReq);
  uint64_t wait = rto_;
  for (uint32_t i = 0; i < probes_ && wait < sh_->cfg.rto_max_ns; ++i) wait *= 2;
  probe_deadline_ = now + std::min(wait, sh_->cfg.rto_max_ns);
}

}  // namespace dpfab::proto::rdm
