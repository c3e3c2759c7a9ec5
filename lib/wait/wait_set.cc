// SPDX-License-Identifier: BSD-3-Clause
#include "wait/wait_set.h"

#include <errno.h>
#include <rdma/fi_errno.h>
#include <sys/epoll.h>

#include <algorithm>

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

int WaitSet::try_arm(bool on_fds) noexcept {
  progress();
  if (signal_)
    signal_->drain();  // C1
  else
    drain_members();
  // Found by that step: report it before arming the ports (prepare_sleep), as Waitable::wait
  // does. Otherwise every wake of a blocking ping-pong paid for an arm it did not need.
  if (any_ready()) {
    armed_.store(false, std::memory_order_relaxed);  // a period a former try_arm began ends
    release_watch();
    return -FI_EAGAIN;
  }
  if (on_fds && !prepare_sleep()) {  // A1-A3 for every source
    release_watch();
    return -FI_EAGAIN;
  }
  armed_.store(true, std::memory_order_seq_cst);  // C2: pairs with the fence in on_member_notify
  if (any_ready()) {                              // C3
    armed_.store(false, std::memory_order_relaxed);
    release_watch();
    return -FI_EAGAIN;
  }
  if (on_fds) arm_deadline();
  hold_watch(on_fds);
  return FI_SUCCESS;
}

void WaitSet::hold_watch(bool on_fds) noexcept {
  std::lock_guard lock(watch_mutex_);
  if (!watched_.empty()) return;
  for_each_source([this, on_fds](ProgressSource* s) {
    const uint8_t kind = s->arm_kind(on_fds);
    try {
      watched_.emplace_back(s, kind);  // capacity stays after the first arm: no allocation later
    } catch (...) {
      return;  // out of memory: this source is not watched (its waits fall back to slices)
    }
    s->armed(kind);
  });
}

void WaitSet::release_watch() noexcept {
  std::lock_guard lock(watch_mutex_);
  for (auto [s, kind] : watched_) s->disarmed(kind);
  watched_.clear();
}

Woke WaitSet::wait_signal(const Deadline& d, uint32_t gen) noexcept {
  int fds[Signal::kMaxWaitFds];
  const size_t nsrc = std::min(source_fds(fds, Signal::kMaxWaitFds), Signal::kMaxWaitFds);
  if (signal_) {
    if (nsrc && signal_->kind() != SignalKind::kYield)
      return signal_->wait_fds(d, gen, std::span<const int>(fds, nsrc));
    return signal_->wait(d, gen);
  }
  // POLLFD: wait on every member's fd and the sources' fds, as the application would.
  std::vector<pollfd> pfds;
  for_each_member([&](Subscription& s) {
    if (Signal* own = s.member->signal(); own && own->fd() >= 0)
      pfds.push_back(pollfd{own->fd(), POLLIN, 0});
  });
  const size_t members = pfds.size();
  for (size_t i = 0; i < nsrc; ++i) pfds.push_back(pollfd{fds[i], POLLIN, 0});
  timespec ts = d.remaining_ts();
  int r = ppoll(pfds.data(), pfds.size(), d.infinite() ? nullptr : &ts, nullptr);
  if (r > 0) {
    for (size_t i = 0; i < members; ++i)
      if (pfds[i].revents) return Woke::kRaised;
    return Woke::kSource;
  }
  if (r < 0 && errno == EINTR) return Woke::kInterrupted;
  return Woke::kTimeout;
}

int64_t WaitSet::spin_budget() noexcept {
  int64_t budget = 0;
  for_each_source([&](ProgressSource* s) { budget = std::max(budget, s->spin_ns()); });
  return budget;
}

void WaitSet::report_wait(int64_t waited_ns, bool ready, bool slept) noexcept {
  for_each_source([&](ProgressSource* s) { s->waited(waited_ns, ready, slept); });
}

void WaitSet::report_woke(int64_t slept_at_ns) noexcept {
  for_each_source([&](ProgressSource* s) { s->woke(slept_at_ns); });
}

