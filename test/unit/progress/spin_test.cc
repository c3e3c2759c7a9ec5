// SPDX-License-Identifier: BSD-3-Clause
//
// The learnt spin budget (lib/progress/spin.h): spin while the expected wait is shorter than two
// wakes, never above the maximum; the wake cost follows measured wakes; a fixed budget does not
// learn.
#include "progress/spin.h"

#include <gtest/gtest.h>

using dpfab::progress::SpinBudget;
using dpfab::progress::SpinConfig;

TEST(SpinBudget, StartsBySleeping) {
  SpinBudget b;
  b.configure(SpinConfig{true, 0, 100'000});
  EXPECT_EQ(b.budget(), 0) << "until gaps look short, a wait sleeps at once";
}

TEST(SpinBudget, DenseTrafficLearnsToSpinWithinTheMaximum) {
  SpinBudget b;
  b.configure(SpinConfig{true, 0, 100'000});
  // Waits that slept for 12 us: 2 us of gap plus the wake they paid.
  for (int i = 0; i < 50; ++i) b.observe(SpinBudget::kWakeCostNs + 2'000, true, true);
  EXPECT_GT(b.budget(), 2'000);
  EXPECT_LE(b.budget(), 100'000);
  // Then spins that won after 1 us.
  for (int i = 0; i < 50; ++i) b.observe(1'000, true, false);
  EXPECT_GT(b.budget(), 1'000);
  EXPECT_LT(b.budget(), SpinBudget::kWakeCostNs);
  EXPECT_EQ(b.spins_won(), 50u);
  EXPECT_EQ(b.sleeps(), 50u);
}

TEST(SpinBudget, SparseTrafficStopsSpinning) {
  SpinBudget b;
  b.configure(SpinConfig{true, 0, 100'000});
  for (int i = 0; i < 50; ++i) b.observe(1'000, true, false);
  ASSERT_GT(b.budget(), 0);
  // Gaps of 2 ms: the budget goes to 0 within a few waits.
  for (int i = 0; i < 20; ++i) b.observe(2'000'000, true, true);
  EXPECT_EQ(b.budget(), 0);
}

TEST(SpinBudget, TheMaximumBoundsALearntBudget) {
  SpinBudget b;
  b.configure(SpinConfig{true, 0, 3'000});
  for (int i = 0; i < 50; ++i) b.observe(8'000, true, false);
  EXPECT_EQ(b.budget(), 3'000);
}

TEST(SpinBudget, TimeoutsTeachNothingAndAFixedBudgetStays) {
  SpinBudget b;
  b.configure(SpinConfig{true, 0, 100'000});
  for (int i = 0; i < 50; ++i) b.observe(1'000, false, false);  // timeouts, interrupts
  EXPECT_EQ(b.budget(), 0);
  SpinBudget f;
  f.configure(SpinConfig{false, 25'000, 100'000});
  for (int i = 0; i < 50; ++i) f.observe(2'000'000, true, true);
  EXPECT_EQ(f.budget(), 25'000);
}

TEST(SpinBudget, TheWakeCostFollowsMeasuredWakesWithinItsBounds) {
  SpinBudget b;
  b.configure(SpinConfig{true, 0, 100'000});
  EXPECT_EQ(b.wake_cost_ns(), SpinBudget::kWakeCostNs);
  for (int i = 0; i < 60; ++i) b.observe_wake(30'000);
  EXPECT_NEAR(b.wake_cost_ns(), 30'000, 500);
  EXPECT_EQ(b.wakes_measured(), 60u);
  for (int i = 0; i < 60; ++i) b.observe_wake(-5);  // a clock that went back: the minimum
  EXPECT_NEAR(b.wake_cost_ns(), SpinBudget::kMinWakeNs, 500);
  for (int i = 0; i < 60; ++i) b.observe_wake(10'000'000'000);  // a stall: the maximum
  EXPECT_NEAR(b.wake_cost_ns(), SpinBudget::kMaxWakeNs, 10'000);
}

// Two blocking processes in ping-pong, both asleep: each waits for the other's wake and its own,
// about two wakes. Counted without its own wake, the gap is one wake long: with the threshold at
// one wake neither ever spun (25 us and 24 us of CPU per message on the 2-vCPU VM, against 1 us
// and 2.6 us spinning). Now the budget covers the peer's wake, and once the peer spins too the
// gaps, and the budget, shrink to the round trip.
TEST(SpinBudget, TwoSleepingPingPongPeersLearnToSpin) {
  SpinBudget b;
  b.configure(SpinConfig{true, 0, 100'000});
  const int64_t wake = 25'000;
  for (int i = 0; i < 60; ++i) b.observe_wake(wake);
  for (int i = 0; i < 60; ++i) b.observe(2 * wake + 1'000, true, true);
  EXPECT_GT(b.budget(), wake + 1'000) << "spins long enough to catch the sleeping peer's answer";
  for (int i = 0; i < 60; ++i) b.observe(wake + 1'000, true, false);  // caught it, spinning
  EXPECT_GT(b.budget(), wake + 1'000);
  for (int i = 0; i < 60; ++i) b.observe(1'000, true, false);  // the peer spins too
  EXPECT_LT(b.budget(), 5'000);
}

TEST(SpinBudget, AMeasuredWakeMovesTheThreshold) {
  SpinBudget b;
  b.configure(SpinConfig{true, 0, 100'000});
  // Gaps of 30 us, spun through: above two default wakes (20 us), so no spinning.
  for (int i = 0; i < 60; ++i) b.observe(30'000, true, false);
  EXPECT_EQ(b.budget(), 0);
  // Wakes measured at 25 us: 30 us is under two of them.
  for (int i = 0; i < 60; ++i) b.observe_wake(25'000);
  b.observe(30'000, true, false);
  EXPECT_GT(b.budget(), 30'000);
  // Sparse traffic still sleeps at once.
  for (int i = 0; i < 30; ++i) b.observe(2'000'000, true, true);
  EXPECT_EQ(b.budget(), 0);
}
