// SPDX-License-Identifier: BSD-3-Clause
#include "progress/port_wake.h"

#include <rte_ethdev.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>

#include "common/log.h"

namespace dpfab::progress {

void PortWake::init(uint16_t port_id, port::RxInterrupt intr) noexcept {
  port_id_ = port_id;
  intr_ = intr;
  timer_.reset(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  if (intr != port::RxInterrupt::kNone) {
    int fd = rte_eth_dev_rx_intr_ctl_q_get_fd(port_id, 0);
    if (fd >= 0 && intr == port::RxInterrupt::kFdOnly) {
      // net_tap: the queue fd is the tap itself, readable while frames wait (read by the PMD).
      intr_fd_ = fd;
      fds_[nfds_++] = fd;
    } else if (fd >= 0) {
      // An rx interrupt fd: an eventfd that the interrupt writes (virtio-user, VFIO), or a proxy
      // epoll fd over the vring's kick eventfd (vhost), which nobody reads. Sleepers wait on an
      // epoll fd of ours holding it edge-triggered, as DPDK's own rx-interrupt epoll does: every
      // interrupt queues one event, and arm() takes it (epoll_wait, no read of the fd itself).
      intr_ep_.reset(epoll_create1(EPOLL_CLOEXEC));
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLET;
      if (intr_ep_.valid() && epoll_ctl(intr_ep_.get(), EPOLL_CTL_ADD, fd, &ev) == 0) {
        intr_fd_ = fd;
        fds_[nfds_++] = intr_ep_.get();
      } else {
        intr_ep_.reset();
        DPFAB_INFO(FI_LOG_CORE, "port %u: cannot watch its rx interrupt fd (polled while idle)",
                   port_id);
      }
    } else {
      DPFAB_INFO(FI_LOG_CORE, "port %u: no queue fd to sleep on (polled while idle)", port_id);
    }
  }
  // The timer fd only where sleepers rely on the port's own fds: on a port they do not cover the
  // wakeup thread watches the port and runs its timers.
  if (intr_fd_ >= 0 && timer_.valid()) fds_[nfds_++] = timer_.get();
}

void PortWake::attach_kick(KickChannel* k) noexcept {
  if (!k || kick_ || nfds_ >= kMaxFds) return;
  kick_ = k;
  fds_[nfds_++] = k->wake_fd();
  if (intr_fd_ < 0 && timer_.valid() && nfds_ < kMaxFds) fds_[nfds_++] = timer_.get();
}

void PortWake::attach_local(shm::Node* n) noexcept {
  if (!n || local_ || nfds_ >= kMaxFds) return;
  local_ = n;
  fds_[nfds_++] = n->wake_fd();
  // Sleepers run the protocol timers themselves where they sleep on these fds (the port covers
  // its frames, or there is no port to poll).
  const bool has_timer = std::find(fds_, fds_ + nfds_, timer_.get()) != fds_ + nfds_;
  if (!has_timer && (intr_fd_ >= 0 || no_rx_) && timer_.valid() && nfds_ < kMaxFds)
    fds_[nfds_++] = timer_.get();
}

void PortWake::arm() noexcept {
  stats_.arms.fetch_add(1, std::memory_order_relaxed);
  if (local_) local_->arm();  // A1-A2 of the same-host path (shm/node.h)
  if (kick_ && kick_in_use()) {
    // A1 before A2: the eventfd is read empty, then the flag set; a kick after the read stays
    // readable. Read at every arm, not only when the flag was found clear: the peer writes
    // after it cleared the flag (at the end of its call, PortEngine::kick_deferred), so the
    // write of a kick can land after an arm that found the flag clear and set it again, and
    // rekick() writes the fd while the flag is set. Readable with the flag set, the fd would
    // end every sleep at once until the next kick (seen: an idle lcore parking and waking 4
    // million times in 10 s). One read, where draining a kick took two before.
    if (kick_->drain()) stats_.kick_wakes.fetch_add(1, std::memory_order_relaxed);
    kick_->arm();  // seq_cst RMW: ordered before the poll that follows (memif_kick.h K1/K2)
  }
  if (intr_ == port::RxInterrupt::kEnable && intr_ep_.valid()) {
    epoll_event ev;
    epoll_wait(intr_ep_.get(), &ev, 1, 0);  // A1: take the interrupt's edge, if it fired
    // Virtio-style interrupts fire once per enable (event index): enable before every sleep.
    std::lock_guard lock(intr_mutex_);
    if (rte_eth_dev_rx_intr_enable(port_id_, 0) == 0)
      stats_.intr_enables.fetch_add(1, std::memory_order_relaxed);
  }
}

void PortWake::arm_timer(uint64_t due_ns) noexcept {
  if (!timer_.valid()) return;
  // Steady state (no protocol timer, none set): no lock, no syscall.
  if (due_ns == timer_set_hint_.load(std::memory_order_relaxed) && due_ns == UINT64_MAX) return;
  std::lock_guard lock(timer_mutex_);
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t now = static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  uint64_t at = due_ns;
  if (due_ns == timer_set_ns_) {
    // Set already and not yet due: nothing to do. Due and unchanged although a poll step ran
    // (the protocol did not move it): look again in 1 ms rather than wake at once, for ever.
    if (due_ns == UINT64_MAX || now < timer_at_ns_) return;
    at = now + 1'000'000;
  } else if (due_ns != UINT64_MAX && due_ns > now) {
    // Slack. An RDM retransmission deadline moves with every message (send time + RTO), so a
    // blocking ping-pong set the fd before every sleep, and timerfd_settime costs 10-20 us on the
    // 2-vCPU VM (most of the CPU of an RDM blocking wait, measured with a trace of both
    // processes). A deadline that may fire a little late (a retransmission, a delayed ack, a
    // probe) keeps a timer set within min(half the time left, 1 ms) after it, and a new one is
    // set that much late, so that the next deadlines fall inside it too. An awake consumer's poll
    // steps meet deadlines exactly; only a sleeping one sees the slack.
    const uint64_t slack = std::min((due_ns - now) / 2, kTimerSlackMaxNs);
    if (timer_at_ns_ != UINT64_MAX && timer_at_ns_ > now && timer_at_ns_ >= due_ns &&
        timer_at_ns_ - due_ns <= slack) {
      timer_set_ns_ = due_ns;
      timer_set_hint_.store(due_ns, std::memory_order_relaxed);
      return;
    }
    at = due_ns + slack;
  }
  uint64_t expiries;
  [[maybe_unused]] ssize_t n = ::read(timer_.get(), &expiries, sizeof(expiries));
  itimerspec its{};
  if (at != UINT64_MAX) {
    if (at == 0) at = 1;  // 0 would disarm: "due now" is 1 ns
    its.it_value.tv_sec = static_cast<time_t>(at / 1'000'000'000);
    its.it_value.tv_nsec = static_cast<long>(at % 1'000'000'000);
  }
  timerfd_settime(timer_.get(), TFD_TIMER_ABSTIME, &its, nullptr);
  timer_set_ns_ = due_ns;
  timer_at_ns_ = at;
  timer_set_hint_.store(due_ns, std::memory_order_relaxed);
  stats_.timer_arms.fetch_add(1, std::memory_order_relaxed);
}

void PortWake::rekick() noexcept {
  if (local_) {  // every sleeper on the port's fds sleeps on the node's eventfd too
    local_->rekick();
    return;
  }
  if (kick_ && kick_in_use()) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(kick_->wake_fd(), &one, sizeof(one));
  } else if (timer_.valid()) {
    // The timer fd is in every covered port's fds: fire it now (the next arm_timer sets it again).
    std::lock_guard lock(timer_mutex_);
    itimerspec its{};
    its.it_value.tv_nsec = 1;
    timerfd_settime(timer_.get(), 0, &its, nullptr);
    timer_set_ns_ = 0;
    timer_at_ns_ = 0;
    timer_set_hint_.store(0, std::memory_order_relaxed);
  }
}

bool PortWake::enable_interrupt() noexcept {
  if (intr_ != port::RxInterrupt::kEnable) return false;
  std::lock_guard lock(intr_mutex_);
  return rte_eth_dev_rx_intr_enable(port_id_, 0) == 0;
}

void PortWake::disable_interrupt() noexcept {
  if (intr_ != port::RxInterrupt::kEnable) return;
  std::lock_guard lock(intr_mutex_);
  rte_eth_dev_rx_intr_disable(port_id_, 0);
}

}  // namespace dpfab::progress
