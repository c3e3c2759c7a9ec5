// SPDX-License-Identifier: BSD-3-Clause
#include "wait/wake_batch.h"

#include <atomic>

namespace dpfab::wait {
namespace {
std::atomic<uint64_t> g_overflows{0};
}  // namespace

constinit thread_local WakeBatch* WakeBatch::t_open = nullptr;

uint64_t WakeBatch::overflows() noexcept { return g_overflows.load(std::memory_order_relaxed); }

bool WakeBatch::push(Fn fn, void* arg, uint64_t value, bool once) noexcept {
  if (once) {
    for (size_t i = 0; i < n_; ++i)
      if (calls_[i].fn == fn && calls_[i].arg == arg) return true;
  }
  if (n_ == kCapacity) [[unlikely]] {
    g_overflows.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  calls_[n_++] = Call{fn, arg, value};
  return true;
}

void WakeBatch::flush() noexcept {
  // Closed first: a deferred call that defers again (a wait set's own notify) runs at once.
  t_open = nullptr;
  for (size_t i = 0; i < n_; ++i) calls_[i].fn(calls_[i].arg, calls_[i].value);
  n_ = 0;
}

}  // namespace dpfab::wait
