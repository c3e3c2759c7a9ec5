// SPDX-License-Identifier: BSD-3-Clause
//
// Signal: what a blocked consumer sleeps on, one of the libfabric wait objects.
//   kEventFd   FI_WAIT_FD / FI_WAIT_POLLFD / FI_WAIT_UNSPEC: a non-blocking eventfd, readable
//              while raised (level-triggered), usable in select/poll/epoll.
//   kMutexCond FI_WAIT_MUTEX_COND: a pthread mutex + condition variable (CLOCK_MONOTONIC) and a
//              flag under the mutex; raise() broadcasts.
//   kYield     FI_WAIT_YIELD: nothing to sleep on; a wait yields the CPU once and returns.
//
// A Signal is only the wake-up channel: whether to raise it is decided by the arm protocol in
// Waitable (waitable.h), so raise() runs only when a consumer is (about to be) asleep.
#pragma once

#include <pthread.h>
#include <rdma/fi_eq.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "common/fd.h"
#include "common/result.h"
#include "wait/deadline.h"

namespace dpfab::wait {

enum class SignalKind : uint8_t { kEventFd, kMutexCond, kYield };

/// Why Signal::wait returned.
enum class Woke : uint8_t {
  kRaised,       ///< the signal is raised (or, for kYield, the CPU was yielded once)
  kTimeout,      ///< the deadline passed
  kInterrupted,  ///< a POSIX signal interrupted the wait (EINTR)
};

class Signal {
 public:
  /// @return -FI_ENOMEM / -FI_EMFILE when the eventfd or the mutex/cond cannot be made.
  static Result<std::unique_ptr<Signal>> create(SignalKind kind);
  ~Signal();
  Signal(const Signal&) = delete;
  Signal& operator=(const Signal&) = delete;

  SignalKind kind() const noexcept { return kind_; }

  /// Makes the signal raised: the eventfd readable, cond waiters woken. Any thread, never blocks
  /// (an eventfd at its maximum count stays readable). Counted in raises().
  void raise() noexcept;
  /// Lowers the signal (reads the eventfd to zero). Consumer side.
  void drain() noexcept;
  /// Blocks until raised or `d`; does not lower the signal.
  Woke wait(const Deadline& d) noexcept;

  /// The eventfd (kEventFd), else -1.
  int fd() const noexcept { return fd_.get(); }
  /// The mutex/cond pair handed out by FI_GETWAIT (kMutexCond), else nullptr.
  fi_mutex_cond* mutex_cond() noexcept { return kind_ == SignalKind::kMutexCond ? &mc_ : nullptr; }
  /// How many times raise() ran: each is at most one syscall or broadcast, i.e. one wakeup.
  uint64_t raises() const noexcept { return raises_.load(std::memory_order_relaxed); }

 private:
  explicit Signal(SignalKind kind) noexcept : kind_(kind) {}
  SignalKind kind_;
  UniqueFd fd_;
  pthread_mutex_t mutex_ = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cond_;
  bool cond_ready_ = false;
  bool flag_ = false;  // kMutexCond: raised, under mutex_
  fi_mutex_cond mc_{&mutex_, &cond_};
  std::atomic<uint64_t> raises_{0};
};

}  // namespace dpfab::wait
