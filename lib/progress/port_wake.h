// SPDX-License-Identifier: BSD-3-Clause
//
// PortWake: a port's wake sources, for the threads that sleep on the port itself (doc/design.md,
// "Sleeping on the port"). Part of the port's engine (PortEngine::wake()).
//
// A blocked receive costs one OS wakeup when the thread that waits for it sleeps where the frame
// arrives, as DPDK's l3fwd-power lcore sleeps on its own rx-interrupt fd and as libfabric's tcp
// provider puts its sockets in the CQ's epoll set. The wake sources of one port:
//   - the memif kick eventfd (memif_kick.h), when the peer is dpfab: the peer writes it after a
//     send that found our kick flag set;
//   - the rx-interrupt fd of queue 0 (virtio, vhost, NICs: written by the interrupt once
//     rte_eth_dev_rx_intr_enable armed it), held edge-triggered in an epoll fd of ours as DPDK
//     does, or the net_tap queue fd (readable while frames wait);
//   - a timerfd at the port's next protocol deadline (ARP retries), so that a sleeper runs the
//     protocol's timers itself.
// fds() lists them (fixed after init: FI_GETWAIT hands them out in epoll sets and pollfd
// arrays). A sleeper arms them (arm(): drain what fired, kick flag, interrupt enable), then runs
// the poll step until the queue is empty (PortEngine::prepare_sleep), then sleeps on them and on
// its object's signal. The woken thread runs the poll step itself.
//
// covered() tells whether they wake a sleeper for every frame: an interrupt or queue fd, or the
// memif kick in use. A port they do not cover (af_packet, af_xdp, ring, null, a memif peer that
// is not dpfab) is polled by the wakeup thread while someone sleeps on it (wakeup.h).
//
// Threads: init/attach_kick on the control path (runtime start, before any consumer); arm(),
// arm_timer() from any consumer thread (interrupt enable/disable serialised by a mutex that the
// data path never takes); statistics atomics read by telemetry.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>

#include "common/fd.h"
#include "port/port.h"
#include "progress/memif_kick.h"
#include "shm/node.h"

namespace dpfab::progress {

struct PortSleepStats {
  std::atomic<uint64_t> arms{0};           ///< sleeps prepared on the port's fds (A1-A3)
  std::atomic<uint64_t> kick_wakes{0};     ///< arms that found the memif kick fired
  std::atomic<uint64_t> intr_enables{0};   ///< rx interrupt enables by sleepers
  std::atomic<uint64_t> timer_arms{0};     ///< timerfd settings (a protocol deadline moved)
  std::atomic<uint64_t> not_safe{0};       ///< prepares that found the receive side taken
  std::atomic<uint64_t> sigio_runs{0};     ///< net_tap: SIGIO trigger run by a sleeper
  std::atomic<int64_t> spin_budget_ns{0};  ///< the consumers' current spin budget (spin.h)
  std::atomic<int64_t> wake_cost_ns{0};    ///< the wake cost they learnt (0: none measured)
};

class PortWake {
 public:
  static constexpr size_t kMaxFds = 4;

  PortWake() = default;
  PortWake(const PortWake&) = delete;
  PortWake& operator=(const PortWake&) = delete;

  /// Opens the timer fd and finds the queue's interrupt or queue fd. Control path, once.
  void init(uint16_t port_id, port::RxInterrupt intr) noexcept;
  /// The memif kick channel of the port (the wakeup thread owns it; it outlives every sleeper).
  /// Control path, before consumers arm; adds its eventfd to fds().
  void attach_kick(KickChannel* k) noexcept;
  /// The engine's same-host node (shm/node.h): its eventfd joins fds(), arm() arms it. Control
  /// path, before consumers arm.
  void attach_local(shm::Node* n) noexcept;
  /// A port that never receives (the placeholder of a process without a port): nothing to poll,
  /// its sleepers rely on the same-host node and the timer fd. Control path, at init.
  void set_no_rx() noexcept { no_rx_ = true; }
  shm::Node* local() const noexcept { return local_; }
  /// Whether the peer's kicks reach us (the wakeup thread, when the peer's hello came or left).
  void set_kick_in_use(bool on) noexcept { kick_in_use_.store(on, std::memory_order_release); }
  bool kick_in_use() const noexcept { return kick_in_use_.load(std::memory_order_acquire); }

