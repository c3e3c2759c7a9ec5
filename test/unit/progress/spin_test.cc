// SPDX-License-Identifier: BSD-3-Clause
//
// The learnt spin budget (lib/progress/spin.h): spin while the expected wait is shorter than a
// wake, never above the maximum; a fixed budget does not learn.
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
