// SPDX-License-Identifier: BSD-3-Clause
//
// Cntr: the storage and the blocking behaviour of a libfabric counter (fi_cntr(3)): a 64-bit
// success value and a 64-bit error value, the producer API the progress lcore calls when an
// operation completes, and the application API behind fi_cntr_read / readerr / add / set /
// adderr / seterr / wait.
//
// Threads.
//   - Producers (the progress lcore, or any thread running a manual-progress step) call add() and
//     add_err(): one atomic add and Waitable::notify(). No lock, no allocation, and no syscall
//     unless a consumer is armed (fi_trywait succeeded or a thread is blocked in wait()).
//   - Application threads call everything else, concurrently with producers and with each other.
//
// Three notions of "something happened":
//   - wait(threshold): the value reached the threshold, or the error value changed since the
//     wait started (fi_cntr_wait: "Any change in a counter's error value will unblock any thread
//     inside fi_cntr_wait").
//   - ready(), used by fi_trywait and wait sets: the value changed since the application last
//     called read(), or the error value since it last called readerr() (a checkpoint taken on
//     read, as libfabric's util counters do). So fi_trywait says -FI_EAGAIN until the
//     application has looked at what changed.
//   - poll_pending(), used by poll sets: the value or the error value changed since the last
//     time fi_poll reported this counter (fi_poll(3)), by a completion or by the application:
//     every fi_cntr_add, fi_cntr_set, fi_cntr_adderr and fi_cntr_seterr counts as a change, as an
//     application polling a counter it adds to expects (the man page's "since the last time
//     fi_poll, fi_cntr_set, or fi_cntr_add were called" is not read as "those calls hide it").
// For ready(), "changed" compares values: a value brought back to the checkpoint by the
// application (a set, or seterr) is not a change. Producers only add, so nothing they do can hide
// from a checkpoint or snapshot; application calls also bump a generation the poll snapshot holds.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "wait/signal.h"
#include "wait/waitable.h"

namespace dpfab::event {

class Cntr final : public wait::Waitable {
 public:
  /// `signal`: the counter's own wait object (null for FI_WAIT_NONE, and for FI_WAIT_SET when the
  /// set signals for its members). Both values start at 0.
  explicit Cntr(std::unique_ptr<wait::Signal> signal) noexcept : Waitable(std::move(signal)) {}
  /// Leaves every set before the counter's state goes: a scan may call ready() until then.
  ~Cntr() override { leave_all_sets(); }

  // ---- producer API (progress lcore, manual-progress step; any thread) ----------------------

  /// Counts `n` successful completions. One atomic add, then notify(). Never blocks.
  void add(uint64_t n) noexcept {
    // Release: whatever the completed operation wrote (received data, ...) is visible to a thread
    // that reads the new value with acquire (read(), wait()). notify() then fences (P2 of the
    // arm protocol in waitable.h).
    value_.fetch_add(n, std::memory_order_release);
    notify();
  }
  /// Counts `n` operations that completed in error. One atomic add, then notify(). Never blocks.
  void add_err(uint64_t n) noexcept {
    err_.fetch_add(n, std::memory_order_release);  // as in add()
    notify();
  }

  // ---- application API (fi_cntr_*) -----------------------------------------------------------

  /// fi_cntr_read: runs one manual-progress step, returns the value and checkpoints it for
  /// ready().
  uint64_t read() noexcept;
  /// fi_cntr_readerr: runs one manual-progress step, returns the error value and checkpoints it
  /// for ready().
  uint64_t readerr() noexcept;
  /// fi_cntr_add: adds `n` to the value, wakes waiters; the next fi_poll reports the counter.
  /// Always 0.
  int app_add(uint64_t n) noexcept;
  /// fi_cntr_set: sets the value, wakes waiters; the next fi_poll reports the counter. Always 0.
  int set(uint64_t v) noexcept;
  /// fi_cntr_adderr: adds `n` to the error value, wakes waiters; the next fi_poll reports the
  /// counter. Always 0.
  int app_adderr(uint64_t n) noexcept;
  /// fi_cntr_seterr: sets the error value, wakes waiters; the next fi_poll reports the counter.
  /// Always 0.
  int seterr(uint64_t v) noexcept;

  /// fi_cntr_wait: blocks until value >= threshold, the error value changes, or `timeout_ms`
  /// passes (negative: never), running the manual-progress step every round.
  /// Without a signal of its own (FI_WAIT_NONE, or FI_WAIT_SET, where the man page calls this
  /// invalid) it does not fail: it busy-polls progress, yielding the CPU between rounds, as
  /// libfabric's util counters do.
  /// @return 0 when value >= threshold (checked first: a threshold reached wins over an error);
  ///         -FI_EAVAIL when the error value changed since the call started;
  ///         -FI_ETIMEDOUT when the timeout passed first (the error value is left unchanged);
  ///         -FI_EINTR when a POSIX signal interrupted the sleep.
  int wait(uint64_t threshold, int timeout_ms) noexcept;

  /// The values without progress or checkpoint (tests, dpfab-info). Acquire.
  uint64_t value() const noexcept { return value_.load(std::memory_order_acquire); }
  uint64_t err() const noexcept { return err_.load(std::memory_order_acquire); }

  // ---- Waitable ------------------------------------------------------------------------------

  /// Changed since the last read() / readerr() (see the top of this file).
  bool ready() const noexcept override;
  /// Changed since the last fi_poll report (by a producer or an application call).
  bool poll_pending() const noexcept override;
  /// fi_poll reported this counter: take the poll snapshot. Called under the poll set's
  /// consumer lock.
  void polled() noexcept override;

  // ---- bindings (control path) ---------------------------------------------------------------

  /// Endpoints (and, later, memory regions) bound to this counter; fi_close refuses with
  /// -FI_EBUSY while there are any. The endpoint bind/close code calls these.
  void bind_ref() noexcept { binds_.fetch_add(1, std::memory_order_relaxed); }
  void bind_unref() noexcept { binds_.fetch_sub(1, std::memory_order_release); }
  int bindings() const noexcept { return binds_.load(std::memory_order_acquire); }

 private:
  /// After an application call changed a value: bumps the generation, then notify().
  void app_changed() noexcept;

  // Producer-written: every completion adds here. Own cache line, apart from the consumer state.
  alignas(64) std::atomic<uint64_t> value_{0};
  std::atomic<uint64_t> err_{0};

  // Consumer state: the read checkpoint (ready) and the poll snapshot (poll_pending). Written by
  // application threads and the fi_poll scan, read by fi_trywait and set scans on any thread.
  // Relaxed: each is a lone value compared against the counter; no data hangs off them. Writers
  // may race (two threads reading concurrently): each component is still a value the counter had
  // during the race, and since producers only add, any later producer change differs from it.
  alignas(64) std::atomic<uint64_t> read_value_{0};
  std::atomic<uint64_t> read_err_{0};
  std::atomic<uint64_t> poll_value_{0};
  std::atomic<uint64_t> poll_err_{0};
  // Application calls (fi_cntr_add/set/adderr/seterr) so far, and the number the poll snapshot
  // saw: a set that puts back the value fi_poll last saw is still reported.
  std::atomic<uint64_t> app_changes_{0};
  std::atomic<uint64_t> poll_app_changes_{0};
  std::atomic<int> binds_{0};
};

}  // namespace dpfab::event
