// SPDX-License-Identifier: BSD-3-Clause
//
// RdmEndpoint: an FI_EP_RDM endpoint on a port: the protocol core (rdm_core.h) bound to a UDP
// port of a Link, its frames built into and read from mbufs, its completions written to CQs and
// counters.
//
// Peers. The core knows peers by a small index of this endpoint's own (a "peer id"), not by the
// AV's fi_addr: a message may come from an address the application never inserted (fabtests and
// fi_pingpong servers learn their client from its first message), an address may be inserted
// after it was heard from, and a removed AV entry may come back under another fi_addr. A peer is
// its (IPv4, UDP port, endpoint id); it gets an id the first time we send to it or hear from it,
// and keeps it (and its reliable stream) for the endpoint's life. Completions carry the sender's
// fi_addr looked up in the AV when FI_SOURCE is on (FI_ADDR_NOTAVAIL for an address not in it;
// with FI_SOURCE_ERR such a receive completes as an FI_EADDRNOTAVAIL error whose err_data is the
// sender's address, fi_cq(3)).
//
// Threads. The core has one owner at a time: every core call (application sends, receives and
// cancels; frames delivered by the port's RX owner; timers run from the poll step) holds the
// endpoint's lock (a SpinLock: one locked instruction per call, common/spinlock.h). The RX owner
// never holds it while polling, and application threads never poll while holding it, so the two
// orders (rx side -> lock -> TX lock; lock -> TX lock) cannot deadlock. Frames the core sends
// during a call are gathered and given to the port in bursts when the call ends (one doorbell, one
// memif kick per burst); a frame the port does not take stays queued (in order) and goes with the
// next burst: back-pressure, never loss. The wake-ups a call decides on (the kick, CQ and counter
// raises) are made once the lock is released (CoreLock, wait/wake_batch.h).
//
// Timers (retransmission, delayed acks, RNR back-off, keepalive probes) run from the port's poll
// step (backlog_pass): has_backlog() says a deadline is set, drain_backlog() runs the core when it
// is due, and timer_due_ns() gives it to the port engine, which arms its timer fd with it before a
// consumer sleeps (lib/progress/port_wake.h): a sleeping application still retransmits.
#pragma once

#include <rdma/fi_endpoint.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "common/spinlock.h"
#include "event/cntr.h"
#include "event/cq.h"
#include "proto/av.h"
#include "proto/endpoint.h"
#include "proto/rdm_core.h"
#include "wait/wake_batch.h"
#include "wire/address.h"
#include "wire/rdm.h"

namespace dpfab::proto {

struct RdmEndpointStats {
  std::atomic<uint64_t> rx_frames{0}, tx_frames{0};
  std::atomic<uint64_t> rx_not_rdm{0};    ///< DGRAM frames sent to our port: dropped
  std::atomic<uint64_t> rx_rejected{0};   ///< RDM headers decode_rdm refused (see rdm_decode)
  std::atomic<uint64_t> rx_segmented{0};  ///< frames whose payload spanned mbuf segments
  std::atomic<uint64_t> tx_no_mbuf{0};    ///< a frame could not be built: the core retries
  std::atomic<uint64_t> tx_deferred{0};   ///< frames the port did not take at once (sent later)
  /// Frames whose data the port copied from where the core keeps it (no copy into an mbuf
  /// first: Link::tx_extbuf_min), and those of them copied after all because the port did not
  /// take them at once.
  std::atomic<uint64_t> tx_by_reference{0}, tx_by_reference_copied{0};
  std::atomic<uint64_t> peers{0};          ///< peer ids given out
  std::atomic<uint64_t> peers_refused{0};  ///< frames from new peers beyond max_peers: dropped
  std::atomic<uint64_t> cq_overrun{0};     ///< completions that found their CQ full
  /// The same-host path (shm/node.h): packets sent through it and received from it (the port
  /// carried the rest of tx_frames / rx_frames), and peers lost with their process.
  std::atomic<uint64_t> local_tx{0}, local_rx{0}, local_lost{0};
  /// Rendezvous data sent and received by reference (one cross-memory copy by the receiver):
  /// kRdmIndirect segments and whole messages (an RTS with wire::kRdmRef), and copies that failed.
  std::atomic<uint64_t> local_indirect_tx{0}, local_indirect_rx{0}, local_indirect_failed{0};
};

/// The counters an RDM endpoint can be bound to (fi_ep_bind flags FI_SEND, FI_RECV, FI_WRITE,
/// FI_READ, FI_REMOTE_WRITE, FI_REMOTE_READ).
enum class CntrKind : uint8_t { kSend, kRecv, kWrite, kRead, kRemoteWrite, kRemoteRead, kCount };

class RdmEndpoint final : public Receiver, private rdm::CoreSink {
 public:
  struct Config {
    rdm::CoreConfig core;
    bool source = false;      ///< FI_SOURCE: completions carry the sender's fi_addr
    bool source_err = false;  ///< FI_SOURCE_ERR: unknown senders complete as FI_EADDRNOTAVAIL
    bool rm_enabled = true;   ///< FI_RM_ENABLED: refuse work whose completion would not fit
    uint32_t max_peers = 1u << 20;
    wire::AddrFormat format = wire::AddrFormat::kNative;  ///< of FI_SOURCE_ERR's err_data
  };
  /// The endpoint on `link`; the core is made at enable(). -FI_ENODEV without a mempool.
  static Result<std::unique_ptr<RdmEndpoint>> create(Link* link, const Config& cfg);
  ~RdmEndpoint() override;

