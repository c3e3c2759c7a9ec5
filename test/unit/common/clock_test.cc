// SPDX-License-Identifier: BSD-3-Clause
// clock::coarse_ns() is the monotonic clock as of its last tick: never ahead of mono_ns(), and
// behind it by less than kCoarseSlackNs, which clearly_before() (MsgEndpoint's timers) relies on.
#include "common/clock.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace dpfab::clock {
namespace {

TEST(Clock, CoarseIsTheMonotonicClockLessThanTheSlackBehind) {
  int64_t lag_max = 0;
  for (int i = 0; i < 100'000; ++i) {
    const int64_t before = mono_ns();
    const int64_t coarse = coarse_ns();
    const int64_t after = mono_ns();
    // Read between two precise readings: never ahead of the second (the same clock), and within
    // the slack of the first.
    ASSERT_LE(coarse, after);
    ASSERT_LT(before - coarse, kCoarseSlackNs);
    lag_max = std::max(lag_max, before - coarse);
  }
  RecordProperty("coarse_lag_max_ns", std::to_string(lag_max));
}

TEST(Clock, ClearlyBeforeOnlyDeadlinesBeyondTheSlack) {
  const auto now = static_cast<uint64_t>(mono_ns());
  EXPECT_TRUE(clearly_before(now + 2 * kCoarseSlackNs));
  EXPECT_FALSE(clearly_before(now));
  EXPECT_FALSE(clearly_before(now - 1'000'000));
  EXPECT_FALSE(clearly_before(0));
  EXPECT_TRUE(clearly_before(UINT64_MAX));
}

}  // namespace
}  // namespace dpfab::clock
