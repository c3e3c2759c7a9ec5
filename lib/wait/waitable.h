// SPDX-License-Identifier: BSD-3-Clause
//
// Waitable: the arm/trywait protocol shared by every object a thread can block on (CQ, EQ,
// counter) and the hooks that let wait sets and poll sets aggregate them.
//
// ---- The protocol ------------------------------------------------------------------------------
//
// A waitable has a queue (or a value) that producers change, an `armed_` flag, and optionally its
// own Signal. Busy-polling costs no syscall and no shared write; each sleep costs at most one
// signal raise.
//
//   producer (notify, after publishing an event; any thread, the progress lcore included):
//     P1  publish the event (ring enqueue, counter add, ...)
//     P2  atomic_thread_fence(seq_cst)
//     P3  if (armed_ && armed_.exchange(false)) signal->raise()
//     P4  for each wait/poll set subscription: push it on the set's ready list, set-level P2-P3
//
//   consumer (try_arm(pred), i.e. fi_trywait / worker arm; then block on the signal):
//     C1  signal->drain()                   -- before the check, never after
//     C2  armed_.store(true, seq_cst)
//     C3  if (pred()) { armed_ = false; return -FI_EAGAIN; }   -- "busy: read first"
//     C4  return FI_SUCCESS                 -- blocking on the signal is now safe
//
// Why no wakeup is lost. Take any event published at P1 and a consumer that returned FI_SUCCESS
// at C4 and blocks. C2 and P2 are both sequentially consistent, so one comes first in their single
// total order:
//   - P2 before C2: then P1 happens-before C3, the check sees the event, and C3 returns EAGAIN
//     (the consumer did not block);
//   - C2 before P2: then P3 reads armed_ == true (no other writer can have cleared it except a
//     producer that raised, or the consumer's own C3 which did not run), exchanges it to false
//     and raises the signal. The raise comes after C1's drain, so the signal stays raised and
//     the consumer's block returns.
// A drain after the check (C1 after C3) would erase a raise that happened in between: the model
// in test/model/arm_trywait.pml finds that lost wakeup, and the one without either fence.
// P3 reads armed_ relaxed first so that the common case (nobody asleep) writes nothing; the
// exchange (a locked RMW) is only done when a consumer is armed. A producer that holds a
// data-path lock (an endpoint's core lock, a poll step's receive side) makes the decision at P3
// and the raise (and P4) once it has let go of the lock (wake_batch.h): the argument above holds
// with the raise later in time -- the consumer it decided to wake stays armed and blocked, or
// about to block on a signal it drained before C2, until the raise comes.
//
// Sleeping on the port as well (ProgressSource::sleep_fds). A consumer whose sleep includes the
// source's wake fds runs, between C1 and C2:
//     A1  drain the wake fds that fired; A2 arm them (memif kick flag, rx interrupt enable,
//         timer fd); A3 run the poll step until the port's queue is empty.
//     If A3 could not own the receive side, or left frames, the consumer does not block
//     (-FI_EAGAIN). A frame that arrives after A3 fires an armed fd (the kick's own store-
//     buffering pair, lib/progress/memif_kick.h; an interrupt enabled before A3). A frame that
//     A3 delivered to this object needs no raise (C2 comes after it) and is seen at C3. Whoever
//     drains a wake fd re-arms it before it polls, so a drain by one sleeper never leaves another
//     sleeping on a disarmed port. Several sleepers on one port all wake on its fds.
//
// The predicate is the condition the waiter will test after waking (queue non-empty, counter at
// its threshold, ...). Every change that can make it true is followed by notify().
#pragma once

#include <rdma/fi_errno.h>
#include <sched.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>

#include "common/fd.h"
#include "common/fence.h"
#include "common/result.h"
#include "wait/deadline.h"
#include "wait/signal.h"
#include "wait/wake_batch.h"

