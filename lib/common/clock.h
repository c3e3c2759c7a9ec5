// SPDX-License-Identifier: BSD-3-Clause
// Time in nanoseconds on CLOCK_MONOTONIC, the one clock of every deadline and timer (protocol
// timers, timerfds, ppoll timeouts), so that they compare; and its coarse (per-tick) reading.
#pragma once

#include <rte_cycles.h>
#include <time.h>

#include <cstdint>

namespace dpfab::clock {

inline int64_t mono_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

/// CLOCK_MONOTONIC_COARSE: the same clock as of its last update (a timer tick), for a fraction of
/// mono_ns()'s cost (7 vs 23 ns measured here). It lags mono_ns() by about a tick, more when
/// ticks come late: 1.7 to 5.7 ms measured here with 4 ms ticks, in a VM.
inline int64_t coarse_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

/// How far behind mono_ns() coarse_ns() is taken to be at most: ten times what was measured.
inline constexpr int64_t kCoarseSlackNs = 50'000'000;

/// Whether the mono_ns() deadline `due` is clearly still ahead, judged by the coarse clock: true
/// only if it is more than kCoarseSlackNs past coarse_ns(). For a path that asks every poll step
/// about a deadline usually far off; when false, read mono_ns(). Were the coarse clock ever to
/// lag more, a deadline would be met that much late.
inline bool clearly_before(uint64_t due) noexcept {
  return static_cast<uint64_t>(coarse_ns() + kCoarseSlackNs) < due;
}

/// mono_ns() for a data path that reads the time on every message: while the last clock_gettime
/// is less than kAnchorNs old, the time is extrapolated from it with the TSC (rte_rdtsc, at the
/// rate rte_get_tsc_hz gives); after that the clock is read again. On the 2-vCPU VM, rdtsc costs
/// 7.5 ns and clock_gettime 16 ns, and an RDM message reads the time on its critical path. The
/// error is the TSC rate's against CLOCK_MONOTONIC's over kAnchorNs (0.1 % off: 50 ns), and a
/// time read just after a new anchor may be that much earlier than one read just before: callers
/// that need the time never to go back keep the latest (RdmEndpoint::core_time). Without a TSC
/// rate (EAL not started), every read is clock_gettime. One user at a time (an owner thread, or
/// the holder of a lock): not thread-safe.
class TscClock {
 public:
  static constexpr uint64_t kAnchorNs = 50'000;

  TscClock() noexcept {
    const uint64_t hz = rte_get_tsc_hz();
    if (hz >= 1'000'000 && hz <= 100'000'000'000ull) {
      mult_ = (uint64_t{1'000'000'000} << kShift) / hz;
      max_cycles_ = kAnchorNs * hz / 1'000'000'000;
    }
  }
  uint64_t now_ns() noexcept {
    // Unsigned: a TSC that went back (or the first read, tsc0_ 0) is far out of the window too.
    const uint64_t d = rte_rdtsc() - tsc0_;
    if (d < max_cycles_) return ns0_ + ((d * mult_) >> kShift);
    ns0_ = static_cast<uint64_t>(mono_ns());
    tsc0_ = rte_rdtsc();
    return ns0_;
  }

 private:
  static constexpr unsigned kShift = 24;  // kAnchorNs of cycles times mult_ fit 64 bits
  uint64_t mult_ = 0;                     // ns per cycle, << kShift
  uint64_t max_cycles_ = 0;               // kAnchorNs in cycles; 0: no TSC rate
  uint64_t tsc0_ = 0, ns0_ = 0;           // the anchor: a clock_gettime and the TSC just after
};

}  // namespace dpfab::clock
