// SPDX-License-Identifier: BSD-3-Clause
//
// WakeBatch (lib/wait/wake_batch.h): wake-ups decided under a lock are made when the outermost
// batch closes, each once, in order; and Waitable::notify defers its raise into an open batch.
#include "wait/wake_batch.h"

#include <gtest/gtest.h>

#include <vector>

#include "wait/signal.h"
#include "wait/waitable.h"

namespace dpfab::wait {
namespace {

std::vector<uint64_t>* g_log = nullptr;

void record(void*, uint64_t v) noexcept { g_log->push_back(v); }
void record_arg(void* arg, uint64_t) noexcept {
  g_log->push_back(reinterpret_cast<uintptr_t>(arg));
}
void defer_again(void*, uint64_t v) noexcept {
  g_log->push_back(v);
  // The batch is closed while it runs its calls: this one runs at once.
  WakeBatch::defer(&record, nullptr, v + 100);
}

class WakeBatchTest : public ::testing::Test {
 protected:
  void SetUp() override { g_log = &log; }
  void TearDown() override { g_log = nullptr; }
  std::vector<uint64_t> log;
};

TEST_F(WakeBatchTest, WithoutABatchACallRunsAtOnce) {
  EXPECT_FALSE(WakeBatch::open());
  WakeBatch::defer(&record, nullptr, 7);
  EXPECT_EQ(log, std::vector<uint64_t>{7});
}

TEST_F(WakeBatchTest, CallsWaitForTheBatchToCloseAndRunInOrder) {
  {
    WakeBatch b;
    EXPECT_TRUE(WakeBatch::open());
    WakeBatch::defer(&record, nullptr, 1);
    WakeBatch::defer(&record, nullptr, 2);
    WakeBatch::defer(&record, nullptr, 3);
    EXPECT_TRUE(log.empty());
  }
  EXPECT_FALSE(WakeBatch::open());
  EXPECT_EQ(log, (std::vector<uint64_t>{1, 2, 3}));
}

TEST_F(WakeBatchTest, AnInnerBatchLeavesItsCallsToTheOuterOne) {
  {
    WakeBatch outer;
    {
      WakeBatch inner;
      WakeBatch::defer(&record, nullptr, 1);
    }
    EXPECT_TRUE(log.empty()) << "the inner batch closed, but the outer lock is still held";
    WakeBatch::defer(&record, nullptr, 2);
  }
  EXPECT_EQ(log, (std::vector<uint64_t>{1, 2}));
}

TEST_F(WakeBatchTest, OnceMergesTheSameCallAndPlainCallsAreKeptApart) {
  int a = 0, b = 0;
  {
    WakeBatch batch;
    WakeBatch::defer(&record_arg, &a, 0, true);
    WakeBatch::defer(&record_arg, &b, 0, true);
    WakeBatch::defer(&record_arg, &a, 0, true);   // merged with the first
    WakeBatch::defer(&record_arg, &b, 0, false);  // not merged
  }
  const auto pa = reinterpret_cast<uintptr_t>(&a), pb = reinterpret_cast<uintptr_t>(&b);
  EXPECT_EQ(log, (std::vector<uint64_t>{pa, pb, pb}));
}

TEST_F(WakeBatchTest, AFullBatchRunsTheNextCallAtOnceAndCountsIt) {
  const uint64_t before = WakeBatch::overflows();
  {
    WakeBatch batch;
    for (uint64_t i = 0; i < WakeBatch::kCapacity; ++i) WakeBatch::defer(&record, nullptr, i);
    EXPECT_TRUE(log.empty());
    WakeBatch::defer(&record, nullptr, 1000);
    EXPECT_EQ(log, std::vector<uint64_t>{1000});
  }
  EXPECT_EQ(log.size(), WakeBatch::kCapacity + 1);
  EXPECT_EQ(WakeBatch::overflows(), before + 1);
}

TEST_F(WakeBatchTest, ACallThatDefersAgainRunsItAtOnce) {
  {
    WakeBatch batch;
    WakeBatch::defer(&defer_again, nullptr, 1);
  }
  EXPECT_EQ(log, (std::vector<uint64_t>{1, 101}));
}

// A waitable whose predicate is a flag.
class Flag final : public Waitable {
 public:
  explicit Flag(std::unique_ptr<Signal> s) : Waitable(std::move(s)) {}
  bool ready() const noexcept override { return set.load(); }
  std::atomic<bool> set{false};
};

TEST(WakeBatchNotify, AnArmedConsumerIsRaisedWhenTheBatchClosesOnce) {
  auto sig = Signal::create(SignalKind::kEventFd);
  ASSERT_TRUE(sig);
  Flag f(std::move(sig.value()));
  ASSERT_EQ(f.try_arm(), FI_SUCCESS);
  const uint64_t raises = f.signal()->raises();
  {
    WakeBatch batch;
    f.set = true;
    f.notify();
    f.notify();  // the second finds the consumer disarmed already: no second raise
    EXPECT_FALSE(f.armed()) << "the decision is made at notify";
    EXPECT_EQ(f.signal()->raises(), raises) << "the raise waits for the lock to be released";
  }
  EXPECT_EQ(f.signal()->raises(), raises + 1);
}

TEST(WakeBatchNotify, WithoutABatchNotifyRaisesAtOnce) {
  auto sig = Signal::create(SignalKind::kEventFd);
  ASSERT_TRUE(sig);
  Flag f(std::move(sig.value()));
  ASSERT_EQ(f.try_arm(), FI_SUCCESS);
  const uint64_t raises = f.signal()->raises();
  f.set = true;
  f.notify();
  EXPECT_EQ(f.signal()->raises(), raises + 1);
}

}  // namespace
}  // namespace dpfab::wait
