// SPDX-License-Identifier: BSD-3-Clause
//
// PortEngine: one per port and process, the data-path side of a port.
//   - transmit: the port's TX queue, serialised by a SpinLock (DPDK TX queues are not
//     thread-safe; any application thread may send). Nothing of ours makes a syscall under it:
//     the memif kick it decides on is written once it is released (wait/wake_batch.h);
//   - progress: one poll step -- rx_burst, decode (wire/decoder.h, every reject counted), ARP,
//     demultiplex data frames by destination UDP port to the bound endpoint (Receiver), free.
//     The receive side has one owner at a time: a caller that finds it taken returns at once
//     (manual progress from several threads never blocks on another);
//   - bind/unbind: the UDP port -> endpoint table (control path). unbind waits until no poll
//     step can still be delivering to the endpoint.
#pragma once

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "common/fd.h"
#include "common/lockcheck.h"
#include "common/result.h"
#include "common/spinlock.h"
#include "port/port.h"
#include "progress/faults.h"
#include "progress/memif_kick.h"
#include "progress/parker.h"
#include "progress/port_wake.h"
#include "progress/udp_claims.h"
#include "proto/endpoint.h"
#include "proto/groups.h"
#include "proto/msg_endpoint.h"
#include "shm/node.h"
#include "wire/arp.h"
#include "wire/decoder.h"
#include "wire/neighbour.h"

namespace dpfab::progress {

struct EngineStats {
  /// rx_frames: frames poll steps handled (with fault injection: what it left and added)
  std::atomic<uint64_t> rx_frames{0}, tx_frames{0}, tx_full{0};
  std::atomic<uint64_t> no_listener{0};  ///< data frames for a UDP port nobody bound
  /// Unicast data frames for another host: a destination IPv4 or MAC not the port's (a bridge
  /// floods frames to unknown MACs; af_packet sees what the kernel interface sees).
  std::atomic<uint64_t> not_ours{0};
  /// Frames dropped because the link had been down for over a second when the TX queue refused
  /// them (a dead memif peer): the send completes, the datagram is lost, as on a wire nobody
  /// listens to. Before that second the sender gets -FI_EAGAIN (a link coming up).
  std::atomic<uint64_t> tx_link_down{0};
  std::atomic<uint64_t> restarts{0};  ///< port restarts to reconnect (memif clients)
  /// memif bursts cut short by the peer's disconnect (port/burst_guard.h).
  std::atomic<uint64_t> burst_faults{0};
  std::atomic<uint64_t> arp{0};       ///< ARP frames handled
  std::atomic<uint64_t> arp_sent{0};  ///< requests, replies and announcements sent
  /// The same-host path: records received (kFrame, kRdm), frames that found no mbuf (dropped),
  /// records for a UDP port nobody bound, records refused (malformed), links lost.
  std::atomic<uint64_t> local_frames{0}, local_rdm{0}, local_no_mbuf{0}, local_no_listener{0};
  std::atomic<uint64_t> local_rejected{0}, local_lost{0};
  /// Fault injection (set_faults): frames dropped, reordered, duplicated, corrupted.
  FaultStats faults;
};

class PortEngine final : public proto::Link {
 public:
  /// The engine of `p`, made on first use (process-wide, thread-safe).
  /// @return -FI_ENODEV for a port dpfab did not create (the application owns its queues).
  static Result<PortEngine*> of(port::Port* p);
  /// Destroys every engine (provider cleanup, after all endpoints are closed).
  static void close_all() noexcept;
  ~PortEngine() override;
  /// Frames a poll step takes from the port at most.
  static constexpr uint16_t kRxBurst = 32;
  /// Calls `fn(engine, arg)` for every engine made so far, under the registry lock (so none is
  /// destroyed meanwhile): statistics readers such as telemetry. `fn` must not call of().
  static void for_each(void (*fn)(const PortEngine&, void*), void* arg) noexcept;

