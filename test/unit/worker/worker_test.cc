// SPDX-License-Identifier: BSD-3-Clause
//
// The worker engine (lib/worker) against the UCP wakeup contract (reference/ucp_worker_wakeup.txt)
// without EAL: members are TestQueues (an atomic count of published events), the progress source
// a counter. Test names quote the sentence they check.
#include "worker/worker.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "../wait/test_queue.h"

#include "test_util.h"

using dpfab::test::After;
using dpfab::test::fd_readable;

using dpfab::wait::Deadline;
using dpfab::wait::ProgressSource;
using dpfab::wait::SignalKind;
using dpfab::wait::test::SpinningSource;
using dpfab::wait::test::TestQueue;
using dpfab::worker::MemPath;
using dpfab::worker::Options;
using dpfab::worker::Wake;
using dpfab::worker::Worker;
using namespace std::chrono_literals;

namespace {

constexpr int64_t kMs = 1'000'000;

std::unique_ptr<Worker> make_worker(ProgressSource* p = nullptr, Options o = Options{}) {
  auto w = Worker::create(p, o);
  EXPECT_TRUE(w) << (w ? "" : w.error().message);
  return w ? std::move(w.value()) : nullptr;
}

/// A member without a signal of its own (FI_WAIT_NONE): the worker signals for it.
std::unique_ptr<TestQueue> make_member() { return std::make_unique<TestQueue>(nullptr); }

/// Counts progress calls; each produces `per_call` events, published into `target` if set.
class CountingProgress final : public ProgressSource {
 public:
  size_t progress() noexcept override {
    calls.fetch_add(1, std::memory_order_relaxed);
    size_t n = per_call.load(std::memory_order_relaxed);
    if (target && n) target->publish(n);
    return n;
  }
  std::atomic<size_t> calls{0};
  std::atomic<size_t> per_call{0};
  TestQueue* target = nullptr;
};

struct Stats {
  std::vector<int64_t> ns;
  void print(const char* what) {
    std::sort(ns.begin(), ns.end());
    auto at = [&](double q) { return ns[std::min(ns.size() - 1, size_t(q * ns.size()))] / 1e3; };
    std::printf(
        "[latency] %-46s n=%3zu  min %8.1f us  median %8.1f us  p90 %8.1f us  max %8.1f us\n", what,
        ns.size(), ns.front() / 1e3, at(0.5), at(0.9), ns.back() / 1e3);
  }
  int64_t median() {
    std::sort(ns.begin(), ns.end());
    return ns[ns.size() / 2];
  }
};

}  // namespace

// ---- creation and membership ------------------------------------------------------------------

TEST(Worker, BadOptionsAreRejected) {
  Options o;
  o.slice_min_ns = 0;
  auto w = Worker::create(nullptr, o);
  ASSERT_FALSE(w);
  EXPECT_EQ(w.code(), -FI_EINVAL);
  o = Options{};
  o.slice_max_ns = o.slice_min_ns - 1;
  EXPECT_EQ(Worker::create(nullptr, o).code(), -FI_EINVAL);
  o = Options{};
  o.spin_ns = -1;
  EXPECT_EQ(Worker::create(nullptr, o).code(), -FI_EINVAL);
}

