// SPDX-License-Identifier: BSD-3-Clause
//
// A minimal waitable for lib/wait tests: a counter of published events that consumers take one
// by one. Producers publish then notify(), as the event objects do.
#pragma once

#include <atomic>
#include <memory>

#include "wait/waitable.h"

namespace dpfab::wait::test {

class TestQueue final : public Waitable {
 public:
  explicit TestQueue(std::unique_ptr<Signal> s) : Waitable(std::move(s)) {}
  static std::unique_ptr<TestQueue> with(SignalKind kind) {
    auto s = Signal::create(kind);
    return std::make_unique<TestQueue>(std::move(s.value()));
  }
  ~TestQueue() override { leave_all_sets(); }

  void publish(uint64_t n = 1) {
    available_.fetch_add(n, std::memory_order_release);  // P1
    notify();                                            // P2-P4
  }
  /// Takes one event if there is one.
  bool take() {
    uint64_t v = available_.load(std::memory_order_acquire);
    while (v > 0)
      if (available_.compare_exchange_weak(v, v - 1, std::memory_order_acq_rel)) return true;
    return false;
  }
  uint64_t available() const { return available_.load(std::memory_order_acquire); }
  bool ready() const noexcept override { return available() > 0; }

 private:
  std::atomic<uint64_t> available_{0};
};

// A progress source with a spin budget whose poll steps publish an event into `into` after
// `deliver_after` of them, and that records what blocking waits report to it (waited, woke):
// for the tests of the learnt spin of fi_wait and the worker's wait (progress/spin.h).
class SpinningSource final : public ProgressSource {
 public:
  size_t progress() noexcept override {
    if (deliver_after > 0 && --deliver_after == 0 && into) {
      into->publish();
      return 1;
    }
    return 0;
  }
  int64_t spin_ns() noexcept override { return budget_ns; }
  void waited(int64_t ns, bool ready, bool slept) noexcept override {
    ++waits;
    last_waited_ns = ns, last_ready = ready, last_slept = slept;
  }
  void woke(int64_t) noexcept override { ++wakes; }
  TestQueue* into = nullptr;
  int64_t budget_ns = 0;
  int deliver_after = 0;
  int waits = 0, wakes = 0;
  int64_t last_waited_ns = 0;
  bool last_ready = false, last_slept = false;
};

}  // namespace dpfab::wait::test
