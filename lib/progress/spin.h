// SPDX-License-Identifier: BSD-3-Clause
//
// SpinBudget: how long a waiter (an application thread in fi_cq_sread, fi_cntr_wait, fi_wait, the
// worker) or an idle worker lcore polls before it sleeps.
//
// A sleep costs a wake: ~7-20 us from an eventfd write to the sleeper running again on this kind
// of machine (FIELD-NOTES), and a context switch of CPU. Spinning costs a core. Spin only while
// the wait we expect is shorter than a wake: then busy-poll latency when traffic is dense, no
// burnt core when it is sparse.
//
// Learning ("auto", the default): an exponentially weighted mean (weight 1/8) of the gaps the
// waiter saw, taken from every wait that ended with an event. A wait that slept is counted
// without the wake it paid (its time less kWakeCostNs), so a waiter that sleeps through short
// gaps sees them as short and starts spinning; one that spins through long ones sees them long
// and stops. The budget is twice the expected gap plus 2 us while that gap is below the wake
// cost, else 0; never above the configured maximum. A fixed budget (FI_DPDK_SPIN_US=<us>)
// disables learning.
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
  /// The cost of one sleep/wake cycle the rule compares against (eventfd write to the sleeper
  /// running: p50 ~7 us, p99 ~19 us measured on the 2-vCPU machines this runs on).
  static constexpr int64_t kWakeCostNs = 10'000;

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
    const int64_t gap = slept ? std::max<int64_t>(waited_ns - kWakeCostNs, 0) : waited_ns;
    int64_t mean = expected_ns_.load(std::memory_order_relaxed);
    mean += (gap - mean) / 8;
    expected_ns_.store(mean, std::memory_order_relaxed);
    const int64_t b = mean < kWakeCostNs ? std::min(2 * mean + 2'000, cfg_.max_ns) : 0;
    budget_ns_.store(b, std::memory_order_relaxed);
  }

  int64_t expected_ns() const noexcept { return expected_ns_.load(std::memory_order_relaxed); }
  uint64_t sleeps() const noexcept { return sleeps_.load(std::memory_order_relaxed); }
  uint64_t spins_won() const noexcept { return spins_won_.load(std::memory_order_relaxed); }

 private:
  SpinConfig cfg_;
  std::atomic<int64_t> budget_ns_{0};
  std::atomic<int64_t> expected_ns_{kWakeCostNs};  // start neutral: sleep until gaps look short
  std::atomic<uint64_t> sleeps_{0}, spins_won_{0};
};

}  // namespace dpfab::progress