  /// The fds a sleeper of this port waits on (see above); fixed after init and attach_kick.
  std::span<const int> fds() const noexcept { return {fds_, nfds_}; }
  /// Whether fds() wake a sleeper for every frame (see above).
  bool covered() const noexcept { return intr_fd_ >= 0 || kick_in_use() || no_rx_; }
  /// How sleepers of the port are woken, for telemetry and dpfab-info.
  const char* describe() const noexcept {
    if (intr_ == port::RxInterrupt::kFdOnly && intr_fd_ >= 0) return "on the port (queue fd)";
    if (intr_fd_ >= 0) return "on the port (rx interrupt)";
    if (kick_in_use()) return "on the port (memif kick)";
    if (no_rx_) return "no port (same-host path only)";
    return "wakeup thread (polled while idle)";
  }
  /// The net_tap queue fd (readable while frames wait), else -1.
  int queue_fd() const noexcept { return intr_ == port::RxInterrupt::kFdOnly ? intr_fd_ : -1; }

  /// A1-A2: drains the fds that fired and arms them: the memif kick flag set (seq_cst RMW), the
  /// rx interrupt drained and enabled. The caller then polls the port (A3). Any thread.
  void arm() noexcept;
  /// Sets the timer fd to fire for `due_ns` (CLOCK_MONOTONIC; UINT64_MAX: none), after draining
  /// an expiry. The fd may fire up to a slack (kTimerSlackMaxNs) late: a timer already set within
  /// that slack is kept (see port_wake.cc). Any thread; call after A3 (the poll may move the
  /// deadline).
  void arm_timer(uint64_t due_ns) noexcept;
  /// The slack of arm_timer: a deadline `d` ns away may fire up to min(d / 2, kTimerSlackMaxNs)
  /// late.
  static constexpr uint64_t kTimerSlackMaxNs = 1'000'000;
  /// Makes the kick fd readable again (a sleeper that drained it could not finish its poll: the
  /// others must not sleep through the frames it left). Any thread.
  void rekick() noexcept;
  /// The CLOCK_MONOTONIC time of the peer's last kick, once (0: none since, or no kick in use).
  /// Any thread; the first sleeper to take it after a wake learns from it (spin.h).
  int64_t take_kick_time() noexcept {
    int64_t t = kick_ && kick_in_use() ? kick_->take_kick_time() : 0;
    if (local_) t = std::max(t, local_->take_kick_time());
    return t;
  }
  /// Disables the rx interrupt (the wakeup thread, when it stops watching for a parked lcore).
  void disable_interrupt() noexcept;
  /// Enables it (the wakeup thread, for a parked lcore). @return whether it is enabled.
  bool enable_interrupt() noexcept;

  /// The protocol timer fd (-1 if it could not be made); in fds() where sleepers rely on them.
  int timer_fd() const noexcept { return timer_.get(); }
  const PortSleepStats& stats() const noexcept { return stats_; }
  PortSleepStats& stats() noexcept { return stats_; }

 private:
  uint16_t port_id_ = 0;
  port::RxInterrupt intr_ = port::RxInterrupt::kNone;
  int intr_fd_ = -1;  // owned by DPDK
  UniqueFd intr_ep_;  // kEnable: an epoll fd holding intr_fd_ edge-triggered (what sleepers see)
  UniqueFd timer_;
  KickChannel* kick_ = nullptr;
  shm::Node* local_ = nullptr;
  bool no_rx_ = false;
  int fds_[kMaxFds] = {-1, -1, -1, -1};
  size_t nfds_ = 0;
  std::atomic<bool> kick_in_use_{false};
  std::mutex intr_mutex_;  // rte_eth_dev_rx_intr_enable/disable; never taken by a poll step
  alignas(64) std::mutex timer_mutex_;
  uint64_t timer_set_ns_ = UINT64_MAX;                // the deadline asked for, under timer_mutex_
  uint64_t timer_at_ns_ = UINT64_MAX;                 // when the fd fires, under timer_mutex_
  std::atomic<uint64_t> timer_set_hint_{UINT64_MAX};  // lock-free look at timer_set_ns_
  PortSleepStats stats_;
};

}  // namespace dpfab::progress
