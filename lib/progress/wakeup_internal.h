// SPDX-License-Identifier: BSD-3-Clause
//
// The wakeup thread's own state (wakeup.cc, wakeup_kick.cc, telemetry through wakeup_stats):
// per-port watch state and the thread. Private to lib/progress.
#pragma once

#include <pthread.h>
#include <rte_epoll.h>
#include <rte_ethdev.h>
#include <time.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "common/clock.h"
#include "common/fd.h"
#include "progress/memif_kick.h"
#include "progress/wakeup.h"

namespace dpfab::progress::detail {

inline int64_t now_ns() noexcept { return clock::mono_ns(); }

constexpr int64_t kNever = INT64_MAX;
constexpr int64_t kTimerRetryNs = 1'000'000;  // a protocol timer that did not move: retry in 1 ms
constexpr int kMaxBurstsPerService = 64;      // poll steps per service (32 frames each)
// memif kick (memif_kick.h): with the peer's kick in place, idle polls are only a safety net
// (a hello still in flight when we armed), up to this far apart. The client connects again after
// kKickRetryMinNs, doubling up to kKickRetryMaxNs (a memif peer that is not dpfab never answers).
constexpr int64_t kKickSafetyPollNs = 100'000'000;
constexpr int64_t kKickRetryMinNs = 10'000'000;
constexpr int64_t kKickRetryMaxNs = 1'000'000'000;

// One per ethdev port id. Written by hooks on any thread (the atomics) and by the wakeup thread
// (the plain fields, its own).
struct PortWatch {
  PortEngine* engine = nullptr;
  port::RxInterrupt intr = port::RxInterrupt::kNone;
  std::atomic<Parker*> owner{nullptr};  // set before the lcores launch, cleared after they stop
  // Watch protocol (wakeup.h): acquirers increment, then read watching.
  alignas(64) std::atomic<int> watchers{0};
  std::atomic<bool> watching{false};
  // Consumers of an lcore-owned port set it (seq_cst RMW); the lcore takes it once per window.
  alignas(64) std::atomic<bool> consumer_polled{false};
  // Statistics.
  alignas(64) std::atomic<uint64_t> watch_starts{0}, doorbells{0}, interrupts{0},
      idle_polls{0}, wakeups{0}, events{0}, rx_busy{0}, fd_mutes{0}, kicks{0};
  std::atomic<int64_t> interval_ns{kIdlePollMinNs};
  // Wakeup-thread state.
  rte_epoll_event fd_ev{};  // kFdOnly: the queue fd, level-triggered (see start_watch)
  int queue_fd = -1;
  bool active = false;      // watched by the thread now
  bool intr_added = false;  // the queue fd is in the epoll set
  bool intr_enabled = false;
  bool intr_failed = false;  // adding the fd failed: polled like a port without interrupt
  // net_tap reads only after its SIGIO handler bumped a trigger; when the fd stays readable but
  // poll steps read nothing, waiting on it would spin: mute it and poll until a frame is read.
  bool fd_muted = false;
  int empty_fd_events = 0;
  int64_t next_poll_ns = kNever;
  int64_t recheck_ns = kNever;  // the receive side was taken when we looked: look again soon
  int64_t linger_until_ns = 0;
  int64_t last_timer_ns = 0;
  uint64_t last_timer_due = UINT64_MAX;
  bool logged_poll = false;
  bool no_rx = false;  // the placeholder port (port::Info::placeholder): never polled
  // The same-host node's eventfd (shm/node.h), watched with the port: its epoll event and
  // whether it is in the set.
  rte_epoll_event local_ev{};
  bool local_added = false;
  // memif kick (memif_kick.h): the channel (never destroyed while the thread runs), its fds'
  // epoll events, and whether our wake fd is in the epoll set.
  KickChannel* kick = nullptr;
  rte_epoll_event listen_ev{}, conn_ev{}, wake_ev{};
  bool wake_added = false;
  int64_t next_connect_ns = kNever;
  int64_t connect_backoff_ns = kKickRetryMinNs;

  bool polled() const noexcept {
    return !no_rx && (intr == port::RxInterrupt::kNone || intr_failed || fd_muted);
  }
  // The peer kicks us (it acknowledged our hello): idle polls are a safety net only.
  bool kicked() const noexcept { return kick && kick->peer_kicks_us(); }
};
extern PortWatch g_ports[RTE_MAX_ETHPORTS];

inline PortWatch* port_of(uint16_t id) noexcept {
  return id < RTE_MAX_ETHPORTS && g_ports[id].engine ? &g_ports[id] : nullptr;
}

// Process-lifetime state, never destroyed (cleanup runs from libfabric's destructor).
struct Thread {
  std::mutex mutex;  // start/stop
  bool running = false;
  pthread_t tid{};
  UniqueFd epfd, doorbell, timer;
  rte_epoll_event door_ev{}, timer_ev{};
  std::vector<uint16_t> ports;
  WakeupConfig cfg;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> loops{0}, doorbell_reads{0}, timer_fires{0};
  std::mutex lcores_mutex;
  std::vector<Parker*> lcores;
  bool telemetry_registered = false;
};
Thread& thread();

/// Runs the port's poll step until the queue is empty (bounded); see wakeup.cc.
bool service(PortWatch& p, Cause why, int64_t now) noexcept;

// ---- the memif kick's side channel, on the wakeup thread (wakeup_kick.cc) ----
/// Adds one of the kick channel's fds to the epoll set (level-triggered, tagged with the port).
bool add_kick_fd(Thread& t, PortWatch& p, int fd, rte_epoll_event* ev) noexcept;
/// K1 (memif_kick.h) for a watched port: our wake fd in the thread's epoll set, the flag set.
void arm_kick(Thread& t, PortWatch& p) noexcept;
/// Client: connects to the peer's kick listener when due (backing off while nobody listens).
void kick_try_connect(Thread& t, PortWatch& p, int64_t now) noexcept;
/// An event on one of the kick channel's fds. Returns false when `fd` is not one of them.
bool on_kick_fd(Thread& t, PortWatch& p, int fd, int64_t now) noexcept;

}  // namespace dpfab::progress::detail