  // ---- set-up (control path, before enable) ----
  void bind_cq(event::Cq* cq, bool tx, bool rx, bool selective) noexcept;
  void bind_cntr(event::Cntr* c, bool tx, bool rx) noexcept;
  /// A counter of one kind (the RMA ones: writes, reads, remote writes and atomics, remote reads).
  void bind_cntr(event::Cntr* c, CntrKind kind) noexcept;
  void bind_av(const AddressVector* av) noexcept { av_ = av; }
  Config& config() noexcept { return cfg_; }
  /// Makes the core (cfg_ as set by then). 0 or the core's error.
  int enable() noexcept;
  /// Our UDP port and endpoint id (network byte order), once the port is bound.
  void set_address(uint16_t udp_port_be, uint16_t ep_id_be) noexcept;
  bool enabled() const noexcept { return core_ != nullptr; }
  /// FI_EP_MSG (msg_endpoint.h): the endpoint's one peer, without an AV: fi_addr 0 names it in
  /// send() and directed receives, and no other. Once, before its first send.
  void bind_peer(const wire::Address& a) noexcept;
  /// FI_EP_MSG, when its connection ends: RdmCore::abort(err).
  void abort(int err) noexcept;
  /// FI_OPT_MIN_MULTI_RECV, before or after enable.
  void set_min_multi_recv(uint64_t v) noexcept;
  uint64_t min_multi_recv() noexcept;
  /// Before close: sends the acks delayed-ack timers hold back (RdmCore::flush_acks).
  void flush_acks() noexcept;
  /// Before close: runs poll steps until every injected send (RdmCore::injected_unacked: the
  /// application was told it was sent, or was told nothing) is acknowledged and every frame the
  /// port refused has gone, for at most min(peer timeout, kCloseLingerMaxNs). A message that
  /// completed when it was copied must not die with the endpoint because its first packet was
  /// lost (a link still coming up) and nobody is left to resend it. Any thread but the RX owner
  /// (an lcore's poll steps do the work then; this one waits). @return whether all went.
  bool linger() noexcept;
  static constexpr uint64_t kCloseLingerMaxNs = 2'000'000'000;
  wire::Address address() const noexcept;

