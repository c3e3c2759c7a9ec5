// SPDX-License-Identifier: BSD-3-Clause
#include "worker/worker.h"

#include <errno.h>
#include <poll.h>
#include <rdma/fi_errno.h>
#include <rte_pause.h>
#include <unistd.h>

#include <algorithm>
#include <limits>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#include <x86intrin.h>
#define DPFAB_WORKER_X86 1
#endif

namespace dpfab::worker {
namespace {

using wait::Deadline;
using wait::Woke;

/// PAUSE rounds between looks at the members (a scan takes the set's consumer lock). A PAUSE is
/// 10-140 cycles depending on the core, so this is well under a microsecond.
constexpr unsigned kPausesPerMemberCheck = 16;
/// One UMWAIT lasts at most this many TSC cycles (~1 us at 2-3 GHz) so that signals, events and
/// the spin budget are looked at between waits; a store to the watched line ends it sooner.
constexpr uint64_t kUmwaitCycles = 2'000;

template <typename T>
T load(const volatile T* address) noexcept {
  // Acquire: pairs with the writer's store (release or stronger), so what it published before
  // the store is visible to our caller once wait_mem reports the change.
  return __atomic_load_n(address, __ATOMIC_ACQUIRE);
}

#ifdef DPFAB_WORKER_X86
/// Waits for a store to the cache line of `address` or kUmwaitCycles, whichever comes first.
/// Only called when cpuid reports WAITPKG (Worker::cpu_has_waitpkg).
template <typename T>
__attribute__((target("waitpkg"))) void umwait_for_change(const volatile T* address,
                                                          T seen) noexcept {
  _umonitor(const_cast<T*>(address));
  // A store between the caller's read and the UMONITOR would not wake the UMWAIT: read again
  // now that the line is monitored.
  if (load(address) != seen) return;
  // Control 1: the C0.1 state (faster wake than C0.2): this is the short, latency-minded phase;
  // the energy saving comes from the sleep phase after it. The OS may cap the wait further
  // (IA32_UMWAIT_CONTROL); an early return is only another look at the address.
  _umwait(1, __rdtsc() + kUmwaitCycles);
}
#endif

}  // namespace

int Options::validate() const noexcept {
  if (spin_ns < 0 || slice_min_ns <= 0 || slice_max_ns < slice_min_ns) return -FI_EINVAL;
  return FI_SUCCESS;
}

bool Worker::cpu_has_waitpkg() noexcept {
#ifdef DPFAB_WORKER_X86
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return (ecx >> 5) & 1;  // CPUID.(EAX=07H,ECX=0):ECX[bit 5] = WAITPKG
#else
  return false;
#endif
}

Result<std::unique_ptr<Worker>> Worker::create(wait::ProgressSource* progress,
                                               const Options& opts) {
  if (opts.validate() != FI_SUCCESS)
    return make_error(-FI_EINVAL, "worker: need spin_ns >= 0 and 0 < slice_min_ns <= slice_max_ns");
  auto set = wait::WaitSet::create(FI_WAIT_FD);
  if (!set) return set.error();
  int fd = -1;
  if (int r = set.value()->get_wait(&fd); r != FI_SUCCESS || fd < 0)
    return make_error(r ? r : -FI_EOTHER, "worker: the wait set has no eventfd");
  std::unique_ptr<Worker> w(new (std::nothrow) Worker(progress, opts, std::move(set.value()), fd));
  if (!w) return make_error(-FI_ENOMEM, "worker: out of memory");
  return w;
}

Worker::Worker(wait::ProgressSource* progress, const Options& opts,
               std::unique_ptr<wait::WaitSet> set, int efd) noexcept
    : progress_(progress),
      opts_(opts),
      umwait_(opts.use_umwait && cpu_has_waitpkg()),
      set_(std::move(set)),
      efd_(efd) {}

// The set's destructor unsubscribes the members that are left.
Worker::~Worker() = default;

int Worker::add_member(wait::Waitable* member) noexcept {
  if (!member) return -FI_EINVAL;
  return set_->add_member(member, member);
}

int Worker::remove_member(wait::Waitable* member) noexcept {
  if (!member) return -FI_EINVAL;
  return set_->remove_member(member);
}

void Worker::signal() noexcept {
  // S1: seq_cst; see "Why a signal is never lost" in worker.h. Only the caller that turns the
  // flag on raises: while it is on, its raise is in the fd or a consumer will take the flag.
  if (signaled_.exchange(true, std::memory_order_seq_cst)) return;
  // S2: raise the set's signal: the eventfd write (readable for poll and wait), through the
  // Signal so that its next drain knows to read it.
  set_->raise_signal();
  // S3: a parked lcore comes back too (issue 6: "unparked by ... worker signal"); atomics and an
  // eventfd write, async-signal-safe like the rest.
  if (progress_) progress_->interrupted();
}

std::optional<Wake> Worker::arm_or_wake() noexcept {
  if (take_signal()) return Wake::kSignal;                     // C0
  if (set_->try_arm(true) != FI_SUCCESS) return Wake::kEvent;  // C1: progress, drain, arm, check
  if (take_signal()) {                                         // C2: a raise C1's drain erased
    set_->disarm();
    return Wake::kSignal;
  }
  return std::nullopt;
}

Woke Worker::sleep_on_fd(int64_t ns) noexcept {
  pollfd p{efd_, POLLIN, 0};
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  int r = ppoll(&p, 1, ns == std::numeric_limits<int64_t>::max() ? nullptr : &ts, nullptr);
  if (r > 0) return Woke::kRaised;
  if (r < 0 && errno == EINTR) return Woke::kInterrupted;
  return Woke::kTimeout;
}

Wake Worker::wait(const Deadline& d) noexcept {
  // As fi_wait (WaitSet::wait): poll for the sources' learnt spin budget first, and report each
  // wait and wake to them (progress/spin.h).
  const int64_t t0 = Deadline::now_ns();
  bool slept = false;
  auto done = [&](Wake why) {
    set_->report_wait(Deadline::now_ns() - t0, why == Wake::kEvent, slept);
    return why;
  };
  if (const int64_t budget = set_->spin_budget(); budget > 0) {
    const Deadline spin_end = Deadline::after_ns(budget);
    while (!spin_end.expired() && !d.expired()) {
      if (take_signal()) return done(Wake::kSignal);
      set_->progress();
      if (set_->any_ready()) return done(Wake::kEvent);
    }
  }
  for (;;) {
    if (auto why = arm_or_wake()) return done(*why);
    slept = true;
    const int64_t slept_at = Deadline::now_ns();
    Woke w = sleep_on_fd(d.remaining_ns());
    set_->report_woke(slept_at);
    // Raised: an event, a signal or a stale raise; the next arm tells which (and absorbs a stale
    // one by draining it).
    if (w == Woke::kRaised) continue;
    set_->disarm();
    if (take_signal()) return done(Wake::kSignal);
    if (set_->any_ready()) return done(Wake::kEvent);
    return done(w == Woke::kInterrupted ? Wake::kInterrupted : Wake::kTimeout);
  }
}

template <typename T>
std::optional<Wake> Worker::spin(const volatile T* address, T seen, const Deadline& d) noexcept {
  const int64_t end = Deadline::now_ns() + opts_.spin_ns;
  for (unsigned round = 0;; ++round) {
    if (load(address) != seen) return Wake::kMemory;
    if (take_signal()) return Wake::kSignal;
    if (umwait_ || round % kPausesPerMemberCheck == 0) {
      if (set_->any_ready()) return Wake::kEvent;
      if (Deadline::now_ns() >= end) return std::nullopt;
      if (d.expired()) return Wake::kTimeout;
    }
#ifdef DPFAB_WORKER_X86
    if (umwait_) {
      umwait_for_change(address, seen);
      continue;
    }
#endif
    rte_pause();
  }
}

template <typename T>
Wake Worker::wait_mem(const volatile T* address, const Deadline& d, MemPath* path) noexcept {
  const T seen = load(address);
  if (opts_.spin_ns > 0) {
    if (auto why = spin(address, seen, d)) {
      if (*why == Wake::kMemory && path) *path = MemPath::kSpin;
      return *why;
    }
  }
  int64_t slice = opts_.slice_min_ns;
  for (;;) {
    if (auto why = arm_or_wake()) return *why;
    // Armed: from here an event or a signal raises the fd. The address is read after arming so
    // that a store before the arm is seen now and one after it at the latest one slice later.
    if (load(address) != seen) {
      set_->disarm();
      if (path) *path = MemPath::kSleep;
      return Wake::kMemory;
    }
    if (d.expired()) {
      set_->disarm();
      return Wake::kTimeout;
    }
    Woke w = sleep_on_fd(std::min(slice, d.remaining_ns()));
    if (w == Woke::kInterrupted) {
      set_->disarm();
      if (load(address) != seen) {
        if (path) *path = MemPath::kSleep;
        return Wake::kMemory;
      }
      return Wake::kInterrupted;
    }
    // A quiet slice: sleep longer next time. A raise: the next arm reports the event or signal.
    if (w == Woke::kTimeout) slice = std::min(slice * 2, opts_.slice_max_ns);
  }
}

template Wake Worker::wait_mem<uint8_t>(const volatile uint8_t*, const Deadline&,
                                        MemPath*) noexcept;
template Wake Worker::wait_mem<uint16_t>(const volatile uint16_t*, const Deadline&,
                                         MemPath*) noexcept;
template Wake Worker::wait_mem<uint32_t>(const volatile uint32_t*, const Deadline&,
                                         MemPath*) noexcept;
template Wake Worker::wait_mem<uint64_t>(const volatile uint64_t*, const Deadline&,
                                         MemPath*) noexcept;

}  // namespace dpfab::worker
