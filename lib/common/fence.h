// SPDX-License-Identifier: BSD-3-Clause
//
// The full fence of the wakeup protocol's producer side (P2 in lib/wait/waitable.h), on the data
// path once per completion.
#pragma once

#include <atomic>

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DPFAB_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define DPFAB_TSAN 1
#endif

namespace dpfab {

/// A sequentially consistent fence: std::atomic_thread_fence(seq_cst). On x86-64, GCC emits
/// MFENCE for it; a locked read-modify-write of a stack word orders loads and stores the same way
/// (the x86 memory model: locked instructions are full barriers for ordinary memory) and costs
/// less (Linux's smp_mb() uses it for that reason). MFENCE also orders non-temporal stores and
/// WC memory, which nothing here uses. ThreadSanitizer does not model inline assembly: its builds
/// keep the standard fence.
inline void full_fence() noexcept {
#if defined(__x86_64__) && !defined(DPFAB_TSAN)
  asm volatile("lock orq $0, -8(%%rsp)" ::: "memory", "cc");
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

}  // namespace dpfab
