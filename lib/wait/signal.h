// SPDX-License-Identifier: BSD-3-Clause
//
// Signal: what a blocked consumer sleeps on, one of the libfabric wait objects.
//   kEventFd   FI_WAIT_FD / FI_WAIT_POLLFD / FI_WAIT_UNSPEC: a non-blocking eventfd, readable
//              while raised (level-triggered), usable in select/poll/epoll by the application.
//   kMutexCond FI_WAIT_MUTEX_COND: a pthread mutex + condition variable (CLOCK_MONOTONIC);
//              raise() broadcasts.
//   kYield     FI_WAIT_YIELD: nothing to sleep on; a wait yields the CPU once and returns.
//
// Two audiences wait on a signal. The application waits on the native object it got from
// FI_GETWAIT (the eventfd, the mutex/cond pair), using fi_trywait, which drains the eventfd before
// checking. The provider's own blocking calls (fi_cq_sread, fi_cntr_wait, fi_wait, worker wait)
// wait on a generation count that every raise() increments: several threads may block on one
// object at once, and one of them re-arming (draining the eventfd) must not erase a wakeup meant
// for another -- a generation only grows, so every waiter that saw the old value wakes. The
// eventfd is written only once its fd has been handed out (export_fd), so sread-only users pay
// one futex wake per sleep, and only when someone sleeps.
//
// A third kind of waiter sleeps on fds besides the signal: a provider wait that also sleeps on its
// port's wake sources (the memif kick, rx-interrupt fds; doc/design.md "Sleeping on the port"). It
// cannot sleep on the futex, and a shared level-triggered eventfd would let one waiter's drain
// hide a raise from another. So each such waiter brings its own eventfd (one per thread, never
// closed while the thread lives) and registers it here for the length of its sleep; raise()
// writes every registered one. Registration and raise form the same store-buffering pair as the
// futex sleepers: the waiter registers (seq_cst), then re-reads the generation; raise() bumps the
// generation (seq_cst), then reads the registrations. One of the two sees the other.
//
// A Signal is only the wake-up channel: whether to raise it is decided by the arm protocol in
// Waitable (waitable.h), so raise() runs only when a consumer is (about to be) asleep.
#pragma once

#include <pthread.h>
#include <rdma/fi_eq.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

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
  kSource,       ///< wait_fds: one of the extra fds (a port's wake source) became readable
};

class Signal {
 public:
  /// @return -FI_ENOMEM / -FI_EMFILE when the eventfd or the mutex/cond cannot be made.
  static Result<std::unique_ptr<Signal>> create(SignalKind kind);
  ~Signal();
  Signal(const Signal&) = delete;
  Signal& operator=(const Signal&) = delete;

  SignalKind kind() const noexcept { return kind_; }

  /// Wakes every waiter: bumps the generation (waking in-process waiters), makes an exported
  /// eventfd readable, broadcasts the condition. Any thread, never blocks. Counted in raises().
  void raise() noexcept;
  /// Lowers the application-visible object (reads the eventfd to zero). fi_trywait's C1 step.
  void drain() noexcept;

  /// The generation to pass to wait(); read it before the re-check that precedes blocking.
  uint32_t generation() const noexcept { return gen_.load(std::memory_order_acquire); }
  /// Blocks until a raise() after `seen` was read (generation() != seen), or `d`, or a POSIX
  /// signal. Independent of drain(): waiters never steal each other's wakeups.
  Woke wait(const Deadline& d, uint32_t seen) noexcept;
  /// As wait(), but sleeps in ppoll on `fds` as well (kEventFd and kMutexCond; kYield yields
  /// once): returns kSource when one of them is readable and no raise came. Several threads may
  /// wait at once; each sleeps on an eventfd of its own that raise() writes. More than
  /// kFdSleepers waiters at once: the extra ones sleep at most 1 ms at a time.
  Woke wait_fds(const Deadline& d, uint32_t seen, std::span<const int> fds) noexcept;
  static constexpr int kFdSleepers = 8;
  static constexpr size_t kMaxWaitFds = 15;  ///< extra fds wait_fds looks at

  /// The eventfd (kEventFd), else -1, for internal bookkeeping (no side effect).
  int fd() const noexcept { return fd_.get(); }
  /// The eventfd handed to the application (FI_GETWAIT, worker get_efd, POLLFD arrays): from now
  /// on every raise() also writes it. The first export of a signal that was already raised leaves
  /// the fd readable once (one spurious wake at most): a consumer may have armed (fi_trywait)
  /// before it took the fd, and the raise that answered that arm did not write it.
  int export_fd() noexcept;
  /// The mutex/cond pair handed out by FI_GETWAIT (kMutexCond), else nullptr.
  fi_mutex_cond* mutex_cond() noexcept { return kind_ == SignalKind::kMutexCond ? &mc_ : nullptr; }
  /// How many times raise() ran: each is at most one eventfd write, one futex wake or one
  /// broadcast, i.e. one wakeup.
  uint64_t raises() const noexcept { return raises_.load(std::memory_order_relaxed); }

 private:
  explicit Signal(SignalKind kind) noexcept : kind_(kind) {}
  SignalKind kind_;
  UniqueFd fd_;
  std::atomic<bool> fd_exported_{false};
  std::atomic<bool> fd_raised_{false};        // the eventfd was written since the last drain
  alignas(64) std::atomic<uint32_t> gen_{0};  // futex word
  std::atomic<int> sleepers_{0};              // in-process waiters inside futex_wait
  pthread_mutex_t mutex_ = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cond_;
  bool cond_ready_ = false;
  fi_mutex_cond mc_{&mutex_, &cond_};
  std::atomic<uint64_t> raises_{0};
  // wait_fds sleepers: their eventfds (-1: free slot), how many are registered, and raisers
  // inside the slot scan (a sleeper leaving waits for them, so that no raise writes an fd whose
  // thread has gone and whose number was reused).
  alignas(64) std::atomic<int> fd_sleepers_[kFdSleepers];
  std::atomic<int> nfd_sleepers_{0};
  std::atomic<int> raisers_{0};
  void wake_fd_sleepers() noexcept;
};

}  // namespace dpfab::wait
