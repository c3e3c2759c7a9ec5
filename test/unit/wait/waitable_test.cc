// SPDX-License-Identifier: BSD-3-Clause
//
// The arm/trywait protocol (doc/design.md, fi_trywait, ucp_worker_arm): try_arm resets the signal
// before checking, returns -FI_EAGAIN while events are queued and FI_SUCCESS when blocking is
// safe; a producer raises the signal only when a consumer is armed; wait() honours timeouts and
// interrupts.
#include "wait/waitable.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/fi_errno.h>

#include <chrono>
#include <thread>
#include <vector>

#include "test_queue.h"

#include "test_util.h"

using dpfab::test::fd_readable;

using namespace dpfab::wait;
using dpfab::wait::test::TestQueue;
using namespace std::chrono_literals;

namespace {}  // namespace

TEST(Trywait, ReturnsEagainWhenEventsAreQueued) {
  auto q = TestQueue::with(SignalKind::kEventFd);
  q->publish();
  EXPECT_EQ(q->try_arm(), -FI_EAGAIN);
  EXPECT_FALSE(q->armed()) << "not left armed after EAGAIN";
}

TEST(Trywait, ReturnsSuccessWhenBlockingIsSafe) {
  auto q = TestQueue::with(SignalKind::kEventFd);
  EXPECT_EQ(q->try_arm(), FI_SUCCESS);
  EXPECT_TRUE(q->armed());
}

TEST(Trywait, ResetsTheSignalBeforeChecking) {
  // libfabric #8947: a trywait that did not clear the fd made poll() spin at 100% CPU.
  auto q = TestQueue::with(SignalKind::kEventFd);
  int fd = q->signal()->export_fd();
  q->signal()->raise();  // stale readiness from an earlier wakeup
  ASSERT_TRUE(fd_readable(fd));
  EXPECT_EQ(q->try_arm(), FI_SUCCESS);
  EXPECT_FALSE(fd_readable(fd));
}

TEST(Trywait, FdIsReadableAfterAnEventOnAnArmedObjectAndOnlyThen) {
  auto q = TestQueue::with(SignalKind::kEventFd);
  int fd = q->signal()->export_fd();  // FI_GETWAIT
  q->publish();                       // not armed: busy polling costs no syscall
  EXPECT_FALSE(fd_readable(fd));
  EXPECT_EQ(q->signal()->raises(), 0u);
  ASSERT_TRUE(q->take());
  ASSERT_EQ(q->try_arm(), FI_SUCCESS);
  EXPECT_FALSE(fd_readable(fd));
  q->publish();
  EXPECT_TRUE(fd_readable(fd));
  EXPECT_EQ(q->signal()->raises(), 1u);
  q->publish();  // the arm was consumed: no second raise
  EXPECT_EQ(q->signal()->raises(), 1u);
}

TEST(Trywait, AnFdTakenAfterTheArmStillWakesForARaiseBeforeIt) {
  // fi_trywait first, FI_GETWAIT after (stress-arm's trywait+poll consumer took the fd after each
  // arm): the raise that answered the arm came before the fd was exported and wrote nothing, so
  // poll() slept through the event (one lost wakeup in CI, a 2 s wait with an event queued).
  auto q = TestQueue::with(SignalKind::kEventFd);
  ASSERT_EQ(q->try_arm(), FI_SUCCESS);
  q->publish();  // raises: the arm is consumed
  EXPECT_EQ(q->signal()->raises(), 1u);
  const int fd = q->signal()->export_fd();
  EXPECT_TRUE(fd_readable(fd)) << "the first export leaves the raise on the fd";
  ASSERT_TRUE(q->take());
  ASSERT_EQ(q->try_arm(), FI_SUCCESS);  // drains it
  EXPECT_FALSE(fd_readable(fd));
  q->signal()->export_fd();  // later exports change nothing
  EXPECT_FALSE(fd_readable(fd));
}

TEST(Trywait, FirstExportOfANeverRaisedSignalLeavesTheFdQuiet) {
  auto q = TestQueue::with(SignalKind::kEventFd);
  EXPECT_FALSE(fd_readable(q->signal()->export_fd()));
}

TEST(Trywait, PredicateIsTheWaitersCondition) {
  auto q = TestQueue::with(SignalKind::kEventFd);
  int fd = q->signal()->export_fd();
  q->publish(2);
  EXPECT_EQ(q->try_arm([&] { return q->available() >= 3; }), FI_SUCCESS);
  q->publish();
  EXPECT_TRUE(fd_readable(fd));
}

