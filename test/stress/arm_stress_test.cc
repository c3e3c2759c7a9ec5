// SPDX-License-Identifier: BSD-3-Clause
//
// Stress test of the arm/trywait protocol (suite 'stress'; also run under ThreadSanitizer).
//
// N producer threads publish uniquely numbered events into lock-free rte_rings (MPMC, made
// without EAL) with random delays; M consumer threads drain, arm, block, wake and drain again.
// Checked: every event is consumed exactly once (a bitmap), no event is slept through (a wait that
// times out while events are queued and no consumer has taken anything for half the wait is a
// lost wakeup), and every wait is bounded (a watchdog fails the test instead of hanging).
// With several consumers a sleeper may legitimately sleep through events while another consumer
// takes them: that consumer's busy C3 clears the shared arm, or its C1 drains the raise, and
// takes over the responsibility for the events (waitable.h; test/model/arm_trywait.pml with
// NCONS=2). Such timeouts are counted apart ("slept while others consumed"), not as lost.
//
// Shapes: consumers blocking through Waitable::wait (what fi_cq_sread does); consumers doing
// fi_trywait + poll(fd) by hand (what an epoll application does); consumers blocking on an
// FD wait set over several queues (fi_wait); yield and mutex/cond signals.
// DPFAB_STRESS_EVENTS scales the run (default 2,000,000 events per case, which gives over a
// million arm/sleep/wake cycles over all cases; the TSan run uses fewer).
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/fi_errno.h>
#include <rte_ring.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "common/ring.h"
#include "wait/wait_set.h"

using namespace dpfab::wait;
using namespace std::chrono_literals;

namespace {

uint64_t events_per_case() {
  const char* e = std::getenv("DPFAB_STRESS_EVENTS");
  return e ? std::strtoull(e, nullptr, 10) : 2000000;
}

// A waitable MPMC queue of event ids over an rte_ring built without EAL.
class RingQueue final : public Waitable {
 public:
  RingQueue(std::unique_ptr<Signal> s, unsigned size) : Waitable(std::move(s)) {
    ssize_t bytes = rte_ring_get_memsize(size);
    mem_.reset(static_cast<char*>(aligned_alloc(64, (bytes + 63) / 64 * 64)));
    ring_ = reinterpret_cast<rte_ring*>(mem_.get());
    if (rte_ring_init(ring_, "stress", size, 0) != 0) std::abort();
  }
  ~RingQueue() override { leave_all_sets(); }
  bool ready() const noexcept override { return !dpfab::ring_empty_acquire(ring_); }
  bool try_publish(uint64_t id) {
    if (rte_ring_enqueue(ring_, reinterpret_cast<void*>(id)) != 0) return false;  // P1
    notify();                                                                     // P2-P4
    return true;
  }
  unsigned drain(uint64_t* out, unsigned max) {
    return rte_ring_dequeue_burst(ring_, reinterpret_cast<void**>(out), max, nullptr);
  }