TEST(Worker, GetEfdReturnsAValidFileDescriptorForPollingFunctions) {
  auto w = make_worker();
  ASSERT_GE(w->efd(), 0);
  pollfd p{w->efd(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0);
  EXPECT_EQ(p.revents, 0);
}

TEST(Worker, AddingAMemberTwiceIsEALREADYAndRemovingAStrangerIsENOENT) {
  auto w = make_worker();
  auto q = make_member();
  EXPECT_EQ(w->add_member(q.get()), FI_SUCCESS);
  EXPECT_EQ(w->add_member(q.get()), -FI_EALREADY);
  EXPECT_EQ(w->members(), 1u);
  auto other = make_member();
  EXPECT_EQ(w->remove_member(other.get()), -FI_ENOENT);
  EXPECT_EQ(w->remove_member(q.get()), FI_SUCCESS);
  EXPECT_EQ(w->members(), 0u);
  EXPECT_EQ(w->add_member(nullptr), -FI_EINVAL);
}

TEST(Worker, ARemovedMemberNoLongerMakesArmBusy) {
  auto w = make_worker();
  auto q = make_member();
  ASSERT_EQ(w->add_member(q.get()), FI_SUCCESS);
  q->publish();
  EXPECT_EQ(w->arm(), -FI_EBUSY);
  ASSERT_EQ(w->remove_member(q.get()), FI_SUCCESS);
  EXPECT_EQ(w->arm(), FI_SUCCESS);
  q->publish();
  EXPECT_FALSE(fd_readable(w->efd()));
}

TEST(Worker, AMemberDestroyedFirstLeavesTheWorker) {
  auto w = make_worker();
  {
    auto q = make_member();
    ASSERT_EQ(w->add_member(q.get()), FI_SUCCESS);
    q->publish();
  }
  EXPECT_EQ(w->members(), 0u);
  EXPECT_EQ(w->arm(), FI_SUCCESS);
}

TEST(Worker, AWorkerDestroyedFirstLeavesItsMembersUsable) {
  auto q = make_member();
  {
    auto w = make_worker();
    ASSERT_EQ(w->add_member(q.get()), FI_SUCCESS);
  }
  EXPECT_EQ(q->subscriptions(), 0);
  q->publish();  // no dangling subscription to call into
  EXPECT_TRUE(q->take());
}

// ---- arm --------------------------------------------------------------------------------------

TEST(Worker, ArmReturnsOkWhenThereAreNoUnprocessedEvents) {
  auto w = make_worker();
  EXPECT_EQ(w->arm(), FI_SUCCESS) << "empty worker";
  auto q = make_member();
  ASSERT_EQ(w->add_member(q.get()), FI_SUCCESS);
  EXPECT_EQ(w->arm(), FI_SUCCESS);
  EXPECT_EQ(w->arm(), FI_SUCCESS) << "arming twice is harmless";
}

TEST(Worker, ArmReturnsBusyWhileThereAreUnprocessedEvents) {
  auto w = make_worker();
  auto q = make_member();
  ASSERT_EQ(w->add_member(q.get()), FI_SUCCESS);
  q->publish(2);
  EXPECT_EQ(w->arm(), -FI_EBUSY);
  ASSERT_TRUE(q->take());
  EXPECT_EQ(w->arm(), -FI_EBUSY) << "one event is still unprocessed";
  ASSERT_TRUE(q->take());
  EXPECT_EQ(w->arm(), FI_SUCCESS);
}

TEST(Worker, ArmIsBusyForAMemberThatJoinsWithEvents) {
  auto w = make_worker();
  auto q = make_member();
  q->publish();
  ASSERT_EQ(w->add_member(q.get()), FI_SUCCESS);
  EXPECT_EQ(w->arm(), -FI_EBUSY);
}

TEST(Worker, ArmRunsOneProgressStepAndIsBusyWhenItProducesEvents) {
  CountingProgress p;
  auto w = make_worker(&p);
  auto q = make_member();
  q->set_progress(&p);  // the member's source, as a CQ of the domain has
  p.target = q.get();
  ASSERT_EQ(w->add_member(q.get()), FI_SUCCESS);
  EXPECT_EQ(w->arm(), FI_SUCCESS);
  EXPECT_GE(p.calls.load(), 1u);
  p.per_call = 1;  // the next poll step finds a completion
  EXPECT_EQ(w->arm(), -FI_EBUSY);
  EXPECT_EQ(q->available(), 1u);
}

// ---- the file descriptor ----------------------------------------------------------------------

TEST(Worker, FileDescriptorIsSignaledByANewEventOnceArmedAndOnlyThen) {
  auto w = make_worker();
  auto q = make_member();
  ASSERT_EQ(w->add_member(q.get()), FI_SUCCESS);
  q->publish();
  EXPECT_FALSE(fd_readable(w->efd())) << "not armed: an event does not signal the fd";
  ASSERT_TRUE(q->take());
  ASSERT_EQ(w->arm(), FI_SUCCESS);
  EXPECT_FALSE(fd_readable(w->efd()));
  q->publish();
  EXPECT_TRUE(fd_readable(w->efd()));
  ASSERT_TRUE(q->take());
  ASSERT_EQ(w->arm(), FI_SUCCESS) << "arm cleans up the fd";
  EXPECT_FALSE(fd_readable(w->efd()));
}

TEST(Worker, AfterBusyTheFileDescriptorWillNotBeSignaledByNewEvents) {
  auto w = make_worker();
  auto q = make_member();
  ASSERT_EQ(w->add_member(q.get()), FI_SUCCESS);
  q->publish();
  ASSERT_EQ(w->arm(), -FI_EBUSY);
  q->publish();
  EXPECT_FALSE(fd_readable(w->efd()));
}

TEST(Worker, FileDescriptorIsSignaledByAnEventOnAnyMember) {
  auto w = make_worker();
  std::vector<std::unique_ptr<TestQueue>> qs;
  for (int i = 0; i < 4; ++i) {
    qs.push_back(make_member());
    ASSERT_EQ(w->add_member(qs.back().get()), FI_SUCCESS);
  }
  for (auto& q : qs) {
    ASSERT_EQ(w->arm(), FI_SUCCESS);
    q->publish();
    EXPECT_TRUE(fd_readable(w->efd()));
    EXPECT_EQ(w->arm(), -FI_EBUSY);
    ASSERT_TRUE(q->take());
  }
}

TEST(Worker, FileDescriptorBecomesReadableWhenAnEventComesFromAnotherThread) {
  auto w = make_worker();
  auto q = make_member();
  ASSERT_EQ(w->add_member(q.get()), FI_SUCCESS);
  ASSERT_EQ(w->arm(), FI_SUCCESS);
  After later(10ms, [&] { q->publish(); });
  EXPECT_TRUE(fd_readable(w->efd(), 5000));
}

// ---- signal -----------------------------------------------------------------------------------

TEST(Worker, SignalMakesTheFileDescriptorReadableEvenWithoutAnEvent) {
  auto w = make_worker();
  ASSERT_EQ(w->arm(), FI_SUCCESS);
  w->signal();
  EXPECT_TRUE(fd_readable(w->efd()));
}

TEST(Worker, SignalMakesTheFileDescriptorReadableEvenWhenNotArmed) {
  auto w = make_worker();
  w->signal();
  EXPECT_TRUE(fd_readable(w->efd()));
}

TEST(Worker, APendingSignalMakesTheNextArmBusyOnce) {
  auto w = make_worker();
  w->signal();
  w->signal();  // coalesces with the first
  EXPECT_EQ(w->arm(), -FI_EBUSY);
  EXPECT_EQ(w->arm(), FI_SUCCESS) << "the signal was consumed by the busy arm";
  EXPECT_FALSE(fd_readable(w->efd()));
}

TEST(Worker, SignalCausesABlockedWaitToReturn) {
  auto w = make_worker();
  auto t0 = std::chrono::steady_clock::now();
  After later(20ms, [&] { w->signal(); });
  EXPECT_EQ(w->wait(Deadline::after_ms(5000)), Wake::kSignal);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 19ms);
}

