// SPDX-License-Identifier: BSD-3-Clause
//
// The FI_EP_RDM reliability layer: one RdmPeer per remote endpoint, turning an unreliable,
// reordering, duplicating frame link into a reliable, in-order stream of RDM packets (wire/rdm.h).
// It knows nothing of mbufs, ports or completion queues: packets come in as (header, byte span)
// and go out through PeerHost::transmit, and time is a number the caller passes in, so that the
// whole protocol runs in a unit test over a simulated lossy link.
//
// Sending. Each sequenced packet gets the next seq (32 bits, wrapping) and stays in the send
// window until it is cumulatively acknowledged; the window holds at most min(config window, the
// peer's advertised window) <= 64 packets. A window entry keeps the header and a pointer to the
// data (the caller keeps the bytes valid until PeerHost::acked), so a retransmission re-reads the
// application's buffer: nothing is copied on the send side.
//
// Acknowledgement. Every packet carries the cumulative ack (next seq expected), a 64-bit SACK
// bitmap of what arrived beyond it, and the receive window. A receiver acks at once when a packet
// arrives out of order or twice (the sender needs the SACK), after ack_every in-order packets, and
// otherwise after ack_delay (a delayed ack, unless a data packet carried it first).
//
// Immediate acks. A data packet with kRdmAckReq (the last packet of a message whose sender waits
// for the ack to complete it) is acked at once: the receiving application may not progress its
// endpoint again soon (manual progress), and a delayed ack would then never leave.
//
// Retransmission. The RTO follows RFC 6298 (Jacobson's SRTT/RTTVAR, RTO = SRTT + 4 RTTVAR,
// clamped to [rto_min, rto_max]), sampled only from packets sent once (Karn). When the RTO
// expires without progress, every unacknowledged packet not SACKed is sent again and the RTO
// doubles (exponential backoff, capped at rto_max). The backoff ends with the next RTT sample, or
// with progress while packets are still in flight (under loss in a stream most packets are
// retransmitted or SACKed and give no sample: kept, it would grow to rto_max and stall the
// stream). An ack that empties the window without a sample keeps it (Karn): a peer that acks
// later than the RTO every time (an application that takes its message, then works or sleeps
// for longer than the RTO under manual progress, its delayed ack held meanwhile) would otherwise
// get every packet twice, and a sleeping sender would wake for each; kept, the RTO grows past the
// peer's delay, the next ack gives a sample, and the estimate learns it. A packet with dupthresh
// SACKed packets above it is retransmitted early once (fast retransmit). After max_retries
// consecutive expiries without an ack, and peer_timeout_ns without progress, the peer is declared
// unreachable: PeerHost::unreachable is called once, the window is emptied and every later send
// fails with -FI_EHOSTUNREACH (no hang, no retry forever).
//
// Receiving. Duplicates (seq below the cumulative ack or already held) are dropped and counted;
// packets beyond the window are dropped; out-of-order packets within it are copied into a slot of
// the endpoint's shared RxSlotPool (no pool slot: dropped, the sender retransmits) and delivered
// when the hole fills. Delivery is strictly in seq order (FI_ORDER_SAS and more).
//
// Flow control. PeerHost::deliver may refuse a packet (no buffer for an unexpected message): the
// packet counts as not received, and an ack with kRdmRnr tells the sender to back off; the sender
// pauses new packets and resends the refused one after rnr_backoff, doubling (capped) while it is
// refused. RNR waits never count toward max_retries: a slow receiver is not a dead one.
//
// Liveness. Retransmissions detect a dead peer only while we have packets in flight. A host that
// waits on a peer with nothing in flight (a sender waiting for a CTS, a receiver in the middle of a
// message) calls keepalive(): the silent peer is probed with acks that request an ack
// (kRdmAckReq), and declared unreachable after max_retries unanswered probes.
//
// Epochs. Each endpoint instance has a random non-zero epoch. A peer's epoch is learnt from its
// first frame; frames with another epoch are dropped and counted. A first frame that is a
// sequenced packet past the start of a stream is dropped too (counted as stale) and teaches
// nothing: it is the tail of a stream the peer began with an earlier instance of us (we were
// restarted and it has not noticed yet), and held in the window it would be delivered into the
// peer's next stream once that stream's first packets filled the hole below it. A pure ack names
// the epoch of the stream it acknowledges (ours), so an ack left over from a closed endpoint that
// had our address is dropped rather than taken as the peer's. A restarted peer (a new epoch
// starting its stream: is_restart) is the host's to handle: RdmCore fails what involved the old
// instance and starts a fresh RdmPeer.
//
// Threading: an RdmPeer and its RdmShared are owned by the thread that owns the endpoint's
// protocol state at the moment (a progress lcore, or an application thread holding the
// endpoint's progress lock); nothing here is atomic. Callbacks into PeerHost are made on that
// thread; they must not call back into the same peer (the host queues work and sends it after).
#pragma once

