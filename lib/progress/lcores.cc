// SPDX-License-Identifier: BSD-3-Clause
#include "progress/lcores.h"

#include <rdma/fi_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_pause.h>

#include <atomic>
#include <mutex>

#include "common/log.h"

namespace dpfab::progress {
namespace {

struct Work {
  std::vector<PortEngine*> engines;
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

int loop(void* arg) {
  auto* w = static_cast<Work*>(arg);
  while (!g_stop.load(std::memory_order_relaxed)) {
    size_t events = 0;
    for (PortEngine* e : w->engines) events += e->progress();
    if (!events) rte_pause();
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
  for (auto& w : work) w = std::make_unique<Work>();
  for (size_t i = 0; i < engines.size(); ++i) work[i % ids.size()]->engines.push_back(engines[i]);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!rte_lcore_is_enabled(ids[i]) || rte_eal_get_lcore_state(ids[i]) != WAIT) {
      DPFAB_WARN(FI_LOG_CORE, "lcore %u is not an idle worker lcore: not used for progress",
                 ids[i]);
      continue;
    }
    if (rte_eal_remote_launch(loop, work[i].get(), ids[i]) != 0) {
      DPFAB_WARN(FI_LOG_CORE, "rte_eal_remote_launch on lcore %u failed", ids[i]);
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
  g_stop.store(true, std::memory_order_relaxed);
  for (unsigned id : l.running) rte_eal_wait_lcore(id);
  l.running.clear();
  l.work.clear();
  g_running.store(false, std::memory_order_release);
}

bool lcores_running() noexcept { return g_running.load(std::memory_order_acquire); }

}  // namespace dpfab::progress
