// SPDX-License-Identifier: BSD-3-Clause
//
// Cq::progress_and_read (fi_cq_read with manual progress): a completion that the reader's own
// progress step makes while the ring is empty goes straight to the reader. These tests check
// that it bypasses the ring, and that order, errors and other producers are as through the ring.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <thread>

#include "event/cq.h"

using dpfab::event::Cq;
using dpfab::event::CqConfig;
using dpfab::event::CqEntry;

namespace {

std::unique_ptr<Cq> make_cq(CqConfig cfg = {}) {
  auto cq = Cq::create(cfg, nullptr);
  EXPECT_TRUE(cq.ok());
  return std::move(cq.value());
}

void* ctx(uintptr_t i) { return reinterpret_cast<void*>(i); }

CqEntry entry(uintptr_t i) {
  CqEntry e;
  e.op_context = ctx(i);
  e.flags = FI_RECV | FI_TAGGED;
  e.len = 100 + i;
  e.buf = ctx(0x1000 + i);
  e.data = 0xd000 + i;
  e.tag = 0x7000 + i;
  e.src_addr = 50 + i;
  return e;
}

// A progress source that runs `step` on each poll step (what a port's delivery would do).
struct Source final : dpfab::wait::ProgressSource {
  std::function<void()> step;
  size_t progress() noexcept override {
    if (step) step();
    return 0;
  }
};

}  // namespace

TEST(CqDirect, TheReadersOwnStepsCompletionBypassesTheRing) {
  auto cq = make_cq({.format = FI_CQ_FORMAT_TAGGED});
  Source src;
  size_t queued_after_write = 99;
  src.step = [&] {
    const CqEntry e = entry(3);
    EXPECT_EQ(cq->write_burst(&e, 1), 1u);
    queued_after_write = cq->count();
  };
  cq->set_progress(&src);
  fi_cq_tagged_entry out[4]{};
  fi_addr_t from[4]{};
  ASSERT_EQ(cq->progress_and_read(out, 4, from), 1);
  EXPECT_EQ(queued_after_write, 0u);  // never in the ring
  EXPECT_EQ(out[0].op_context, ctx(3));
  EXPECT_EQ(out[0].flags, uint64_t{FI_RECV | FI_TAGGED});
  EXPECT_EQ(out[0].len, 103u);
  EXPECT_EQ(out[0].buf, ctx(0x1003));
  EXPECT_EQ(out[0].data, 0xd003u);
  EXPECT_EQ(out[0].tag, 0x7003u);
  EXPECT_EQ(from[0], fi_addr_t{53});
  // Outside a read, this thread's writes go to the ring again.
  src.step = nullptr;
  ASSERT_TRUE(cq->write(entry(4)));
  EXPECT_EQ(cq->count(), 1u);
  EXPECT_EQ(cq->progress_and_read(out, 4, nullptr), 1);
  EXPECT_EQ(out[0].op_context, ctx(4));
}

TEST(CqDirect, CompletionsAlreadyQueuedComeFirst) {
  auto cq = make_cq();
  Source src;
  src.step = [&] { ASSERT_TRUE(cq->write(entry(2))); };
  cq->set_progress(&src);
  ASSERT_TRUE(cq->write(entry(1)));
  fi_cq_entry out[4]{};
  ASSERT_EQ(cq->progress_and_read(out, 4, nullptr), 2);
  EXPECT_EQ(out[0].op_context, ctx(1));
  EXPECT_EQ(out[1].op_context, ctx(2));
}

TEST(CqDirect, ABurstTakesOneDirectlyAndQueuesTheRestBehindIt) {
  auto cq = make_cq({.format = FI_CQ_FORMAT_MSG});
  Source src;
  src.step = [&] {
    const CqEntry burst[3] = {entry(1), entry(2), entry(3)};
    EXPECT_EQ(cq->write_burst(burst, 3), 3u);
    EXPECT_TRUE(cq->write(entry(4)));  // a later write of the same step: behind them
  };
  cq->set_progress(&src);
  fi_cq_msg_entry out[2]{};
  ASSERT_EQ(cq->progress_and_read(out, 2, nullptr), 2);
  EXPECT_EQ(out[0].op_context, ctx(1));
  EXPECT_EQ(out[1].op_context, ctx(2));
  src.step = nullptr;
  ASSERT_EQ(cq->progress_and_read(out, 1, nullptr), 1);
  EXPECT_EQ(out[0].op_context, ctx(3));
  ASSERT_EQ(cq->progress_and_read(out, 2, nullptr), 1);
  EXPECT_EQ(out[0].op_context, ctx(4));
  EXPECT_EQ(cq->progress_and_read(out, 2, nullptr), -FI_EAGAIN);
}