#include <rdma/fabric.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "proto/timer_heap.h"
#include "wire/rdm.h"

namespace dpfab::proto::rdm {

/// Reliability parameters (per endpoint). Times in nanoseconds of the caller's clock.
inline constexpr uint32_t kMaxDupthresh = 8;

struct ReliabilityConfig {
  uint16_t window = 64;  ///< packets in flight per peer and receive window; 1..64 (SACK bits)
  uint64_t rto_init_ns = 1'000'000;
  uint64_t rto_min_ns = 200'000;
  uint64_t rto_max_ns = 200'000'000;
  uint32_t max_retries = 10;  ///< consecutive RTO expiries without progress -> unreachable...
  /// ...once the peer has also been silent (no progress on our packets, no answer to probes) for
  /// this long: a peer whose application does not progress its endpoint for a while (manual
  /// progress, a long computation) is slow, not dead.
  uint64_t peer_timeout_ns = 10'000'000'000;
  uint64_t ack_delay_ns = 20'000;
  /// The RTO's lower bound for a peer on a lossless link (set_lossless(): a same-host peer, whose
  /// shared-memory rings drop nothing once a packet is in them). There a timeout only means that
  /// the peer has not run yet, which on a host with more busy processes than cores takes a few
  /// scheduler slices (4 ms each at HZ=250): a retransmission then is a duplicate. It still
  /// recovers what the receiving process dropped itself (a packet for an endpoint not yet open).
  uint64_t lossless_rto_min_ns = 20'000'000;
  uint32_t ack_every = 4;  ///< in-order packets that trigger an immediate ack
  /// Packets transmitted after one and delivered before it that declare it lost (1..8).
  uint32_t dupthresh = 3;
  uint64_t rnr_backoff_min_ns = 50'000;
  uint64_t rnr_backoff_max_ns = 20'000'000;
  /// Silence of a peer we wait on (keepalive()) before the first probe.
  uint64_t keepalive_ns = 100'000'000;
  /// First sequence number of both directions; the same on every endpoint (there is no
  /// handshake). Tests set it near 2^32 to cross the wrap.
  uint32_t initial_seq = 0;
};

/// Returns 0 or -FI_EINVAL with a config the layer cannot run with.
int validate(const ReliabilityConfig& c) noexcept;

/// What a peer needs of its endpoint. Called on the protocol owner thread only.
class PeerHost {
 public:
  virtual ~PeerHost() = default;
  /// Sends one RDM frame to `peer`. @return false when the port did not take it (TX queue full,
  /// no mbuf): a new packet is then not sent at all (send() returns -FI_EAGAIN and the host
  /// retries it soon), a retransmission waits for the next timer, an ack for the next packet.
  virtual bool transmit(fi_addr_t peer, const wire::RdmHeader& h,
                        std::span<const uint8_t> data) noexcept = 0;
  /// The next in-order sequenced packet from `peer`. @return false to refuse it for lack of a
  /// buffer (the peer backs off and resends it), true when it was consumed.
  virtual bool deliver(fi_addr_t peer, const wire::RdmHeader& h,
                       std::span<const uint8_t> data) noexcept = 0;
  /// The packet sent with cookie `cookie` is acknowledged (cumulatively): its data may go.
  virtual void acked(fi_addr_t peer, uint32_t cookie) noexcept = 0;
  /// `peer` stopped answering. Packets still in the window are dropped without acked(); the host
  /// fails every operation involving the peer.
  virtual void unreachable(fi_addr_t peer) noexcept = 0;
};

/// Copies of out-of-order packets, shared by the peers of one endpoint: `count` slots of a header
/// and up to `slot_bytes` of data, allocated once. Owner thread only.
class RxSlotPool {
 public:
  RxSlotPool(size_t count, size_t slot_bytes);
  /// A free slot index, or -1.
  int32_t get() noexcept;
  void put(int32_t i) noexcept;
  wire::RdmHeader& header(int32_t i) noexcept { return headers_[i]; }
  uint8_t* data(int32_t i) noexcept { return bytes_.get() + static_cast<size_t>(i) * slot_bytes_; }
  uint32_t& len(int32_t i) noexcept { return lens_[i]; }
  size_t slot_bytes() const noexcept { return slot_bytes_; }
  size_t available() const noexcept { return free_.size(); }