TEST(Wait, ReturnsReadyAtOnceWhenThePredicateHolds) {
  auto q = TestQueue::with(SignalKind::kEventFd);
  q->publish();
  EXPECT_EQ(q->wait([&] { return q->ready(); }, Deadline::after_ms(-1)), WaitStatus::kReady);
}

TEST(Wait, TimesOutAfterAboutTheTimeoutAndDisarms) {
  for (auto k : {SignalKind::kEventFd, SignalKind::kMutexCond, SignalKind::kYield}) {
    auto q = TestQueue::with(k);
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(q->wait([&] { return q->ready(); }, Deadline::after_ms(30)), WaitStatus::kTimeout);
    auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_GE(took, 29ms);
    EXPECT_LT(took, 2000ms);
    EXPECT_FALSE(q->armed());
  }
}

TEST(Wait, WokenByAProducerOnAnotherThread) {
  for (auto k : {SignalKind::kEventFd, SignalKind::kMutexCond, SignalKind::kYield}) {
    auto q = TestQueue::with(k);
    std::thread t([&] {
      std::this_thread::sleep_for(20ms);
      q->publish();
    });
    EXPECT_EQ(q->wait([&] { return q->ready(); }, Deadline::after_ms(10000)), WaitStatus::kReady);
    t.join();
  }
}