namespace dpfab::wait {

/// Something that can make progress: a domain polling its ports under manual progress.
///
/// Sleeping on the source (doc/design.md, "Sleeping on the port"). A source may own wake fds
/// (sleep_fds: a port's memif kick eventfd, rx-interrupt or queue fd, protocol timer fd). A
/// consumer that sleeps on them as well as on its object's signal needs nobody to progress the
/// port for it: it is woken by the port itself and runs the poll step on its own thread, one OS
/// wakeup per message. Before such a consumer blocks, prepare_sleep() arms those fds (drains
/// what fired, sets the kick flag, enables the interrupt) and polls once more; a frame that
/// arrives after that poll fires an armed fd. A consumer that sleeps on its signal only (an
/// application waiting on the FI_WAIT_MUTEX_COND pair) cannot see the fds: then the armed()
/// hook has the wakeup thread watch the port for it (lib/progress/wakeup.h).
class ProgressSource {
 public:
  virtual ~ProgressSource() = default;
  /// One poll step; returns how many events it produced.
  virtual size_t progress() noexcept = 0;
  /// How long a blocked wait keeps running progress steps before it sleeps (the spin budget). It
  /// may change from one wait to the next (a budget that learns, see waited()).
  virtual int64_t spin_ns() noexcept { return 0; }
  /// A blocked wait ended after `waited_ns` (from its first look to its return): with an event
  /// (`ready`) or not, having slept or not. The spin budget learns from it. Any thread.
  virtual void waited(int64_t /*waited_ns*/, bool /*ready*/, bool /*slept*/) noexcept {}
  /// A wait that went to sleep at `slept_at_ns` (CLOCK_MONOTONIC) is running again. A source
  /// that knows when the wake was sent (a memif kick's time) learns what a wake costs from it.
  virtual void woke(int64_t /*slept_at_ns*/) noexcept {}
  /// While a wait sleeps, how often it wakes to run a progress step; negative when events arrive
  /// without the waiter's help (automatic progress, the port's own wake fds, or the wakeup thread
  /// watching the port while a consumer is armed). Without either, the sleeper polls at this
  /// interval.
  virtual int64_t poll_interval_ns() const noexcept { return -1; }
  /// The fds a sleeper waits on besides its object's signal; empty when none. The same for the
  /// life of the source (FI_GETWAIT hands them out in epoll sets and pollfd arrays).
  virtual std::span<const int> sleep_fds() const noexcept { return {}; }
  /// Arms sleep_fds() and runs the poll step once more (A1-A3, waitable.h). Any thread.
  /// @return false when sleeping is not safe yet: the poll step could not run (another thread
  ///         owned the port's receive side) or left frames behind. The caller polls again.
  virtual bool prepare_sleep() noexcept { return true; }
  /// The last step before a sleep on sleep_fds(), once the consumer's re-check (C3) found
  /// nothing: sets the source's timer fd to its next protocol deadline (a retransmission, a
  /// delayed ack). Not part of prepare_sleep(): a consumer whose re-check finds an event does
  /// not sleep and must not pay for it (a timerfd_settime takes 10 us on the 2-vCPU VM, and up to
  /// 45 us for a deadline that close; measured in the waitset ping-pong, where it delayed every
  /// reply past the peer's 20 us delayed ack). Any thread.
  virtual void arm_deadline() noexcept {}
  /// What armed()/disarmed() must do for a consumer that sleeps on the fds (`on_fds`) or not:
  /// an opaque kind, passed back to both hooks (0: nothing).
  virtual uint8_t arm_kind(bool /*on_fds*/) const noexcept { return 0; }
  /// A consumer of this source armed (its armed flag went from false to true: fi_trywait, a
  /// blocking wait), with the kind arm_kind() gave. Any thread; never blocks.
  virtual void armed(uint8_t /*kind*/) noexcept {}
  /// The end of an armed period: a producer cleared the flag (and raised), or the consumer did.
  virtual void disarmed(uint8_t /*kind*/) noexcept {}
  /// interrupt() ran on a waitable of this source (fi_cq_signal): a parked lcore may want to know.
  virtual void interrupted() noexcept {}
};

class Aggregator;
class Waitable;

/// One membership of a waitable in a wait set or poll set. Owned by the aggregator.
struct Subscription {
  Aggregator* agg = nullptr;
  Waitable* member = nullptr;
  void* context = nullptr;          ///< reported by fi_poll: the member fid's context
  std::atomic<bool> queued{false};  ///< on the aggregator's ready list (or its active set)
  Subscription* next = nullptr;     ///< ready-list link, written by the pushing producer
};

/// Outcome of a blocking wait.
enum class WaitStatus : uint8_t {
  kReady,        ///< the predicate is true
  kTimeout,      ///< the deadline passed first
  kInterrupted,  ///< interrupt() (fi_cq_signal, worker signal) or a POSIX signal (EINTR)
};

class Waitable {
 public:
  static constexpr int kMaxSubscriptions = 16;

