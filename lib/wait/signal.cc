// SPDX-License-Identifier: BSD-3-Clause
#include "wait/signal.h"

#include <errno.h>
#include <poll.h>
#include <rdma/fi_errno.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

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
      uint64_t one = 1;
      // EAGAIN only when the count is at its maximum: then it is readable already.
      [[maybe_unused]] ssize_t n = ::write(fd_.get(), &one, sizeof(one));
      break;
    }
    case SignalKind::kMutexCond:
      pthread_mutex_lock(&mutex_);
      flag_ = true;
      pthread_cond_broadcast(&cond_);
      pthread_mutex_unlock(&mutex_);
      break;
    case SignalKind::kYield:
      break;
  }
}

void Signal::drain() noexcept {
  switch (kind_) {
    case SignalKind::kEventFd: {
      uint64_t v;
      [[maybe_unused]] ssize_t n = ::read(fd_.get(), &v, sizeof(v));  // EAGAIN when already 0
      break;
    }
    case SignalKind::kMutexCond:
      pthread_mutex_lock(&mutex_);
      flag_ = false;
      pthread_mutex_unlock(&mutex_);
      break;
    case SignalKind::kYield:
      break;
  }
}

Woke Signal::wait(const Deadline& d) noexcept {
  switch (kind_) {
    case SignalKind::kEventFd: {
      pollfd p{fd_.get(), POLLIN, 0};
      timespec ts = d.remaining_ts();
      int r = ppoll(&p, 1, d.infinite() ? nullptr : &ts, nullptr);
      if (r > 0) return Woke::kRaised;
      if (r < 0 && errno == EINTR) return Woke::kInterrupted;
      return Woke::kTimeout;
    }
    case SignalKind::kMutexCond: {
      pthread_mutex_lock(&mutex_);
      int r = 0;
      while (!flag_ && r != ETIMEDOUT) {
        if (d.infinite()) {
          pthread_cond_wait(&cond_, &mutex_);
        } else {
          timespec at = d.abs_monotonic();
          r = pthread_cond_timedwait(&cond_, &mutex_, &at);
        }
      }
      bool raised = flag_;
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
