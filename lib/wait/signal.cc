// SPDX-License-Identifier: BSD-3-Clause
#include "wait/signal.h"

#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <rdma/fi_errno.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

namespace dpfab::wait {

Result<std::unique_ptr<Signal>> Signal::create(SignalKind kind) {
  std::unique_ptr<Signal> s(new (std::nothrow) Signal(kind));
  if (!s) return make_error(-FI_ENOMEM, "signal: out of memory");
  for (auto& slot : s->fd_sleepers_) slot.store(-1, std::memory_order_relaxed);
  if (kind == SignalKind::kEventFd) {
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) return make_error(errno == EMFILE ? -FI_EMFILE : -FI_ENOMEM, "eventfd failed");
    s->fd_.reset(fd);
  } else if (kind == SignalKind::kMutexCond) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int r = pthread_cond_init(&s->cond_, &attr);
    pthread_condattr_destroy(&attr);
    if (r != 0) return make_error(-FI_ENOMEM, "pthread_cond_init failed");
    s->cond_ready_ = true;
  }
  return s;
}

namespace {

// The calling thread's own eventfd for wait_fds (made on first use, closed at thread exit: by
// then the thread is in no Signal's slots).
int thread_sleep_fd() noexcept {
  thread_local UniqueFd fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  return fd.get();
}

}  // namespace

Signal::~Signal() {
  if (cond_ready_) pthread_cond_destroy(&cond_);
  pthread_mutex_destroy(&mutex_);
}

void Signal::wake_fd_sleepers() noexcept {
  // After the generation bump (seq_cst): pairs with the sleeper's seq_cst registration and
  // re-read of the generation in wait_fds.
  if (nfd_sleepers_.load(std::memory_order_seq_cst) == 0) return;
  raisers_.fetch_add(1, std::memory_order_seq_cst);
  for (auto& slot : fd_sleepers_) {
    int fd = slot.load(std::memory_order_seq_cst);
    if (fd >= 0) {
      uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(fd, &one, sizeof(one));
    }
  }
  raisers_.fetch_sub(1, std::memory_order_release);
}

void Signal::raise() noexcept {
  raises_.fetch_add(1, std::memory_order_relaxed);
  switch (kind_) {
    case SignalKind::kEventFd: {
      // Generation first (seq_cst), then the sleeper count: pairs with the waiter's seq_cst
      // increment of sleepers_ and re-read of gen_ in wait() -- one of the two sees the other.
      gen_.fetch_add(1, std::memory_order_seq_cst);
      if (sleepers_.load(std::memory_order_seq_cst) > 0)
        syscall(SYS_futex, &gen_, FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
      if (fd_exported_.load(std::memory_order_seq_cst)) {  // pairs with export_fd()
        uint64_t one = 1;
        // EAGAIN only when the count is at its maximum: then it is readable already.
        [[maybe_unused]] ssize_t n = ::write(fd_.get(), &one, sizeof(one));
        // After the write: a drain that misses this flag leaves the fd readable for one more
        // round (a spurious wake), never a readable fd that drains keep skipping.
        fd_raised_.store(true, std::memory_order_release);
      }
      wake_fd_sleepers();
      break;
    }
    case SignalKind::kMutexCond:
      pthread_mutex_lock(&mutex_);
      gen_.fetch_add(1, std::memory_order_seq_cst);  // under the mutex; seq_cst for fd sleepers
      pthread_cond_broadcast(&cond_);
      pthread_mutex_unlock(&mutex_);
      wake_fd_sleepers();
      break;
    case SignalKind::kYield:
      gen_.fetch_add(1, std::memory_order_release);
      break;
  }
}

int Signal::export_fd() noexcept {
  // Store-buffering with raise(): it bumps gen_ (seq_cst), then reads fd_exported_; we store
  // fd_exported_ (seq_cst), then read gen_. A raise either sees the export and writes the fd, or
  // its generation is seen here and the fd is written below. Raises before the first export
  // wrote nothing (UnexportedEventFdIsNotWritten): without this, an application that called
  // fi_trywait before FI_GETWAIT slept on an fd its raise never touched.
  if (kind_ == SignalKind::kEventFd && !fd_exported_.exchange(true, std::memory_order_seq_cst) &&
      gen_.load(std::memory_order_seq_cst) != 0) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(fd_.get(), &one, sizeof(one));
    fd_raised_.store(true, std::memory_order_release);  // after the write, as in raise()
  }
  return fd_.get();
}

void Signal::drain() noexcept {
  // Read the eventfd only when a raise wrote it since the last drain: an uncontended fi_trywait
  // then costs no system call.
  if (kind_ == SignalKind::kEventFd && fd_raised_.load(std::memory_order_relaxed) &&
      fd_raised_.exchange(false, std::memory_order_acquire)) {
    uint64_t v;
    [[maybe_unused]] ssize_t n = ::read(fd_.get(), &v, sizeof(v));  // EAGAIN when already 0
  }
}