TEST(CqDirect, AnErrorAfterTheDirectCompletionIsReportedNext) {
  auto cq = make_cq();
  Source src;
  src.step = [&] {
    ASSERT_TRUE(cq->write(entry(1)));
    fi_cq_err_entry e{};
    e.op_context = ctx(2);
    e.err = FI_EIO;
    ASSERT_EQ(cq->write_error(e, nullptr, 0), 0);
    ASSERT_TRUE(cq->write(entry(3)));
  };
  cq->set_progress(&src);
  fi_cq_entry out[4]{};
  ASSERT_EQ(cq->progress_and_read(out, 4, nullptr), 1);
  EXPECT_EQ(out[0].op_context, ctx(1));
  src.step = nullptr;
  EXPECT_EQ(cq->progress_and_read(out, 4, nullptr), -FI_EAVAIL);
  fi_cq_err_entry err{};
  ASSERT_EQ(cq->readerr(&err), 1);
  EXPECT_EQ(err.op_context, ctx(2));
  EXPECT_EQ(err.err, FI_EIO);
  ASSERT_EQ(cq->progress_and_read(out, 4, nullptr), 1);
  EXPECT_EQ(out[0].op_context, ctx(3));
}

TEST(CqDirect, AnErrorQueuedBeforeKeepsItsPlace) {
  auto cq = make_cq();
  fi_cq_err_entry e{};
  e.op_context = ctx(1);
  e.err = FI_ECANCELED;
  ASSERT_EQ(cq->write_error(e, nullptr, 0), 0);
  Source src;
  src.step = [&] { ASSERT_TRUE(cq->write(entry(2))); };
  cq->set_progress(&src);
  fi_cq_entry out[2]{};
  EXPECT_EQ(cq->progress_and_read(out, 2, nullptr), -FI_EAVAIL);
  fi_cq_err_entry err{};
  ASSERT_EQ(cq->readerr(&err), 1);
  EXPECT_EQ(err.op_context, ctx(1));
  src.step = nullptr;
  ASSERT_EQ(cq->progress_and_read(out, 2, nullptr), 1);
  EXPECT_EQ(out[0].op_context, ctx(2));
}

TEST(CqDirect, AnotherCqsCompletionAndAnotherThreadsGoToTheRing) {
  auto cq = make_cq();
  auto other = make_cq();
  Source src;
  src.step = [&] {
    ASSERT_TRUE(other->write(entry(9)));  // the tx CQ of a step that reads the rx CQ, say
    std::thread t([&] { EXPECT_TRUE(cq->write(entry(1))); });  // a progress lcore
    t.join();
    ASSERT_TRUE(cq->write(entry(2)));  // queued behind the lcore's
  };
  cq->set_progress(&src);
  fi_cq_entry out[4]{};
  ASSERT_EQ(cq->progress_and_read(out, 4, nullptr), 2);
  EXPECT_EQ(out[0].op_context, ctx(1));
  EXPECT_EQ(out[1].op_context, ctx(2));
  EXPECT_EQ(other->count(), 1u);
}

TEST(CqDirect, APeekOrAnInvalidReadTakesNothingDirectly) {
  auto cq = make_cq();
  Source src;
  src.step = [&] { ASSERT_TRUE(cq->write(entry(1))); };
  cq->set_progress(&src);
  EXPECT_EQ(cq->progress_and_read(nullptr, 0, nullptr), 0);  // count 0: reports it waits
  EXPECT_EQ(cq->count(), 1u);
  src.step = nullptr;
  EXPECT_EQ(cq->progress_and_read(nullptr, 1, nullptr), -FI_EINVAL);
  EXPECT_EQ(cq->count(), 1u);
}
