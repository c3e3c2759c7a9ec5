// SPDX-License-Identifier: BSD-3-Clause
//
// The wakeup thread and lcore parking: zero CPU when nobody is busy, microseconds back when
// traffic or a signal arrives (doc/design.md, "The wakeup thread").
//
// One wakeup thread per process ("dpfab-wakeup", rte_ctrl_thread_create) sleeps in epoll_wait on
//   - the rx-interrupt fd of every port whose PMD has one (rte_eth_dev_rx_intr_ctl_q; enabled with
//     rte_eth_dev_rx_intr_enable where the PMD supports it, the queue fd itself on net_tap),
//   - a timerfd: the earliest protocol deadline of a watched port, and the next idle poll of a
//     watched port without rx interrupt (memif, af_packet, null, ring: polled at an adaptive rate,
//     from kIdlePollMinNs up to the idle_poll_us key, doubling while nothing arrives),
//   - a doorbell eventfd (a port needs watching, or stop),
//   - on memif ports whose peer is dpfab too, the memif kick (memif_kick.h): our eventfd, which
//     the peer writes when it sends to us while we sleep; idle polls are then a safety net only.
// It *watches* a port while someone needs it to:
//   - automatic progress: the worker lcore that owns the port is parked;
//   - manual progress: a consumer of the port's domain is armed (fi_trywait, fi_cq_sread, fi_wait,
//     worker arm): the wait::ProgressSource armed()/disarmed() hooks count them.
// Watching means: the port's interrupt enabled and its fd in the epoll set (or its idle polls
// scheduled), and after that one poll step, so that a frame that arrived before the interrupt
// was enabled is not left behind. When a watched port has traffic, the wakeup thread runs the
// port's poll step itself (the engine's receive side is a try-lock: it delivers the completions,
// whose notify() wakes the blocked application thread) and unparks the owning lcore. After the
// last watcher leaves, it keeps watching for kLingerNs (a ping-pong re-arms within microseconds:
// no doorbell per round trip), then disables the interrupt.
//
// Watch protocol (no watcher is missed): acquirer: watchers.fetch_add(seq_cst); if
// (!watching.load(seq_cst)) ring the doorbell. Wakeup thread, to stop: watching.store(false,
// seq_cst); if (watchers.load(seq_cst) > 0) watch on. Store buffering again: one side sees the
// other.
//
// Statistics per lcore and per port are atomics read by DPDK telemetry (/dpfab/ports,
// /dpfab/lcores, /dpfab/wakeup; dpdk-telemetry.py) and by dpfab-info.
#pragma once

#include <sys/eventfd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/fd.h"
#include "common/result.h"
#include "progress/engine.h"
#include "progress/parker.h"
#include "progress/spin.h"

