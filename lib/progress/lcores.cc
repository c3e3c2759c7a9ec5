// SPDX-License-Identifier: BSD-3-Clause
#include "progress/lcores.h"

#include <rdma/fi_errno.h>
#include <rte_cycles.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_pause.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <span>

#include "common/log.h"
#include "progress/spin.h"
#include "progress/wakeup.h"

namespace dpfab::progress {
namespace {

constexpr size_t kMaxSleepFds = 15;       // what one parked lcore sleeps on besides its eventfd
constexpr size_t kMaxPortsPerLcore = 64;  // ports beyond this are watched by the wakeup thread

struct Work {
  std::vector<PortEngine*> engines;
  std::vector<uint16_t> port_ids;
  Parker parker;
};

struct Lcores {
  std::mutex mutex;
  std::vector<unsigned> running;
  std::vector<std::unique_ptr<Work>> work;
};
Lcores& lcores() {
  static Lcores* l = new Lcores();  // never destroyed (cleanup runs from a destructor)
  return *l;
}
// Relaxed is enough for the stop flag: rte_eal_wait_lcore synchronises afterwards.
std::atomic<bool> g_stop{false};
std::atomic<bool> g_running{false};

// Frames received and sent on the lcore's ports: activity that is not a delivered event (ARP,
// frames held for a receive not yet posted, sends by the application).
uint64_t activity(const Work& w) noexcept {
  uint64_t a = 0;
  for (PortEngine* e : w.engines)
    a += e->stats().rx_frames.load(std::memory_order_relaxed) +
         e->stats().tx_frames.load(std::memory_order_relaxed);
  return a;
}

// The park protocol L1-L6 (wakeup.h). Returns after an unpark, or at once when L4 found work.
// Returns whether it slept.
bool park(Work& w) noexcept {
  Parker& pk = w.parker;
  pk.drain();        // L1
  pk.mark_parked();  // L2 (seq_cst)
  // L3: a port whose own fds wake a sleeper (memif kick, rx interrupt, net_tap queue fd) is
  // armed by the lcore itself, which then sleeps on those fds: a frame wakes the lcore directly.
  // The others are watched by the wakeup thread, which unparks the lcore.
  int fds[kMaxSleepFds];
  size_t nfds = 0;
  bool covered[kMaxPortsPerLcore] = {};
  for (size_t i = 0; i < w.engines.size(); ++i) {
    const size_t armed_fds = static_cast<size_t>(std::count(covered, covered + i, true));
    if (i < kMaxPortsPerLcore && (armed_fds + 1) * PortWake::kMaxFds <= kMaxSleepFds)
      covered[i] = w.engines[i]->wake().covered();
    if (!(i < kMaxPortsPerLcore && covered[i])) watch_for_parked(w.port_ids[i]);
  }
  // L4: poll once more (an armed port: until its queue is empty); a consumer that polled, a
  // frame or a send since L2 means back out.
  const uint64_t before = activity(w);
  size_t events = 0;
  bool work = false;
  for (size_t i = 0; i < w.engines.size(); ++i) {
    PortEngine* e = w.engines[i];
    if (i < kMaxPortsPerLcore && covered[i]) {
      work |= !e->prepare_sleep();  // A1-A3 (port_wake.h)
      for (int fd : e->wake().fds()) fds[nfds++] = fd;
    } else {
      events += e->progress();
    }
  }
  work |= events != 0 || activity(w) != before || g_stop.load(std::memory_order_seq_cst);
  for (uint16_t id : w.port_ids) work |= take_consumer_polled(id);
  bool slept = false;
  if (work) {
    if (pk.back_out()) pk.stats.backouts.fetch_add(1, std::memory_order_relaxed);
  } else {
    for (size_t i = 0; i < w.engines.size(); ++i)
      if (i < kMaxPortsPerLcore && covered[i]) w.engines[i]->arm_deadline();
    pk.stats.parks.fetch_add(1, std::memory_order_relaxed);
    pk.sleep(std::span<const int>(fds, nfds));  // L5
    slept = true;
  }
  for (size_t i = 0; i < w.engines.size(); ++i)
    if (!(i < kMaxPortsPerLcore && covered[i])) unwatch_for_parked(w.port_ids[i]);  // L6
  return slept;
}

int loop(void* arg) {
  auto* w = static_cast<Work*>(arg);
  LcoreStats& st = w->parker.stats;
  const WakeupConfig& cfg = wakeup_config();
  const bool may_park = (cfg.spin_auto || cfg.spin_ns >= 0) && wakeup_running();
  SpinBudget& budget = w->parker.budget;
  budget.configure(SpinConfig{cfg.spin_auto, std::max<int64_t>(cfg.spin_ns, 0), cfg.spin_max_ns});
  const double cycles_per_ns = static_cast<double>(rte_get_tsc_hz()) * 1e-9;
  auto spin_cycles = [&] { return static_cast<uint64_t>(budget.budget() * cycles_per_ns); };
  uint64_t limit = may_park ? spin_cycles() : 0;
  uint64_t idle_since = rte_rdtsc();
  bool idle = false, parked_since_idle = false;
  uint64_t seen = activity(*w);
  while (!g_stop.load(std::memory_order_relaxed)) {
    size_t events = 0;
    for (PortEngine* e : w->engines) events += e->progress();
    const uint64_t now_activity = activity(*w);
    if (events || now_activity != seen) {
      seen = now_activity;
      st.busy_polls.store(st.busy_polls.load(std::memory_order_relaxed) + 1,
                          std::memory_order_relaxed);  // single writer
      const uint64_t now = rte_rdtsc();
      if (idle && may_park) {  // a gap ended: the budget learns it (spin.h)
        budget.observe(static_cast<int64_t>(static_cast<double>(now - idle_since) / cycles_per_ns),
                       true, parked_since_idle);
        limit = spin_cycles();
      }
      idle = parked_since_idle = false;
      idle_since = now;
      continue;
    }
    if (!idle) idle_since = rte_rdtsc();
    idle = true;
    st.idle_polls.store(st.idle_polls.load(std::memory_order_relaxed) + 1,
                        std::memory_order_relaxed);
    if (!may_park) {
      rte_pause();
      continue;
    }
    if (rte_rdtsc() - idle_since < limit) {
      rte_pause();
      continue;
    }
    // Idle for the whole spin budget. A consumer that polled in this window keeps us awake.
    bool polled = false;
    for (uint16_t id : w->port_ids) polled |= take_consumer_polled(id);
    if (!polled) {
      parked_since_idle |= park(*w);
      seen = activity(*w);
    } else {
      idle_since = rte_rdtsc();
    }
  }
  return 0;
}

}  // namespace

Status start_lcores(const std::vector<unsigned>& ids, const std::vector<PortEngine*>& engines) {
  Lcores& l = lcores();
  std::lock_guard lock(l.mutex);
  if (!l.running.empty() || ids.empty()) return Ok{};
  g_stop.store(false, std::memory_order_relaxed);
  std::vector<std::unique_ptr<Work>> work(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    work[i] = std::make_unique<Work>();
    if (auto s = work[i]->parker.init(ids[i]); !s) return s.error();
  }
  for (size_t i = 0; i < engines.size(); ++i) {
    work[i % ids.size()]->engines.push_back(engines[i]);
    work[i % ids.size()]->port_ids.push_back(engines[i]->port()->info().port_id);
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!rte_lcore_is_enabled(ids[i]) || rte_eal_get_lcore_state(ids[i]) != WAIT) {
      DPFAB_WARN(FI_LOG_CORE, "lcore %u is not an idle worker lcore: not used for progress",
                 ids[i]);
      continue;
    }
    // Owners are known before the loop runs: consumers' hooks find the lcore to unpark.
    for (uint16_t id : work[i]->port_ids) set_port_owner(id, &work[i]->parker);
    register_lcore(&work[i]->parker);
    if (rte_eal_remote_launch(loop, work[i].get(), ids[i]) != 0) {
      DPFAB_WARN(FI_LOG_CORE, "rte_eal_remote_launch on lcore %u failed", ids[i]);
      for (uint16_t id : work[i]->port_ids) set_port_owner(id, nullptr);
      continue;
    }
    l.running.push_back(ids[i]);
    DPFAB_INFO(FI_LOG_CORE, "lcore %u progresses %zu port(s)", ids[i], work[i]->engines.size());
  }
  l.work = std::move(work);
  g_running.store(!l.running.empty(), std::memory_order_release);
  return Ok{};
}

void stop_lcores() noexcept {
  Lcores& l = lcores();
  std::lock_guard lock(l.mutex);
  if (l.running.empty()) return;
  g_stop.store(true, std::memory_order_seq_cst);  // read by L4 of a parking lcore
  for (auto& w : l.work) w->parker.unpark(Cause::kStop);
  for (unsigned id : l.running) rte_eal_wait_lcore(id);
  for (auto& w : l.work)
    for (uint16_t id : w->port_ids) set_port_owner(id, nullptr);
  unregister_lcores();
  l.running.clear();
  l.work.clear();
  g_running.store(false, std::memory_order_release);
}

bool lcores_running() noexcept { return g_running.load(std::memory_order_acquire); }

}  // namespace dpfab::progress
