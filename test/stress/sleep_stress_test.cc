// SPDX-License-Identifier: BSD-3-Clause
//
// Stress test of sleeping on the port (suite 'stress'; also run under ThreadSanitizer): the
// A1-A3 arming of a port's wake fd, wait_fds' per-waiter eventfds, and try_arm(on_fds), with
// several consumers on one port and on one object.
//
// A FakePort stands for a memif link whose peer kicks: producer threads put frames in it (a
// counter) and, after a full fence, kick our eventfd when our flag is set (exchange to 0), as
// PortEngine::transmit does with KickChannel::kick. Its ProgressSource is what PortConsumer is
// for a real port: sleep_fds() = {kick eventfd}; prepare_sleep() = drain the eventfd when the flag
// was cleared, set the flag (seq_cst), poll until the queue is empty (the receive side is a
// try-lock: a taken one is waited out, then polled by us); progress() = one poll step that routes
// frame i to queue i % kQueues and notifies it.
//
// Consumers: sread-like threads (Waitable::wait: spin budget 0, then wait_fds), two of them on
// the same queue; an FD consumer (FI_GETWAIT epoll fd + try_arm(on_fds) + epoll_wait, what an
// application does); a mutex/cond queue waited on through wait(). Producers pause now and then
// so that consumers really sleep. Checked: every frame is received by its queue's consumers
// exactly once in count, and no wait reaches its 2 s bound (a lost wakeup: the producers never
// stop for that long). DPFAB_STRESS_EVENTS scales the run.
#include <gtest/gtest.h>
#include <rdma/fi_errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "common/fd.h"
#include "wait/waitable.h"

using namespace dpfab::wait;

namespace {

uint64_t frames_total() {
  const char* e = std::getenv("DPFAB_STRESS_EVENTS");
  return e ? std::strtoull(e, nullptr, 10) : 2000000;
}

class Queue final : public Waitable {
 public:
  explicit Queue(SignalKind k) : Waitable(std::move(Signal::create(k).value())) {}
  void publish() {
    available_.fetch_add(1, std::memory_order_release);  // P1
    notify();                                            // P2-P4
  }
  bool take() {
    uint64_t v = available_.load(std::memory_order_acquire);
    while (v > 0)
      if (available_.compare_exchange_weak(v, v - 1, std::memory_order_acq_rel)) return true;
    return false;
  }
  bool ready() const noexcept override { return available_.load(std::memory_order_acquire) > 0; }

 private:
  std::atomic<uint64_t> available_{0};
};

constexpr int kQueues = 3;
constexpr uint64_t kBurst = 32;

class FakePort final : public ProgressSource {
 public:
  FakePort() : kick_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) { fd_ = kick_.get(); }
  std::vector<Queue*> queues;