TEST(Wait, SeveralWaitersNeverStealEachOthersWakeups) {
  // Waiter A wants 2 events, waiter B one. Each round publishes one event: B must wake for it,
  // even though A wakes too, finds its predicate false and re-arms (draining the eventfd).
  for (auto k : {SignalKind::kEventFd, SignalKind::kMutexCond}) {
    auto q = TestQueue::with(k);
    q->signal()->export_fd();  // an application also holds the fd: drains really happen
    std::atomic<bool> stop{false};
    std::thread a([&] {
      while (!stop.load())
        q->wait([&] { return q->available() >= 2 || stop.load(); }, Deadline::after_ms(50));
    });
    int lost = 0;
    for (int round = 0; round < 2000; ++round) {
      std::atomic<bool> woke{false};
      std::thread b([&] {
        auto st = q->wait([&] { return q->available() >= 1; }, Deadline::after_ms(2000));
        woke = st == WaitStatus::kReady;
      });
      if (round % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
      q->publish();
      b.join();
      if (!woke) ++lost;
      ASSERT_TRUE(q->take());
    }
    stop = true;
    q->interrupt();
    a.join();
    EXPECT_EQ(lost, 0) << "lost wakeups";
  }
}

TEST(Wait, InterruptMakesABlockedWaitReturn) {
  for (auto k : {SignalKind::kEventFd, SignalKind::kMutexCond, SignalKind::kYield}) {
    auto q = TestQueue::with(k);
    std::thread t([&] {
      std::this_thread::sleep_for(20ms);
      q->interrupt();
    });
    EXPECT_EQ(q->wait([&] { return q->ready(); }, Deadline::after_ms(-1)),
              WaitStatus::kInterrupted);
    t.join();
  }
}

TEST(Wait, InterruptBeforeTheWaitDoesNotLeakIntoTheNextWait) {
  auto q = TestQueue::with(SignalKind::kEventFd);
  q->interrupt();  // nobody waiting
  EXPECT_EQ(q->wait([&] { return q->ready(); }, Deadline::after_ms(20)), WaitStatus::kTimeout);
}

namespace {
class CountingProgress final : public ProgressSource {
 public:
  explicit CountingProgress(TestQueue* q) : q_(q) {}
  size_t progress() noexcept override {
    ++calls;
    if (calls == 3) q_->publish();  // the third poll step finds a frame
    return calls == 3;
  }
  int calls = 0;

 private:
  TestQueue* q_;
};
}  // namespace

TEST(Wait, RunsAProgressStepEachRoundUnderManualProgress) {
  auto q = TestQueue::with(SignalKind::kYield);
  CountingProgress p(q.get());
  q->set_progress(&p);
  EXPECT_EQ(q->wait([&] { return q->ready(); }, Deadline::after_ms(5000)), WaitStatus::kReady);
  EXPECT_EQ(p.calls, 3);
}

namespace {
// Records what a wait reports to its source: woke() after each sleep, waited() at the end.
class WakeRecording final : public ProgressSource {
 public:
  size_t progress() noexcept override { return 0; }
  void woke(int64_t slept_at_ns) noexcept override {
    slept_at.push_back(slept_at_ns);
    woke_at.push_back(Deadline::now_ns());
  }
  void waited(int64_t, bool r, bool s) noexcept override { ready = r, slept = s; }
  std::vector<int64_t> slept_at, woke_at;
  bool ready = false, slept = false;
};
}  // namespace

// A source learns what a wake cost from when the sleep began (spin.h): woke() follows every sleep
// with its start, and a wait that never slept reports none.
TEST(Wait, TellsTheSourceWhenEachSleepBeganAfterItWakes) {
  auto q = TestQueue::with(SignalKind::kEventFd);
  WakeRecording src;
  q->set_progress(&src);
  const int64_t t0 = Deadline::now_ns();
  std::thread t([&] {
    std::this_thread::sleep_for(30ms);
    q->publish();
  });
  EXPECT_EQ(q->wait([&] { return q->ready(); }, Deadline::after_ms(10000)), WaitStatus::kReady);
  t.join();
  ASSERT_GE(src.slept_at.size(), 1u);
  EXPECT_GE(src.slept_at[0], t0);
  EXPECT_GE(src.woke_at.back() - src.slept_at[0], 25'000'000) << "the sleep is the 30 ms one";
  EXPECT_TRUE(src.ready);
  EXPECT_TRUE(src.slept);

  WakeRecording busy;
  q->set_progress(&busy);
  EXPECT_EQ(q->wait([&] { return q->ready(); }, Deadline::after_ms(10000)), WaitStatus::kReady);
  EXPECT_TRUE(busy.slept_at.empty()) << "no sleep, no woke()";
  EXPECT_FALSE(busy.slept);
}

namespace {
// Counts the armed periods the protocol reports to the progress source (what makes the wakeup
// thread watch a port).
class ArmCounting final : public ProgressSource {
 public:
  size_t progress() noexcept override { return 0; }
  void armed(uint8_t) noexcept override { ++armed_n; }
  void disarmed(uint8_t) noexcept override { ++disarmed_n; }
  void interrupted() noexcept override { ++interrupted_n; }
  int armed_n = 0, disarmed_n = 0, interrupted_n = 0;
};
}  // namespace

TEST(ArmedHooks, EachArmedPeriodIsReportedOnceAndEndedOnce) {
  ArmCounting p;
  {
    auto q = TestQueue::with(SignalKind::kEventFd);
    q->set_progress(&p);
    ASSERT_EQ(q->try_arm(), FI_SUCCESS);  // armed: the port must be watched
    EXPECT_EQ(p.armed_n, 1);
    ASSERT_EQ(q->try_arm(), FI_SUCCESS);  // re-arming an armed object is the same period
    EXPECT_EQ(p.armed_n, 1);
    EXPECT_EQ(p.disarmed_n, 0);
    q->publish();  // the producer wakes the consumer: the period ends
    EXPECT_EQ(p.disarmed_n, 1);
    q->publish();  // nobody armed: nothing to end
    EXPECT_EQ(p.disarmed_n, 1);
    EXPECT_EQ(q->try_arm(), -FI_EAGAIN);  // busy: armed and ended at once
    EXPECT_EQ(p.armed_n, 2);
    EXPECT_EQ(p.disarmed_n, 2);
    while (q->take()) {
    }
    ASSERT_EQ(q->try_arm(), FI_SUCCESS);
    q->disarm();  // a timeout ends it
    q->disarm();  // twice is harmless
    EXPECT_EQ(p.armed_n, 3);
    EXPECT_EQ(p.disarmed_n, 3);
    q->interrupt();
    EXPECT_EQ(p.interrupted_n, 1);
    ASSERT_EQ(q->try_arm(), FI_SUCCESS);  // armed, then the object is closed
  }
  EXPECT_EQ(p.armed_n, 4);
  EXPECT_EQ(p.disarmed_n, 4) << "closing an armed object ends its armed period";
}

TEST(Subscriptions, RefusesDuplicatesAndTooMany) {
  auto q = TestQueue::with(SignalKind::kEventFd);
  std::vector<std::unique_ptr<Subscription>> subs;
  std::vector<std::unique_ptr<char>> aggs;  // distinct fake aggregator addresses
  for (int i = 0; i < Waitable::kMaxSubscriptions; ++i) {
    aggs.push_back(std::make_unique<char>());
    subs.push_back(std::make_unique<Subscription>());
    subs.back()->agg = reinterpret_cast<Aggregator*>(aggs.back().get());
    subs.back()->member = q.get();
    ASSERT_EQ(q->subscribe(subs.back().get()), FI_SUCCESS);
  }
  Subscription dup;
  dup.agg = subs[0]->agg;
  EXPECT_EQ(q->subscribe(&dup), -FI_EALREADY);
  char extra;
  Subscription more;
  more.agg = reinterpret_cast<Aggregator*>(&extra);
  EXPECT_EQ(q->subscribe(&more), -FI_ENOSPC);
  for (auto& s : subs) q->unsubscribe(s.get());
  EXPECT_EQ(q->subscriptions(), 0);
}
