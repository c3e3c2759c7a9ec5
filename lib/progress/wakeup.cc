// SPDX-License-Identifier: BSD-3-Clause
#include "progress/wakeup.h"

#include <poll.h>
#include <pthread.h>
#include <rdma/fi_errno.h>
#include <rte_epoll.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_telemetry.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <time.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <mutex>

#include "common/log.h"
#include "progress/memif_kick.h"
#include "progress/wakeup_internal.h"

namespace dpfab::progress {
namespace detail {

PortWatch g_ports[RTE_MAX_ETHPORTS];

Thread& thread() {
  static Thread* t = new Thread();
  return *t;
}

}  // namespace detail

using namespace detail;

namespace {

std::atomic<bool> g_running{false};
std::atomic<int> g_doorbell_fd{-1};

void ring(PortWatch& p) noexcept {
  int fd = g_doorbell_fd.load(std::memory_order_acquire);
  if (fd < 0) return;
  p.doorbells.fetch_add(1, std::memory_order_relaxed);
  eventfd_write(fd, 1);
}

// Watch protocol, acquirer side (wakeup.h).
void acquire(PortWatch& p) noexcept {
  p.watchers.fetch_add(1, std::memory_order_seq_cst);
  // Pairs with the seq_cst store of `watching` (false) then load of `watchers` in evaluate().
  if (!p.watching.load(std::memory_order_seq_cst)) ring(p);
}
void release(PortWatch& p) noexcept { p.watchers.fetch_sub(1, std::memory_order_release); }

void unpark_owner(PortWatch& p, Cause why) noexcept {
  if (Parker* o = p.owner.load(std::memory_order_acquire)) o->unpark(why);
}

// ---- the wakeup thread --------------------------------------------------------------------------

// Adds the net_tap queue fd, level-triggered. rte_epoll_ctl(DEL) clears the event's epdata, so
// it is filled in again for every ADD.
bool add_queue_fd(Thread& t, PortWatch& p) noexcept {
  p.fd_ev = {};
  p.fd_ev.epdata.event = EPOLLIN;
  p.fd_ev.epdata.data = &p;
  return rte_epoll_ctl(t.epfd.get(), EPOLL_CTL_ADD, p.queue_fd, &p.fd_ev) == 0;
}

void mute_fd(Thread& t, PortWatch& p, int64_t now) noexcept {
  rte_epoll_ctl(t.epfd.get(), EPOLL_CTL_DEL, p.queue_fd, &p.fd_ev);
  p.intr_added = false;
  p.fd_muted = true;
  p.fd_mutes.fetch_add(1, std::memory_order_relaxed);
  p.interval_ns.store(kIdlePollMinNs, std::memory_order_relaxed);
  p.next_poll_ns = now + kIdlePollMinNs;
}

void unmute_fd(Thread& t, PortWatch& p) noexcept {
  p.fd_muted = false;
  p.empty_fd_events = 0;
  p.intr_added = add_queue_fd(t, p);
  if (!p.intr_added) p.intr_failed = true;
  p.next_poll_ns = kNever;
}

void start_watch(Thread& t, PortWatch& p, uint16_t id, int64_t now) noexcept {
  p.watching.store(true, std::memory_order_seq_cst);
  p.fd_muted = false;
  p.empty_fd_events = 0;
  p.active = true;
  p.watch_starts.fetch_add(1, std::memory_order_relaxed);
  if (p.intr != port::RxInterrupt::kNone && !p.intr_failed) {
    if (!p.intr_added && p.intr == port::RxInterrupt::kFdOnly) {
      // net_tap: the queue fd is the tap fd. DPDK would add it edge-triggered, but the PMD reads
      // only after its SIGIO handler ran, which may come after epoll woke us: an edge consumed
      // by a poll step that read nothing would strand the frame. Level-triggered, the fd keeps
      // waking us until the frame is read.
      p.queue_fd = rte_eth_dev_rx_intr_ctl_q_get_fd(id, 0);
      p.intr_added = p.queue_fd >= 0 && add_queue_fd(t, p);
      if (!p.intr_added) {
        p.intr_failed = true;
        DPFAB_WARN(FI_LOG_CORE, "port %u: cannot wait on its queue fd: polled while idle instead",
                   id);
      }
    } else if (!p.intr_added) {
      int r = rte_eth_dev_rx_intr_ctl_q(id, 0, t.epfd.get(), RTE_INTR_EVENT_ADD, &p);
      p.intr_added = r == 0;
      if (r != 0) {
        p.intr_failed = true;
        DPFAB_WARN(FI_LOG_CORE,
                   "port %u: cannot wait on its rx interrupt (rte_eth_dev_rx_intr_ctl_q: %d): "
                   "polled while idle instead",
                   id, r);
      }
    }
    if (p.intr == port::RxInterrupt::kEnable && p.intr_added && !p.intr_enabled)
      p.intr_enabled = p.engine->wake().enable_interrupt();
  }
  p.interval_ns.store(kIdlePollMinNs, std::memory_order_relaxed);
  if (p.kick) arm_kick(t, p);
  if (shm::Node* n = p.engine->local_node()) {
    // The same-host path wakes us as it wakes a sleeper on the port's fds (shm/node.h A1-A2).
    if (!p.local_added) p.local_added = add_kick_fd(t, p, n->wake_fd(), &p.local_ev);
    n->arm();
  }
  // After enabling: a frame that came before the interrupt was armed is found here.
  service(p, Cause::kIdlePoll, now);
}

void stop_watch(PortWatch& p, uint16_t id) noexcept {
  if (p.local_added)  // the node stays armed: sleepers on the port's fds may rely on it
    rte_epoll_ctl(thread().epfd.get(), EPOLL_CTL_DEL, p.engine->local_node()->wake_fd(),
                  &p.local_ev);
  p.local_added = false;
  if (p.kick) {
    // The kick flag stays set: a sleeper on the port's own fds may rely on it (the peer clears it
    // when it kicks). Only our watch of the wake fd ends.
    if (p.wake_added)
      rte_epoll_ctl(thread().epfd.get(), EPOLL_CTL_DEL, p.kick->wake_fd(), &p.wake_ev);
    p.wake_added = false;
  }
  // The interrupt stays enabled: a sleeper on the port's own fds may have enabled it too
  // (virtio-style interrupts fire once per enable, so an enabled one costs at most one write).
  p.intr_enabled = false;
  if (p.intr_added && p.intr == port::RxInterrupt::kFdOnly)
    rte_epoll_ctl(thread().epfd.get(), EPOLL_CTL_DEL, p.queue_fd, &p.fd_ev);
  else if (p.intr_added)
    rte_eth_dev_rx_intr_ctl_q(id, 0, thread().epfd.get(), RTE_INTR_EVENT_DEL, &p);
  p.intr_added = false;
  p.fd_muted = false;
  p.active = false;
  p.next_poll_ns = p.recheck_ns = kNever;
}

// Starts or stops watching as needed; returns when the port next needs the thread.
int64_t evaluate(Thread& t, PortWatch& p, uint16_t id, int64_t now) noexcept {
  kick_try_connect(t, p, now);
  const bool wanted = p.watchers.load(std::memory_order_seq_cst) > 0;
  if (wanted) p.linger_until_ns = now + kLingerNs;
  if (!p.active) {
    if (!wanted) return p.next_connect_ns;
    start_watch(t, p, id, now);
  } else if (!wanted && now >= p.linger_until_ns) {
    p.watching.store(false, std::memory_order_seq_cst);
    // Pairs with acquire(): it incremented before reading `watching`.
    if (p.watchers.load(std::memory_order_seq_cst) > 0) {
      p.watching.store(true, std::memory_order_seq_cst);
      p.linger_until_ns = now + kLingerNs;
    } else {
      stop_watch(p, id);
      return kNever;
    }
  }
  int64_t next = std::min({p.next_poll_ns, p.recheck_ns, p.next_connect_ns});
  if (!wanted) next = std::min(next, p.linger_until_ns);
  uint64_t due = p.engine->timer_due_ns();
  if (due != UINT64_MAX) {
    int64_t at = static_cast<int64_t>(std::min<uint64_t>(due, kNever));
    if (due == p.last_timer_due) at = std::max(at, p.last_timer_ns + kTimerRetryNs);
    next = std::min(next, at);
  }
  return next;
}

void set_timer(Thread& t, int64_t at, int64_t* armed) noexcept {
  if (at == *armed) return;
  itimerspec its{};
  if (at != kNever) {
    at = std::max<int64_t>(at, 1);
    its.it_value.tv_sec = at / 1'000'000'000;
    its.it_value.tv_nsec = at % 1'000'000'000;
  }
  timerfd_settime(t.timer.get(), TFD_TIMER_ABSTIME, &its, nullptr);
  *armed = at;
}

void* run(void*) {
  Thread& t = thread();
  prctl(PR_SET_TIMERSLACK, 1000UL);  // 1 us: the idle polls are tens of microseconds apart
  rte_epoll_event evs[16];
  int64_t armed = -1;
  while (!t.stop.load(std::memory_order_acquire)) {
    int64_t now = now_ns();
    int64_t next = kNever;
    for (uint16_t id : t.ports) next = std::min(next, evaluate(t, g_ports[id], id, now));
    set_timer(t, next, &armed);
    int n = rte_epoll_wait(t.epfd.get(), evs, 16, -1);
    t.loops.fetch_add(1, std::memory_order_relaxed);
    now = now_ns();
    for (int i = 0; i < n; ++i) {
      uint64_t v;
      if (evs[i].fd == t.doorbell.get()) {
        eventfd_read(t.doorbell.get(), &v);
        t.doorbell_reads.fetch_add(1, std::memory_order_relaxed);
      } else if (evs[i].fd == t.timer.get()) {
        (void)!read(t.timer.get(), &v, sizeof(v));
        t.timer_fires.fetch_add(1, std::memory_order_relaxed);
        armed = -1;  // a one-shot timer that fired is disarmed
      } else if (auto* p = static_cast<PortWatch*>(evs[i].epdata.data);
                 p && p->local_added && evs[i].fd == p->engine->local_node()->wake_fd()) {
        // A same-host peer kicked us (or a link came or went): poll, arm again, poll.
        if (!p->active) continue;
        service(*p, Cause::kRxInterrupt, now);
        p->engine->local_node()->arm();
        service(*p, Cause::kRxInterrupt, now);
      } else if (p && p->kick && on_kick_fd(t, *p, evs[i].fd, now)) {
        continue;
      } else if (p && p->active) {
        // DPDK's callback has read the interrupt counter (eventfd PMDs); net_tap's queue fd is
        // drained by the poll step itself.
        p->interrupts.fetch_add(1, std::memory_order_relaxed);
        bool got = service(*p, Cause::kRxInterrupt, now);
        if (p->intr == port::RxInterrupt::kFdOnly && !got) {
          // net_tap reads only after its SIGIO handler bumped its receive trigger, and now and
          // then a frame sits in the queue with the trigger unchanged (seen here: the fd stays
          // readable, poll steps read nothing, the frame waits for the next one's SIGIO). Run
          // the handler on this thread (nobody else is disturbed) and read again.
          if (PortEngine::tap_sigio_handler_installed()) {
            pthread_kill(pthread_self(), SIGIO);
            got = service(*p, Cause::kRxInterrupt, now);
          }
          if (!got && ++p->empty_fd_events >= 4) mute_fd(t, *p, now);
        }
        if (got) p->empty_fd_events = 0;
      }
    }
    for (uint16_t id : t.ports) {
      PortWatch& p = g_ports[id];
      if (!p.active) continue;
      if (now >= p.next_poll_ns || now >= p.recheck_ns) {
        bool got = service(p, Cause::kIdlePoll, now);
        if (p.fd_muted && !got && PortEngine::tap_sigio_handler_installed()) {
          pthread_kill(pthread_self(), SIGIO);
          got = service(p, Cause::kIdlePoll, now);
        }
        if (p.fd_muted) {
          // Back to waiting on the fd once it is drained (or a frame was read at last).
          pollfd pf{p.queue_fd, POLLIN, 0};
          if (got || poll(&pf, 1, 0) == 0) unmute_fd(t, p);
        }
        continue;
      }
      uint64_t due = p.engine->timer_due_ns();
      if (due != UINT64_MAX && static_cast<int64_t>(std::min<uint64_t>(due, kNever)) <= now &&
          (due != p.last_timer_due || now >= p.last_timer_ns + kTimerRetryNs)) {
        p.last_timer_due = due;
        p.last_timer_ns = now;
        service(p, Cause::kTimer, now);
      }
    }
  }
  for (uint16_t id : t.ports)
    if (g_ports[id].active) stop_watch(g_ports[id], id);
  return nullptr;
}

}  // namespace

namespace detail {

// Runs the port's poll step until the queue is empty (bounded). The frames go to endpoints, whose
// completions notify() blocked consumers; a parked owner is unparked when anything came.
// Returns whether frames were received or events delivered.
bool service(PortWatch& p, Cause why, int64_t now) noexcept {
  PortEngine* e = p.engine;
  const uint64_t rx0 = e->stats().rx_frames.load(std::memory_order_relaxed);
  uint64_t last = rx0;
  size_t events = 0;
  bool busy = false;
  for (int i = 0; i < kMaxBurstsPerService; ++i) {
    size_t ev = e->progress();
    events += ev;
    uint64_t rx = e->stats().rx_frames.load(std::memory_order_relaxed);
    if (rx == last && ev == 0) {
      busy = e->rx_busy();  // another thread holds the receive side: it may leave frames behind
      // Virtio-style interrupts (event index) fire once per enable: re-enable after reading,
      // then look once more for a frame that came in between (DPDK's l3fwd-power pattern).
      if (!busy && p.intr_enabled && i + 1 < kMaxBurstsPerService) {
        e->wake().enable_interrupt();
        if (e->progress() || e->stats().rx_frames.load(std::memory_order_relaxed) != rx) {
          last = e->stats().rx_frames.load(std::memory_order_relaxed);
          continue;
        }
      }
      break;
    }
    last = rx;
  }
  if (why != Cause::kRxInterrupt) p.idle_polls.fetch_add(1, std::memory_order_relaxed);
  int64_t interval = p.interval_ns.load(std::memory_order_relaxed);
  if (last != rx0 || events) {
    p.wakeups.fetch_add(1, std::memory_order_relaxed);
    p.events.fetch_add(events, std::memory_order_relaxed);
    interval = kIdlePollMinNs;
    // The frames are published (endpoints' queues); unpark() needs a full barrier before its
    // check of `parked` (the lcore's L2/L4 pair).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    unpark_owner(p, why);
  } else if (!busy && p.polled()) {
    const int64_t cap =
        p.kicked() ? kKickSafetyPollNs : std::max(thread().cfg.idle_poll_max_ns, kIdlePollMinNs);
    interval = std::min(interval * 2, cap);
  }
  if (busy) p.rx_busy.fetch_add(1, std::memory_order_relaxed);
  p.recheck_ns = busy ? now + kIdlePollMinNs : kNever;
  p.interval_ns.store(interval, std::memory_order_relaxed);
  p.next_poll_ns = p.polled() ? now + interval : kNever;
  return last != rx0 || events;
}

}  // namespace detail

// ---- start / stop -------------------------------------------------------------------------------

Status start_wakeup(const std::vector<PortEngine*>& engines, const WakeupConfig& cfg) {
  Thread& t = thread();
  std::lock_guard lock(t.mutex);
  if (t.running) return Ok{};
  t.cfg = cfg;
  t.epfd.reset(epoll_create1(EPOLL_CLOEXEC));
  t.doorbell.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  t.timer.reset(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  if (!t.epfd.valid() || !t.doorbell.valid() || !t.timer.valid())
    return make_error(-FI_EMFILE, "wakeup thread: cannot create its epoll/eventfd/timerfd");
  t.door_ev = {};
  t.door_ev.epdata.event = EPOLLIN;
  t.timer_ev = {};
  t.timer_ev.epdata.event = EPOLLIN;
  if (rte_epoll_ctl(t.epfd.get(), EPOLL_CTL_ADD, t.doorbell.get(), &t.door_ev) != 0 ||
      rte_epoll_ctl(t.epfd.get(), EPOLL_CTL_ADD, t.timer.get(), &t.timer_ev) != 0)
    return make_error(-FI_EOTHER, "wakeup thread: rte_epoll_ctl failed");
  t.ports.clear();
  for (PortEngine* e : engines) {
    const port::Info& in = e->port()->info();
    if (in.port_id >= RTE_MAX_ETHPORTS) continue;
    PortWatch& p = g_ports[in.port_id];
    p.engine = e;
    p.intr = in.rx_interrupt;
    p.no_rx = in.placeholder;
    p.intr_failed = false;
    p.watchers.store(0, std::memory_order_relaxed);
    p.watching.store(false, std::memory_order_relaxed);
    p.active = false;
    t.ports.push_back(in.port_id);
    if (!in.memif_link.empty() && p.intr == port::RxInterrupt::kNone && !p.kick) {
      auto* k = new KickChannel(in.memif_link, in.memif_server,
                                [e](KickChannel::Peer peer) { return e->set_kick_peer(peer); });
      if (k->open() && (k->listen_fd() < 0 || add_kick_fd(t, p, k->listen_fd(), &p.listen_ev))) {
        p.kick = k;
        e->wake().attach_kick(k);  // its eventfd joins what sleepers on the port wait on
        p.wake_added = false;
        p.connect_backoff_ns = kKickRetryMinNs;
        p.next_connect_ns = in.memif_server ? kNever : 0;  // the client connects at once
      } else {
        delete k;
        DPFAB_INFO(FI_LOG_CORE, "port %s: no memif kick (polled while idle)", in.name.c_str());
      }
    }
    if (p.polled() && !p.logged_poll) {
      p.logged_poll = true;
      DPFAB_INFO(FI_LOG_CORE,
                 "port %u %s (%s) has no rx interrupt: while its consumers sleep, the wakeup "
                 "thread polls it every %" PRId64 "-%" PRId64 " us",
                 in.port_id, in.name.c_str(), in.driver.c_str(), kIdlePollMinNs / 1000,
                 std::max(cfg.idle_poll_max_ns, kIdlePollMinNs) / 1000);
    }
  }
  t.stop.store(false, std::memory_order_relaxed);
  g_doorbell_fd.store(t.doorbell.get(), std::memory_order_release);
  int r = rte_ctrl_thread_create(&t.tid, "dpfab-wakeup", nullptr, run, nullptr);
  if (r != 0) {
    g_doorbell_fd.store(-1, std::memory_order_release);
    return make_error(-FI_EOTHER, "wakeup thread: rte_ctrl_thread_create failed: " +
                                      std::string(std::strerror(r < 0 ? -r : r)));
  }
  t.running = true;
  g_running.store(true, std::memory_order_release);
  if (!t.telemetry_registered) {
    t.telemetry_registered = true;
    register_telemetry();
  }
  DPFAB_INFO(FI_LOG_CORE, "wakeup thread started: %zu port(s), lcore spin %" PRId64 " us",
             t.ports.size(), cfg.spin_ns / 1000);
  return Ok{};
}

void stop_wakeup() noexcept {
  Thread& t = thread();
  std::lock_guard lock(t.mutex);
  if (!t.running) return;
  t.stop.store(true, std::memory_order_release);
  eventfd_write(t.doorbell.get(), 1);
  pthread_join(t.tid, nullptr);
  g_running.store(false, std::memory_order_release);
  g_doorbell_fd.store(-1, std::memory_order_release);
  for (uint16_t id : t.ports) {
    delete g_ports[id].kick;  // withdraws the peer's half from the engine first
    g_ports[id].kick = nullptr;
    g_ports[id].engine = nullptr;
  }
  t.ports.clear();
  t.epfd.reset();
  t.doorbell.reset();
  t.timer.reset();
  t.running = false;
}

bool wakeup_running() noexcept { return g_running.load(std::memory_order_acquire); }
const WakeupConfig& wakeup_config() noexcept { return thread().cfg; }

void set_port_owner(uint16_t port_id, Parker* owner) noexcept {
  if (port_id >= RTE_MAX_ETHPORTS) return;
  g_ports[port_id].owner.store(owner, std::memory_order_release);
  if (g_ports[port_id].engine) g_ports[port_id].engine->set_owner(owner);
}

// ---- hooks --------------------------------------------------------------------------------------

void consumer_armed(uint16_t port_id) noexcept {
  PortWatch* p = port_of(port_id);
  if (p && !p->owner.load(std::memory_order_relaxed)) acquire(*p);
}

void consumer_disarmed(uint16_t port_id) noexcept {
  PortWatch* p = port_of(port_id);
  if (p && !p->owner.load(std::memory_order_relaxed)) release(*p);
}

void consumer_polled(uint16_t port_id) noexcept {
  if (port_id >= RTE_MAX_ETHPORTS) return;
  PortWatch& p = g_ports[port_id];
  Parker* o = p.owner.load(std::memory_order_relaxed);
  if (!o) return;
  // Full barrier (locked RMW): the caller's posted receive is visible before `parked` is read;
  // pairs with the lcore's L2 (seq_cst store) and L4 (poll, then take_consumer_polled).
  p.consumer_polled.exchange(true, std::memory_order_seq_cst);
  o->unpark(Cause::kDoorbell);
}

void on_signal(uint16_t port_id) noexcept {
  if (port_id >= RTE_MAX_ETHPORTS) return;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  unpark_owner(g_ports[port_id], Cause::kSignal);
}

void watch_for_parked(uint16_t port_id) noexcept {
  if (PortWatch* p = port_of(port_id)) acquire(*p);
}

void unwatch_for_parked(uint16_t port_id) noexcept {
  if (PortWatch* p = port_of(port_id)) release(*p);
}

bool take_consumer_polled(uint16_t port_id) noexcept {
  if (port_id >= RTE_MAX_ETHPORTS) return false;
  std::atomic<bool>& f = g_ports[port_id].consumer_polled;
  return f.load(std::memory_order_seq_cst) && f.exchange(false, std::memory_order_seq_cst);
}

// ---- statistics ---------------------------------------------------------------------------------

void register_lcore(Parker* p) noexcept {
  Thread& t = thread();
  std::lock_guard lock(t.lcores_mutex);
  try {
    t.lcores.push_back(p);
  } catch (...) {
  }
}

void unregister_lcores() noexcept {
  Thread& t = thread();
  std::lock_guard lock(t.lcores_mutex);
  t.lcores.clear();
}

WakeupStats wakeup_stats() {
  Thread& t = thread();
  WakeupStats s;
  {
    std::lock_guard lock(t.mutex);
    s.running = t.running;
    s.loops = t.loops.load(std::memory_order_relaxed);
    s.doorbells = t.doorbell_reads.load(std::memory_order_relaxed);
    s.timer_fires = t.timer_fires.load(std::memory_order_relaxed);
    for (uint16_t id : t.ports) {
      const PortWatch& p = g_ports[id];
      PortWatchStats ps;
      ps.port_id = id;
      ps.name = p.engine ? p.engine->port()->info().name : "?";
      ps.rx_interrupt =
          p.intr_failed ? "none (polled while idle)" : port::rx_interrupt_name(p.intr);
      ps.watched = p.watching.load(std::memory_order_relaxed);
      ps.watchers = p.watchers.load(std::memory_order_relaxed);
      ps.watch_starts = p.watch_starts.load(std::memory_order_relaxed);
      ps.doorbells = p.doorbells.load(std::memory_order_relaxed);
      ps.interrupts = p.interrupts.load(std::memory_order_relaxed);
      ps.idle_polls = p.idle_polls.load(std::memory_order_relaxed);
      ps.wakeups = p.wakeups.load(std::memory_order_relaxed);
      ps.events = p.events.load(std::memory_order_relaxed);
      ps.rx_busy = p.rx_busy.load(std::memory_order_relaxed);
      ps.fd_mutes = p.fd_mutes.load(std::memory_order_relaxed);
      ps.kick = !p.kick ? "none" : p.engine->wake().kick_in_use() ? "in use" : "no dpfab peer yet";
      ps.kicks = p.kicks.load(std::memory_order_relaxed);
      ps.idle_poll_ns = p.polled() ? p.interval_ns.load(std::memory_order_relaxed) : 0;
      Parker* o = p.owner.load(std::memory_order_acquire);
      ps.owner_lcore = o ? static_cast<int>(o->lcore()) : -1;
      s.ports.push_back(std::move(ps));
    }
  }
  std::lock_guard lock(t.lcores_mutex);
  for (Parker* p : t.lcores) {
    LcoreWakeStats l;
    l.lcore = p->lcore();
    l.parked = p->parked();
    l.busy_polls = p->stats.busy_polls.load(std::memory_order_relaxed);
    l.idle_polls = p->stats.idle_polls.load(std::memory_order_relaxed);
    l.parks = p->stats.parks.load(std::memory_order_relaxed);
    l.backouts = p->stats.backouts.load(std::memory_order_relaxed);
    l.parked_ns = p->stats.parked_ns.load(std::memory_order_relaxed);
    for (size_t c = 0; c < kCauses; ++c)
      l.unparks[c] = p->stats.unparks[c].load(std::memory_order_relaxed);
    s.lcores.push_back(l);
  }
  return s;
}

}  // namespace dpfab::progress