namespace dpfab::progress {

struct WakeupConfig {
  bool spin_auto = true;                 ///< lcores learn their spin budget (spin.h)
  int64_t spin_ns = 100'000;             ///< fixed lcore spin budget; < 0: lcores never park
  int64_t spin_max_ns = 100'000;         ///< the most a learnt budget may reach
  int64_t idle_poll_max_ns = 1'000'000;  ///< longest idle-poll interval of ports without interrupt
};

inline constexpr int64_t kIdlePollMinNs = 20'000;  ///< first idle-poll interval after traffic
inline constexpr int64_t kLingerNs = 2'000'000;    ///< watching goes on this long after the last
                                                   ///< watcher left

/// Starts the wakeup thread for `engines` (once per process; later calls are no-ops). Reads each
/// port's rx interrupt capability (port::Info::rx_interrupt), logs once per port that has none
/// that it is polled while idle, registers the telemetry commands.
/// @return -FI_EMFILE / -FI_EOTHER when the fds or the thread cannot be made (then nothing is
///         watched: manual-progress waits poll in slices, lcores never park).
Status start_wakeup(const std::vector<PortEngine*>& engines, const WakeupConfig& cfg);
/// Stops and joins the thread, disables the interrupts (provider cleanup, after stop_lcores).
void stop_wakeup() noexcept;
/// Whether the thread runs (then it watches ports for armed consumers and parked lcores).
bool wakeup_running() noexcept;
const WakeupConfig& wakeup_config() noexcept;

/// Control path (lcores.cc, before launching / after stopping): the lcore that owns a port.
void set_port_owner(uint16_t port_id, Parker* owner) noexcept;

// ---- hooks, any thread ------------------------------------------------------------------------

/// A consumer of the port's domain armed / ended its armed period (wait::ProgressSource hooks).
/// Counted only when no lcore owns the port (manual progress).
void consumer_armed(uint16_t port_id) noexcept;
void consumer_disarmed(uint16_t port_id) noexcept;
/// The application polled, read or waited on the domain while an lcore owns the port: the lcore
/// does not park during this spin window, and comes back now if parked (a posted receive may match
/// a held frame). A seq_cst RMW on a line the lcore reads once per window.
void consumer_polled(uint16_t port_id) noexcept;
/// fi_cq_signal on a CQ of the port's domain: a parked owner comes back.
void on_signal(uint16_t port_id) noexcept;

/// Whether the wakeup thread is running and so a blocked manual-progress wait needs no slices.
inline bool wakeup_covers() noexcept { return wakeup_running(); }

// ---- lcore side (lcores.cc) ----------------------------------------------------------------

/// L3 / L6 of the park protocol for one port.
void watch_for_parked(uint16_t port_id) noexcept;
void unwatch_for_parked(uint16_t port_id) noexcept;
/// Takes (and clears) the port's "a consumer polled in this window" flag.
bool take_consumer_polled(uint16_t port_id) noexcept;

// ---- statistics ---------------------------------------------------------------------------

struct PortWatchStats {
  uint16_t port_id = 0;
  std::string name;
  std::string rx_interrupt;   ///< "yes" / "queue fd only" / "none (polled while idle)"
  bool watched = false;       ///< being watched now
  int watchers = 0;           ///< parked owner + armed consumers now
  uint64_t watch_starts = 0;  ///< times watching started
  uint64_t doorbells = 0;     ///< doorbells rung for it
  uint64_t interrupts = 0;    ///< rx interrupts taken
  uint64_t idle_polls = 0;    ///< poll steps the wakeup thread ran (timer or idle poll)
  uint64_t wakeups = 0;       ///< wakeup-thread poll steps that received or delivered frames
  uint64_t events = 0;        ///< completions delivered by those steps
  uint64_t rx_busy = 0;       ///< wakeup-thread poll steps that found the receive side taken
  uint64_t fd_mutes = 0;      ///< net_tap: queue fd readable but nothing read: polled instead
  std::string kick;           ///< memif kick (memif_kick.h): "none", "no dpfab peer yet", "in use"
  uint64_t kicks = 0;         ///< kicks received from the memif peer
  int64_t idle_poll_ns = 0;   ///< current idle-poll interval (ports without interrupt)
  int owner_lcore = -1;       ///< the worker lcore that owns it, or -1 (manual progress)
};
struct LcoreWakeStats {
  unsigned lcore = 0;
  bool parked = false;
  uint64_t busy_polls = 0, idle_polls = 0, parks = 0, backouts = 0, parked_ns = 0;
  std::array<uint64_t, kCauses> unparks{};
};
struct WakeupStats {
  bool running = false;
  uint64_t loops = 0;      ///< epoll_wait returns
  uint64_t doorbells = 0;  ///< doorbell reads
  uint64_t timer_fires = 0;
  std::vector<PortWatchStats> ports;
  std::vector<LcoreWakeStats> lcores;
};
WakeupStats wakeup_stats();
/// Registers /dpfab/stats with DPDK telemetry (telemetry.cc; once, from start_wakeup).
void register_telemetry() noexcept;

/// Registers an lcore's statistics for wakeup_stats() (lcores.cc).
void register_lcore(Parker* p) noexcept;
void unregister_lcores() noexcept;

}  // namespace dpfab::progress
