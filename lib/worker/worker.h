// SPDX-License-Identifier: BSD-3-Clause
//
// Worker: the engine of the UCP-style wakeup face (fi_ext_dpdk.h): one eventfd-backed wait set
// over CQs, counters and EQs plus a signal flag, a progress source, and wait_mem.
//
// ---- How it maps onto lib/wait ---------------------------------------------------------------
//
//   members          a wait::WaitSet of kind FI_WAIT_FD: members push themselves on its ready
//                    list when they get an event, and the set's arm protocol raises its one
//                    eventfd when it is armed (wait_set.h, aggregator.h, waitable.h).
//   get_efd          that eventfd.
//   arm              WaitSet::try_arm (one progress step of the members' sources, drain the fd,
//                    arm, look at the ready list) plus the signal flag (below).
//   wait             arm; sleep on the fd; on a raise, arm again (a stale raise is absorbed by the
//                    re-arm; an event or a signal makes it busy, which ends the wait).
//   signal           signaled_ = true, then raise the fd (an eventfd write) whether or not the
//                    worker is armed, as UCX does; skipped when a signal is pending already.
//   wait_mem         spin (UMWAIT/PAUSE) on the address, then arm and sleep on the fd in slices,
//                    reading the address between slices (see wait_mem below).
//   progress         the domain's ProgressSource.
//
// ---- Why a signal is never lost ----------------------------------------------------------------
//
//   signal:    S1 if (!signaled_.exchange(true, seq_cst))   S2 write(efd, 1)
//   consumer:  C0 take_signal()  C1 set.try_arm() [drains the fd, arms, checks members]
//              C2 take_signal()  C3 sleep on the fd
// Every store of true at S1 is followed by its raise at S2 (a signal that finds true pending
// leaves it to the one that stored it). A raise erased by C1's drain was read by that drain, so
// its S1 happens-before C1 (the kernel's eventfd lock orders the write before the read), and C2,
// sequenced after C1, reads true (or a consumer took it and reported it): the consumer does not
// sleep, arm returns -FI_EBUSY. A raise after the drain leaves the fd readable, so the sleep at
// C3 returns. Either way each pending signal is reported exactly once, by the take_signal
// (exchange to false) that every reporting path goes through.
//
// Threads: signal() from any thread, any time, async-signal-safe. arm/wait/wait_mem/progress from
// any thread (the member set serialises its consumers), meant for the worker's owner. add_member/
// remove_member are control path; nothing may run concurrently with destruction.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "common/result.h"
#include "wait/deadline.h"
#include "wait/wait_set.h"
#include "wait/waitable.h"
#include "worker/fi_ext_dpdk.h"

namespace dpfab::worker {

/// Tuning of wait_mem (struct fi_dpdk_worker_attr).
struct Options {
  int64_t spin_ns = FI_DPDK_WORKER_SPIN_NS_DEFAULT;  ///< busy-wait budget; 0: sleep at once
  int64_t slice_min_ns = FI_DPDK_WORKER_SLICE_MIN_NS_DEFAULT;  ///< first sleep slice on the fd
  int64_t slice_max_ns = FI_DPDK_WORKER_SLICE_MAX_NS_DEFAULT;  ///< slices double up to this
  bool use_umwait = true;  ///< use UMWAIT in the spin when the CPU has WAITPKG

  /// @return -FI_EINVAL unless 0 <= spin_ns and 0 < slice_min_ns <= slice_max_ns.
  int validate() const noexcept;
};

/// Why a blocking call returned.
enum class Wake : uint8_t {
  kEvent,        ///< a member has events
  kSignal,       ///< signal() was called (now consumed)
  kMemory,       ///< wait_mem: the watched value changed
  kTimeout,      ///< the deadline passed first
  kInterrupted,  ///< a POSIX signal interrupted a sleep (EINTR)
};

/// Which path wait_mem took when it noticed the change (for tests and measurements).
enum class MemPath : uint8_t { kSpin, kSleep };

class Worker {
 public:
  /// `progress` is the domain's step (may be null: progress() then returns 0).
  /// @return -FI_EINVAL for bad options; -FI_ENOMEM / -FI_EMFILE when the eventfd cannot be made.
  static Result<std::unique_ptr<Worker>> create(wait::ProgressSource* progress,
                                                const Options& opts);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  /// Adds a member (control path). A member with events already makes the next arm busy.
  /// @return -FI_EINVAL for null; -FI_EALREADY; -FI_ENOSPC (member in too many sets); -FI_ENOMEM.
  int add_member(wait::Waitable* member) noexcept;
  /// @return -FI_ENOENT when `member` is not one.
  int remove_member(wait::Waitable* member) noexcept;
  size_t members() const noexcept { return set_->size(); }