TEST(Worker, ASignalBeforeTheWaitIsNotLost) {
  auto w = make_worker();
  w->signal();
  EXPECT_EQ(w->wait(Deadline::after_ms(5000)), Wake::kSignal);
  EXPECT_EQ(w->wait(Deadline::after_ms(0)), Wake::kTimeout) << "consumed";
}

TEST(Worker, SignalIsSafeFromAnyThread) {
  auto w = make_worker();
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([&] {
      for (int k = 0; k < 1000; ++k) w->signal();
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(w->wait(Deadline::after_ms(1000)), Wake::kSignal);
  EXPECT_EQ(w->arm(), FI_SUCCESS);
}

// ---- wait -------------------------------------------------------------------------------------

TEST(Worker, WaitReturnsWhenAnEventHappensOnAnotherThread) {
  auto w = make_worker();
  auto q = make_member();
  ASSERT_EQ(w->add_member(q.get()), FI_SUCCESS);
  auto t0 = std::chrono::steady_clock::now();
  After later(20ms, [&] { q->publish(); });
  EXPECT_EQ(w->wait(Deadline::after_ms(5000)), Wake::kEvent);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 19ms);
  EXPECT_EQ(q->available(), 1u);
}

TEST(Worker, WaitReturnsAtOnceWhileEventsAreUnprocessed) {
  auto w = make_worker();
  auto q = make_member();
  ASSERT_EQ(w->add_member(q.get()), FI_SUCCESS);
  q->publish();
  EXPECT_EQ(w->wait(Deadline::after_ms(5000)), Wake::kEvent);
  EXPECT_EQ(w->wait(Deadline::after_ms(5000)), Wake::kEvent) << "until they are drained";
}

TEST(Worker, WaitReturnsOnlyIfNewEventsOccur) {
  auto w = make_worker();
  auto q = make_member();
  ASSERT_EQ(w->add_member(q.get()), FI_SUCCESS);
  // A stale raise of the fd (an event already consumed) does not end the wait.
  ASSERT_EQ(w->arm(), FI_SUCCESS);
  q->publish();
  ASSERT_TRUE(fd_readable(w->efd()));
  ASSERT_TRUE(q->take());
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(w->wait(Deadline::after_ms(50)), Wake::kTimeout);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 49ms);
}

