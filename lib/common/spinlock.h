// SPDX-License-Identifier: BSD-3-Clause
//
// SpinLock: a test-and-test-and-set lock for short critical sections on the data path, where a
// std::mutex costs two locked instructions per pair (lock cmpxchg, then the unlock's xchg that
// checks for waiters) and this one costs one (the xchg; the unlock is a plain release store).
// Measured on the 2-vCPU VM: 14-16 ns per uncontended std::mutex lock/unlock pair, 6.5 ns here.
//
// Waiting. A waiter spins (rte_pause) for a while, then yields the CPU between attempts: a holder
// preempted on the waiter's own CPU (two threads of one SCHED_FIFO priority, as `chrt -f 1` runs
// both benchmark processes' threads) gets to run again instead of waiting behind a spinner that
// never gives up its CPU. It never sleeps in the kernel otherwise: hold it only for bounded work
// that makes no syscall and takes no other lock that could wait on the holder.
//
// Satisfies BasicLockable and Lockable (std::lock_guard, std::unique_lock with try_to_lock).
//
// Every SpinLock is a data-path lock for common/lockcheck.h: in a -Dlockcheck=true build a
// syscall made while one is held is reported (the name given at construction says which). The
// yield of a waiter that already holds another lock is exempt: it is how the lock waits.
#pragma once

#include <rte_pause.h>
#include <sched.h>

#include <atomic>

#include "common/lockcheck.h"

namespace dpfab {

class SpinLock {
 public:
  /// `name` (a string literal) names the lock in lockcheck reports.
  explicit SpinLock(const char* name = "SpinLock") noexcept {
#ifdef DPFAB_LOCKCHECK
    name_ = name;
#else
    (void)name;
#endif
  }
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;

  void lock() noexcept {
    // Acquire: pairs with the release store in unlock(), so the previous holder's writes are seen.
    if (!locked_.exchange(true, std::memory_order_acquire)) [[likely]] {
      entered();
      return;
    }
    lock_slow();
    entered();
  }
  bool try_lock() noexcept {
    // A relaxed look first: a busy lock costs no locked instruction (and no cache-line steal).
    if (locked_.load(std::memory_order_relaxed) ||
        locked_.exchange(true, std::memory_order_acquire))
      return false;
    entered();
    return true;
  }
  void unlock() noexcept {
    lockcheck::leave();
    locked_.store(false, std::memory_order_release);
  }
  /// Whether some thread holds it (a recent value).
  bool is_locked() const noexcept { return locked_.load(std::memory_order_relaxed); }

 private:
  void entered() noexcept {
#ifdef DPFAB_LOCKCHECK
    lockcheck::enter(name_);
#endif
  }
  void lock_slow() noexcept {
    for (unsigned spins = 0;; ++spins) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < kSpinsBeforeYield) {
          rte_pause();
        } else {
          lockcheck::Exempt waiting("lock wait");
          sched_yield();
          spins = 0;
        }
      }
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
    }
  }
  static constexpr unsigned kSpinsBeforeYield = 1024;
  std::atomic<bool> locked_{false};
#ifdef DPFAB_LOCKCHECK
  const char* name_;
#endif
};

}  // namespace dpfab