  /// Binds a UDP port (network byte order) to an endpoint. -FI_EADDRINUSE when taken here. The
  /// port is also claimed for this process (udp_claims.h) when no other process holds it.
  int bind(uint16_t udp_port_be, proto::Receiver* r) noexcept;
  /// Binds the first ephemeral port (49152-65535) that is free here and, on an af_packet or af_xdp
  /// port, that no other process on the same interface with our address (MAC and IPv4) has
  /// claimed, and claims it; returns it (network order) or 0.
  uint16_t bind_ephemeral(proto::Receiver* r) noexcept;
  /// Unbinds; on return no poll step is delivering to the endpoint that held the port.
  void unbind(uint16_t udp_port_be) noexcept;
  // proto::Link
  uint16_t transmit(rte_mbuf** frames, uint16_t n) noexcept override;
  /// Runs fn(arg) as the owner of the receive side (waits for it): control-path calls of
  /// receivers (an endpoint's cancel or close), fault injection set-up.
  void run_as_rx_owner(void (*fn)(void*), void* arg) noexcept override;
  /// The memif peer's kick (memif_kick.h), or {}: transmit() kicks the peer after every burst
  /// when it is set. Swapped under the TX lock, and then the kicks still in flight (decided
  /// under the lock, written after it) are waited for, so a withdrawn peer is never kicked.
  /// False (nothing set) when the lock stays held, or a kick in flight, for kKickLockWaitNs:
  /// held by a thread that will not let go, as when a signal handler calls exit() on the thread
  /// inside transmit() and the provider's destructor runs there; waiting would hang the exiting
  /// process.
  bool set_kick_peer(KickChannel::Peer p) noexcept;
  static constexpr int64_t kKickLockWaitNs = 200'000'000;
  /// One poll step; returns the frames delivered to endpoints (events), not frames received.
  size_t progress() noexcept override;
  /// Before a consumer sleeps on wake().fds(): arms them (A1-A2, port_wake.h), then runs poll
  /// steps until the receive queue is empty (A3). Any thread. @return false when the receive side
  /// was taken by another thread (or the queue did not empty): sleeping is not safe yet, poll
  /// again.
  bool prepare_sleep() noexcept;
  /// Once the consumer's re-check found nothing (it will sleep): sets the timer fd to the next
  /// protocol deadline (wait::ProgressSource::arm_deadline). Any thread.
  void arm_deadline() noexcept;
  /// Whether SIGIO has a plain handler (net_tap's receive trigger): then raising it is harmless.
  static bool tap_sigio_handler_installed() noexcept;
  /// The worker lcore that owns the port (lcores.cc), or null: transmit() unparks it.
  void set_owner(Parker* p) noexcept { owner_.store(p, std::memory_order_release); }
  /// Injects faults into what the port receives (faults.h) at `f`'s rates from now on; all rates
  /// 0 turns injection off (frames it held are freed). Control path, any thread (waits for the
  /// receive side). @return 0; -FI_ENOMEM.
  [[nodiscard]] int set_faults(const config::FaultConfig& f) noexcept;
  /// udp_checksum = on: frames sent carry a UDP checksum even on memif and ring ports (by
  /// default they carry none there: wire::TxChecksumCaps::udp_none). Before endpoints are bound.
  void set_udp_checksum_always() noexcept { tx_caps_.udp_none = false; }
  /// tx_extbuf_min (fi_dpdk(7)): data of at least `bytes` is transmitted from the caller's
  /// memory on ports whose transmit copies synchronously (Link::tx_extbuf_min); 0: never.
  /// Before endpoints are bound; 0 until then.
  void set_tx_extbuf_min(uint32_t bytes) noexcept { tx_extbuf_min_ = tx_copies_ ? bytes : 0; }
  uint32_t tx_extbuf_min() const noexcept override { return tx_extbuf_min_; }
  /// Opens the engine's same-host node (shm/node.h): endpoints on this port then reach the
  /// peers of this host through shared memory, and the poll step receives from them. Control
  /// path, at runtime start, before endpoints are bound. `derive_address`: the port is the
  /// placeholder of a process without one (port::open_placeholder): its MAC and IPv4 come from
  /// the node id (unique on the host). @return 0 or the node's error (the port works without).
  int attach_local(const shm::NodeConfig& cfg, bool derive_address) noexcept;
  /// The node, or null (the same-host path is off).
  shm::Node* local_node() const noexcept { return local_node_.get(); }
  /// The port's wake sources (port_wake.h).
  PortWake& wake() noexcept { return wake_; }
  const PortWake& wake() const noexcept { return wake_; }
  rte_mempool* pool() const noexcept override { return port_->mempool(); }
  const rte_ether_addr& mac() const noexcept override { return port_->info().mac; }
  uint32_t ipv4_be() const noexcept override { return ipv4_be_; }
  uint16_t mtu() const noexcept override { return port_->info().mtu; }
  wire::TxChecksumCaps tx_caps() const noexcept override { return tx_caps_; }