int WaitSet::wait(const Deadline& d) noexcept {
  // As Waitable::wait: spin for the longest budget of the members' sources first, and tell every
  // source how the wait went (its budget learns from it, spin.h) and when a sleep began.
  const int64_t t0 = Deadline::now_ns();
  bool slept = false;
  auto done = [&](int rc) {
    report_wait(Deadline::now_ns() - t0, rc == FI_SUCCESS, slept);
    return rc;
  };
  if (const int64_t budget = spin_budget(); budget > 0) {
    const Deadline spin_end = Deadline::after_ns(budget);
    while (!spin_end.expired() && !d.expired()) {
      progress();
      if (any_ready()) return done(FI_SUCCESS);
    }
  }
  for (;;) {
    const uint32_t gen = signal_ ? signal_->generation() : 0;  // before try_arm's re-check
    if (try_arm(true) != FI_SUCCESS) return done(FI_SUCCESS);  // try_arm released the watch
    slept = true;
    const int64_t slept_at = Deadline::now_ns();
    Woke w = wait_signal(d, gen);
    report_woke(slept_at);
    // Raised: re-check through try_arm (stale raises are absorbed). A wake fd: the next try_arm
    // polls the port.
    if (w == Woke::kRaised || w == Woke::kSource) continue;
    disarm();
    if (any_ready()) return done(FI_SUCCESS);
    return done(w == Woke::kInterrupted ? -FI_EINTR : -FI_ETIMEDOUT);
  }
}

void WaitSet::sync_epoll() noexcept {
  std::lock_guard lock(epoll_mutex_);
  if (!epoll_.valid()) return;
  int fds[Signal::kMaxWaitFds];
  const size_t n = std::min(source_fds(fds, Signal::kMaxWaitFds), Signal::kMaxWaitFds);
  std::vector<int> want(fds, fds + n);
  epoll_event ev{};
  ev.events = EPOLLIN;
  for (int fd : epoll_fds_)
    if (std::find(want.begin(), want.end(), fd) == want.end())
      epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, &ev);
  for (int fd : want)
    if (std::find(epoll_fds_.begin(), epoll_fds_.end(), fd) == epoll_fds_.end())
      epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev);
  epoll_fds_ = std::move(want);
}

int WaitSet::get_wait(void* arg) noexcept {
  if (!arg) return -FI_EINVAL;
  switch (kind_) {
    case FI_WAIT_FD: {
      // An epoll fd over the set's eventfd and the sources' wake fds (members join later too).
      {
        std::lock_guard lock(epoll_mutex_);
        if (!epoll_.valid()) {
          UniqueFd ep(epoll_create1(EPOLL_CLOEXEC));
          epoll_event ev{};
          ev.events = EPOLLIN;
          if (!ep.valid() || epoll_ctl(ep.get(), EPOLL_CTL_ADD, signal_->export_fd(), &ev) != 0)
            return -FI_EMFILE;
          epoll_ = std::move(ep);
        }
      }
      sync_epoll();
      *static_cast<int*>(arg) = epoll_.get();
      return FI_SUCCESS;
    }
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
      int src[Signal::kMaxWaitFds];
      const size_t nsrc = std::min(source_fds(src, Signal::kMaxWaitFds), Signal::kMaxWaitFds);
      fds.insert(fds.end(), src, src + nsrc);
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
  if (r == FI_SUCCESS) sync_epoll();
  return r;
}

int WaitSet::remove_member(Waitable* member) noexcept {
  int r = remove(member);
  if (r == FI_SUCCESS && kind_ == FI_WAIT_POLLFD)
    change_index_.fetch_add(1, std::memory_order_acq_rel);
  if (r == FI_SUCCESS) sync_epoll();
  return r;
}

int PollSet::poll(void** contexts, int count) noexcept {
  if (count < 0 || (count > 0 && !contexts)) return -FI_EINVAL;
  progress();
  return static_cast<int>(scan(contexts, static_cast<size_t>(count), true));
}

}  // namespace dpfab::wait