 private:
  size_t slot_bytes_;
  std::unique_ptr<uint8_t[]> bytes_;
  std::vector<wire::RdmHeader> headers_;
  std::vector<uint32_t> lens_;
  std::vector<int32_t> free_;  // reserved to count: put never allocates
};

/// Per-endpoint counters of the reliability layer (owner thread writes; read for tests/stats).
struct ReliabilityStats {
  uint64_t tx_packets = 0, tx_retransmits = 0, tx_fast_retransmits = 0, tx_acks = 0;
  uint64_t tx_refused = 0;  ///< frames the port did not take
  uint64_t rx_packets = 0, rx_duplicates = 0, rx_out_of_order = 0, rx_beyond_window = 0;
  uint64_t rx_no_slot = 0, rx_refused = 0, rx_stale_epoch = 0, rx_bad_ack = 0;
  uint64_t rto_expiries = 0, rnr_received = 0, rtt_samples = 0, unreachable = 0, probes = 0;
  uint64_t rtt_sample_max_ns = 0;    ///< the largest RTT sample taken (any peer)
  uint64_t rto_estimate_max_ns = 0;  ///< the largest RTO computed from samples (before backoff)
};

class RdmPeer;
// Where a peer keeps its place in RdmShared::timers (defined below RdmPeer).
uint32_t& timer_index(RdmPeer& p) noexcept;

/// What the peers of one endpoint share.
struct RdmShared {
  PeerHost* host = nullptr;
  ReliabilityConfig cfg;
  uint32_t epoch = 1;  ///< ours, never 0
  RxSlotPool* slots = nullptr;
  ReliabilityStats stats;
  // The peers' timers in order, once many peers are active, so that RdmCore::next_deadline (read
  // after every call into the core) costs the same with one peer in flight as with hundreds.
  // RdmCore turns it on when more than CoreConfig::timer_heap_from peers are active, and off
  // again when progress() leaves a quarter of that (a visit of so few costs less than the upkeep).
  // While on, the active peers are tracked: RdmCore lists a peer in `moved` after every call into
  // it that may move a timer (RdmCore::timers_moved: one flag read while the heap is off), and
  // settle() puts those peers' timers in place, once per read. Room for every peer in both is
  // reserved when it is first turned on, and as peers are added after (RdmCore::add_peer).
  bool heap_on = false;
  TimerHeap<RdmPeer, timer_index> timers;
  std::vector<RdmPeer*> moved;
  /// Peers both have room for (reserved: list() and settle() never allocate).
  size_t timer_room() const noexcept { return std::min(timers.capacity(), moved.capacity()); }
  void reserve_timers(size_t n) {  // may throw std::bad_alloc
    timers.reserve(n);
    moved.reserve(n);
  }
  void list(RdmPeer* p) noexcept;  // p's timers may have moved (heap on)
  void settle() noexcept;
  void track(RdmPeer* p) noexcept;    // p became active (heap on): its timer into the heap
  void untrack(RdmPeer* p) noexcept;  // p left the active peers (heap on): no timer of its own
  /// A tracked peer whose timer is due at `now`, out of the heap until it is listed (the caller
  /// runs its timers, then lists it), or null when none is due. Call settle() first.
  RdmPeer* take_due(uint64_t now) noexcept { return timers.take_due(now); }
  void turn_off() noexcept;  // the listed peers untracked, the heap emptied, off
};

/// One remote endpoint's reliability state. Cold (never sent to or heard from) it is this object
/// only (<= 256 bytes); the window state is allocated on first use.
class RdmPeer {
 public:
  RdmPeer(RdmShared* shared, fi_addr_t addr) noexcept;
  ~RdmPeer();
  RdmPeer(const RdmPeer&) = delete;
  RdmPeer& operator=(const RdmPeer&) = delete;