Woke Signal::wait_fds(const Deadline& d, uint32_t seen, std::span<const int> fds) noexcept {
  if (kind_ == SignalKind::kYield || fds.empty()) return wait(d, seen);
  const int own = thread_sleep_fd();
  std::atomic<int>* slot = nullptr;
  if (own >= 0)
    for (auto& s : fd_sleepers_) {
      int free_slot = -1;
      // seq_cst: the registration comes before the generation re-read below in the total order.
      if (s.compare_exchange_strong(free_slot, own, std::memory_order_seq_cst)) {
        slot = &s;
        break;
      }
    }
  if (slot) nfd_sleepers_.fetch_add(1, std::memory_order_seq_cst);
  Woke result = Woke::kTimeout;
  if (gen_.load(std::memory_order_seq_cst) != seen) {
    result = Woke::kRaised;
  } else {
    pollfd pf[kMaxWaitFds + 1];
    size_t n = 0;
    for (int fd : fds.first(std::min(fds.size(), kMaxWaitFds))) pf[n++] = pollfd{fd, POLLIN, 0};
    if (slot) pf[n++] = pollfd{own, POLLIN, 0};
    // Without a slot of our own, sleep in slices of 1 ms and look at the generation between them.
    Deadline until = d;
    if (!slot && (d.infinite() || d.remaining_ns() > 1'000'000))
      until = Deadline::after_ns(1'000'000);
    timespec ts = until.remaining_ts();
    int r = ppoll(pf, n, until.infinite() ? nullptr : &ts, nullptr);
    const int err = r < 0 ? errno : 0;
    if (slot && pf[n - 1].revents) {
      uint64_t v;
      [[maybe_unused]] ssize_t rd = ::read(own, &v, sizeof(v));
    }
    if (gen_.load(std::memory_order_acquire) != seen)
      result = Woke::kRaised;
    else if (r > 0)
      result = Woke::kSource;  // a port fd (or a stale write to our own fd): look again
    else if (r < 0 && err == EINTR)
      result = Woke::kInterrupted;
    else if (r == 0 && !d.expired())
      result = Woke::kSource;  // a 1 ms slice ended: let the caller look again
  }
  if (slot) {
    slot->store(-1, std::memory_order_seq_cst);
    nfd_sleepers_.fetch_sub(1, std::memory_order_relaxed);
    // A raiser that read our fd before the clear is inside its scan (raisers_ > 0): wait for it,
    // so that it never writes the fd after we return (the thread may exit and the number be
    // reused). seq_cst on both sides: either it saw -1, or we see its increment.
    while (raisers_.load(std::memory_order_seq_cst) != 0) sched_yield();
  }
  return result;
}

Woke Signal::wait(const Deadline& d, uint32_t seen) noexcept {
  switch (kind_) {
    case SignalKind::kEventFd: {
      for (;;) {
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        if (gen_.load(std::memory_order_seq_cst) != seen) {
          sleepers_.fetch_sub(1, std::memory_order_relaxed);
          return Woke::kRaised;
        }
        if (d.expired()) {
          sleepers_.fetch_sub(1, std::memory_order_relaxed);
          return Woke::kTimeout;
        }
        timespec ts = d.remaining_ts();
        long r = syscall(SYS_futex, &gen_, FUTEX_WAIT_PRIVATE, seen, d.infinite() ? nullptr : &ts,
                         nullptr, 0);
        int err = r < 0 ? errno : 0;
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
        if (gen_.load(std::memory_order_acquire) != seen) return Woke::kRaised;
        if (err == EINTR) return Woke::kInterrupted;
        if (err == ETIMEDOUT) return Woke::kTimeout;
        // Spurious wake-up (or EAGAIN on a changed word, seen above): go round.
      }
    }
    case SignalKind::kMutexCond: {
      pthread_mutex_lock(&mutex_);
      int r = 0;
      while (gen_.load(std::memory_order_relaxed) == seen && r != ETIMEDOUT) {
        if (d.infinite()) {
          pthread_cond_wait(&cond_, &mutex_);
        } else {
          timespec at = d.abs_monotonic();
          r = pthread_cond_timedwait(&cond_, &mutex_, &at);
        }
      }
      bool raised = gen_.load(std::memory_order_relaxed) != seen;
      pthread_mutex_unlock(&mutex_);
      return raised ? Woke::kRaised : Woke::kTimeout;
    }
    case SignalKind::kYield:
      if (d.expired()) return Woke::kTimeout;
      sched_yield();
      return Woke::kRaised;
  }
  return Woke::kTimeout;
}

}  // namespace dpfab::wait
