// SPDX-License-Identifier: BSD-3-Clause
//
// WakeBatch: the wake-ups a thread decides while it holds a data-path lock, made once it has let
// go of it.
//
// A wake-up is a syscall: an eventfd write, a futex wake, a condition broadcast (0.1 us at best,
// 7-45 us on a VM when it schedules the woken thread on the waker's CPU). Made inside an
// endpoint's core lock, a port's TX lock or a poll step's ownership of the receive side, it would
// hold every other thread that spins on that lock for as long (common/lockcheck.h states and
// checks the rule). So the code that decides to wake someone under such a lock -- Waitable::notify
// (a CQ, counter or EQ whose consumer is armed), the memif kick (PortEngine::transmit) -- calls
// defer() instead of waking, and whoever takes the lock opens a WakeBatch on its stack *before*
// taking it: the batch's destructor runs after the lock's (C++ destroys in reverse order) and
// makes the wake-ups, each once even when a poll step completed several operations for one CQ.
//
//   wait::WakeBatch wakes;      // first
//   std::lock_guard lock(mu_);  // released before `wakes` is destroyed
//
// Batches nest: a batch opened while another is open on the thread does nothing, and the
// outermost one makes every wake-up (a poll step that delivers to an endpoint, which takes its
// lock, wakes after the whole step). Without an open batch, defer() wakes at once. A poll step
// flushes its batch (flush_now) just before it lets go of the receive side, which endpoint unbind
// waits for: a deferred raise never outlives the CQ, EQ or counter it names.
//
// Delaying a wake-up is safe for the arm protocol (waitable.h): the producer's decision (the
// exchange of `armed`) is made at once, and the consumer it decided to wake stays armed, asleep or
// about to sleep, until the raise comes; it only comes a little later. Each deferred call runs
// exactly once.
//
// Threads: a batch belongs to the thread that opened it (thread-local, initial-exec: one %fs load
// per defer).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dpfab::wait {

class WakeBatch {
 public:
  /// A deferred wake-up: fn(arg, value).
  using Fn = void (*)(void* arg, uint64_t value) noexcept;
  /// Calls one batch holds; past that, defer() wakes at once (counted in overflows()).
  static constexpr size_t kCapacity = 64;

  WakeBatch() noexcept : outer_(t_open != nullptr) {
    if (!outer_) t_open = this;
  }
  ~WakeBatch() {
    // flush_now() closed it already (t_open no longer names it): nothing left to make.
    if (!outer_ && t_open == this) flush();
  }
  WakeBatch(const WakeBatch&) = delete;
  WakeBatch& operator=(const WakeBatch&) = delete;

  /// Calls fn(arg, value) when the thread's open batch closes, or now when none is open. With
  /// `once`, a call already queued with the same fn and arg is not queued again.
  static void defer(Fn fn, void* arg, uint64_t value = 0, bool once = false) noexcept {
    WakeBatch* b = t_open;
    if (b == nullptr || !b->push(fn, arg, value, once)) fn(arg, value);
  }
  /// Makes the queued calls now and closes the batch (the outermost batch only; an inner one
  /// leaves them to the outer). The destructor then has nothing left to do.
  void flush_now() noexcept {
    if (!outer_) flush();
  }
  /// Whether a batch is open on this thread.
  static bool open() noexcept { return t_open != nullptr; }
  /// Deferred calls that found their batch full and ran at once, since the process started.
  static uint64_t overflows() noexcept;

 private:
  struct Call {
    Fn fn;
    void* arg;
    uint64_t value;
  };
  bool push(Fn fn, void* arg, uint64_t value, bool once) noexcept;
  void flush() noexcept;

  bool outer_;  // another batch was open when this one was made: this one does nothing
  size_t n_ = 0;
  Call calls_[kCapacity];
  static constinit thread_local WakeBatch* t_open [[gnu::tls_model("initial-exec")]];
};

}  // namespace dpfab::wait
