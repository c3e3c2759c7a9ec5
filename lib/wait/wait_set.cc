// SPDX-License-Identifier: BSD-3-Clause
#include "wait/wait_set.h"

#include <errno.h>
#include <rdma/fi_errno.h>

namespace dpfab::wait {

Result<std::unique_ptr<WaitSet>> WaitSet::create(fi_wait_obj kind) {
  std::unique_ptr<Signal> signal;
  switch (kind) {
    case FI_WAIT_UNSPEC:
    case FI_WAIT_FD: {
      auto s = Signal::create(SignalKind::kEventFd);
      if (!s) return s.error();
      signal = std::move(s.value());
      break;
    }
    case FI_WAIT_MUTEX_COND: {
      auto s = Signal::create(SignalKind::kMutexCond);
      if (!s) return s.error();
      signal = std::move(s.value());
      break;
    }
    case FI_WAIT_YIELD: {
      auto s = Signal::create(SignalKind::kYield);
      if (!s) return s.error();
      signal = std::move(s.value());
      break;
    }
    case FI_WAIT_POLLFD:
      break;
    default:
      return make_error(-FI_EINVAL,
                        "wait set: wait_obj must be UNSPEC, FD, POLLFD, MUTEX_COND "
                        "or YIELD");
  }
  std::unique_ptr<WaitSet> ws(new (std::nothrow) WaitSet(kind, std::move(signal)));
  if (!ws) return make_error(-FI_ENOMEM, "wait set: out of memory");
  return ws;
}

void WaitSet::on_member_notify(Subscription* sub) noexcept {
  // The set-level arm protocol (waitable.h), P2-P3: the member's event and its queued flag are
  // published; a consumer armed on the set must be woken.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (armed_.load(std::memory_order_relaxed) && armed_.exchange(false, std::memory_order_acq_rel)) {
    if (signal_) {
      signal_->raise();
    } else if (Signal* own = sub->member->signal()) {
      own->raise();  // POLLFD: the member's fd is the one in the application's pollfd array
    }
  }
}

// POLLFD: a member's fd may have been raised by the set; lower every fd the consumer may still see
// readable (members on the ready list or kept active) so that poll() does not spin on stale
// readiness. Members never taken cannot have been raised: the raise follows the push.
void WaitSet::drain_members() noexcept {
  std::lock_guard lock(consumer_mutex_);
  take_pushed();
  for (Subscription* s : active_)
    if (Signal* own = s->member->signal()) own->drain();
}

int WaitSet::try_arm() noexcept {
  progress();
  if (signal_)
    signal_->drain();  // C1
  else
    drain_members();
  armed_.store(true, std::memory_order_seq_cst);  // C2: pairs with the fence in on_member_notify
  if (any_ready()) {                              // C3
    armed_.store(false, std::memory_order_relaxed);
    release_watch();
    return -FI_EAGAIN;
  }
  hold_watch();
  return FI_SUCCESS;
}

void WaitSet::hold_watch() noexcept {
  std::lock_guard lock(watch_mutex_);
  if (!watched_.empty()) return;
  for_each_source([this](ProgressSource* s) {
    try {
      watched_.push_back(s);  // capacity stays after the first arm: no allocation later
    } catch (...) {
      return;  // out of memory: this source is not watched (its waits fall back to slices)
    }
    s->armed();
  });
}

void WaitSet::release_watch() noexcept {
  std::lock_guard lock(watch_mutex_);
  for (ProgressSource* s : watched_) s->disarmed();
  watched_.clear();
}

Woke WaitSet::wait_signal(const Deadline& d, uint32_t gen) noexcept {
  if (signal_) return signal_->wait(d, gen);
  // POLLFD: wait on every member's fd, as the application would.
  std::vector<pollfd> fds;
  for_each_member([&](Subscription& s) {
    if (Signal* own = s.member->signal(); own && own->fd() >= 0)
      fds.push_back(pollfd{own->fd(), POLLIN, 0});
  });
  timespec ts = d.remaining_ts();
  int r = ppoll(fds.data(), fds.size(), d.infinite() ? nullptr : &ts, nullptr);
  if (r > 0) return Woke::kRaised;
  if (r < 0 && errno == EINTR) return Woke::kInterrupted;
  return Woke::kTimeout;
}

int WaitSet::wait(const Deadline& d) noexcept {
  for (;;) {
    const uint32_t gen = signal_ ? signal_->generation() : 0;  // before try_arm's re-check
    if (try_arm() != FI_SUCCESS) return FI_SUCCESS;            // try_arm released the watch
    Woke w = wait_signal(d, gen);
    if (w == Woke::kRaised) continue;  // re-check through try_arm: stale raises are absorbed
    disarm();
    if (any_ready()) return FI_SUCCESS;
    return w == Woke::kInterrupted ? -FI_EINTR : -FI_ETIMEDOUT;
  }
}

int WaitSet::get_wait(void* arg) noexcept {
  if (!arg) return -FI_EINVAL;
  switch (kind_) {
    case FI_WAIT_FD:
      *static_cast<int*>(arg) = signal_->export_fd();
      return FI_SUCCESS;
    case FI_WAIT_MUTEX_COND:
      *static_cast<fi_mutex_cond*>(arg) = *signal_->mutex_cond();
      return FI_SUCCESS;
    case FI_WAIT_POLLFD: {
      auto* pf = static_cast<fi_wait_pollfd*>(arg);
      int ret = FI_SUCCESS;
      std::vector<int> fds;
      for_each_member([&](Subscription& s) {
        if (Signal* own = s.member->signal(); own && own->fd() >= 0) fds.push_back(own->fd());
      });
      pf->change_index = change_index();
      if (pf->nfds < fds.size())
        ret = -FI_ETOOSMALL;
      else
        for (size_t i = 0; i < fds.size(); ++i) pf->fd[i] = pollfd{fds[i], POLLIN, 0};
      pf->nfds = fds.size();
      return ret;
    }
    default:
      return -FI_ENODATA;  // UNSPEC / YIELD: no native object to hand out
  }
}

int WaitSet::add_member(Waitable* member, void* context) noexcept {
  if (members_need_own_fd() && (!member->signal() || member->signal()->fd() < 0)) return -FI_EINVAL;
  // POLLFD: the member's eventfd is what the application (and wait_signal) polls.
  if (kind_ == FI_WAIT_POLLFD) member->signal()->export_fd();
  int r = add(member, context);
  if (r == FI_SUCCESS && kind_ == FI_WAIT_POLLFD)
    change_index_.fetch_add(1, std::memory_order_acq_rel);
  return r;
}

int WaitSet::remove_member(Waitable* member) noexcept {
  int r = remove(member);
  if (r == FI_SUCCESS && kind_ == FI_WAIT_POLLFD)
    change_index_.fetch_add(1, std::memory_order_acq_rel);
  return r;
}

int PollSet::poll(void** contexts, int count) noexcept {
  if (count < 0 || (count > 0 && !contexts)) return -FI_EINVAL;
  progress();
  return static_cast<int>(scan(contexts, static_cast<size_t>(count), true));
}

}  // namespace dpfab::wait