TEST(Worker, WaitTimesOut) {
  auto w = make_worker();
  EXPECT_EQ(w->wait(Deadline::after_ms(0)), Wake::kTimeout);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(w->wait(Deadline::after_ms(30)), Wake::kTimeout);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 29ms);
  EXPECT_FALSE(fd_readable(w->efd()));
}

// ---- wait_mem ---------------------------------------------------------------------------------

TEST(Worker, WaitMemReturnsWhenTheAddressIsWrittenOnAnotherThread_SpinPath) {
  Options o;
  o.spin_ns = 5'000 * kMs;  // the whole wait spins
  auto w = make_worker(nullptr, o);
  alignas(8) uint64_t word = 7;
  MemPath path = MemPath::kSleep;
  After later(10ms, [&] { __atomic_store_n(&word, 8, __ATOMIC_RELEASE); });
  EXPECT_EQ(w->wait_mem<uint64_t>(&word, Deadline::after_ms(5000), &path), Wake::kMemory);
  EXPECT_EQ(path, MemPath::kSpin);
}

TEST(Worker, WaitMemReturnsWhenTheAddressIsWrittenOnAnotherThread_SleepPath) {
  Options o;
  o.spin_ns = 0;
  auto w = make_worker(nullptr, o);
  alignas(8) uint64_t word = 7;
  MemPath path = MemPath::kSpin;
  After later(20ms, [&] { __atomic_store_n(&word, 8, __ATOMIC_RELEASE); });
  EXPECT_EQ(w->wait_mem<uint64_t>(&word, Deadline::after_ms(5000), &path), Wake::kMemory);
  EXPECT_EQ(path, MemPath::kSleep);
}

TEST(Worker, WaitMemWatchesOnlyTheGivenWidth) {
  Options o;
  o.spin_ns = 1 * kMs;
  o.slice_min_ns = o.slice_max_ns = 1 * kMs;
  auto w = make_worker(nullptr, o);
  alignas(8) uint8_t bytes[8] = {};
  After later(1ms, [&] { __atomic_store_n(&bytes[1], 1, __ATOMIC_RELEASE); });
  EXPECT_EQ(w->wait_mem<uint8_t>(&bytes[0], Deadline::after_ms(20)), Wake::kTimeout)
      << "the neighbouring byte is not watched";
  // The writer keeps changing the watched value every millisecond until the wait returns: on a
  // slow machine (ThreadSanitizer) a single early store could land before wait_mem reads its
  // entry value, and then waiting for the next change would be right.
  auto changes = [&](auto* p, auto first) {
    return [p, first](const std::atomic<bool>& stop) {
      for (auto v = first; !stop.load(); ++v) {
        __atomic_store_n(p, v, __ATOMIC_RELEASE);
        std::this_thread::sleep_for(1ms);
      }
    };
  };
  auto expect_woken = [&](auto* p, auto first) {
    std::atomic<bool> stop{false};
    std::thread writer(changes(p, first), std::cref(stop));
    EXPECT_EQ(w->wait_mem<std::remove_pointer_t<decltype(p)>>(p, Deadline::after_ms(5000)),
              Wake::kMemory);
    stop = true;
    writer.join();
  };
  expect_woken(&bytes[1], uint8_t{2});
  expect_woken(reinterpret_cast<uint16_t*>(&bytes[2]), uint16_t{0x0101});
  expect_woken(reinterpret_cast<uint32_t*>(&bytes[4]), uint32_t{1});
}

