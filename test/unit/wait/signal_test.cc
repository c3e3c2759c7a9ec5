// SPDX-License-Identifier: BSD-3-Clause
//
// Signals: the native wait objects (FI_WAIT_FD eventfd usable in poll, FI_WAIT_MUTEX_COND,
// FI_WAIT_YIELD) and their timeouts.
#include "wait/signal.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "test_util.h"

using dpfab::test::fd_readable;

using namespace dpfab::wait;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<Signal> make(SignalKind k) {
  auto s = Signal::create(k);
  EXPECT_TRUE(s);
  return std::move(s.value());
}

}  // namespace

TEST(Signal, ExportedEventFdIsReadableAfterRaiseAndNotAfterDrain) {
  auto s = make(SignalKind::kEventFd);
  ASSERT_GE(s->export_fd(), 0);
  EXPECT_FALSE(fd_readable(s->fd()));
  s->raise();
  EXPECT_TRUE(fd_readable(s->fd()));
  s->raise();  // several raises: still one readable fd
  s->drain();
  EXPECT_FALSE(fd_readable(s->fd()));
  EXPECT_EQ(s->raises(), 2u);
  EXPECT_EQ(s->mutex_cond(), nullptr);
}

TEST(Signal, UnexportedEventFdIsNotWritten) {
  auto s = make(SignalKind::kEventFd);
  s->raise();  // nobody got the fd: in-process waiters use the generation only
  EXPECT_FALSE(fd_readable(s->fd()));
  EXPECT_EQ(s->raises(), 1u);
}

TEST(Signal, WaitReturnsAtOnceWhenARaiseFollowedTheGenerationRead) {
  for (auto k : {SignalKind::kEventFd, SignalKind::kMutexCond}) {
    auto s = make(k);
    uint32_t seen = s->generation();
    s->raise();
    EXPECT_EQ(s->wait(Deadline::after_ms(5000), seen), Woke::kRaised);
    EXPECT_EQ(s->wait(Deadline::after_ms(5000), seen), Woke::kRaised) << "wait does not lower";
    s->drain();
    EXPECT_EQ(s->wait(Deadline::after_ms(5000), seen), Woke::kRaised)
        << "a drain (another waiter re-arming) cannot hide a raise";
  }
}

TEST(Signal, WaitTimesOutAfterAboutTheTimeout) {
  for (auto k : {SignalKind::kEventFd, SignalKind::kMutexCond}) {
    auto s = make(k);
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(s->wait(Deadline::after_ms(50), s->generation()), Woke::kTimeout);
    auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_GE(took, 49ms);
    EXPECT_LT(took, 2000ms);
    EXPECT_EQ(s->wait(Deadline::after_ms(0), s->generation()), Woke::kTimeout)
        << "zero timeout polls once";
  }
}

TEST(Signal, OneRaiseWakesEveryBlockedWaiter) {
  for (auto k : {SignalKind::kEventFd, SignalKind::kMutexCond}) {
    auto s = make(k);
    uint32_t seen = s->generation();
    std::atomic<int> woke{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < 3; ++i)
      ts.emplace_back([&] {
        if (s->wait(Deadline::after_ms(10000), seen) == Woke::kRaised) woke.fetch_add(1);
      });
    std::this_thread::sleep_for(20ms);
    s->raise();
    for (auto& t : ts) t.join();
    EXPECT_EQ(woke.load(), 3);
  }
}

TEST(Signal, RaiseFromAnotherThreadWakesABlockedWait) {
  for (auto k : {SignalKind::kEventFd, SignalKind::kMutexCond}) {
    auto s = make(k);
    uint32_t seen = s->generation();
    std::thread t([&] {
      std::this_thread::sleep_for(20ms);
      s->raise();
    });
    EXPECT_EQ(s->wait(Deadline::after_ms(10000), seen), Woke::kRaised);
    t.join();
  }
}

TEST(Signal, MutexCondExposesThePairForFiGetwait) {
  auto s = make(SignalKind::kMutexCond);
  fi_mutex_cond* mc = s->mutex_cond();
  ASSERT_NE(mc, nullptr);
  ASSERT_NE(mc->mutex, nullptr);
  ASSERT_NE(mc->cond, nullptr);
  EXPECT_EQ(s->fd(), -1);
  // An application waiting on the pair itself is woken by raise().
  std::thread t([&] {
    std::this_thread::sleep_for(20ms);
    s->raise();
  });
  pthread_mutex_lock(mc->mutex);
  timespec at;
  clock_gettime(CLOCK_MONOTONIC, &at);
  at.tv_sec += 10;
  int r = pthread_cond_timedwait(mc->cond, mc->mutex, &at);
  pthread_mutex_unlock(mc->mutex);
  EXPECT_EQ(r, 0);
  t.join();
}

TEST(Signal, YieldWaitsWithoutAWaitObject) {
  auto s = make(SignalKind::kYield);
  EXPECT_EQ(s->fd(), -1);
  EXPECT_EQ(s->mutex_cond(), nullptr);
  EXPECT_EQ(s->wait(Deadline::after_ms(1000), s->generation()), Woke::kRaised)
      << "yields once and returns";
  EXPECT_EQ(s->wait(Deadline::after_ms(0), s->generation()), Woke::kTimeout);
}

TEST(Deadline, NegativeIsInfiniteZeroIsExpired) {
  EXPECT_TRUE(Deadline::after_ms(-1).infinite());
  EXPECT_FALSE(Deadline::after_ms(-1).expired());
  EXPECT_TRUE(Deadline::after_ms(0).expired());
  EXPECT_FALSE(Deadline::after_ms(10000).expired());
  EXPECT_GT(Deadline::after_ms(10000).remaining_ns(), 9'000'000'000);
}
