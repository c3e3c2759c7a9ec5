// SPDX-License-Identifier: BSD-3-Clause
//
// event::Cntr without EAL: the fi_cntr(3) semantics of read/add/set/adderr/seterr/wait, the
// producer API the progress lcore uses, the arm protocol (fi_trywait, the fd), and the two
// notions of "changed" that wait sets (ready: since the application last read) and poll sets
// (poll_pending: since the last fi_poll report, application calls included, fi_poll(3)) rely on.
// Test names quote or paraphrase the man-page sentence they check.
#include "event/cntr.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/fi_errno.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "wait/wait_set.h"

#include "test_util.h"

using dpfab::test::After;
using dpfab::test::fd_readable;

using dpfab::event::Cntr;
using namespace dpfab::wait;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<Cntr> make_cntr(SignalKind kind) {
  auto s = Signal::create(kind);
  EXPECT_TRUE(s);
  return std::make_unique<Cntr>(std::move(s.value()));
}
std::unique_ptr<Cntr> make_cntr_without_signal() { return std::make_unique<Cntr>(nullptr); }

// If the code under test failed to wake, the watchdog interrupts the counter after a few seconds
// so that the test ends (and fails: the wait returns -FI_EINTR) instead of hanging.
class Watchdog {
 public:
  explicit Watchdog(Cntr* c, std::chrono::milliseconds after = 5000ms)
      : t_([this, c, after] {
          auto until = std::chrono::steady_clock::now() + after;
          while (!done_.load() && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(1ms);
          if (!done_.load()) c->interrupt();
        }) {}
  ~Watchdog() {
    done_.store(true);
    t_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread t_;
};

class CountingProgress final : public ProgressSource {
 public:
  CountingProgress(Cntr* c, int produce_at) : c_(c), produce_at_(produce_at) {}
  size_t progress() noexcept override {
    int n = ++calls;
    if (n == produce_at_) c_->add(1);  // this poll step found a completion
    return n == produce_at_;
  }
  std::atomic<int> calls{0};

 private:
  Cntr* c_;
  int produce_at_;
};

const SignalKind kKinds[] = {SignalKind::kEventFd, SignalKind::kMutexCond, SignalKind::kYield};

}  // namespace

// ---- values ------------------------------------------------------------------------------------

TEST(FiCntrOpen, BothValuesStartAtZero) {
  auto c = make_cntr(SignalKind::kEventFd);
  EXPECT_EQ(c->read(), 0u);
  EXPECT_EQ(c->readerr(), 0u);
}

TEST(FiCntrRead, ReturnsTheCurrentValueOfACounter) {
  auto c = make_cntr(SignalKind::kEventFd);
  c->add(3);  // the progress lcore counts three completions
  EXPECT_EQ(c->read(), 3u);
  c->add(1);
  EXPECT_EQ(c->read(), 4u);
}

TEST(FiCntrReaderr, ReturnsTheNumberOfOperationsThatCompletedInError) {
  auto c = make_cntr(SignalKind::kEventFd);
  c->add_err(2);
  EXPECT_EQ(c->readerr(), 2u);
  EXPECT_EQ(c->read(), 0u) << "a counter stores two distinct values";
}

TEST(FiCntrAdd, AddsTheUserSpecifiedValueToTheCounter) {
  auto c = make_cntr(SignalKind::kEventFd);
  c->add(5);
  EXPECT_EQ(c->app_add(7), FI_SUCCESS);
  EXPECT_EQ(c->read(), 12u);
  EXPECT_EQ(c->readerr(), 0u);
}

TEST(FiCntrSet, SetsTheCounterToTheSpecifiedValue) {
  auto c = make_cntr(SignalKind::kEventFd);
  c->add(5);
  EXPECT_EQ(c->set(2), FI_SUCCESS);
  EXPECT_EQ(c->read(), 2u);
  EXPECT_EQ(c->set(0), FI_SUCCESS);
  EXPECT_EQ(c->read(), 0u);
}

TEST(FiCntrAdderr, AddsTheUserSpecifiedValueToTheErrorValueOfTheCounter) {
  auto c = make_cntr(SignalKind::kEventFd);
  c->add_err(1);
  EXPECT_EQ(c->app_adderr(4), FI_SUCCESS);
  EXPECT_EQ(c->readerr(), 5u);
  EXPECT_EQ(c->read(), 0u);
}

TEST(FiCntrSeterr, SetsTheErrorValueOfTheCounterToTheSpecifiedValue) {
  auto c = make_cntr(SignalKind::kEventFd);
  c->add_err(9);
  EXPECT_EQ(c->seterr(3), FI_SUCCESS);
  EXPECT_EQ(c->readerr(), 3u);
  EXPECT_EQ(c->read(), 0u);
}

TEST(FiCntrRead, RunsOneManualProgressStep) {
  // doc/design.md: under manual progress the poll step runs inline inside fi_cntr_read.
  auto c = make_cntr(SignalKind::kEventFd);
  CountingProgress p(c.get(), 1);
  c->set_progress(&p);
  EXPECT_EQ(c->read(), 1u) << "the completion found by the progress step is counted";
  EXPECT_EQ(c->readerr(), 0u);
  EXPECT_EQ(p.calls.load(), 2);
}

TEST(ProducerApi, ConcurrentAddsFromSeveralThreadsSumExactly) {
  auto c = make_cntr(SignalKind::kEventFd);
  constexpr int kThreads = 4;
  constexpr uint64_t kPerThread = 250'000;
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i)
    ts.emplace_back([&, i] {
      for (uint64_t k = 0; k < kPerThread; ++k) {
        c->add(1);
        if (k % 4 == static_cast<uint64_t>(i)) c->add_err(1);
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(c->read(), kThreads * kPerThread);
  EXPECT_EQ(c->readerr(), kThreads * kPerThread / 4);
}

TEST(ProducerApi, ApplicationAddsAndProducerAddsSumExactly) {
  auto c = make_cntr(SignalKind::kEventFd);
  constexpr uint64_t kN = 200'000;
  std::thread producer([&] {
    for (uint64_t k = 0; k < kN; ++k) c->add(1);
  });
  for (uint64_t k = 0; k < kN; ++k) ASSERT_EQ(c->app_add(2), FI_SUCCESS);
  producer.join();
  EXPECT_EQ(c->read(), 3 * kN);
}

TEST(ProducerApi, CostsNoSignalWhileNobodyIsArmed) {
  auto c = make_cntr(SignalKind::kEventFd);
  for (int i = 0; i < 1000; ++i) {
    c->add(1);
    c->add_err(1);
  }
  EXPECT_EQ(c->signal()->raises(), 0u);
}

// ---- fi_cntr_wait ------------------------------------------------------------------------------

TEST(FiCntrWait, ReturnsAtOnceWhenTheCounterIsAlreadyAtTheThreshold) {
  for (auto k : kKinds) {
    auto c = make_cntr(k);
    c->add(10);
    EXPECT_EQ(c->wait(10, 0), FI_SUCCESS);
    EXPECT_EQ(c->wait(3, -1), FI_SUCCESS);
  }
}

TEST(FiCntrWait, UponSuccessfulReturnTheCounterIsGreaterOrEqualToTheThreshold) {
  for (auto k : kKinds) {
    auto c = make_cntr(k);
    Watchdog dog(c.get());
    After producer(20ms, [&] {
      for (int i = 0; i < 5; ++i) {
        c->add(1);
        std::this_thread::sleep_for(2ms);
      }
    });
    EXPECT_EQ(c->wait(5, 5000), FI_SUCCESS) << static_cast<int>(k);
    EXPECT_GE(c->read(), 5u);
  }
}

TEST(FiCntrWait, ANegativeTimeoutWaitsUntilTheThresholdIsReached) {
  for (auto k : kKinds) {
    auto c = make_cntr(k);
    Watchdog dog(c.get());  // a lost wakeup ends as -FI_EINTR, not a hang
    After producer(30ms, [&] { c->add(1); });
    EXPECT_EQ(c->wait(1, -1), FI_SUCCESS) << static_cast<int>(k);
  }
}

TEST(FiCntrWait, IfTheCallReturnsDueToTimeoutFiEtimedoutIsReturned) {
  for (auto k : kKinds) {
    auto c = make_cntr(k);
    c->add(1);
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(c->wait(2, 100), -FI_ETIMEDOUT) << static_cast<int>(k);
    auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_GE(took, 99ms);
    EXPECT_LT(took, 2000ms);
    EXPECT_FALSE(c->armed()) << "a timed-out wait leaves nothing armed";
  }
}

TEST(FiCntrWait, OnTimeoutTheErrorValueRemainsUnchanged) {
  auto c = make_cntr(SignalKind::kEventFd);
  c->add_err(3);
  EXPECT_EQ(c->wait(1, 20), -FI_ETIMEDOUT);
  EXPECT_EQ(c->readerr(), 3u);
}

TEST(FiCntrWait, ZeroTimeoutChecksOnce) {
  auto c = make_cntr(SignalKind::kEventFd);
  EXPECT_EQ(c->wait(1, 0), -FI_ETIMEDOUT);
  c->add(1);
  EXPECT_EQ(c->wait(1, 0), FI_SUCCESS);
}

TEST(FiCntrWait, AnyChangeInTheErrorValueUnblocksAThreadInsideFiCntrWait) {
  for (auto k : kKinds) {
    auto c = make_cntr(k);
    Watchdog dog(c.get());
    After producer(30ms, [&] { c->add_err(1); });
    EXPECT_EQ(c->wait(1, 5000), -FI_EAVAIL) << static_cast<int>(k);
    EXPECT_EQ(c->read(), 0u);
    EXPECT_EQ(c->readerr(), 1u);
  }
}

TEST(FiCntrWait, FiCntrAdderrAndSeterrUnblockAWaiterToo) {
  auto c = make_cntr(SignalKind::kEventFd);
  {
    Watchdog dog(c.get());
    After app(30ms, [&] { c->app_adderr(2); });
    EXPECT_EQ(c->wait(1, 5000), -FI_EAVAIL);
  }
  {
    Watchdog dog(c.get());
    After app(30ms, [&] { c->seterr(0); });
    EXPECT_EQ(c->wait(1, 5000), -FI_EAVAIL);
  }
}

TEST(FiCntrWait, AnErrorCountedBeforeTheWaitStartedDoesNotEndIt) {
  // Only a change while waiting unblocks: an old error is not reported again by every wait.
  auto c = make_cntr(SignalKind::kEventFd);
  c->add_err(1);
  EXPECT_EQ(c->wait(1, 30), -FI_ETIMEDOUT);
}

TEST(FiCntrWait, AThresholdReachedWinsOverAnErrorChange) {
  auto c = make_cntr(SignalKind::kEventFd);
  Watchdog dog(c.get());
  {
    After producer(20ms, [&] {
      c->add_err(1);  // may wake the waiter first: then it returns -FI_EAVAIL, also correct
      c->add(1);
    });
    int r = c->wait(1, 5000);
    EXPECT_TRUE(r == FI_SUCCESS || r == -FI_EAVAIL) << r;
  }
  // Both changes are visible now (the producer was joined): the success value is reported.
  EXPECT_EQ(c->wait(1, 0), FI_SUCCESS);
}

TEST(FiCntrWait, FiCntrSetThatReachesTheThresholdWakesAWaiter) {
  for (auto k : kKinds) {
    auto c = make_cntr(k);
    Watchdog dog(c.get());
    After app(30ms, [&] { c->set(100); });
    EXPECT_EQ(c->wait(50, 5000), FI_SUCCESS) << static_cast<int>(k);
  }
}

TEST(FiCntrWait, FiCntrAddFromAnotherThreadWakesAWaiter) {
  for (auto k : kKinds) {
    auto c = make_cntr(k);
    Watchdog dog(c.get());
    After app(30ms, [&] { c->app_add(2); });
    EXPECT_EQ(c->wait(2, 5000), FI_SUCCESS) << static_cast<int>(k);
  }
}

TEST(FiCntrWait, RunsTheManualProgressStepEachRound) {
  // FI_WAIT_YIELD: every round yields and progresses again. (A counter that sleeps on an fd or a
  // cond relies on the wakeup thread to progress while it sleeps: not a unit-level matter.)
  auto c = make_cntr(SignalKind::kYield);
  CountingProgress p(c.get(), 3);
  c->set_progress(&p);
  Watchdog dog(c.get());
  EXPECT_EQ(c->wait(1, 5000), FI_SUCCESS);
  EXPECT_EQ(p.calls.load(), 3);
}

TEST(FiCntrWaitWithoutWaitObject, BusyPollsProgressUntilTheThreshold) {
  // FI_WAIT_NONE: nothing to sleep on; dpfab spins with progress instead of failing.
  auto c = make_cntr_without_signal();
  CountingProgress p(c.get(), 50);
  c->set_progress(&p);
  EXPECT_EQ(c->wait(1, 5000), FI_SUCCESS);
  EXPECT_GE(p.calls.load(), 50);
}

TEST(FiCntrWaitWithoutWaitObject, SeesAnotherThreadsAdd) {
  auto c = make_cntr_without_signal();
  After producer(20ms, [&] { c->add(1); });
  EXPECT_EQ(c->wait(1, 5000), FI_SUCCESS);
}

TEST(FiCntrWaitWithoutWaitObject, TimesOutAfterAboutTheTimeout) {
  auto c = make_cntr_without_signal();
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(c->wait(1, 50), -FI_ETIMEDOUT);
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 49ms);
  EXPECT_LT(took, 2000ms);
}

TEST(FiCntrWaitWithoutWaitObject, ReportsAnErrorChange) {
  auto c = make_cntr_without_signal();
  After producer(20ms, [&] { c->add_err(1); });
  EXPECT_EQ(c->wait(1, 5000), -FI_EAVAIL);
}

TEST(FiCntrWait, NoLostWakeupAcrossManyAddWaitRounds) {
  // Ping-pong: each round the waiter blocks for the next value while the producer adds it, so
  // every arm races an add. A lost wakeup shows as a timeout.
  for (auto k : {SignalKind::kEventFd, SignalKind::kMutexCond}) {
    auto c = make_cntr(k);
    constexpr uint64_t kRounds = 20'000;
    std::atomic<uint64_t> acked{0};
    std::thread producer([&] {
      for (uint64_t i = 1; i <= kRounds; ++i) {
        c->add(1);
        auto until = std::chrono::steady_clock::now() + 5s;
        while (acked.load(std::memory_order_acquire) < i &&
               std::chrono::steady_clock::now() < until)
          std::this_thread::yield();
      }
    });
    uint64_t failures = 0;
    for (uint64_t i = 1; i <= kRounds; ++i) {
      if (c->wait(i, 2000) != FI_SUCCESS) ++failures;
      acked.store(i, std::memory_order_release);
    }
    producer.join();
    EXPECT_EQ(failures, 0u) << static_cast<int>(k);
    EXPECT_EQ(c->read(), kRounds);
  }
}

// ---- the arm protocol: fi_trywait and the fd ---------------------------------------------------

TEST(FiTrywait, ReturnsEagainWhenTheCounterChangedSinceTheApplicationReadIt) {
  auto c = make_cntr(SignalKind::kEventFd);
  EXPECT_EQ(c->try_arm(), FI_SUCCESS) << "unchanged since open";
  c->disarm();
  c->add(1);
  EXPECT_EQ(c->try_arm(), -FI_EAGAIN);
  EXPECT_EQ(c->read(), 1u);
  EXPECT_EQ(c->try_arm(), FI_SUCCESS);
}

TEST(FiTrywait, AnErrorChangeNeedsFiCntrReaderr) {
  auto c = make_cntr(SignalKind::kEventFd);
  c->add_err(1);
  EXPECT_EQ(c->try_arm(), -FI_EAGAIN);
  c->read();  // reading the success value does not consume the news of an error
  EXPECT_EQ(c->try_arm(), -FI_EAGAIN);
  c->readerr();
  EXPECT_EQ(c->try_arm(), FI_SUCCESS);
}

TEST(FiTrywait, FdIsReadableAfterAnAddToAnArmedCounterAndOnlyThen) {
  auto c = make_cntr(SignalKind::kEventFd);
  int fd = c->signal()->export_fd();
  c->add(1);  // not armed: no syscall, fd stays quiet
  EXPECT_FALSE(fd_readable(fd));
  EXPECT_EQ(c->signal()->raises(), 0u);
  c->read();
  ASSERT_EQ(c->try_arm(), FI_SUCCESS);
  EXPECT_FALSE(fd_readable(fd));
  c->add(1);
  EXPECT_TRUE(fd_readable(fd));
  EXPECT_EQ(c->signal()->raises(), 1u);
  c->add(1);  // the arm was used up: no second raise
  EXPECT_EQ(c->signal()->raises(), 1u);
}

TEST(FiTrywait, FdIsReadableAfterAnErrorOnAnArmedCounter) {
  auto c = make_cntr(SignalKind::kEventFd);
  const int fd = c->signal()->export_fd();  // what FI_GETWAIT hands out
  ASSERT_EQ(c->try_arm(), FI_SUCCESS);
  c->add_err(1);
  EXPECT_TRUE(fd_readable(fd));
}

TEST(FiTrywait, ApplicationSetAndAddRaiseAnArmedCounterToo) {
  auto c = make_cntr(SignalKind::kEventFd);
  const int fd = c->signal()->export_fd();  // what FI_GETWAIT hands out
  ASSERT_EQ(c->try_arm(), FI_SUCCESS);
  c->set(4);
  EXPECT_TRUE(fd_readable(fd));
  c->read();
  ASSERT_EQ(c->try_arm(), FI_SUCCESS);
  EXPECT_FALSE(fd_readable(fd)) << "trywait lowers the fd before it checks";
  c->app_add(1);
  EXPECT_TRUE(fd_readable(fd));
}

TEST(Ready, IsTheChangeSinceTheLastReadCheckpoint) {
  auto c = make_cntr(SignalKind::kEventFd);
  EXPECT_FALSE(c->ready());
  c->add(1);
  EXPECT_TRUE(c->ready());
  c->read();
  EXPECT_FALSE(c->ready());
  c->set(1);  // same value as read: no change
  EXPECT_FALSE(c->ready());
  c->set(0);
  EXPECT_TRUE(c->ready());
  c->read();
  c->add_err(1);
  EXPECT_TRUE(c->ready());
  c->readerr();
  EXPECT_FALSE(c->ready());
}

// ---- fi_poll: "changed since the last time fi_poll, fi_cntr_set, or fi_cntr_add were called" --
// Changes the application makes (fi_cntr_add/set/adderr/seterr) count, as producers' do.

TEST(PollPending, ReportedWhenTheValueOrErrorValueChangedSinceTheLastFiPoll) {
  auto c = make_cntr(SignalKind::kEventFd);
  EXPECT_FALSE(c->poll_pending());
  c->add(1);
  EXPECT_TRUE(c->poll_pending());
  c->polled();
  EXPECT_FALSE(c->poll_pending()) << "reported once, not again until it changes";
  c->add_err(1);
  EXPECT_TRUE(c->poll_pending());
  c->polled();
  EXPECT_FALSE(c->poll_pending());
}

TEST(PollPending, FiCntrReadDoesNotResetThePollSnapshot) {
  auto c = make_cntr(SignalKind::kEventFd);
  c->add(1);
  c->read();
  c->readerr();
  EXPECT_TRUE(c->poll_pending());
}

TEST(PollPending, FiCntrAddIsAChange) {
  auto c = make_cntr(SignalKind::kEventFd);
  c->add(1);
  c->add_err(1);
  c->app_add(1);
  EXPECT_TRUE(c->poll_pending()) << "changed by producers and by the application";
  c->polled();
  EXPECT_FALSE(c->poll_pending());
  c->app_add(1);
  EXPECT_TRUE(c->poll_pending());
  c->polled();
  c->app_add(0);  // a call, but no change of value: a false positive is allowed, not required
  c->polled();
  EXPECT_FALSE(c->poll_pending());
}

TEST(PollPending, FiCntrSetIsAChangeEvenWhenSetBack) {
  auto c = make_cntr(SignalKind::kEventFd);
  c->set(7);
  EXPECT_TRUE(c->poll_pending());
  c->polled();
  EXPECT_FALSE(c->poll_pending());
  c->set(8);
  c->set(7);  // back to the value fi_poll last saw: still a change to report
  EXPECT_TRUE(c->poll_pending());
  c->polled();
  EXPECT_FALSE(c->poll_pending());
}

TEST(PollPending, FiCntrAdderrAndSeterrAreChanges) {
  auto c = make_cntr(SignalKind::kEventFd);
  c->app_adderr(1);
  EXPECT_TRUE(c->poll_pending());
  c->polled();
  c->seterr(5);
  EXPECT_TRUE(c->poll_pending());
  c->polled();
  EXPECT_FALSE(c->poll_pending());
  c->seterr(6);
  c->seterr(5);
  EXPECT_TRUE(c->poll_pending()) << "set and set back";
}

TEST(PollSetWithCounter, FiPollReturnsTheCounterAfterAProducerAddAndOnlyOnce) {
  auto c = make_cntr(SignalKind::kEventFd);
  PollSet ps;
  int ctx_tag = 0;
  ASSERT_EQ(ps.add(c.get(), &ctx_tag), FI_SUCCESS);
  void* ctx[4];
  EXPECT_EQ(ps.poll(ctx, 4), 0);
  c->add(1);
  ASSERT_EQ(ps.poll(ctx, 4), 1);
  EXPECT_EQ(ctx[0], &ctx_tag);
  EXPECT_EQ(ps.poll(ctx, 4), 0) << "unchanged since the last fi_poll";
  c->add_err(1);
  EXPECT_EQ(ps.poll(ctx, 4), 1);
  ASSERT_EQ(ps.remove(c.get()), FI_SUCCESS);
}

TEST(PollSetWithCounter, FiPollReturnsACounterTheApplicationChanged) {
  // The reported bug: fi_poll (nothing), fi_cntr_add, fi_poll returned 0.
  auto c = make_cntr(SignalKind::kEventFd);
  PollSet ps;
  int ctx_tag = 0;
  ASSERT_EQ(ps.add(c.get(), &ctx_tag), FI_SUCCESS);
  void* ctx[4];
  EXPECT_EQ(ps.poll(ctx, 4), 0);
  c->app_add(1);
  ASSERT_EQ(ps.poll(ctx, 4), 1) << "fi_cntr_add";
  EXPECT_EQ(ctx[0], &ctx_tag);
  EXPECT_EQ(ps.poll(ctx, 4), 0);
  c->set(9);
  ASSERT_EQ(ps.poll(ctx, 4), 1) << "fi_cntr_set";
  EXPECT_EQ(ctx[0], &ctx_tag);
  c->app_adderr(1);
  EXPECT_EQ(ps.poll(ctx, 4), 1) << "fi_cntr_adderr";
  c->seterr(0);
  EXPECT_EQ(ps.poll(ctx, 4), 1) << "fi_cntr_seterr";
  EXPECT_EQ(ps.poll(ctx, 4), 0);
  ASSERT_EQ(ps.remove(c.get()), FI_SUCCESS);
}

TEST(PollSetWithCounter, NoApplicationChangeIsMissedWhileAnotherThreadPolls) {
  // Every fi_cntr_add after a fi_poll that did not see it must be reported by a later fi_poll.
  auto c = make_cntr(SignalKind::kEventFd);
  PollSet ps;
  ASSERT_EQ(ps.add(c.get(), c.get()), FI_SUCCESS);
  std::atomic<bool> done{false};
  std::thread app([&] {
    for (int i = 0; i < 100'000; ++i) {
      if (i % 2)
        c->app_add(1);
      else
        c->set(c->value());  // the same value: a change the poll set must still report
    }
    done.store(true, std::memory_order_release);
  });
  void* ctx[1];
  while (!done.load(std::memory_order_acquire)) ps.poll(ctx, 1);
  app.join();
  ps.poll(ctx, 1);  // reports the last change, or the racing poll above already did
  EXPECT_EQ(ps.poll(ctx, 1), 0);
  c->set(c->value());
  EXPECT_EQ(ps.poll(ctx, 1), 1);
  ASSERT_EQ(ps.remove(c.get()), FI_SUCCESS);
}

TEST(PollSetWithCounter, NoChangeIsMissedWhileAProducerRacesFiPoll) {
  // Every producer add after a fi_poll that did not see it must be reported by a later fi_poll.
  auto c = make_cntr(SignalKind::kEventFd);
  PollSet ps;
  ASSERT_EQ(ps.add(c.get(), c.get()), FI_SUCCESS);
  constexpr uint64_t kAdds = 100'000;
  std::atomic<bool> done{false};
  std::thread producer([&] {
    for (uint64_t i = 0; i < kAdds; ++i) c->add(1);
    done.store(true, std::memory_order_release);
  });
  void* ctx[1];
  while (!done.load(std::memory_order_acquire)) ps.poll(ctx, 1);
  producer.join();
  // The value moved since whichever snapshot the last racing fi_poll took, or that poll took it
  // after the last add: either the counter is reported now, or the snapshot is the final value.
  int n = ps.poll(ctx, 1);
  if (n == 0) {
    EXPECT_FALSE(c->poll_pending());
  } else {
    EXPECT_EQ(n, 1);
  }
  EXPECT_EQ(ps.poll(ctx, 1), 0);
  c->add(1);
  EXPECT_EQ(ps.poll(ctx, 1), 1);
  ASSERT_EQ(ps.remove(c.get()), FI_SUCCESS);
}

TEST(WaitSetWithCounter, FiWaitReturnsWhenAMemberCounterIsAddedTo) {
  for (auto k : {FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD}) {
    auto ws = WaitSet::create(k);
    ASSERT_TRUE(ws);
    auto c = make_cntr_without_signal();  // members of a set signal through the set
    ASSERT_EQ(ws.value()->add_member(c.get(), nullptr), FI_SUCCESS);
    EXPECT_EQ(ws.value()->wait(Deadline::after_ms(20)), -FI_ETIMEDOUT);
    {
      After producer(30ms, [&] { c->add(1); });
      EXPECT_EQ(ws.value()->wait(Deadline::after_ms(5000)), FI_SUCCESS) << k;
    }
    EXPECT_EQ(ws.value()->wait(Deadline::after_ms(0)), FI_SUCCESS)
        << "still changed: the application has not read it";
    c->read();
    EXPECT_EQ(ws.value()->wait(Deadline::after_ms(20)), -FI_ETIMEDOUT);
    ASSERT_EQ(ws.value()->remove_member(c.get()), FI_SUCCESS);
  }
}

TEST(Bindings, AreCountedForFiClose) {
  auto c = make_cntr(SignalKind::kEventFd);
  EXPECT_EQ(c->bindings(), 0);
  c->bind_ref();
  c->bind_ref();
  EXPECT_EQ(c->bindings(), 2);
  c->bind_unref();
  c->bind_unref();
  EXPECT_EQ(c->bindings(), 0);
}

TEST(Destruction, LeavesEverySetItIsIn) {
  auto c = make_cntr(SignalKind::kEventFd);
  PollSet ps;
  auto ws = WaitSet::create(FI_WAIT_FD);
  ASSERT_TRUE(ws);
  ASSERT_EQ(ps.add(c.get(), nullptr), FI_SUCCESS);
  ASSERT_EQ(ws.value()->add_member(c.get(), nullptr), FI_SUCCESS);
  c.reset();
  EXPECT_EQ(ps.size(), 0u);
  EXPECT_EQ(ws.value()->size(), 0u);
}
