// SPDX-License-Identifier: BSD-3-Clause
//
// Counters<E>: one 64-bit counter per value of an enum E (E::kCount values), for the decoder's and
// the ARP handler's per-reason statistics.
//
// Threading: one owner thread (the progress thread that decodes a port's frames) calls bump();
// any thread may call get() at any time. A bump is a relaxed load and a relaxed store, not a
// read-modify-write: with a single writer no increment is lost, and it compiles to the same
// load/add/store as a plain uint64_t (no lock prefix). The atomic type is what makes a reader on
// another thread well defined: it sees some recent value of each counter, never a torn one. The
// counters of one Counters object are not a consistent snapshot of one instant.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace dpfab::wire {

template <class E>
class Counters {
 public:
  static constexpr size_t kSize = static_cast<size_t>(E::kCount);

  /// Adds n to e's counter. Owner thread only.
  void bump(E e, uint64_t n = 1) noexcept {
    auto& c = c_[static_cast<size_t>(e)];
    // Relaxed: single writer; readers need only untorn values, nothing is published through it.
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

  /// e's counter. Any thread.
  uint64_t get(E e) const noexcept {
    return c_[static_cast<size_t>(e)].load(std::memory_order_relaxed);
  }

  /// The sum of the counters from `first` (inclusive) to E::kCount. Any thread.
  uint64_t sum_from(E first) const noexcept {
    uint64_t s = 0;
    for (size_t i = static_cast<size_t>(first); i < kSize; ++i)
      s += c_[i].load(std::memory_order_relaxed);
    return s;
  }

 private:
  std::array<std::atomic<uint64_t>, kSize> c_{};  // value-initialized to 0 (C++20 atomics)
};

}  // namespace dpfab::wire