  fi_addr_t addr() const noexcept { return addr_; }
  /// The peer's epoch as learnt (0: not heard from yet).
  uint32_t peer_epoch() const noexcept { return peer_epoch_; }
  /// Whether `h` is the first packet of a new instance of the peer: another epoch than the one
  /// learnt, a sequenced packet, at the start of its stream.
  bool is_restart(const wire::RdmHeader& h) const noexcept {
    return peer_epoch_ != 0 && h.epoch != peer_epoch_ && h.kind != wire::RdmKind::kAck &&
           h.seq == sh_->cfg.initial_seq;
  }
  bool unreachable() const noexcept { return unreachable_; }
  /// Declares the peer unreachable now (the host knows it is gone: a same-host peer whose process
  /// ended). As after retransmissions unanswered: PeerHost::unreachable, once.
  void lose() noexcept {
    if (!unreachable_) declare_unreachable();
  }
  /// On a peer that has sent nothing yet: our stream to it continues at `seq` instead of
  /// initial_seq. A restarted peer whose first packet acknowledges packets of ours (it took the
  /// start of a stream we had begun with its old instance) expects `seq` next; a stream from
  /// initial_seq would be taken as duplicates and acked, never delivered.
  void start_stream_at(uint32_t seq) noexcept {
    if (snd_una_ == snd_nxt_ && !hot_) snd_una_ = snd_nxt_ = seq;
  }
  /// Whether send() would take a packet now (window open, no RNR pause, reachable).
  bool can_send() const noexcept {
    return !unreachable_ && !rnr_paused_ && snd_nxt_ - snd_una_ < send_window();
  }

  /// Sends a sequenced packet: `proto` gives kind, flags, msg_id and the body; seq, epoch and the
  /// ack fields are filled in. `data` must stay valid until acked(cookie) or unreachable().
  /// @return 0; -FI_EAGAIN when the window is full or the peer asked us to back off;
  ///         -FI_EHOSTUNREACH after the peer was declared unreachable; -FI_ENOMEM when the window
  ///         state cannot be allocated; -FI_EAGAIN too when the port did not take the frame (then
  ///         nothing was sent and no seq was used).
  [[nodiscard]] int send(const wire::RdmHeader& proto, std::span<const uint8_t> data,
                         uint32_t cookie, uint64_t now) noexcept;

  /// A decoded RDM frame from this peer (decode_rdm said kOk).
  void on_frame(const wire::RdmHeader& h, std::span<const uint8_t> data, uint64_t now) noexcept;

  /// Whether on_frame(h, ...) would take `h` as the next packet of the stream and deliver it at
  /// once (PeerHost::deliver): a sequenced packet of the peer's known epoch, at rcv_nxt, whose
  /// ack fields are sound, on a reachable peer with its window state in place.
  bool next_in_order(const wire::RdmHeader& h) const noexcept {
    return !unreachable_ && peer_epoch_ != 0 && h.epoch == peer_epoch_ &&
           h.kind != wire::RdmKind::kAck && hot_ && h.seq == rcv_nxt_ &&
           !wire::seq_lt(snd_nxt_, h.ack);
  }
  /// on_frame for a packet next_in_order() accepted, when the host consumes it itself instead of
  /// through PeerHost::deliver (RdmCore's receive fast path): take_next() before its delivery
  /// (its ack fields, as on_frame processes them first), delivered_next() after (the stream
  /// moves on, held packets that follow are delivered, the ack it is owed is sent or timed). The
  /// host must not refuse it.
  void take_next(const wire::RdmHeader& h, uint64_t now) noexcept;
  void delivered_next(const wire::RdmHeader& h, uint64_t now) noexcept;