  // ---- data path (application threads, after enable) ----
  /// fi_send & co, and the RMA and atomic calls (op.kind; op.dest is an fi_addr of the AV;
  /// op.completion as selective completion says). -FI_EINVAL: NULL buffer with a length, `dest`
  /// not in the AV, or what RdmCore::send refuses; -FI_EMSGSIZE; -FI_EAGAIN: tx_ops operations in
  /// progress, or no CQ room (RM); -FI_EHOSTUNREACH: the peer was declared unreachable.
  ssize_t send(const rdm::SendOp& op) noexcept { return send(op, op.dest); }
  /// send() to `dest` (op.dest is not read): the op is not copied on its way to the core.
  ssize_t send(const rdm::SendOp& op, fi_addr_t dest) noexcept;
  /// fi_recv & co (op.match.src is an fi_addr of the AV, or FI_ADDR_UNSPEC; op.completion as
  /// selective completion says). -FI_EINVAL for a
  /// NULL buffer with a length, a source not in the AV, and what RdmCore::recv refuses;
  /// -FI_EAGAIN: rx_ops receives posted, or no CQ room (RM).
  ssize_t recv(const rdm::RecvOp& op) noexcept;
  /// fi_cancel of a posted receive. 0 or -FI_ENOENT.
  int cancel(void* context) noexcept;
  /// FI_TRIGGER (fi_trigger(3), FI_TRIGGER_THRESHOLD): `op` is posted once `cntr`'s value reaches
  /// `threshold` (checked after every call into the endpoint and every poll step). The checks of
  /// send() apply when it is posted; an op the core refuses then completes as an error with its
  /// context. 0; -FI_EINVAL for a NULL counter or buffer; -FI_EAGAIN when kMaxTriggered wait.
  ssize_t trigger(const rdm::SendOp& op, event::Cntr* cntr, uint64_t threshold) noexcept;
  static constexpr size_t kMaxTriggered = 1024;

  // ---- receive side (the port's RX owner) ----
  bool deliver(const wire::Frame& f, rte_mbuf* m) noexcept override;
  bool has_backlog() const noexcept override {
    return due_ns_.load(std::memory_order_relaxed) != UINT64_MAX;
  }
  size_t drain_backlog() noexcept override;
  uint64_t timer_due_ns() const noexcept override {
    return due_ns_.load(std::memory_order_relaxed);
  }
  /// The time this poll step's backlog pass read (drain_backlog, with a deadline set), into
  /// `*ns`; false when it read none. CLOCK_MONOTONIC through the TSC (clock::TscClock: may be
  /// up to 50 ns early). RX owner only.
  bool time_of_step(uint64_t* ns) const noexcept {
    if (rx_now_step_ != link_->poll_step_count()) return false;
    *ns = rx_now_;
    return true;
  }
  uint64_t backlog_pass(size_t* done) noexcept override {
    if (due_ns_.load(std::memory_order_relaxed) == UINT64_MAX) return UINT64_MAX;
    *done += drain_backlog();
    return due_ns_.load(std::memory_order_relaxed);
  }
  void link_lost(uint32_t node_be, uint32_t nonce_be) noexcept override;

  const RdmEndpointStats& stats() const noexcept { return stats_; }
  const wire::RdmDecodeStats& rdm_decode() const noexcept { return decode_; }
  /// Core counters (read under the endpoint's lock: a snapshot).
  rdm::CoreStats core_stats() noexcept;
  rdm::ReliabilityStats reliability_stats() noexcept;
  /// Operations in progress (0 when everything completed), under the lock.
  size_t in_use() noexcept;

 private:
  struct Peer {
    wire::Address addr;  // mac, ipv4, udp port, ep id (network order), host part
    // Same-host peer reached through a link that copies rendezvous data out of our memory
    // (kRdmIndirect, kRdmRef): the core was told so (set_peer_reads_us, and large segments:
    // set_peer_rdv_segment).
    bool large_rdv = false;
    // Reached through the same-host path: the core was told its link is lossless
    // (set_peer_lossless, from finish()).
    bool lossless = false;
    // Its address names a process of this host: the core was told (set_peer_same_host: the
    // same-host path's eager limit), by peer_id or, once a record went to it, by finish().
    bool same_host = false;
    // The headers of frames to it (links without UDP checksum: transmit); made on the first frame
    // after our address was set.
    bool headers_ok = false;
    wire::HeaderTemplate headers;
  };
  static constexpr uint32_t kNoPeer = UINT32_MAX;
  static constexpr size_t kTxBurst = 32;
  /// Same-host rendezvous by reference (transmit_local): segments of at least kIndirectMin
  /// bytes go so, and once a peer takes them, its rendezvous data goes in segments of
  /// kIndirectSegment (one copy, one record, per MiB); the receiver refuses more than
  /// kMaxIndirect in one.
  static constexpr uint64_t kIndirectMin = 4096;
  static constexpr uint64_t kIndirectSegment = 1 << 20;
  static constexpr uint64_t kMaxIndirect = 1 << 24;