 private:
  struct Free {
    void operator()(char* p) const { free(p); }
  };
  std::unique_ptr<char, Free> mem_;
  rte_ring* ring_;
};

struct Tally {
  explicit Tally(uint64_t n) : seen((n + 63) / 64), total(n) {}
  void mark(uint64_t id) {
    uint64_t bit = 1ull << (id % 64);
    if (seen[id / 64].fetch_or(bit, std::memory_order_relaxed) & bit) dup.fetch_add(1);
    consumed.fetch_add(1, std::memory_order_relaxed);
  }
  static int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  /// After a drain that took something.
  void took() { last_take_ms.store(now_ms(), std::memory_order_relaxed); }
  /// A wait timed out while `queued` events were visible: a lost wakeup when no consumer has
  /// taken anything for `quiet_ms` (every consumer slept through them), otherwise a sleeper that
  /// another consumer stood in for.
  void timed_out_with(unsigned queued, int64_t quiet_ms) {
    if (!queued) return;
    if (now_ms() - last_take_ms.load(std::memory_order_relaxed) >= quiet_ms)
      lost_wakeups.fetch_add(queued);
    else
      covered.fetch_add(1);
  }
  uint64_t missing() const {
    uint64_t m = 0;
    for (uint64_t id = 0; id < total; ++id)
      if (!(seen[id / 64].load() & (1ull << (id % 64)))) ++m;
    return m;
  }
  std::vector<std::atomic<uint64_t>> seen;
  uint64_t total;
  std::atomic<uint64_t> consumed{0}, dup{0}, lost_wakeups{0}, covered{0}, arms{0}, sleeps{0};
  std::atomic<int64_t> last_take_ms{now_ms()};
};

// Random delays: often none, often a spin of up to a few microseconds (about the length of an
// arm or a wake-up, so that arms and publishes interleave in every order), rarely a sleep.
void jitter(std::mt19937& rng) {
  unsigned r = rng() % 1000;
  if (r < 400) return;
  if (r < 990) {
    for (unsigned i = rng() % 8000; i > 0; --i) std::atomic_signal_fence(std::memory_order_seq_cst);
    return;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(rng() % 100));
}

void produce(std::vector<RingQueue*> queues, uint64_t first, uint64_t count, unsigned seed) {
  std::mt19937 rng(seed);
  for (uint64_t id = first; id < first + count; ++id) {
    RingQueue* q = queues[rng() % queues.size()];
    while (!q->try_publish(id)) std::this_thread::yield();  // full: wait for consumers
    jitter(rng);
  }
}

enum class Shape { kWaitLoop, kTrywaitPoll, kWaitSet };

struct Case {
  const char* name;
  SignalKind kind;
  Shape shape;
  int producers, consumers, queues;
};

void run(const Case& c) {
  const uint64_t n = events_per_case();
  Tally tally(n);
  std::unique_ptr<WaitSet> set;
  if (c.shape == Shape::kWaitSet) set = std::move(WaitSet::create(FI_WAIT_FD).value());
  std::vector<std::unique_ptr<RingQueue>> queues;
  std::vector<RingQueue*> raw;
  for (int i = 0; i < c.queues; ++i) {
    std::unique_ptr<Signal> s;
    if (c.shape != Shape::kWaitSet) s = std::move(Signal::create(c.kind).value());
    queues.push_back(std::make_unique<RingQueue>(std::move(s), 1024));
    raw.push_back(queues.back().get());
    if (set) {
      ASSERT_EQ(set->add_member(raw.back(), nullptr), FI_SUCCESS);
    }
  }
  std::atomic<bool> done{false};
  constexpr auto kWait = 2000;  // ms: far beyond any legitimate wake-up delay
  constexpr int64_t kQuiet = kWait / 2;

  auto consume = [&](int who) {
    std::mt19937 rng(1000 + who);
    uint64_t buf[64];
    RingQueue* mine = raw[who % raw.size()];
    while (!done.load(std::memory_order_acquire)) {
      // Drain everything visible.
      bool got = false;
      for (RingQueue* q : raw) {
        if (c.shape != Shape::kWaitSet && q != mine && c.queues > 1) continue;
        for (unsigned k; (k = q->drain(buf, 64)) > 0; got = true)
          for (unsigned i = 0; i < k; ++i) tally.mark(buf[i]);
      }
      if (got) {
        tally.took();
        continue;
      }
      jitter(rng);
      tally.arms.fetch_add(1, std::memory_order_relaxed);
      switch (c.shape) {
        case Shape::kWaitLoop: {
          auto st =
              mine->wait([&] { return mine->ready() || done.load(); }, Deadline::after_ms(kWait));
          if (st == WaitStatus::kTimeout) tally.timed_out_with(mine->ready(), kQuiet);
          tally.sleeps.fetch_add(1, std::memory_order_relaxed);
          break;
        }
        case Shape::kTrywaitPoll: {  // the application's loop: fi_trywait, then poll(fd)
          if (mine->try_arm() != FI_SUCCESS) break;
          tally.sleeps.fetch_add(1, std::memory_order_relaxed);
          pollfd p{mine->signal()->export_fd(), POLLIN, 0};
          if (poll(&p, 1, kWait) == 0) {
            mine->disarm();
            tally.timed_out_with(mine->ready(), kQuiet);
          }
          break;
        }
        case Shape::kWaitSet: {
          if (set->try_arm() != FI_SUCCESS) break;
          tally.sleeps.fetch_add(1, std::memory_order_relaxed);
          int fd = -1;
          set->get_wait(&fd);
          pollfd p{fd, POLLIN, 0};
          if (poll(&p, 1, kWait) == 0) {
            set->disarm();
            unsigned queued = 0;
            for (RingQueue* q : raw) queued += q->ready();
            tally.timed_out_with(queued, kQuiet);
          }
          break;
        }
      }
    }
    for (RingQueue* q : raw)  // final drain
      for (unsigned k; (k = q->drain(buf, 64)) > 0;)
        for (unsigned i = 0; i < k; ++i) tally.mark(buf[i]);
  };

  std::vector<std::thread> threads;
  for (int i = 0; i < c.consumers; ++i) threads.emplace_back(consume, i);
  std::vector<std::thread> producers;
  uint64_t per = n / c.producers;
  for (int p = 0; p < c.producers; ++p) {
    uint64_t first = p * per, count = p + 1 == c.producers ? n - first : per;
    producers.emplace_back(produce, raw, first, count, 7 + p);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(600);
  for (auto& t : producers) t.join();
  while (tally.consumed.load() < n && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  done.store(true, std::memory_order_release);
  // Wake consumers still blocked: interrupt() raises a queue's own signal and, through the
  // subscription, the wait set's.
  for (RingQueue* q : raw) q->interrupt();
  for (auto& t : threads) t.join();

  EXPECT_EQ(tally.lost_wakeups.load(), 0u) << c.name;
  EXPECT_EQ(tally.dup.load(), 0u) << c.name << ": events consumed twice";
  EXPECT_EQ(tally.missing(), 0u) << c.name << ": events never consumed";
  std::printf(
      "%-28s %llu events, %llu arms, %llu sleeps, %llu raises, %llu slept while others consumed\n",
      c.name, static_cast<unsigned long long>(n),
      static_cast<unsigned long long>(tally.arms.load()),
      static_cast<unsigned long long>(tally.sleeps.load()), static_cast<unsigned long long>([&] {
        uint64_t r = 0;
        for (RingQueue* q : raw)
          if (q->signal()) r += q->signal()->raises();
        return r;
      }()),
      static_cast<unsigned long long>(tally.covered.load()));
  if (set)
    for (RingQueue* q : raw) set->remove_member(q);
}

}  // namespace

class ArmStress : public testing::TestWithParam<Case> {};

TEST_P(ArmStress, NoLostWakeupEveryEventOnceEveryWaitBounded) { run(GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    Shapes, ArmStress,
    testing::Values(Case{"eventfd wait loop 2p1c", SignalKind::kEventFd, Shape::kWaitLoop, 2, 1, 1},
                    Case{"eventfd wait loop 3p2c", SignalKind::kEventFd, Shape::kWaitLoop, 3, 2, 1},
                    Case{"trywait+poll 2p1c", SignalKind::kEventFd, Shape::kTrywaitPoll, 2, 1, 1},
                    Case{"trywait+poll 2p2c", SignalKind::kEventFd, Shape::kTrywaitPoll, 2, 2, 1},
                    Case{"mutex/cond 2p2c", SignalKind::kMutexCond, Shape::kWaitLoop, 2, 2, 1},
                    Case{"yield 2p1c", SignalKind::kYield, Shape::kWaitLoop, 2, 1, 1},
                    Case{"wait set 8 queues 3p2c", SignalKind::kEventFd, Shape::kWaitSet, 3, 2, 8}),
    [](const auto& info) {
      std::string s = info.param.name;
      for (auto& ch : s)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return s;
    });