  // ---- neighbours (ARP) ----
  /// The MAC of `ipv4_be` when known (our own address included); otherwise asks for it (an ARP
  /// request goes out from the next poll steps, with retries) and returns nullopt. Any thread.
  std::optional<rte_ether_addr> resolve(uint32_t ipv4_be) noexcept;
  /// Whether resolving `ipv4_be` has finally failed (retries exhausted). Any thread.
  bool resolve_failed(uint32_t ipv4_be) const noexcept;
  /// Sends a gratuitous ARP (at start, so that peers and switches learn us).
  void announce() noexcept;

  // ---- multicast (fi_join) ----
  /// Makes `r` a member of IPv4 group `group_be` on UDP port `udp_port_be` (both network order):
  /// group frames to that group and port are delivered to it (a copy to each member). Lets the
  /// group's MAC in through the port's filter (port::Port::join_multicast) and, for the port's
  /// first member of the group, sends an IGMPv2 membership report. Control path, any thread.
  /// @return 0; -FI_EINVAL when `group_be` is not multicast; -FI_EALREADY when `r` is a member
  ///         already; -FI_ENOSPC beyond proto::GroupTable::kMaxMembers; Port::join_multicast's.
  int join_group(uint32_t group_be, uint16_t udp_port_be, proto::Receiver* r) noexcept;
  /// Ends a membership made by join_group (the last one of the group on this port sends an IGMPv2
  /// leave). On return no poll step is delivering to `r` for it. Control path, any thread.
  void leave_group(uint32_t group_be, uint16_t udp_port_be, proto::Receiver* r) noexcept;
  const proto::GroupStats& group_stats() const noexcept { return group_stats_; }

  // ---- FI_EP_MSG ----
  /// The port's MSG counters, shared by its MSG and passive endpoints (telemetry).
  proto::MsgPortStats& msg_stats() noexcept { return msg_stats_; }
  const proto::MsgPortStats& msg_stats() const noexcept { return msg_stats_; }
  /// Whether 127.0.0.0/8 names this port too (memif and ring ports: links inside this host).
  /// Such a port takes frames sent to a loopback address as its own, and answers ARP requests
  /// for one, so that a peer process on the link resolves "127.0.0.1" to us: fabtests and other
  /// programs that name the server 127.0.0.1 connect (FI_EP_MSG) to the process at the other end
  /// of the link. fi_dpdk(7), "Loopback addresses".
  bool loopback_alias() const noexcept { return loopback_alias_; }

  const wire::DecodeStats& decode_stats() const noexcept { return decode_; }
  const wire::ArpStats& arp_stats() const noexcept { return arp_stats_; }
  const EngineStats& stats() const noexcept { return stats_; }
  /// Frames the last poll step handled and the next one frees (poll_step): not free, not leaked.
  /// Any thread (a recent value).
  uint16_t done_frames() const noexcept { return done_n_.load(std::memory_order_relaxed); }
  port::Port* port() const noexcept { return port_; }
  /// Whether some thread owns the receive side right now (a progress() would return at once).
  bool rx_busy() const noexcept { return rx_busy_.load(std::memory_order_relaxed); }
  /// When the next protocol timer (ARP retry, new resolution) wants a poll step, in CLOCK_MONOTONIC
  /// ns; UINT64_MAX when none. Any thread (the wakeup thread arms its timerfd with it).
  /// Receivers' timers (RDM retransmissions, delayed acks) count too, as of the last poll step's
  /// backlog pass (which comes before its frames), or of prepare_sleep, which counts its frames.
  uint64_t timer_due_ns() const noexcept {
    return std::min(timer_due_ns_.load(std::memory_order_relaxed),
                    rx_timer_due_ns_.load(std::memory_order_relaxed));
  }