  RdmEndpoint(Link* link, const Config& cfg) : link_(link), cfg_(cfg) {}
  static uint64_t now_ns() noexcept;
  // Under mu_: `t`, or the last time given to the core if that is later (the core's clock never
  // goes back, though a frame's time may be older than a concurrent application call's).
  uint64_t core_time(uint64_t t) noexcept {
    if (t < last_now_) t = last_now_;
    last_now_ = t;
    return t;
  }
  static uint64_t key_of(uint32_t ip_be, uint16_t port_be, uint16_t ep_be) noexcept {
    return uint64_t{ip_be} << 32 | uint64_t{port_be} << 16 | ep_be;
  }
  // Under mu_. The peer id of an address, made when new (kNoPeer beyond max_peers or when the
  // core cannot take it).
  uint32_t peer_id(const wire::Address& a) noexcept;
  // Under mu_, outside core calls: tells the core that peer `id` is a process of this host when
  // its address says so (once).
  void mark_same_host(uint32_t id) noexcept;
  // Under mu_. The peer id of an AV fi_addr; kNoPeer when it is not in the AV.
  uint32_t peer_of(fi_addr_t a) noexcept;
  // Under mu_. The peer id of a frame's source (peer_id, through rx_key_).
  uint32_t peer_from(const wire::Address& a) noexcept;
  // Under mu_, on the send path: `a` (an AV entry) names another node instance than peer `id`
  // had: RdmCore::renew_peer.
  void renew_if_new_instance(uint32_t id, const wire::Address& a) noexcept;
  // Under mu_ (FI_RM_ENABLED): whether `cq` has room for every operation that may still
  // complete into it (sends in progress, receives posted) and one more.
  bool cq_room(const event::Cq* cq) const noexcept;
  // Under mu_: the route and dpfab header of frames to `p`; makes p.headers from them (false:
  // it cannot, frames are encoded in full).
  wire::Route route_to(const Peer& p) const noexcept;
  wire::Header outer_to(const Peer& p, uint32_t payload_len) const noexcept;
  bool make_headers(Peer& p) noexcept;
  // Under mu_: gives queued frames to the port; refreshes due_ns_; loses the peers the same-host
  // path found gone during the call (lost_).
  void finish() noexcept;
  // Under mu_: a packet to same-host peer `p` through its link `c`. As transmit().
  bool transmit_local(Peer& p, uint32_t id, shm::Conn* c, const wire::RdmHeader& h,
                      std::span<const uint8_t> data) noexcept;
  // Under mu_: a packet to `p` through the port, its data copied into the frame or (kByReference)
  // chained after it in place (rdm_endpoint_tx.cc). As transmit().
  template <bool kByReference>
  [[gnu::always_inline]] bool transmit_port(Peer& p, const wire::RdmHeader& h,
                                            std::span<const uint8_t> data) noexcept;
  // Under mu_: an mbuf that points at `data` (an external buffer, rdm_endpoint_tx.cc), or null.
  rte_mbuf* data_by_reference(std::span<const uint8_t> data) noexcept;
  // Under mu_, after a burst: frames left in txq_ that refer to the core's memory become copies.
  [[gnu::cold]] void keep_no_references() noexcept;
  // RX owner: a kRdmIndirect packet (its data stays in the sender's memory): copied from there
  // straight into the receive's buffer (RdmCore::rdv_placement), then given to the core.
  bool deliver_indirect(const wire::Frame& f) noexcept;
  // Under mu_: send() once the op's checks passed and the time is known.
  ssize_t send_locked(const rdm::SendOp& op, fi_addr_t dest, uint64_t now) noexcept;
  // Under mu_: recv() once the source (if any) is a peer id.
  ssize_t recv_locked(const rdm::RecvOp& op) noexcept;
  // Under mu_: posts the triggered operations whose counters reached their threshold.
  void fire_triggered(uint64_t now) noexcept;
  void flush() noexcept;

  // rdm::CoreSink (under mu_)
  bool transmit(fi_addr_t peer, const wire::RdmHeader& h,
                std::span<const uint8_t> data) noexcept override;
  void complete(const rdm::Completion& c) noexcept override;
  // A same-host peer's message by reference (RTS with wire::kRdmRef): copied out of its memory.
  int read_peer(fi_addr_t peer, uint64_t addr, void* dst, size_t n) noexcept override;

