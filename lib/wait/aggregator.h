// SPDX-License-Identifier: BSD-3-Clause
//
// Aggregator: what wait sets and poll sets share. Members (waitables) push their subscription on
// a lock-free ready list when they get an event; the consumer looks only at members on that list
// (plus those it kept from last time because they still had events), so fi_poll, fi_wait and
// fi_trywait cost grows with the number of *active* members, not with all members (the idea of
// epoll's ready list).
//
// Ready-list protocol, per subscription (same shape as the arm protocol in waitable.h):
//   producer (Waitable::notify):  publish event; fence(seq_cst);
//                                 if (!sub.queued.exchange(true)) push(sub); on_member_notify()
//   consumer (scan):              take every pushed sub; for each kept/taken sub that has no
//                                 event: sub.queued.store(false, seq_cst); fence;
//                                 if (member has event && !sub.queued.exchange(true)) keep it.
// A member with an event is therefore always either queued-and-visible to the consumer, or
// re-pushed by the producer that cleared the race: never dropped (proof as for arm/trywait; the
// stress test exercises it). False positives are possible, misses are not.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "wait/waitable.h"

namespace dpfab::wait {

class Aggregator {
 public:
  /// `poll_semantics`: members are judged by poll_pending()/polled() (poll sets) instead of
  /// ready() (wait sets).
  explicit Aggregator(bool poll_semantics) noexcept : poll_semantics_(poll_semantics) {}
  virtual ~Aggregator();
  Aggregator(const Aggregator&) = delete;
  Aggregator& operator=(const Aggregator&) = delete;

  /// Adds a member. @return -FI_EALREADY if it is a member already, -FI_ENOSPC when the member is
  /// in too many sets, -FI_ENOMEM. Control path.
  int add(Waitable* member, void* context) noexcept;
  /// Removes a member. @return -FI_ENOENT if it is not one. Control path.
  int remove(Waitable* member) noexcept;
  size_t size() const noexcept;

  /// Producer side, from Waitable::notify via the subscription.
  void member_notified(Subscription* sub) noexcept {
    if (!sub->queued.exchange(true, std::memory_order_acq_rel)) push(sub);
    on_member_notify(sub);
  }

  /// Runs one progress step on every distinct progress source of the members.
  size_t progress() noexcept;
  /// ProgressSource::prepare_sleep on every distinct source (A1-A3, waitable.h); false when any
  /// of them is not ready to sleep on.
  bool prepare_sleep() noexcept;
  /// ProgressSource::arm_deadline on every distinct source.
  void arm_deadline() noexcept;
  /// The union of the sources' sleep_fds(), at most `max` into `out`; returns how many there are.
  size_t source_fds(int* out, size_t max) noexcept;

  /// Consumer side: reports up to `max` members with events into `contexts` (may be null with
  /// `consume` false: then it only counts). With `consume`, members are told they were polled.
  /// Holds the consumer lock; callers serialise nothing themselves.
  size_t scan(void** contexts, size_t max, bool consume) noexcept;
  /// Whether any member has events (a scan that consumes nothing).
  bool any_ready() noexcept { return scan(nullptr, 1, false) > 0; }

  /// Every distinct progress source of the members (consumer side; not from inside progress()).
  template <typename Fn>
  void for_each_source(Fn&& fn) {
    std::lock_guard lock(members_mutex_);
    for (auto& e : sources_) fn(e.first);
  }

  /// Every member's subscription, for the aggregator's own signal handling (control path).
  template <typename Fn>
  void for_each_member(Fn&& fn) {
    std::lock_guard lock(members_mutex_);
    for (auto& s : members_) fn(*s);
  }

 protected:
  /// Set-level reaction after a member was queued (wait sets: the set's arm protocol).
  virtual void on_member_notify(Subscription*) noexcept {}
  /// Called by remove() before a member leaves (its progress source may go away after).
  virtual void on_member_leaving() noexcept {}
  bool pending(const Subscription* s) const noexcept {
    return poll_semantics_ ? s->member->poll_pending() : s->member->ready();
  }
  /// Moves everything pushed so far into the active list. Consumer lock held.
  void take_pushed() noexcept;

  std::mutex consumer_mutex_;            // scan/any_ready/take: one consumer at a time
  std::vector<Subscription*> active_;    // consumer-owned, queued == true for each
  std::vector<Subscription*> reported_;  // scan scratch: reported members go to the back

 private:
  void push(Subscription* sub) noexcept {
    Subscription* head = head_.load(std::memory_order_relaxed);
    do {
      sub->next = head;
    } while (!head_.compare_exchange_weak(head, sub, std::memory_order_release,
                                          std::memory_order_relaxed));
  }

  const bool poll_semantics_;
  // Producers push here (Treiber stack); the consumer takes the whole stack at once, so there is
  // no ABA problem. Own cache line: every producer writes it.
  alignas(64) std::atomic<Subscription*> head_{nullptr};
  alignas(64) mutable std::mutex members_mutex_;  // control path: add/remove/progress sources
  std::vector<std::unique_ptr<Subscription>> members_;
  std::vector<std::pair<ProgressSource*, int>> sources_;  // distinct sources, with member counts
};

}  // namespace dpfab::wait