 private:
  explicit PortEngine(port::Port* p);
  static void rx_wait() noexcept;
  static int64_t now_ns() noexcept;
  enum class Handled { kFree, kDelivered, kKept };  // kKept: a receiver holds the mbuf
  // RX owner: the same-host path's records (kFrame, kRdm, kRdmIndirect) and lost links.
  size_t poll_local(size_t* delivered) noexcept;
  Handled handle_record(const shm::Conn& c, const shm::RecordHeader& h,
                        const uint8_t* payload) noexcept;
  void local_lost(const shm::Conn& c) noexcept;
  /// The poll step. `received` (when the step ran): frames taken from the queue and records from
  /// the same-host path; `local_received`, when given: the latter alone. Returns the events
  /// delivered; -1 when another thread owns the receive side.
  long poll_step(uint16_t* received, uint16_t* local_received = nullptr) noexcept;
  // `from`: the same-host link a kFrame record came through (its host part goes into the frame).
  Handled handle(rte_mbuf* m, const shm::Conn* from = nullptr) noexcept;
  // RX owner: a copy of a group frame to each member.
  Handled deliver_group(const wire::Frame& f, rte_mbuf* m) noexcept;
  // The warning, once per port, that a peer speaks wire version 1 (wire/format.h): deferred by
  // the RX owner (a wait::WakeBatch::Fn; `src` is the sender's IPv4 << 16 | UDP port, both in
  // network byte order).
  static void warn_old_version(void* engine, uint64_t src) noexcept;
  size_t drain_backlogs() noexcept;  // RX owner
  /// rx_timer_due_ns_ from the receivers' deadlines as they are now, without running their work
  /// (prepare_sleep, after a step whose frames came after its backlog pass). Any thread: takes
  /// the receive side, or leaves the value to the thread that holds it.
  void refresh_rx_deadline() noexcept;
  void send_raw(const uint8_t* frame, size_t len) noexcept;
  void tick_neighbours() noexcept;      // RX owner: retries and new resolutions
  void check_link() noexcept;           // RX owner: reconnects a memif client whose link is down
  void prefault_at_link_up() noexcept;  // RX owner: see prefault_pending_
  /// How long the link has been down (0: up, or just found down). Any thread.
  int64_t link_down_for_ns(int64_t now) noexcept;
  bool try_lock_tx_for(int64_t ns) noexcept;  // tx_lock_.lock(), for at most `ns`; false: not taken
  // The receive side: a try-lock (a poll step that finds it taken returns at once), a data-path
  // lock for common/lockcheck.h.
  bool try_take_rx() noexcept {
    if (rx_busy_.load(std::memory_order_relaxed) ||
        rx_busy_.exchange(true, std::memory_order_acquire))
      return false;
    lockcheck::enter("port RX side");
    return true;
  }
  void release_rx() noexcept {
    lockcheck::leave();
    rx_busy_.store(false, std::memory_order_release);
  }
  static void kick_deferred(void* engine, uint64_t fd) noexcept;  // wait::WakeBatch::Fn
  static void warn_link_down(void* engine, uint64_t) noexcept;    // wait::WakeBatch::Fn
  static void warn_burst_fault(void* engine, uint64_t) noexcept;  // wait::WakeBatch::Fn
  void burst_fault() noexcept;  // a guarded memif burst faulted (port/burst_guard.h)
  int bind_demux(uint16_t udp_port_be, proto::Receiver* r) noexcept;
  int bind_claimed(uint16_t udp_port_be, proto::Receiver* r, UniqueFd claim) noexcept;

