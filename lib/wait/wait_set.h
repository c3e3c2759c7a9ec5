// SPDX-License-Identifier: BSD-3-Clause
//
// Wait sets (fi_wait_open / fi_wait / fi_trywait on the set) and poll sets (fi_poll_open /
// fi_poll_add / fi_poll_del / fi_poll), built on Aggregator.
//
// Wait-set kinds:
//   FI_WAIT_FD / FI_WAIT_UNSPEC  one eventfd for the whole set, raised by the set's arm protocol;
//   FI_WAIT_MUTEX_COND           one mutex/cond pair for the set;
//   FI_WAIT_YIELD                nothing: fi_wait yields until a member has events;
//   FI_WAIT_POLLFD               one eventfd per member (members keep their own); FI_GETWAIT hands
//                                out the array and change_index moves whenever a member joins or
//                                leaves. The set raises the fd of the member that got the event.
// The members' progress sources' wake fds (a port's memif kick, rx-interrupt fd: sleep_fds in
// waitable.h) join what the set sleeps on: FI_GETWAIT of an FD set is an epoll fd over the set's
// eventfd and those fds (kept in step as members join and leave), a POLLFD array lists them after
// the members' fds, and fi_wait sleeps on them too. A set armed for a sleep on them arms them
// and polls once more (A1-A3) before it reports that blocking is safe.
#pragma once

#include <poll.h>
#include <rdma/fi_eq.h>

#include <vector>

#include "wait/aggregator.h"

namespace dpfab::wait {

class WaitSet final : public Aggregator {
 public:
  /// @return -FI_EINVAL for FI_WAIT_NONE/FI_WAIT_SET or an unknown kind; -FI_ENOMEM/-FI_EMFILE.
  static Result<std::unique_ptr<WaitSet>> create(fi_wait_obj kind);

  ~WaitSet() override { release_watch(); }

  fi_wait_obj kind() const noexcept { return kind_; }
  /// Whether a member joining this set needs an eventfd of its own (POLLFD), or the set signals
  /// for its members (the others).
  bool members_need_own_fd() const noexcept { return kind_ == FI_WAIT_POLLFD; }

  /// fi_trywait on the set: FI_SUCCESS when blocking on the set's wait object is safe,
  /// -FI_EAGAIN when a member has events. Runs one progress step first. `on_fds`: the sleep that
  /// follows includes the sources' wake fds (FD and POLLFD sets as handed out, fi_wait).
  int try_arm(bool on_fds = false) noexcept;
  /// What fi_trywait on this set passes as on_fds: whether what the application sleeps on
  /// (FI_GETWAIT) includes the sources' fds.
  bool app_sleeps_on_fds() const noexcept { return kind_ == FI_WAIT_FD || kind_ == FI_WAIT_POLLFD; }
  void disarm() noexcept {
    armed_.store(false, std::memory_order_relaxed);
    release_watch();
  }
  /// fi_wait: 0 once a member has events; -FI_ETIMEDOUT; -FI_EINTR on a POSIX signal. Polls for
  /// spin_budget() before it sleeps, and reports the wait (report_wait, report_woke).
  int wait(const Deadline& d) noexcept;
  /// The longest spin budget of the members' progress sources (progress/spin.h): how long a
  /// blocking wait on the set polls before it sleeps. Consumer side.
  int64_t spin_budget() noexcept;
  /// Tells every source how a blocking wait on the set went (ProgressSource::waited) and when a
  /// sleep of it began, once it runs again (ProgressSource::woke): their budgets learn from it.
  void report_wait(int64_t waited_ns, bool ready, bool slept) noexcept;
  void report_woke(int64_t slept_at_ns) noexcept;

  /// FI_GETWAIT. FD: int*; MUTEX_COND: fi_mutex_cond*; POLLFD: fi_wait_pollfd* (-FI_ETOOSMALL
  /// when nfds is too small, with nfds set to what is needed). -FI_ENODATA for UNSPEC/YIELD.
  int get_wait(void* arg) noexcept;
  uint64_t change_index() const noexcept { return change_index_.load(std::memory_order_acquire); }
  /// Raises the set's own signal (FD / MUTEX_COND / YIELD sets): an external event such as a
  /// worker signal. No effect on POLLFD sets (they have no signal of their own).
  void raise_signal() noexcept {
    if (signal_) signal_->raise();
  }

  /// Keeps change_index in step with membership (POLLFD).
  int add_member(Waitable* member, void* context) noexcept;
  int remove_member(Waitable* member) noexcept;

 private:
  WaitSet(fi_wait_obj kind, std::unique_ptr<Signal> signal) noexcept
      : Aggregator(false), kind_(kind), signal_(std::move(signal)) {}
  // The members' progress sources are told armed() when a try_arm succeeds and disarmed() at the
  // consumer's next try_arm, disarm or wait return (a producer cannot tell them: it runs inside
  // their progress step). Consumer side only.
  void hold_watch(bool on_fds) noexcept;
  void release_watch() noexcept;
  void on_member_notify(Subscription* sub) noexcept override;
  void on_member_leaving() noexcept override { release_watch(); }
  void drain_members() noexcept;
  Woke wait_signal(const Deadline& d, uint32_t gen) noexcept;
  /// FD sets whose fd was handed out: brings the epoll set in step with the sources' fds.
  void sync_epoll() noexcept;

  const fi_wait_obj kind_;
  std::unique_ptr<Signal> signal_;  // null for POLLFD (members' fds)
  alignas(64) std::atomic<bool> armed_{false};
  std::atomic<uint64_t> change_index_{1};
  std::mutex watch_mutex_;
  std::vector<std::pair<ProgressSource*, uint8_t>> watched_;  // told armed(kind), watch_mutex_
  std::mutex epoll_mutex_;      // FD sets: the handed-out epoll fd and what it holds
  UniqueFd epoll_;              // made by the first FI_GETWAIT
  std::vector<int> epoll_fds_;  // source fds in it (the set's eventfd is always in it)
};

class PollSet final : public Aggregator {
 public:
  PollSet() noexcept : Aggregator(true) {}
  /// fi_poll: one progress step, then up to `count` contexts of members that may have events.
  int poll(void** contexts, int count) noexcept;
};

}  // namespace dpfab::wait