  /// Runs the timers (delayed ack, RNR resend, retransmission). Call at least by next_deadline().
  void poll(uint64_t now) noexcept;
  /// Sends the ack that a delayed-ack timer holds back, now (the endpoint is closing: the peer
  /// would otherwise retransmit to nobody and fail its send).
  void flush_ack(uint64_t now) noexcept {
    if (!unreachable_ && ack_deadline_ != UINT64_MAX) send_ack(now, 0);
  }
  /// The earliest time poll() has work, or UINT64_MAX.
  uint64_t next_deadline() const noexcept {
    return std::min({ack_deadline_, rnr_deadline_, rto_deadline_, probe_deadline_});
  }

  /// Liveness when nothing of ours is in flight (then the RTO covers it). `waiting`: the host
  /// expects something from the peer (a CTS, the rest of a message). After keepalive_ns of
  /// silence the peer is probed with an ack request (kRdmAckReq), again after the RTO doubling
  /// as for retransmissions; max_retries probes unanswered declare it unreachable. A peer that
  /// answers is alive however long it takes to post a receive. Call from the host's progress.
  void keepalive(bool waiting, uint64_t now) noexcept;

  /// Packets sent and not yet cumulatively acked.
  uint32_t in_flight() const noexcept { return snd_nxt_ - snd_una_; }
  /// The retransmission timeout now: the estimate, doubled per expiry while the backoff lasts.
  uint64_t rto_ns() const noexcept {
    // Exponential backoff over the estimate, one doubling per expiry (backoff_: when it ends,
    // acked_through and the file comment).
    const uint64_t rto = std::min(rto_ << backoff_, sh_->cfg.rto_max_ns);
    return lossless_ ? std::max(rto, lossless_min()) : rto;
  }
  uint64_t lossless_min() const noexcept {
    return std::min(sh_->cfg.lossless_rto_min_ns, sh_->cfg.rto_max_ns);
  }
  /// The link to this peer loses nothing it took (same-host rings): the RTO is at least
  /// ReliabilityConfig::lossless_rto_min_ns from the next packet on. Loss detection, RNR and
  /// liveness are unchanged.
  void set_lossless() noexcept { lossless_ = true; }
  bool lossless() const noexcept { return lossless_; }
  uint64_t srtt_ns() const noexcept { return srtt_; }

 private:
  struct TxEntry {
    wire::RdmHeader h;
    const uint8_t* data;
    uint32_t len;
    uint32_t cookie;
    uint64_t sent_ns;
    uint32_t xmit;  // order of its last transmission among this peer's (Hot::xmits)
    uint16_t tx_count;
    bool sacked;
  };
  struct Hot {
    TxEntry tx[64];
    int32_t rx_slot[64];            // out-of-order packets held, indexed seq % 64; -1 empty
    uint32_t xmits = 0;             // transmissions so far (wraps; compared with seq_lt)
    uint64_t min_rtt = UINT64_MAX;  // the smallest RTT sample (loss detection, process_ack)
  };

  class Delivered;
  friend struct RdmShared;  // list(), settle(), track(), untrack(), turn_off()
  friend uint32_t& timer_index(RdmPeer& p) noexcept;
  // timer_state_: untracked (the heap is off, or the peer is not active), tracked (its entry in
  // the heap is its next_deadline), listed in RdmShared::moved (the entry is settled at the next
  // read), listed and no longer active since.
  static constexpr uint8_t kUntracked = 0, kTracked = 1, kListed = 2, kListedIdle = 3;

  bool ensure_hot() noexcept;
  void fill_ack(wire::RdmHeader& h) const noexcept;
  // Whether an ack of `e` now dates its last transmission (see process_ack).
  bool dated(const TxEntry& e, uint64_t now) const noexcept;
  // Cumulative progress to `ack` (in flight, beyond snd_una_): acked() for each packet, an RTT
  // sample (Karn), timers reset; each packet's delivery noted in `delivered` (may be null).
  void acked_through(uint32_t ack, uint64_t now, Delivered* delivered) noexcept;
  bool transmit_entry(TxEntry& e, uint64_t now) noexcept;
  void send_ack(uint64_t now, uint16_t flags) noexcept;
  void process_ack(const wire::RdmHeader& h, uint64_t now) noexcept;
  void rtt_sample(uint64_t r) noexcept;
  void deliver_in_order(const wire::RdmHeader& h, std::span<const uint8_t> data,
                        uint64_t now) noexcept;
  // A valid frame from the peer: it is alive; its ack fields are processed.
  void heard(const wire::RdmHeader& h, uint64_t now) noexcept;
  void declare_unreachable() noexcept;
  uint32_t send_window() const noexcept {
    return std::min<uint32_t>(sh_->cfg.window, peer_window_);
  }