  port::Port* port_;
  uint16_t port_id_;
  uint32_t ipv4_be_;
  wire::TxChecksumCaps tx_caps_;
  alignas(64) SpinLock tx_lock_{"port TX"};
  // Kicks decided under tx_lock_ whose eventfd write has not been made yet (set_kick_peer waits
  // for them before it lets the channel release the peer's fd).
  std::atomic<uint32_t> kicks_in_flight_{0};
  alignas(64) std::atomic<bool> rx_busy_{false};
  wire::DecodeStats decode_;        // written by the RX owner only
  wire::NeighbourTable neigh_;      // written by the RX owner only (the *_st calls)
  wire::ArpStats arp_stats_;        // written by the RX owner only
  uint32_t polls_ = 0;              // RX owner: neighbour timers run every few polls
  int64_t next_link_check_ns_ = 0;  // RX owner
  int64_t last_restart_ns_ = 0;     // RX owner
  /// RX owner. A memif port whose link is not up yet (or went down: a new connection maps new
  /// regions): the first poll step that finds it up faults the shared memory in
  /// (port::Port::prefault_shared_memory), once per connection, before it receives.
  bool prefault_pending_ = false;
  bool memif_ = false;           // a net_memif port (set at construction)
  bool loopback_alias_ = false;  // memif and ring: see loopback_alias()
  // RX owner: the frames the last poll step handled, freed at the start of the next. done_n_ is
  // read by statistics readers (done_frames), relaxed.
  rte_mbuf* done_[kRxBurst] = {};
  std::atomic<uint16_t> done_n_{0};
  /// An af_packet or af_xdp port: other processes may open the same interface (udp_claims.h).
  bool shared_link_ = false;
  /// A restart failed (a memif client with no server): the port is stopped, and DPDK's bursts on
  /// a stopped port are a misuse (its stand-in burst dumps a stack trace). No burst until a
  /// restart succeeds. Written holding both RX ownership and the TX lock, read holding either.
  bool stopped_ = false;
  KickChannel::Peer kick_peer_;  // under tx_lock_
  /// When the link was first found down (0: up): link_down_for_ns. Any thread; races only move it
  /// a little.
  std::atomic<int64_t> link_down_since_ns_{0};
  static constexpr int64_t kLinkGraceNs = 1'000'000'000;
  std::atomic<bool> neigh_pending_{false};  // a resolution is under way: tick on idle polls
  std::unique_ptr<std::atomic<proto::Receiver*>[]> demux_;  // indexed by UDP port (host order)
  // Bound receivers, for the backlog pass of every poll step (control path writes, RX owner
  // reads; unbind waits for the RX owner as for demux_).
  static constexpr size_t kMaxReceivers = 256;
  std::atomic<proto::Receiver*> receivers_[kMaxReceivers] = {};
  std::atomic<size_t> receivers_used_{0};  // slots ever used: the backlog pass scans only these
  // fn(Receiver*) for each bound receiver. RX owner (unbind waits for the receive side).
  template <typename Fn>
  void for_each_receiver(Fn&& fn) const noexcept {
    const size_t used = receivers_used_.load(std::memory_order_acquire);
    for (size_t i = 0; i < used; ++i)
      if (proto::Receiver* r = receivers_[i].load(std::memory_order_acquire)) fn(r);
  }
  EngineStats stats_;
  UdpClaims claims_;
  std::mutex claims_mutex_;                   // control path: bind, unbind
  std::map<uint16_t, UniqueFd> held_claims_;  // by UDP port (network order), under the mutex
  // RX owner; null unless set_faults turned injection on (it swaps it holding the RX side).
  std::unique_ptr<FaultInjector> faults_;
  proto::GroupTable groups_;  // multicast memberships (join_group)
  proto::GroupStats group_stats_;
  proto::MsgPortStats msg_stats_;
  std::atomic<uint64_t> timer_due_ns_{UINT64_MAX};  // neighbours; see timer_due_ns()
  // The port copies each frame in its tx burst (memif in copy mode, af_packet, tap): frames
  // may point to the caller's memory (set_tx_extbuf_min).
  bool tx_copies_ = false;
  uint32_t tx_extbuf_min_ = 0;
  std::atomic<uint64_t> rx_timer_due_ns_{UINT64_MAX};  // receivers, after the backlog pass
  PortWake wake_;
  std::atomic<Parker*> owner_{nullptr};
  std::unique_ptr<shm::Node> local_node_;  // the same-host path (attach_local)
  uint64_t local_host_be_ = 0;
};

}  // namespace dpfab::progress
