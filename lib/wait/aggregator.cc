// SPDX-License-Identifier: BSD-3-Clause
#include "wait/aggregator.h"

#include <rdma/fi_errno.h>

#include <algorithm>

namespace dpfab::wait {

Aggregator::~Aggregator() {
  // fi_close refuses while members remain; unsubscribe whatever is left for safety.
  std::lock_guard lock(members_mutex_);
  for (auto& s : members_) s->member->unsubscribe(s.get());
}

int Aggregator::add(Waitable* member, void* context) noexcept {
  std::lock_guard lock(members_mutex_);
  for (auto& s : members_)
    if (s->member == member) return -FI_EALREADY;
  auto sub = std::unique_ptr<Subscription>(new (std::nothrow) Subscription());
  if (!sub) return -FI_ENOMEM;
  sub->agg = this;
  sub->member = member;
  sub->context = context;
  try {
    members_.reserve(members_.size() + 1);
    sources_.reserve(sources_.size() + 1);
    std::lock_guard consumer(consumer_mutex_);
    active_.reserve(members_.size() + 1);
    reported_.reserve(members_.size() + 1);
  } catch (...) {
    return -FI_ENOMEM;
  }
  if (int r = member->subscribe(sub.get()); r != FI_SUCCESS) return r;
  if (ProgressSource* p = member->progress_source()) {
    auto it = std::find_if(sources_.begin(), sources_.end(), [p](auto& e) { return e.first == p; });
    if (it == sources_.end())
      sources_.emplace_back(p, 1);
    else
      ++it->second;
  }
  // A member may join with events already queued: make the next scan look at it.
  Subscription* raw = sub.get();
  members_.push_back(std::move(sub));
  member_notified(raw);
  return FI_SUCCESS;
}

int Aggregator::remove(Waitable* member) noexcept {
  on_member_leaving();
  std::lock_guard lock(members_mutex_);
  auto it = std::find_if(members_.begin(), members_.end(),
                         [member](auto& s) { return s->member == member; });
  if (it == members_.end()) return -FI_ENOENT;
  Subscription* sub = it->get();
  member->unsubscribe(sub);  // no producer touches sub after this
  {
    // It may still sit on the ready list: take the list, then forget it.
    std::lock_guard consumer(consumer_mutex_);
    take_pushed();
    active_.erase(std::remove(active_.begin(), active_.end(), sub), active_.end());
  }
  if (ProgressSource* p = member->progress_source()) {
    auto src =
        std::find_if(sources_.begin(), sources_.end(), [p](auto& e) { return e.first == p; });
    if (src != sources_.end() && --src->second == 0) sources_.erase(src);
  }
  members_.erase(it);
  return FI_SUCCESS;
}

size_t Aggregator::size() const noexcept {
  std::lock_guard lock(members_mutex_);
  return members_.size();
}

bool Aggregator::prepare_sleep() noexcept {
  std::lock_guard lock(members_mutex_);
  bool ok = true;
  for (auto& [source, count] : sources_) ok &= source->prepare_sleep();
  return ok;
}

void Aggregator::arm_deadline() noexcept {
  std::lock_guard lock(members_mutex_);
  for (auto& [source, count] : sources_) source->arm_deadline();
}

size_t Aggregator::source_fds(int* out, size_t max) noexcept {
  std::lock_guard lock(members_mutex_);
  size_t n = 0;
  for (auto& [source, count] : sources_)
    for (int fd : source->sleep_fds()) {
      // Two domains on one port share its fds: list each once.
      if (std::find(out, out + std::min(n, max), fd) != out + std::min(n, max)) continue;
      if (n < max) out[n] = fd;
      ++n;
    }
  return n;
}

size_t Aggregator::progress() noexcept {
  std::lock_guard lock(members_mutex_);
  size_t n = 0;
  for (auto& [source, count] : sources_) n += source->progress();
  return n;
}

void Aggregator::take_pushed() noexcept {
  // Acquire: pairs with the release CAS in push(), so the pushed subs' `next` links are visible.
  Subscription* s = head_.exchange(nullptr, std::memory_order_acquire);
  for (; s; s = s->next) active_.push_back(s);  // capacity reserved in add(): once per sub
}

size_t Aggregator::scan(void** contexts, size_t max, bool consume) noexcept {
  std::lock_guard lock(consumer_mutex_);
  take_pushed();
  size_t reported = 0, kept = 0;
  reported_.clear();  // capacity reserved in add(): no allocation here
  for (size_t i = 0; i < active_.size(); ++i) {
    Subscription* sub = active_[i];
    if (reported == max) {  // no room: keep the rest for the next scan, unexamined, in front
      active_[kept++] = sub;
      continue;
    }
    if (pending(sub)) {
      if (contexts) contexts[reported] = sub->context;
      ++reported;
      if (consume) sub->member->polled();
      if (pending(sub)) {  // still has events (a CQ not yet drained): stays active, at the back
        reported_.push_back(sub);
        continue;
      }
    }
    // No (more) events: leave the active list, unless an event raced with us (see the header).
    sub->queued.store(false, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (pending(sub) && !sub->queued.exchange(true, std::memory_order_acq_rel))
      active_[kept++] = sub;
  }
  // Members reported this time queue up behind those not yet reported: with a small `max`, every
  // member with events is reported within a bounded number of calls.
  active_.resize(kept);
  active_.insert(active_.end(), reported_.begin(), reported_.end());
  return reported;
}

}  // namespace dpfab::wait
