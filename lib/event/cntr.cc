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

// The application's changes (fi_cntr_add/set/adderr/seterr) bump app_changes_ after the value
// moved and before notify(): a scan that sees the new generation reports the counter, and one that
// took its snapshot before the bump sees the generation differ next time. Each call counts, even
// one that leaves the value where fi_poll last saw it (set and set back): a false positive at
// worst, which fi_poll(3) allows.
void Cntr::app_changed() noexcept {
  // seq_cst: read by poll_pending() in the aggregator's re-check, after its seq_cst fence.
  app_changes_.fetch_add(1, std::memory_order_seq_cst);
  notify();  // a waiter's threshold may now be reached; poll sets queue the counter
}

int Cntr::app_add(uint64_t n) noexcept {
  value_.fetch_add(n, std::memory_order_acq_rel);
  app_changed();
  return FI_SUCCESS;
}

int Cntr::set(uint64_t v) noexcept {
  // Release, as a producer's add: the application may publish data with its set.
  value_.store(v, std::memory_order_release);
  app_changed();
  return FI_SUCCESS;
}

int Cntr::app_adderr(uint64_t n) noexcept {
  err_.fetch_add(n, std::memory_order_acq_rel);
  // "Any change in a counter's error value will unblock any thread inside fi_cntr_wait"
  app_changed();
  return FI_SUCCESS;
}

int Cntr::seterr(uint64_t v) noexcept {
  err_.store(v, std::memory_order_release);
  app_changed();
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
         err_.load(std::memory_order_seq_cst) != poll_err_.load(std::memory_order_relaxed) ||
         app_changes_.load(std::memory_order_seq_cst) !=
             poll_app_changes_.load(std::memory_order_relaxed);
}

void Cntr::polled() noexcept {
  // A change after these loads differs from the snapshot (producers only add; every application
  // call bumps the generation), so the scan's re-check keeps the counter active and the next
  // fi_poll reports it. A change before them is covered by the report this snapshot follows.
  poll_app_changes_.store(app_changes_.load(std::memory_order_acquire), std::memory_order_relaxed);
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