  /// `signal` may be null: FI_WAIT_NONE, or membership in a wait set that signals for us.
  explicit Waitable(std::unique_ptr<Signal> signal) noexcept : signal_(std::move(signal)) {}
  virtual ~Waitable();
  Waitable(const Waitable&) = delete;
  Waitable& operator=(const Waitable&) = delete;

  // ---- what the event object supplies ----

  /// True while the consumer has something to read (CQ/EQ non-empty, counter changed since it was
  /// last read). Any thread; must not block. Used by fi_trywait and wait sets.
  virtual bool ready() const noexcept = 0;
  /// fi_poll's notion of "has events" (counters: changed since the last fi_poll/set/add).
  virtual bool poll_pending() const noexcept { return ready(); }
  /// Called when fi_poll reported this member (counters take their poll snapshot here).
  virtual void polled() noexcept {}

  // ---- producer side ----

  /// Tells sleepers that an event was published. Call after every change that can make a
  /// consumer's predicate true. No syscall unless a consumer is armed. Any thread. Inside an
  /// open WakeBatch (a data-path lock is held: wake_batch.h) the raise, the end-of-arm hook and
  /// the wait sets' notification run when the batch closes; the decision (P3) is made here.
  void notify() noexcept {
    // P2: orders the caller's publication before the armed_ load; pairs with the seq_cst store of
    // armed_ in try_arm (store-buffering: one of the two sides sees the other). full_fence is
    // std::atomic_thread_fence(seq_cst), cheaper on x86-64 (common/fence.h).
    full_fence();
    if (armed_.load(std::memory_order_relaxed) &&
        armed_.exchange(false, std::memory_order_acq_rel)) {
      // One call per armed period ended here (each pairs with the armed_hook(true) that began
      // it), so not merged with another.
      WakeBatch::defer(&Waitable::end_armed_period, this);
    }
    if (nsubs_.load(std::memory_order_relaxed) != 0)
      WakeBatch::defer(&Waitable::notify_subscribers_call, this, 0, /*once=*/true);
  }

  // ---- consumer side ----

  /// The arm step of fi_trywait / worker arm for predicate `pred` (see the protocol above).
  /// `on_fds`: the caller's sleep includes the progress source's sleep_fds() (the FI_WAIT_FD epoll
  /// set, a POLLFD array, the provider's own waits); then the port is armed and polled (A1-A3).
  /// @return FI_SUCCESS when blocking is safe; -FI_EAGAIN when pred() holds or the port has work.
  template <typename Pred>
  int try_arm(Pred&& pred, bool on_fds = false) noexcept {
    if (signal_) signal_->drain();  // C1
    ProgressSource* src = progress_source();
    if (on_fds && src && !src->prepare_sleep()) return -FI_EAGAIN;  // A1-A3
    // The kind first: a producer that ends the armed period (exchange in notify) reads it.
    arm_kind_.store(src ? src->arm_kind(on_fds) : 0, std::memory_order_relaxed);
    // C2: pairs with the fence in notify(). A seq_cst exchange is a seq_cst store that also
    // tells whether this starts an armed period (for the progress source's armed() hook).
    if (!armed_.exchange(true, std::memory_order_seq_cst)) armed_hook(true);
    if (pred()) {  // C3
      if (armed_.exchange(false, std::memory_order_relaxed)) armed_hook(false);
      return -FI_EAGAIN;
    }
    if (on_fds && src) src->arm_deadline();
    return FI_SUCCESS;  // C4
  }
  int try_arm(bool on_fds = false) noexcept {
    return try_arm([this] { return ready(); }, on_fds);
  }
  /// Clears a stale arm (after a timeout). Harmless if a producer clears it concurrently: exactly
  /// one of them ends the armed period.
  void disarm() noexcept {
    if (armed_.load(std::memory_order_relaxed) && armed_.exchange(false, std::memory_order_relaxed))
      armed_hook(false);
  }
  bool armed() const noexcept { return armed_.load(std::memory_order_relaxed); }

