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

}  // namespace dpfab::wait::test
