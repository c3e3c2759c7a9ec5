// SPDX-License-Identifier: BSD-3-Clause
//
// The protocol timer of a port's wake fds (lib/progress/port_wake.h): deadlines that move a
// little keep the timer set (no timerfd_settime per sleep), and the fd fires no earlier than the
// deadline and no later than its slack. No EAL: a port without an rx interrupt.
#include "progress/port_wake.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <cstdint>

#include "common/clock.h"

using dpfab::progress::PortWake;

namespace {

uint64_t now_ns() { return static_cast<uint64_t>(dpfab::clock::mono_ns()); }

uint64_t arms(const PortWake& w) { return w.stats().timer_arms.load(); }

}  // namespace

// A retransmission deadline moves with every message (send time + RTO): a blocking ping-pong
// used to set the timer before every sleep. Deadlines 50-100 ms ahead: a slow machine (sanitizers)
// may stall between the calls without the timer firing.
TEST(PortWakeTimer, ADeadlineThatMovesWithinTheSlackKeepsTheTimer) {
  PortWake w;
  w.init(0, dpfab::port::RxInterrupt::kNone);
  ASSERT_GE(w.timer_fd(), 0);
  const uint64_t t0 = now_ns();
  w.arm_timer(t0 + 100'000'000);  // set at +100 ms, with up to 1 ms of slack: fires at +101 ms
  EXPECT_EQ(arms(w), 1u);
  w.arm_timer(t0 + 100'500'000);  // later, still before the fd fires: kept
  w.arm_timer(t0 + 100'900'000);
  EXPECT_EQ(arms(w), 1u);
  w.arm_timer(t0 + 102'000'000);  // past it: the fd would fire too early, set again
  EXPECT_EQ(arms(w), 2u);
  w.arm_timer(t0 + 50'000'000);  // earlier than the fd: it would fire too late, set again
  EXPECT_EQ(arms(w), 3u);
  w.arm_timer(UINT64_MAX);  // nothing due: cleared
  EXPECT_EQ(arms(w), 4u);
  w.arm_timer(UINT64_MAX);  // and left so
  EXPECT_EQ(arms(w), 4u);
}

TEST(PortWakeTimer, FiresAfterTheDeadlineAndWithinItsSlack) {
  PortWake w;
  w.init(0, dpfab::port::RxInterrupt::kNone);
  ASSERT_GE(w.timer_fd(), 0);
  const uint64_t due = now_ns() + 4'000'000;
  w.arm_timer(due);
  pollfd pf{w.timer_fd(), POLLIN, 0};
  ASSERT_EQ(poll(&pf, 1, 1000), 1);
  const uint64_t fired = now_ns();
  EXPECT_GE(fired, due);
  // At most 1 ms (the slack of a 4 ms deadline) late, plus the scheduling of this thread.
  EXPECT_LT(fired, due + PortWake::kTimerSlackMaxNs + 20'000'000);
  // A short deadline has a short slack: half the time left.
  const uint64_t due2 = now_ns() + 200'000;
  w.arm_timer(due2);
  ASSERT_EQ(poll(&pf, 1, 1000), 1);
  EXPECT_GE(now_ns(), due2);
}