  /// Blocks until `pred()` holds, `d` passes, or interrupt() is called, running one progress step
  /// per round (manual progress). Requires an own signal (not FI_WAIT_NONE / FI_WAIT_SET). Spins
  /// for the source's budget first; then sleeps on the signal and the source's wake fds.
  template <typename Pred>
  WaitStatus wait(Pred&& pred, const Deadline& d) noexcept {
    const int64_t t0 = Deadline::now_ns();
    ProgressSource* src = progress_source();
    bool slept = false;
    auto done = [&](WaitStatus s) {
      if (src) src->waited(Deadline::now_ns() - t0, s == WaitStatus::kReady, slept);
      return s;
    };
    const uint64_t seq = interrupts_.load(std::memory_order_acquire);
    // Spin phase: poll for the spin budget before paying for a sleep and a wakeup.
    if (const int64_t budget = src ? src->spin_ns() : 0; budget > 0) {
      const Deadline spin_end = Deadline::after_ns(budget);
      while (!spin_end.expired() && !d.expired()) {
        src->progress();
        if (pred()) return done(WaitStatus::kReady);
        if (interrupts_.load(std::memory_order_acquire) != seq)
          return done(WaitStatus::kInterrupted);
      }
    }
    if (signal_->kind() == SignalKind::kYield) {
      // FI_WAIT_YIELD: nothing to sleep on. Poll, yielding the CPU between rounds; nothing is
      // armed (no thread needs to watch the port for a waiter that never sleeps).
      for (;;) {
        progress_once();
        if (pred()) return done(WaitStatus::kReady);
        if (interrupts_.load(std::memory_order_acquire) != seq)
          return done(WaitStatus::kInterrupted);
        if (d.expired()) return done(pred() ? WaitStatus::kReady : WaitStatus::kTimeout);
        sched_yield();
      }
    }
    const std::span<const int> fds = src ? src->sleep_fds() : std::span<const int>();
    const bool on_fds = !fds.empty();
    // A source that needs a progress step now and then although it has fds (an EQ whose AV waits
    // for ARP replies on a port the fds do not cover: the fds may be the same-host path's alone)
    // gives a poll interval too: the sleep is cut into slices of it.
    const int64_t slice = src ? src->poll_interval_ns() : -1;
    for (;;) {
      // A plain poll step before arming, although try_arm's A3 polls again: work that is
      // already there is found without arming the port, which would have the peer kick us for
      // nothing (measured: dropping it raised a blocking ping-pong from 0.6 to 1.0-1.2 OS
      // wakeups per message on memif). fi_trywait and WaitSet::try_arm do the same.
      progress_once();
      if (pred()) return done(WaitStatus::kReady);
      if (interrupts_.load(std::memory_order_acquire) != seq) {
        disarm();
        return done(WaitStatus::kInterrupted);
      }
      if (d.expired()) {
        disarm();
        return done(WaitStatus::kTimeout);
      }
      // The generation is read before the re-check in try_arm: any raise after the check bumps
      // it, so the wait below cannot sleep through it (nor can another waiter's drain hide it).
      const uint32_t gen = signal_->generation();
      if (try_arm(pred, on_fds) != FI_SUCCESS) continue;
      if (interrupts_.load(std::memory_order_acquire) != seq) {
        disarm();
        return done(WaitStatus::kInterrupted);
      }
      // Under manual progress without wake fds or a watching thread, sleep in slices, polling
      // the port between them.
      const bool sliced = slice >= 0 && (d.infinite() || d.remaining_ns() > slice);
      slept = true;
      const int64_t slept_at = Deadline::now_ns();
      const Deadline until = sliced ? Deadline::after_ns(slice) : d;
      Woke w = on_fds ? signal_->wait_fds(until, gen, fds) : signal_->wait(until, gen);
      if (src) src->woke(slept_at);
      if (w == Woke::kSource) continue;  // the port woke us: the next round polls it
      if (sliced && w == Woke::kTimeout) {
        disarm();
        continue;
      }
      if (w == Woke::kInterrupted) {
        disarm();
        return done(pred() ? WaitStatus::kReady : WaitStatus::kInterrupted);
      }
      if (w == Woke::kTimeout) {
        disarm();
        return done(pred() ? WaitStatus::kReady : WaitStatus::kTimeout);
      }
    }
  }

