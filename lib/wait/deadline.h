// SPDX-License-Identifier: BSD-3-Clause
//
// Deadline: a point on CLOCK_MONOTONIC made from a libfabric timeout in milliseconds (negative =
// never). Every blocking call in dpfab waits against one, so that a timeout is never restarted by
// a spurious wakeup.
#pragma once

#include <time.h>

#include <cstdint>
#include <limits>

#include "common/clock.h"

namespace dpfab::wait {

class Deadline {
 public:
  /// `timeout_ms` < 0: infinite; 0: already expired (poll once); > 0: that many ms from now.
  static Deadline after_ms(int64_t timeout_ms) noexcept {
    if (timeout_ms < 0) return Deadline(kNever);
    return Deadline(now_ns() + timeout_ms * 1'000'000);
  }
  static Deadline after_ns(int64_t ns) noexcept { return Deadline(now_ns() + ns); }
  static Deadline never() noexcept { return Deadline(kNever); }

  bool infinite() const noexcept { return at_ns_ == kNever; }
  bool expired() const noexcept { return !infinite() && now_ns() >= at_ns_; }
  /// Nanoseconds left (0 when expired, INT64_MAX when infinite).
  int64_t remaining_ns() const noexcept {
    if (infinite()) return kNever;
    int64_t left = at_ns_ - now_ns();
    return left > 0 ? left : 0;
  }
  /// Absolute CLOCK_MONOTONIC time, for pthread_cond_timedwait with a monotonic condattr.
  timespec abs_monotonic() const noexcept {
    return timespec{static_cast<time_t>(at_ns_ / 1'000'000'000),
                    static_cast<long>(at_ns_ % 1'000'000'000)};
  }
  /// Time left as a relative timespec, for ppoll/epoll_pwait2.
  timespec remaining_ts() const noexcept {
    int64_t ns = remaining_ns();
    return timespec{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  }

  static int64_t now_ns() noexcept { return clock::mono_ns(); }

 private:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  explicit Deadline(int64_t at) noexcept : at_ns_(at) {}
  int64_t at_ns_;
};

}  // namespace dpfab::wait
