// SPDX-License-Identifier: BSD-3-Clause
// Time in nanoseconds on CLOCK_MONOTONIC, the one clock of every deadline and timer (protocol
// timers, timerfds, ppoll timeouts), so that they compare.
#pragma once

#include <time.h>

#include <cstdint>

namespace dpfab::clock {

inline int64_t mono_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace dpfab::clock