  // Producer: a frame into the "ring", then S1 (fence) and S2 (kick if armed).
  void produce() noexcept {
    head_.fetch_add(1, std::memory_order_seq_cst);
    if (flag_.load(std::memory_order_seq_cst) && flag_.exchange(0, std::memory_order_seq_cst)) {
      uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(kick_.get(), &one, sizeof(one));
      kicks.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // -1: the receive side is taken.
  long poll_step(uint64_t* received) noexcept {
    if (rx_.exchange(true, std::memory_order_acquire)) return -1;
    const uint64_t h = head_.load(std::memory_order_seq_cst);
    const uint64_t n = std::min(h - tail_, kBurst);
    for (uint64_t i = 0; i < n; ++i) queues[(tail_ + i) % queues.size()]->publish();
    tail_ += n;
    rx_.store(false, std::memory_order_release);
    *received = n;
    return static_cast<long>(n);
  }

  size_t progress() noexcept override {
    uint64_t r;
    long n = poll_step(&r);
    return n < 0 ? 0 : static_cast<size_t>(n);
  }
  std::span<const int> sleep_fds() const noexcept override { return {&fd_, 1}; }
  bool prepare_sleep() noexcept override {
    if (!flag_.load(std::memory_order_relaxed)) {  // A1: the peer kicked (or first arm)
      uint64_t v;
      [[maybe_unused]] ssize_t n = ::read(kick_.get(), &v, sizeof(v));
    }
    flag_.exchange(1, std::memory_order_seq_cst);  // A2
    for (int i = 0; i < 64;) {  // A3: wait out another owner of rx, then poll ourselves
      uint64_t received = 0;
      if (poll_step(&received) < 0) {
        while (rx_.load(std::memory_order_acquire)) std::this_thread::yield();
        continue;
      }
      if (received < kBurst) return true;
      ++i;
    }
    return false;
  }

  std::atomic<uint64_t> kicks{0};

 private:
  dpfab::UniqueFd kick_;
  int fd_;
  alignas(64) std::atomic<uint64_t> head_{0};
  alignas(64) std::atomic<bool> rx_{false};
  uint64_t tail_ = 0;  // under rx_
  alignas(64) std::atomic<uint32_t> flag_{0};
};

struct Result {
  std::atomic<uint64_t> got{0};
  std::atomic<uint64_t> lost_wakeups{0};
  std::atomic<uint64_t> sleeps{0};
};

// Waits through Waitable::wait until `share` frames of `q` were taken by all its consumers.
void sread_consumer(Queue& q, uint64_t share, Result& r) {
  while (r.got.load(std::memory_order_relaxed) < share) {
    if (q.take()) {
      r.got.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    WaitStatus s =
        q.wait([&] { return q.ready() || r.got.load() >= share; }, Deadline::after_ms(2000));
    r.sleeps.fetch_add(1, std::memory_order_relaxed);
    if (s == WaitStatus::kTimeout && r.got.load() < share)
      r.lost_wakeups.fetch_add(1, std::memory_order_relaxed);
  }
  q.interrupt();  // the other consumer of the queue may sleep: the share is complete
}

// FI_GETWAIT + fi_trywait + epoll_wait, as an application.
void fd_consumer(Queue& q, uint64_t share, Result& r) {
  const int fd = q.export_wait_fd();
  ASSERT_GE(fd, 0);
  dpfab::UniqueFd ep(epoll_create1(EPOLL_CLOEXEC));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ASSERT_EQ(epoll_ctl(ep.get(), EPOLL_CTL_ADD, fd, &ev), 0);
  while (r.got.load(std::memory_order_relaxed) < share) {
    q.progress_once();  // fi_cq_read's poll step
    if (q.take()) {
      r.got.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (q.try_arm(true) != FI_SUCCESS) continue;
    epoll_event out;
    r.sleeps.fetch_add(1, std::memory_order_relaxed);
    if (epoll_wait(ep.get(), &out, 1, 2000) == 0) {
      q.progress_once();
      if (!q.ready()) r.lost_wakeups.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

TEST(SleepOnThePort, NoLostWakeupWithSeveralSleepersOnOnePort) {
  const uint64_t total = frames_total() / kQueues * kQueues;
  FakePort port;
  Queue sread_q(SignalKind::kEventFd), fd_q(SignalKind::kEventFd), cond_q(SignalKind::kMutexCond);
  port.queues = {&sread_q, &fd_q, &cond_q};
  for (Queue* q : port.queues) q->set_progress(&port);
  const uint64_t share = total / kQueues;
  Result res[kQueues];
  std::vector<std::thread> threads;
  // Two sleepers on one object, one FD application, one mutex/cond object: all on one port.
  threads.emplace_back(sread_consumer, std::ref(sread_q), share, std::ref(res[0]));
  threads.emplace_back(sread_consumer, std::ref(sread_q), share, std::ref(res[0]));
  threads.emplace_back(fd_consumer, std::ref(fd_q), share, std::ref(res[1]));
  threads.emplace_back(sread_consumer, std::ref(cond_q), share, std::ref(res[2]));
  constexpr int kProducers = 2;
  std::atomic<uint64_t> next{0};
  for (int p = 0; p < kProducers; ++p)
    threads.emplace_back([&, p] {
      std::mt19937_64 rng(p + 1);
      while (next.fetch_add(1, std::memory_order_relaxed) < total) {
        port.produce();
        // Now and then a pause long enough for consumers to arm and sleep.
        if (rng() % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 50));
      }
    });
  for (auto& t : threads) t.join();
  uint64_t sleeps = 0;
  for (int i = 0; i < kQueues; ++i) {
    // A wait's predicate may let a consumer stop as soon as the share is reached; never more.
    EXPECT_EQ(res[i].got.load(), share) << "queue " << i;
    EXPECT_EQ(res[i].lost_wakeups.load(), 0u) << "queue " << i;
    sleeps += res[i].sleeps.load();
  }
  std::printf("%llu frames, %llu waits, %llu kicks\n", static_cast<unsigned long long>(total),
              static_cast<unsigned long long>(sleeps),
              static_cast<unsigned long long>(port.kicks.load()));
  EXPECT_GT(port.kicks.load(), 0u) << "nobody ever slept on the port";
}

}  // namespace