  RdmShared* sh_;
  fi_addr_t addr_;
  std::unique_ptr<Hot> hot_;
  uint32_t peer_epoch_ = 0;  // 0 until the peer's first frame
  uint32_t snd_una_ = 0;     // oldest unacknowledged seq
  uint32_t snd_nxt_ = 0;     // next seq to send
  uint32_t rcv_nxt_ = 0;     // next seq expected (our cumulative ack)
  uint64_t held_ = 0;        // our SACK bits: bit i = seq rcv_nxt + 1 + i is held in a slot
  uint16_t peer_window_;     // the peer's last advertised window
  bool unreachable_ = false;
  bool rnr_paused_ = false;
  uint32_t timeouts_ = 0;    // consecutive RTO expiries without progress
  uint16_t backoff_ = 0;     // doublings of the RTO, <= 20 (poll; acked_through ends them)
  bool lossless_ = false;    // set_lossless()
  uint8_t timer_state_ = 0;  // RdmShared::timers: kUntracked, kTracked, kListed, kListedIdle
  uint32_t unacked_rx_ = 0;  // in-order packets received since our last ack
  uint64_t srtt_ = 0, rttvar_ = 0, rto_;  // rto_: the estimate, before backoff
  uint64_t rto_deadline_ = UINT64_MAX;
  uint64_t ack_deadline_ = UINT64_MAX;
  uint64_t rnr_deadline_ = UINT64_MAX;
  uint64_t rnr_backoff_;
  uint64_t last_heard_ = 0;   // last valid frame from the peer
  uint64_t stall_since_ = 0;  // since when our oldest unacked packet waits (progress resets it)
  uint64_t probe_deadline_ = UINT64_MAX;
  uint32_t probes_ = 0;             // unanswered keepalive probes
  uint32_t timer_at_ = kTimerNone;  // our place in RdmShared::timers
};

inline uint32_t& timer_index(RdmPeer& p) noexcept { return p.timer_at_; }

inline void RdmShared::list(RdmPeer* p) noexcept {
  if (p->timer_state_ != RdmPeer::kTracked) return;  // listed already, or not active
  p->timer_state_ = RdmPeer::kListed;
  moved.push_back(p);  // reserved: no allocation
}

inline void RdmShared::settle() noexcept {
  for (RdmPeer* p : moved) {
    timers.set(p, p->next_deadline());
    p->timer_state_ =
        p->timer_state_ == RdmPeer::kListedIdle ? RdmPeer::kUntracked : RdmPeer::kTracked;
  }
  moved.clear();
}

inline void RdmShared::track(RdmPeer* p) noexcept {
  if (p->timer_state_ == RdmPeer::kUntracked) {
    p->timer_state_ = RdmPeer::kTracked;
    timers.set(p, p->next_deadline());
  } else if (p->timer_state_ == RdmPeer::kListedIdle) {
    p->timer_state_ = RdmPeer::kListed;
  }
}

inline void RdmShared::untrack(RdmPeer* p) noexcept {
  if (p->timer_state_ == RdmPeer::kTracked) {
    p->timer_state_ = RdmPeer::kUntracked;
    timers.set(p, UINT64_MAX);
  } else if (p->timer_state_ == RdmPeer::kListed) {
    p->timer_state_ = RdmPeer::kListedIdle;
  }
}

inline void RdmShared::turn_off() noexcept {
  for (RdmPeer* p : moved) p->timer_state_ = RdmPeer::kUntracked;
  moved.clear();
  timers.clear();
  heap_on = false;
}

}  // namespace dpfab::proto::rdm