TEST(Worker, WaitMemReturnsWhenAnEventOccurs) {
  for (int64_t spin : {int64_t{5'000} * kMs, int64_t{0}}) {
    Options o;
    o.spin_ns = spin;
    auto w = make_worker(nullptr, o);
    auto q = make_member();
    ASSERT_EQ(w->add_member(q.get()), FI_SUCCESS);
    alignas(8) uint64_t word = 0;
    After later(10ms, [&] { q->publish(); });
    EXPECT_EQ(w->wait_mem<uint64_t>(&word, Deadline::after_ms(5000)), Wake::kEvent)
        << "spin " << spin;
  }
}

TEST(Worker, WaitMemReturnsOnSignal) {
  for (int64_t spin : {int64_t{5'000} * kMs, int64_t{0}}) {
    Options o;
    o.spin_ns = spin;
    o.slice_min_ns = o.slice_max_ns = 1'000 * kMs;  // only the signal can end a sleep early
    auto w = make_worker(nullptr, o);
    alignas(8) uint64_t word = 0;
    auto t0 = std::chrono::steady_clock::now();
    After later(10ms, [&] { w->signal(); });
    EXPECT_EQ(w->wait_mem<uint64_t>(&word, Deadline::after_ms(5000)), Wake::kSignal)
        << "spin " << spin;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 500ms);
  }
}

TEST(Worker, WaitMemReturnsAtOnceWhileEventsAreUnprocessed) {
  auto w = make_worker();
  auto q = make_member();
  ASSERT_EQ(w->add_member(q.get()), FI_SUCCESS);
  q->publish();
  alignas(8) uint64_t word = 0;
  EXPECT_EQ(w->wait_mem<uint64_t>(&word, Deadline::after_ms(5000)), Wake::kEvent);
}

TEST(Worker, WaitMemTimesOut) {
  Options o;
  o.spin_ns = 1 * kMs;
  auto w = make_worker(nullptr, o);
  alignas(4) uint32_t word = 0;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(w->wait_mem<uint32_t>(&word, Deadline::after_ms(30)), Wake::kTimeout);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 29ms);
  EXPECT_EQ(w->wait_mem<uint32_t>(&word, Deadline::after_ms(0)), Wake::kTimeout);
}

TEST(Worker, AWriterThatStoresThenSignalsEndsWaitMemAtOnce) {
  // Wherever the store lands (before wait_mem reads the address, during the arm, during the
  // sleep), store-then-signal ends the wait at once: the slices here are 1 s.
  Options o;
  o.spin_ns = 0;
  o.slice_min_ns = o.slice_max_ns = 1'000 * kMs;
  auto w = make_worker(nullptr, o);
  alignas(8) uint64_t word = 0;
  for (int i = 0; i < 100; ++i) {
    After writer(std::chrono::microseconds(i % 10), [&] {
      __atomic_fetch_add(&word, 1, __ATOMIC_RELEASE);
      w->signal();  // a writer that wants an immediate wake
    });
    auto t0 = std::chrono::steady_clock::now();
    Wake r = w->wait_mem<uint64_t>(&word, Deadline::after_ms(5000));
    EXPECT_TRUE(r == Wake::kMemory || r == Wake::kSignal);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 500ms) << "round " << i;
  }
}

TEST(Worker, WaitMemUsesUmwaitExactlyWhenTheCpuHasWaitpkg) {
  // cpuid leaf 7 ECX bit 5 is what the kernel reports as the "waitpkg" flag.
  FILE* f = std::fopen("/proc/cpuinfo", "r");
  ASSERT_NE(f, nullptr);
  bool listed = false;
  char line[8192];
  while (std::fgets(line, sizeof(line), f))
    if (std::strncmp(line, "flags", 5) == 0) {
      listed = std::strstr(line, " waitpkg") != nullptr;
      break;
    }
  std::fclose(f);
  EXPECT_EQ(Worker::cpu_has_waitpkg(), listed);
  EXPECT_EQ(make_worker()->spins_with_umwait(), listed);
  Options o;
  o.use_umwait = false;
  EXPECT_FALSE(make_worker(nullptr, o)->spins_with_umwait());
  std::printf("[info] WAITPKG %s: wait_mem spins with %s\n", listed ? "present" : "absent",
              listed ? "UMWAIT" : "PAUSE");
}

// ---- progress ---------------------------------------------------------------------------------

TEST(Worker, ProgressReturnsTheNumberOfEventsProduced) {
  CountingProgress p;
  auto w = make_worker(&p);
  EXPECT_EQ(w->progress(), 0u);
  p.per_call = 3;
  EXPECT_EQ(w->progress(), 3u);
  EXPECT_EQ(p.calls.load(), 2u);
  auto none = make_worker(nullptr);
  EXPECT_EQ(none->progress(), 0u);
}

TEST(Worker, TheUcpLoopDrainsProgressesArmsAndSleeps) {
  // The example of ucp_worker_arm(3): progress until 0, arm, poll; BUSY means progress more.
  CountingProgress p;
  auto w = make_worker(&p);
  auto q = make_member();
  q->set_progress(&p);
  ASSERT_EQ(w->add_member(q.get()), FI_SUCCESS);
  constexpr uint64_t kEvents = 200;
  std::thread producer([&] {
    for (uint64_t i = 0; i < kEvents; ++i) {
      if (i % 16 == 0) std::this_thread::sleep_for(100us);
      q->publish();
    }
  });
  uint64_t got = 0;
  int sleeps = 0, timeouts = 0;
  while (got < kEvents) {
    if (q->take()) {
      ++got;
      continue;
    }
    if (w->progress() > 0) continue;
    int r = w->arm();
    if (r == FI_SUCCESS) {
      ++sleeps;
      if (!fd_readable(w->efd(), 2000)) ++timeouts;
    } else {
      ASSERT_EQ(r, -FI_EBUSY);
    }
    if (timeouts) break;
  }
  producer.join();
  EXPECT_EQ(got, kEvents);
  EXPECT_EQ(timeouts, 0) << "a wakeup was lost";
  EXPECT_GT(sleeps, 0);
}

// ---- no lost wakeup under races ---------------------------------------------------------------

TEST(Worker, NoEventWakeupIsLostAcrossThreads) {
  auto w = make_worker();
  auto q = make_member();
  ASSERT_EQ(w->add_member(q.get()), FI_SUCCESS);
  constexpr int kRounds = 20'000;
  std::atomic<int> consumed{0};
  std::thread producer([&] {
    for (int i = 0; i < kRounds; ++i) {
      // One event in flight at a time: the consumer must wake for each.
      while (consumed.load(std::memory_order_acquire) < i) std::this_thread::yield();
      q->publish();
    }
  });
  int lost = 0;
  for (int i = 0; i < kRounds && !lost; ++i) {
    Wake r = w->wait(Deadline::after_ms(2000));
    if (r != Wake::kEvent) ++lost;
    if (!q->take()) ++lost;
    consumed.store(i + 1, std::memory_order_release);
  }
  if (lost) consumed.store(kRounds, std::memory_order_release);
  producer.join();
  EXPECT_EQ(lost, 0);
}

TEST(Worker, NoSignalIsLostAcrossThreads) {
  auto w = make_worker();
  constexpr int kRounds = 20'000;
  std::atomic<int> posted{0};
  std::atomic<bool> stop{false};
  std::thread signaller([&] {
    for (int i = 1; i <= kRounds && !stop.load(); ++i) {
      posted.store(i, std::memory_order_release);
      w->signal();
      if (i % 64 == 0) std::this_thread::yield();
    }
  });
  int seen = 0, timeouts = 0;
  while (seen < kRounds) {
    int p = posted.load(std::memory_order_acquire);
    if (p > seen) {
      seen = p;
      continue;
    }
    // posted == seen: any later post is followed by a signal, which must end this wait.
    if (w->wait(Deadline::after_ms(2000)) == Wake::kTimeout) {
      ++timeouts;
      break;
    }
  }
  stop = true;
  signaller.join();
  EXPECT_EQ(timeouts, 0) << "a signal was lost at " << seen;
}

// ---- wake-up latency (printed; bounds are loose sanity checks) --------------------------------

namespace {

/// `rounds` wake-ups: `wake_fn(i)` on another thread `delay` (+ up to `jitter`, spread evenly
/// over the rounds so that the writes do not keep one phase against a sleep slice) after
/// `wait_fn(i)` starts; samples the time from just before wake_fn to wait_fn's return.
template <typename WaitFn, typename WakeFn>
Stats measure(int rounds, std::chrono::microseconds delay, WaitFn wait_fn, WakeFn wake_fn,
              std::chrono::microseconds jitter = 0us) {
  Stats s;
  for (int i = 0; i < rounds; ++i) {
    std::atomic<int64_t> woken_at{0};
    auto d = delay + jitter * ((i * 37) % rounds) / rounds;
    After later(d, [&] {
      woken_at.store(Deadline::now_ns(), std::memory_order_release);
      wake_fn(i);
    });
    wait_fn(i);
    int64_t end = Deadline::now_ns();
    // The waker stamps before it wakes; a wake that beat the stamp is not a sample.
    int64_t start = woken_at.load(std::memory_order_acquire);
    if (start != 0) s.ns.push_back(end - start);
  }
  return s;
}

}  // namespace

TEST(WorkerLatency, EventToWaitAndToEfd) {
  auto w = make_worker();
  auto q = make_member();
  ASSERT_EQ(w->add_member(q.get()), FI_SUCCESS);
  auto wait_stats = measure(
      200, 2ms,
      [&](int) {
        ASSERT_EQ(w->wait(Deadline::after_ms(5000)), Wake::kEvent);
        ASSERT_TRUE(q->take());
      },
      [&](int) { q->publish(); });
  wait_stats.print("event -> wait() returns");
  auto efd_stats = measure(
      200, 2ms,
      [&](int) {
        // On a loaded machine the waker may publish before this thread arms: arm() is then
        // rightly busy, and the event is simply taken.
        int r = w->arm();
        ASSERT_TRUE(r == FI_SUCCESS || r == -FI_EBUSY) << r;
        if (r == FI_SUCCESS) {
          ASSERT_TRUE(fd_readable(w->efd(), 5000));
        }
        ASSERT_TRUE(q->take());
      },
      [&](int) { q->publish(); });
  efd_stats.print("event -> efd readable (poll)");
  EXPECT_LT(wait_stats.median(), 20 * kMs);
  EXPECT_LT(efd_stats.median(), 20 * kMs);
}

TEST(WorkerLatency, SignalToWaitAndToWaitMem) {
  auto w = make_worker();
  auto wait_stats = measure(
      200, 2ms, [&](int) { ASSERT_EQ(w->wait(Deadline::after_ms(5000)), Wake::kSignal); },
      [&](int) { w->signal(); });
  wait_stats.print("signal -> wait() returns");
  Options o;
  o.spin_ns = 0;
  auto sleeper = make_worker(nullptr, o);
  alignas(8) uint64_t word = 0;
  auto mem_stats = measure(
      200, 2ms,
      [&](int) {
        ASSERT_EQ(sleeper->wait_mem<uint64_t>(&word, Deadline::after_ms(5000)), Wake::kSignal);
      },
      [&](int) { sleeper->signal(); });
  mem_stats.print("signal -> wait_mem() returns (sleeping)");
  EXPECT_LT(wait_stats.median(), 20 * kMs);
  EXPECT_LT(mem_stats.median(), 20 * kMs);
}

// A bounded-latency check with a few rounds (the figures it prints are indicative; measure with
// scripts/bench-wait.sh, not here).
TEST(WorkerLatency, MemoryWriteToWaitMem) {
  alignas(8) uint64_t word = 0;
  auto store = [&](int i) { __atomic_store_n(&word, uint64_t(i) + 1, __ATOMIC_RELEASE); };
  // wait_mem waits for a change of the value it reads on entry (ucp_worker_wait_mem). On a slow
  // machine (ThreadSanitizer) round i's store can land before that read: then the wait rightly
  // runs to its timeout, and the round is no sample, not a failure.
  auto stored_before_entry = [&](Wake r, int i) {
    return r == Wake::kTimeout && __atomic_load_n(&word, __ATOMIC_ACQUIRE) == uint64_t(i) + 1;
  };
  {
    Options o;
    o.spin_ns = 5'000 * kMs;  // spin covers the whole wait
    auto w = make_worker(nullptr, o);
    auto s = measure(
        20, 200us,
        [&](int i) {
          MemPath path;
          Wake r = w->wait_mem<uint64_t>(&word, Deadline::after_ms(5000), &path);
          if (stored_before_entry(r, i)) return;
          ASSERT_EQ(r, Wake::kMemory);
          ASSERT_EQ(path, MemPath::kSpin);
        },
        store);
    s.print(w->spins_with_umwait() ? "store -> wait_mem() (spin, UMWAIT)"
                                   : "store -> wait_mem() (spin, PAUSE)");
    // Each round asserted above that the spin saw the store. The median only catches a wait that
    // hangs on: a spinner on a busy 2-vCPU machine loses its CPU for scheduler ticks (a median of
    // 7.7 ms was seen with a package install beside it), so the bound is the other cases' 20 ms.
    EXPECT_LT(s.median(), 20 * kMs);
  }
  for (int64_t slice_us : {50, 200, 1000}) {
    Options o;
    o.spin_ns = 0;
    o.slice_min_ns = o.slice_max_ns = slice_us * 1000;
    auto w = make_worker(nullptr, o);
    auto s = measure(
        10, 3ms,
        [&](int i) {
          MemPath path;
          Wake r = w->wait_mem<uint64_t>(&word, Deadline::after_ms(5000), &path);
          if (stored_before_entry(r, i)) return;
          ASSERT_EQ(r, Wake::kMemory);
          ASSERT_EQ(path, MemPath::kSleep);
        },
        store, std::chrono::microseconds(slice_us));
    char what[80];
    std::snprintf(what, sizeof(what), "store -> wait_mem() (sleep, slice %lld us)",
                  static_cast<long long>(slice_us));
    s.print(what);
    EXPECT_LT(s.median(), slice_us * 1000 + 20 * kMs);
  }
  {
    Options o;  // the defaults: 5 us spin, then 50 us .. 1 ms slices; the write comes at 10 ms
    auto w = make_worker(nullptr, o);
    auto s = measure(
        5, 10ms,
        [&](int i) {
          Wake r = w->wait_mem<uint64_t>(&word, Deadline::after_ms(5000));
          if (stored_before_entry(r, i)) return;
          ASSERT_EQ(r, Wake::kMemory);
        },
        store, 1000us);
    s.print("store -> wait_mem() (defaults, write at 10-11 ms)");
    EXPECT_LT(s.median(), 25 * kMs);
  }
}

// ---- the learnt spin of wait (FI_DPDK_SPIN_US) --------------------------------------------------

// wait polls for its members' learnt budget before it sleeps, as fi_wait and fi_cq_sread do, and
// reports each wait so that the budget learns.
TEST(Worker, WaitSpinsForTheMembersBudgetAndReportsTheWait) {
  auto w = make_worker();
  auto q = make_member();
  SpinningSource src;
  src.into = q.get();
  q->set_progress(&src);
  ASSERT_EQ(w->add_member(q.get()), FI_SUCCESS);
  src.budget_ns = 5'000'000'000;  // far longer than the test: the event comes from the spin
  src.deliver_after = 50;
  EXPECT_EQ(w->wait(Deadline::after_ms(10000)), Wake::kEvent);
  EXPECT_EQ(src.deliver_after, 0);
  EXPECT_EQ(src.waits, 1);
  EXPECT_TRUE(src.last_ready);
  EXPECT_FALSE(src.last_slept);
  ASSERT_TRUE(q->take());
  src.budget_ns = 0;
  EXPECT_EQ(w->wait(Deadline::after_ms(20)), Wake::kTimeout);
  EXPECT_EQ(src.waits, 2);
  EXPECT_FALSE(src.last_ready);
  EXPECT_TRUE(src.last_slept);
  ASSERT_EQ(w->remove_member(q.get()), FI_SUCCESS);
}