  Link* link_;
  Config cfg_;
  const AddressVector* av_ = nullptr;
  std::optional<wire::Address> peer_;  // bind_peer (FI_EP_MSG): stands for the AV
  event::Cq* tx_cq_ = nullptr;
  event::Cq* rx_cq_ = nullptr;
  bool tx_selective_ = false, rx_selective_ = false;
  event::Cntr* cntrs_[static_cast<size_t>(CntrKind::kCount)] = {};
  uint16_t udp_port_be_ = 0, ep_id_be_ = 0;
  // The link takes frames without UDP checksum and without offloads (memif, ring): frames are
  // built from each peer's HeaderTemplate (set with our address).
  bool use_templates_ = false;
  // Link::tx_extbuf_min (set with our address): data of at least this many bytes is sent by
  // reference (rdm_endpoint_tx.cc); 0: always copied.
  uint32_t ext_min_ = 0;

  SpinLock mu_{"endpoint core"};  // the core's owner (see the file comment)
  // mu_, with the wake-ups decided under it (CQ and counter raises, memif kicks) made once it is
  // released (wait/wake_batch.h): no syscall under the lock (common/lockcheck.h).
  struct CoreLock {
    wait::WakeBatch wakes;  // made first, destroyed after `lock`
    std::lock_guard<SpinLock> lock;
    explicit CoreLock(SpinLock& m) noexcept : lock(m) {}
  };
  std::unique_ptr<rdm::RdmCore> core_;
  std::vector<Peer> peers_;                     // by peer id
  std::unordered_map<uint64_t, uint32_t> ids_;  // key_of(address) -> peer id
  // Under mu_: the last peer sent to and the last one heard from, so that a conversation costs
  // no hash lookup per message. A peer id never changes meaning, nor does an AV entry (av.h:
  // entries are written once and fi_addr values never reused), so neither goes stale; the MAC
  // is still refreshed on every use, as peer_id does.
  const AvEntry* tx_entry_ = nullptr;  // the AV entry of the last send's destination...
  uint32_t tx_peer_ = kNoPeer;         // ...and its peer id
  uint64_t rx_key_ = 0;                // key_of the last frame's source...
  uint32_t rx_peer_ = kNoPeer;         // ...and its peer id (kNoPeer: none yet)
  struct Triggered {
    rdm::SendOp op;
    event::Cntr* cntr;
    uint64_t threshold;
    std::vector<uint8_t> compare;  // a compare atomic's values (the caller's may be gone)
  };
  std::vector<Triggered> triggered_;  // under mu_ (FI_TRIGGER), at most kMaxTriggered
  rte_mbuf* txq_[kTxBurst] = {};      // frames built during the call in progress
  uint32_t txq_n_ = 0;
  // Under mu_: same-host peers whose node was found gone during the core call in progress (the
  // sink may not call back into the core): lost in finish().
  std::vector<uint32_t> lost_;
  // Under mu_: same-host peers whose rendezvous data goes by reference from now on (the sink
  // may not call back into the core: set_peer_rdv_segment in finish()).
  bool in_send_ = false;  // in send(): complete() flushes queued frames first
  std::vector<uint32_t> large_rdv_;
  std::vector<uint32_t> lossless_;  // peers to tell the core about, as large_rdv_
  uint16_t ip_id_ = 0;
  std::atomic<uint64_t> due_ns_{UINT64_MAX};  // the core's next deadline
  uint64_t last_now_ = 0;                     // under mu_: the last time given to the core
  // The time of core calls (common/clock.h): tx_clock_ under mu_ (application calls), rx_clock_
  // the RX owner's (poll steps).
  clock::TscClock tx_clock_, rx_clock_;
  // RX owner: the time drain_backlog read and the poll step it read it in (Link::poll_step_count):
  // frames of the same step are delivered at that time, without another clock read.
  uint64_t rx_now_ = 0;
  uint64_t rx_now_step_ = UINT64_MAX;
  wire::RdmDecodeStats decode_;  // RX owner
  RdmEndpointStats stats_;
};

}  // namespace dpfab::proto