  /// The eventfd of get_efd: readable after an event that follows a successful arm(), or after
  /// signal(). Owned by the worker.
  int efd() const noexcept { return efd_; }

  /// ucp_worker_arm. @return FI_SUCCESS (the fd is lowered and will be raised by the next event
  /// or signal); -FI_EBUSY when a member has events or a signal is pending (consumed here).
  int arm() noexcept { return arm_or_wake() ? -FI_EBUSY : FI_SUCCESS; }

  /// ucp_worker_wait until `d`: kEvent, kSignal, kTimeout or kInterrupted. Returns at once when a
  /// member has events or a signal is pending.
  Wake wait(const wait::Deadline& d) noexcept;

  /// ucp_worker_wait_mem: until the value at `address` (read atomically, acquire) differs from
  /// its value at entry (kMemory), a member has events (kEvent), a signal (kSignal), `d`
  /// (kTimeout) or EINTR during a sleep (kInterrupted). T is uint8_t, uint16_t, uint32_t or
  /// uint64_t and `address` must be aligned to it. `path`, when not null, receives the path that
  /// saw a kMemory change.
  ///
  /// First a spin of options().spin_ns: UMWAIT on the cache line (WAITPKG) or PAUSE, looking at
  /// the signal flag every round and at the members every few rounds (no progress, no syscall).
  /// Then rounds of: arm (progress once, busy -> kEvent/kSignal); read the address; sleep on the
  /// fd for a slice that starts at slice_min_ns and doubles, while nothing happens, up to
  /// slice_max_ns. Events and signals end a sleep at once (they raise the fd); a plain store to
  /// the address is seen at the end of the current slice: at most one slice late.
  template <typename T>
  Wake wait_mem(const volatile T* address, const wait::Deadline& d,
                MemPath* path = nullptr) noexcept;

  /// ucp_worker_signal. Any thread; async-signal-safe (an atomic store and an eventfd write).
  void signal() noexcept;

  /// ucp_worker_progress: one step of the progress source; the number of events it produced.
  size_t progress() noexcept { return progress_ ? progress_->progress() : 0; }

  /// Whether this CPU has WAITPKG (UMONITOR/UMWAIT): cpuid leaf 7, sub-leaf 0, ECX bit 5.
  static bool cpu_has_waitpkg() noexcept;
  /// Whether wait_mem's spin uses UMWAIT (WAITPKG present and options allow it).
  bool spins_with_umwait() const noexcept { return umwait_; }
  const Options& options() const noexcept { return opts_; }

 private:
  Worker(wait::ProgressSource* progress, const Options& opts, std::unique_ptr<wait::WaitSet> set,
         int efd) noexcept;

  /// arm(): nullopt when armed; otherwise why not (kSignal or kEvent), the signal consumed.
  std::optional<Wake> arm_or_wake() noexcept;
  /// Reports a pending signal once: true for exactly one caller per batch of signal() calls.
  bool take_signal() noexcept {
    // Relaxed load first: no write when nothing is pending. The exchange is seq_cst: it is the
    // C0/C2 read of the argument in the header, ordered after try_arm's drain and arm.
    return signaled_.load(std::memory_order_relaxed) &&
           signaled_.exchange(false, std::memory_order_seq_cst);
  }
  /// Sleeps on the fd until it is readable or `ns` pass (INT64_MAX: no limit).
  wait::Woke sleep_on_fd(int64_t ns) noexcept;
  template <typename T>
  std::optional<Wake> spin(const volatile T* address, T seen, const wait::Deadline& d) noexcept;

  wait::ProgressSource* const progress_;
  const Options opts_;
  const bool umwait_;
  std::unique_ptr<wait::WaitSet> set_;  // FI_WAIT_FD: owns the eventfd
  const int efd_;                       // set_'s eventfd
  // Written by signal() on any thread, exchanged by the consumer: own cache line.
  alignas(64) std::atomic<bool> signaled_{false};
};

}  // namespace dpfab::worker
