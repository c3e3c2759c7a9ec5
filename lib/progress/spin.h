// SPDX-License-Identifier: BSD-3-Clause
//
// SpinBudget: how long a waiter (an application thread in fi_cq_sread, fi_cntr_wait, fi_wait, the
// worker) or an idle worker lcore polls before it sleeps.
//
// A sleep costs a wake: the time from the wake being sent (an eventfd write, a kick) to the
// sleeper running again, 7-45 us on the 2-vCPU machines this runs on depending on where the
// scheduler puts the two (FIELD-NOTES), and a context switch of CPU. Spinning costs a core. Spin
// only while the wait we expect is about as short as a wake: then busy-poll latency when traffic
// is dense, no burnt core when it is sparse.
//
// Learning ("auto", the default): an exponentially weighted mean (weight 1/8) of the gaps the
// waiter saw, taken from every wait that ended with an event. A wait that slept is counted
// without the wake it paid (its time less the wake cost), so a waiter that sleeps through short
// gaps sees them as short and starts spinning; one that spins through long ones sees them long
// and stops. The budget is twice the expected gap plus 2 us while that gap is below twice the
// wake cost, else 0; never above the configured maximum. Twice: when the peer sleeps too, the gap
// we see holds the peer's own wake, about one wake cost, and no gap would ever look short enough
// to spin through (two blocking ping-pong processes then both slept on every message, at 25 us
// and 24 us of CPU per message, where spinning gives 1 us and 2.6 us). A budget of twice that gap
// catches the peer's answer without our own wake; once both spin, the gaps shrink to the
// round trip. A fixed budget (FI_DPDK_SPIN_US=<us>) disables learning.
//
// The wake cost starts at kWakeCostNs and, where the waker says when it sent the wake (the memif
// kick stamps its time), follows what the wakes measured (mean of weight 1/8, each sample within
// [kMinWakeNs, kMaxWakeNs]).
//
// Threads: any thread may observe() and budget(); the state is a few relaxed atomics (a lost
// update only delays learning by one wait).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace dpfab::progress {

struct SpinConfig {
  bool learn = true;         ///< "auto"
  int64_t fixed_ns = 0;      ///< the budget when !learn (>= 0)
  int64_t max_ns = 100'000;  ///< the most a learnt budget may reach
};

class SpinBudget {
 public:
  /// The cost of one sleep/wake cycle the rule starts from (eventfd write to the sleeper
  /// running: p50 ~7 us, p99 ~19 us measured on the 2-vCPU machines this runs on), until wakes
  /// are measured (observe_wake).
  static constexpr int64_t kWakeCostNs = 10'000;
  static constexpr int64_t kMinWakeNs = 1'000;
  static constexpr int64_t kMaxWakeNs = 1'000'000;

  void configure(const SpinConfig& c) noexcept {
    cfg_ = c;
    budget_ns_.store(c.learn ? 0 : c.fixed_ns, std::memory_order_relaxed);
  }
  const SpinConfig& config() const noexcept { return cfg_; }

  /// The budget for the next wait, in ns.
  int64_t budget() const noexcept { return budget_ns_.load(std::memory_order_relaxed); }

  /// A wait ended after `waited_ns`: with an event (`ready`) or not, having slept or not.
  void observe(int64_t waited_ns, bool ready, bool slept) noexcept {
    if (slept)
      sleeps_.fetch_add(1, std::memory_order_relaxed);
    else if (ready)
      spins_won_.fetch_add(1, std::memory_order_relaxed);
    if (!cfg_.learn || !ready) return;
    const int64_t wake = wake_cost_ns();
    const int64_t gap = slept ? std::max<int64_t>(waited_ns - wake, 0) : waited_ns;
    int64_t mean = expected_ns_.load(std::memory_order_relaxed);
    mean += (gap - mean) / 8;
    expected_ns_.store(mean, std::memory_order_relaxed);
    const int64_t b = mean < 2 * wake ? std::min(2 * mean + 2'000, cfg_.max_ns) : 0;
    budget_ns_.store(b, std::memory_order_relaxed);
  }

  /// A wake measured: `ns` from its sending to the sleeper running. Learnt in any mode (the
  /// budget uses it only when learning).
  void observe_wake(int64_t ns) noexcept {
    ns = std::clamp(ns, kMinWakeNs, kMaxWakeNs);
    int64_t mean = wake_ns_.load(std::memory_order_relaxed);
    mean += (ns - mean) / 8;
    wake_ns_.store(mean, std::memory_order_relaxed);
    wakes_measured_.fetch_add(1, std::memory_order_relaxed);
  }
  int64_t wake_cost_ns() const noexcept { return wake_ns_.load(std::memory_order_relaxed); }
  uint64_t wakes_measured() const noexcept {
    return wakes_measured_.load(std::memory_order_relaxed);
  }

  int64_t expected_ns() const noexcept { return expected_ns_.load(std::memory_order_relaxed); }
  uint64_t sleeps() const noexcept { return sleeps_.load(std::memory_order_relaxed); }
  uint64_t spins_won() const noexcept { return spins_won_.load(std::memory_order_relaxed); }

 private:
  SpinConfig cfg_;
  std::atomic<int64_t> budget_ns_{0};
  std::atomic<int64_t> expected_ns_{2 * kWakeCostNs};  // start neutral: sleep until gaps look short
  std::atomic<int64_t> wake_ns_{kWakeCostNs};
  std::atomic<uint64_t> sleeps_{0}, spins_won_{0}, wakes_measured_{0};
};

}  // namespace dpfab::progress
