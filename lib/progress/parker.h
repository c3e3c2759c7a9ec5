// SPDX-License-Identifier: BSD-3-Clause
//
// Parker: one worker lcore's sleep state (lcores.cc), and why it was unparked.
//
// Parking (worker lcores, lcores.cc), the sleep protocol of the arm/trywait shape (waitable.h):
//   lcore:   idle for the spin budget, no consumer polled during it, nothing sent during it
//            L1 drain own eventfd; L2 parked.store(true, seq_cst); L3 arm the ports that have wake
//            sources (port_wake.h), watch the others (+1 each, doorbell the wakeup thread unless
//            it is watching already); L4 poll once more (armed ports: until empty), back out if
//            anything arrived or a consumer polled; L5 sleep on the eventfd and the armed ports'
//            fds; L6 unwatch.
//   waker:   publish the work (a posted receive, consumer_polled, a frame the wakeup thread saw);
//            a full barrier; if (parked && parked.exchange(false)) write the eventfd.
//   Either L4 sees the work, or the waker sees parked == true (store buffering, both seq_cst).
// Unpark causes: a frame on an armed port (the lcore's own sleep), an rx interrupt or idle poll
// that found frames (the wakeup thread), a doorbell
// (an application posting a send, or polling/reading/waiting on the domain: a posted receive is
// matched by the lcore's poll step), fi_cq_signal on a CQ of the port's domain, stop.
//
// A parked lcore sleeps on its eventfd and on the wake fds of its ports that have them
// (port_wake.h): a frame on such a port wakes the lcore directly; the others are watched by the
// wakeup thread (wakeup.h), which unparks it.
#pragma once

#include <sys/eventfd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <span>

#include "common/fd.h"
#include "common/result.h"
#include "progress/spin.h"

namespace dpfab::progress {

/// Why a parked lcore was unparked, or why the wakeup thread ran a port's poll step.
enum class Cause : uint8_t {
  kRxInterrupt,  ///< the port's rx interrupt (or net_tap queue fd) fired
  kIdlePoll,     ///< the wakeup thread's idle poll of a port without rx interrupt found frames
  kDoorbell,     ///< an application sent, posted, read or waited on the port's domain
  kTimer,        ///< a protocol deadline (ARP retry)
  kSignal,       ///< fi_cq_signal on a CQ of the port's domain
  kStop,         ///< provider cleanup
};
inline constexpr size_t kCauses = 6;
const char* cause_name(Cause c) noexcept;

/// Counters of one worker lcore. Written by the lcore (and by unparkers for `unparks`).
struct LcoreStats {
  std::atomic<uint64_t> busy_polls{0};  ///< loop rounds that received or delivered something
  std::atomic<uint64_t> idle_polls{0};  ///< loop rounds that found nothing
  std::atomic<uint64_t> parks{0};       ///< times it went to sleep
  std::atomic<uint64_t> backouts{0};    ///< park attempts abandoned at the last check (L4)
  std::array<std::atomic<uint64_t>, kCauses> unparks{};  ///< by cause
  std::atomic<uint64_t> parked_ns{0};                    ///< total time asleep
};

/// One worker lcore's sleep state (owned by lcores.cc, registered with the wakeup thread).
class Parker {
 public:
  /// @return -FI_EMFILE when no eventfd can be made.
  Status init(unsigned lcore) noexcept;
  unsigned lcore() const noexcept { return lcore_; }

  /// Waker side: unparks if parked. Call after publishing the work (the caller supplies the full
  /// barrier: a seq_cst RMW or fence before this). Any thread. @return whether it woke the lcore.
  bool unpark(Cause why) noexcept {
    if (!parked_.load(std::memory_order_relaxed) ||
        !parked_.exchange(false, std::memory_order_acq_rel))
      return false;
    stats.unparks[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
    eventfd_write(efd_.get(), 1);
    return true;
  }
  bool parked() const noexcept { return parked_.load(std::memory_order_relaxed); }

  // Lcore side (park protocol L1-L6 above; lcores.cc).
  void drain() noexcept;                                                           ///< L1
  void mark_parked() noexcept { parked_.store(true, std::memory_order_seq_cst); }  ///< L2
  /// Backs out of L2 (L4 found work). @return false when an unparker cleared it already (its
  /// eventfd write is then drained by the next L1).
  bool back_out() noexcept { return parked_.exchange(false, std::memory_order_acq_rel); }
  /// L5: sleeps until unpark(), one of `port_fds` (its armed ports' wake fds) becomes readable,
  /// or a POSIX signal. A port fd counts as an unpark by kRxInterrupt (the lcore was woken by the
  /// frame itself). Returns the time asleep in ns.
  int64_t sleep(std::span<const int> port_fds = {}) noexcept;

  LcoreStats stats;
  SpinBudget budget;  ///< the lcore's spin budget (lcore_spin_us; spin.h). The lcore only.

 private:
  unsigned lcore_ = 0;
  UniqueFd efd_;
  alignas(64) std::atomic<bool> parked_{false};  // written by the lcore and by unparkers
};

}  // namespace dpfab::progress