  /// Makes a blocked wait() return kInterrupted and raises the signal (so an fd or cond waiter
  /// wakes too): fi_cq_signal, worker signal. Any thread.
  void interrupt() noexcept {
    interrupts_.fetch_add(1, std::memory_order_acq_rel);
    if (ProgressSource* p = progress_source()) p->interrupted();
    if (signal_) signal_->raise();
    if (nsubs_.load(std::memory_order_relaxed) != 0) notify_subscribers();
  }

  Signal* signal() const noexcept { return signal_.get(); }

  /// What FI_GETWAIT hands out for FI_WAIT_FD: without source fds the signal's eventfd; with
  /// them an epoll fd (made once, owned here) over the eventfd and every sleep_fds() of the
  /// progress source, readable when any of them is. -FI_ENODATA without an eventfd signal;
  /// -FI_EMFILE when the epoll fd cannot be made. Control path.
  int export_wait_fd() noexcept;
  /// FI_WAIT_POLLFD: the fds to list (the signal's eventfd first, then the source's), at most
  /// `max` written to `out`. @return how many there are (may exceed `max`).
  size_t export_poll_fds(int* out, size_t max) noexcept;

  /// The progress step run by wait() and by sets that contain this waitable (manual progress).
  void set_progress(ProgressSource* p) noexcept { progress_.store(p, std::memory_order_release); }
  ProgressSource* progress_source() const noexcept {
    return progress_.load(std::memory_order_acquire);
  }
  size_t progress_once() noexcept {
    ProgressSource* p = progress_source();
    return p ? p->progress() : 0;
  }

  // ---- set membership (control path) ----

  /// Adds `sub` (whose agg and member are set) to the subscriptions notify() visits.
  /// @return -FI_EALREADY when this aggregator is subscribed already, -FI_ENOSPC past
  ///         kMaxSubscriptions.
  int subscribe(Subscription* sub) noexcept;
  /// Removes `sub`; on return no producer is still using it.
  void unsubscribe(Subscription* sub) noexcept;
  int subscriptions() const noexcept { return nsubs_.load(std::memory_order_acquire); }
  /// Leaves every wait set and poll set. Call it first when closing the derived object: a scan
  /// on another thread may call ready() until this returns.
  void leave_all_sets() noexcept;

 private:
  void notify_subscribers() noexcept;
  // notify()'s deferred halves (WakeBatch::Fn).
  static void end_armed_period(void* self, uint64_t) noexcept {
    auto* w = static_cast<Waitable*>(self);
    if (w->signal_) w->signal_->raise();
    w->armed_hook(false);
  }
  static void notify_subscribers_call(void* self, uint64_t) noexcept {
    static_cast<Waitable*>(self)->notify_subscribers();
  }
  void armed_hook(bool armed) noexcept {
    if (ProgressSource* p = progress_source()) {
      const uint8_t kind = arm_kind_.load(std::memory_order_relaxed);
      armed ? p->armed(kind) : p->disarmed(kind);
    }
  }

  // Written by consumers (try_arm) and producers (notify): on its own cache line.
  alignas(64) std::atomic<bool> armed_{false};
  // The source's arm_kind() of the consumer that armed last (written before armed_ is set; a
  // producer reads it after the exchange that ends the period). Two consumers arming one object
  // at once with different kinds may pair a hook with the other's kind: harmless for the kinds
  // in use (a wakeup-thread watch held a little longer or shorter).
  std::atomic<uint8_t> arm_kind_{0};
  std::atomic<uint64_t> interrupts_{0};
  alignas(64) std::unique_ptr<Signal> signal_;
  std::atomic<ProgressSource*> progress_{nullptr};
  std::atomic<int> nsubs_{0};
  std::atomic<int> in_notify_{0};  // producers inside notify_subscribers (unsubscribe waits)
  std::atomic<Subscription*> subs_[kMaxSubscriptions] = {};
  std::mutex export_mutex_;  // export_wait_fd: made once
  UniqueFd epoll_fd_;
};

}  // namespace dpfab::wait
