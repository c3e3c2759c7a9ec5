// SPDX-License-Identifier: BSD-3-Clause
#include "event/cntr.h"

#include <rdma/fi_errno.h>
#include <sched.h>

#include "wait/deadline.h"

namespace dpfab::event {

uint64_t Cntr::read() noexcept {
  progress_once();
  // Acquire: pairs with the release add of the producer, so the completed operations' effects
  // are visible to the caller.
  uint64_t v = value_.load(std::memory_order_acquire);
  read_value_.store(v, std::memory_order_relaxed);
  return v;
}

uint64_t Cntr::readerr() noexcept {
  progress_once();
  uint64_t e = err_.load(std::memory_order_acquire);  // as in read()
  read_err_.store(e, std::memory_order_relaxed);
  return e;
}

int Cntr::app_add(uint64_t n) noexcept {
  // The error value is sampled before the value changes, so an error added by a producer after
  // this call can only make the snapshot older (a false positive for fi_poll), never hide.
  uint64_t e = err_.load(std::memory_order_acquire);
  uint64_t v = value_.fetch_add(n, std::memory_order_acq_rel) + n;
  poll_value_.store(v, std::memory_order_relaxed);
  poll_err_.store(e, std::memory_order_relaxed);
  notify();  // a waiter's threshold may now be reached
  return FI_SUCCESS;
}

int Cntr::set(uint64_t v) noexcept {
  uint64_t e = err_.load(std::memory_order_acquire);  // before the value changes, as in app_add
  // Release, as a producer's add: the application may publish data with its set.
  value_.store(v, std::memory_order_release);
  poll_value_.store(v, std::memory_order_relaxed);
  poll_err_.store(e, std::memory_order_relaxed);
  notify();
  return FI_SUCCESS;
}

int Cntr::app_adderr(uint64_t n) noexcept {
  err_.fetch_add(n, std::memory_order_acq_rel);
  notify();  // "Any change in a counter's error value will unblock any thread inside fi_cntr_wait"
  return FI_SUCCESS;
}

int Cntr::seterr(uint64_t v) noexcept {
  err_.store(v, std::memory_order_release);
  notify();
  return FI_SUCCESS;
}

bool Cntr::ready() const noexcept {
  // seq_cst loads: this runs as C3 of the arm protocol, after the seq_cst store of armed_ in
  // try_arm; together with the fence in notify() (P2), either we see the producer's add or the
  // producer sees armed_ and raises the signal.
  return value_.load(std::memory_order_seq_cst) != read_value_.load(std::memory_order_relaxed) ||
         err_.load(std::memory_order_seq_cst) != read_err_.load(std::memory_order_relaxed);
}

bool Cntr::poll_pending() const noexcept {
  // seq_cst: the aggregator's ready-list protocol re-checks after its seq_cst fence (aggregator.h).
  return value_.load(std::memory_order_seq_cst) != poll_value_.load(std::memory_order_relaxed) ||
         err_.load(std::memory_order_seq_cst) != poll_err_.load(std::memory_order_relaxed);
}

void Cntr::polled() noexcept {
  // A producer change after these loads differs from the snapshot, so the scan's re-check keeps
  // the counter active and the next fi_poll reports it.
  poll_value_.store(value_.load(std::memory_order_acquire), std::memory_order_relaxed);
  poll_err_.store(err_.load(std::memory_order_acquire), std::memory_order_relaxed);
}

int Cntr::wait(uint64_t threshold, int timeout_ms) noexcept {
  const uint64_t err_at_start = err_.load(std::memory_order_acquire);
  // seq_cst loads: the predicate is C3 of the arm protocol when Waitable::wait arms (see ready()).
  auto reached = [&] { return value_.load(std::memory_order_seq_cst) >= threshold; };
  auto pred = [&] { return reached() || err_.load(std::memory_order_seq_cst) != err_at_start; };
  auto outcome = [&] { return reached() ? FI_SUCCESS : -FI_EAVAIL; };
  const wait::Deadline deadline = wait::Deadline::after_ms(timeout_ms);

  if (!signal()) {
    // FI_WAIT_NONE / FI_WAIT_SET without an own fd: nothing to sleep on. Busy-poll the progress
    // step and yield between rounds so that a producer thread sharing the core can run.
    for (;;) {
      progress_once();
      if (pred()) return outcome();
      if (deadline.expired()) return -FI_ETIMEDOUT;
      sched_yield();
    }
  }

  switch (Waitable::wait(pred, deadline)) {
    case wait::WaitStatus::kReady:
      return outcome();
    case wait::WaitStatus::kTimeout:
      return -FI_ETIMEDOUT;
    case wait::WaitStatus::kInterrupted:
      break;
  }
  return -FI_EINTR;
}

}  // namespace dpfab::event
