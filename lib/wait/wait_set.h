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
  /// -FI_EAGAIN when a member has events. Runs one progress step first.
  int try_arm() noexcept;
  void disarm() noexcept {
    armed_.store(false, std::memory_order_relaxed);
    release_watch();
  }
  /// fi_wait: 0 once a member has events; -FI_ETIMEDOUT; -FI_EINTR on a POSIX signal.
  int wait(const Deadline& d) noexcept;

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
  void hold_watch() noexcept;
  void release_watch() noexcept;
  void on_member_notify(Subscription* sub) noexcept override;
  void on_member_leaving() noexcept override { release_watch(); }
  void drain_members() noexcept;
  Woke wait_signal(const Deadline& d, uint32_t gen) noexcept;

  const fi_wait_obj kind_;
  std::unique_ptr<Signal> signal_;  // null for POLLFD (members' fds)
  alignas(64) std::atomic<bool> armed_{false};
  std::atomic<uint64_t> change_index_{1};
  std::mutex watch_mutex_;
  std::vector<ProgressSource*> watched_;  // sources told armed(), under watch_mutex_
};

class PollSet final : public Aggregator {
 public:
  PollSet() noexcept : Aggregator(true) {}
  /// fi_poll: one progress step, then up to `count` contexts of members that may have events.
  int poll(void** contexts, int count) noexcept;
};

}  // namespace dpfab::wait
