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

#include <climits>

namespace dpfab::wait {

Result<std::unique_ptr<Signal>> Signal::create(SignalKind kind) {
  std::unique_ptr<Signal> s(new (std::nothrow) Signal(kind));
  if (!s) return make_error(-FI_ENOMEM, "signal: out of memory");
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

Signal::~Signal() {
  if (cond_ready_) pthread_cond_destroy(&cond_);
  pthread_mutex_destroy(&mutex_);
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
      if (fd_exported_.load(std::memory_order_relaxed)) {
        uint64_t one = 1;
        // EAGAIN only when the count is at its maximum: then it is readable already.
        [[maybe_unused]] ssize_t n = ::write(fd_.get(), &one, sizeof(one));
        // After the write: a drain that misses this flag leaves the fd readable for one more
        // round (a spurious wake), never a readable fd that drains keep skipping.
        fd_raised_.store(true, std::memory_order_release);
      }
      break;
    }
    case SignalKind::kMutexCond:
      pthread_mutex_lock(&mutex_);
      gen_.fetch_add(1, std::memory_order_relaxed);  // under the mutex
      pthread_cond_broadcast(&cond_);
      pthread_mutex_unlock(&mutex_);
      break;
    case SignalKind::kYield:
      gen_.fetch_add(1, std::memory_order_release);
      break;
  }
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
