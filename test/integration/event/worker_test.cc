// SPDX-License-Identifier: BSD-3-Clause
//
// The UCP-style worker (<rdma/fi_ext_dpdk.h>, reference/ucp_worker_wakeup.txt) through the real
// libfabric core, on one net_null port: fi_open_ops on the domain, worker open/close, get_efd,
// arm, wait, wait_mem, signal, progress; then counters, CQs and EQs as members (fi_cntr_add and
// fi_eq_write from another thread are the producers until the data path exists).
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <thread>

#include "fi_ext_dpdk.h"
#include "fixture.h"

#include "test_util.h"

using dpfab::test::After;
using dpfab::test::fd_readable;

using namespace dpfab::test;
using namespace std::chrono_literals;

namespace {

class WorkerTest : public DomainTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(DomainTest::SetUp());
    ASSERT_EQ(fi_open_ops(&d_.domain->fid, FI_DPDK_WORKER_OPS, 0, reinterpret_cast<void**>(&ops_),
                          nullptr),
              0);
    ASSERT_NE(ops_, nullptr);
  }
  void TearDown() override {
    if (worker_) {
      EXPECT_EQ(ops_->worker_close(worker_), 0);
    }
    DomainTest::TearDown();
  }
  void open_worker(const fi_dpdk_worker_attr* attr = nullptr) {
    ASSERT_EQ(ops_->worker_open(d_.domain, attr, &worker_), 0);
    ASSERT_NE(worker_, nullptr);
    ASSERT_EQ(ops_->get_efd(worker_, &efd_), 0);
  }

  fi_dpdk_worker_ops* ops_ = nullptr;
  fi_dpdk_worker* worker_ = nullptr;
  int efd_ = -1;
};

}  // namespace

// ---- reaching the worker: fi_open_ops ---------------------------------------------------------

TEST_F(WorkerTest, OpenOpsWithTheWorkerNameGivesTheWorkerOps) {
  EXPECT_STREQ(FI_DPDK_WORKER_OPS, "dpdk_worker_v1");
  EXPECT_GE(ops_->size, sizeof(fi_dpdk_worker_ops));
  EXPECT_GT(ops_->size, offsetof(fi_dpdk_worker_ops, progress));
  EXPECT_NE(ops_->worker_open, nullptr);
  EXPECT_NE(ops_->worker_close, nullptr);
  EXPECT_NE(ops_->worker_add, nullptr);
  EXPECT_NE(ops_->worker_remove, nullptr);
  EXPECT_NE(ops_->get_efd, nullptr);
  EXPECT_NE(ops_->arm, nullptr);
  EXPECT_NE(ops_->wait, nullptr);
  EXPECT_NE(ops_->wait_mem, nullptr);
  EXPECT_NE(ops_->signal, nullptr);
  EXPECT_NE(ops_->progress, nullptr);
}

TEST_F(WorkerTest, OpenOpsWithAnUnknownNameIsENOSYS) {
  void* ops = nullptr;
  EXPECT_EQ(fi_open_ops(&d_.domain->fid, "dpdk_worker_v0", 0, &ops, nullptr), -FI_ENOSYS);
  EXPECT_EQ(fi_open_ops(&d_.domain->fid, "verbs_domain_ops", 0, &ops, nullptr), -FI_ENOSYS);
  EXPECT_EQ(ops, nullptr);
}

TEST_F(WorkerTest, OpenOpsRejectsFlagsAndNullArguments) {
  void* ops = nullptr;
  EXPECT_EQ(fi_open_ops(&d_.domain->fid, FI_DPDK_WORKER_OPS, 1, &ops, nullptr), -FI_EBADFLAGS);
  EXPECT_EQ(fi_open_ops(&d_.domain->fid, nullptr, 0, &ops, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_open_ops(&d_.domain->fid, FI_DPDK_WORKER_OPS, 0, nullptr, nullptr), -FI_EINVAL);
}

// ---- open / close -----------------------------------------------------------------------------

TEST_F(WorkerTest, WorkerOpensAndCloses) {
  fi_dpdk_worker* w = nullptr;
  ASSERT_EQ(ops_->worker_open(d_.domain, nullptr, &w), 0);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(ops_->worker_close(w), 0);
  fi_dpdk_worker_attr attr{};
  attr.spin_ns = 0;
  attr.slice_min_ns = 10'000;
  attr.slice_max_ns = 10'000;
  ASSERT_EQ(ops_->worker_open(d_.domain, &attr, &w), 0);
  EXPECT_EQ(ops_->worker_close(w), 0);
}

TEST_F(WorkerTest, TheDomainCannotBeClosedWhileAWorkerIsOpenOnIt) {
  open_worker();
  EXPECT_EQ(fi_close(&d_.domain->fid), -FI_EBUSY);
  EXPECT_EQ(ops_->worker_close(worker_), 0);
  worker_ = nullptr;
  // TearDown closes the domain: now it succeeds.
}

TEST_F(WorkerTest, WorkerOpenRejectsBadArguments) {
  fi_dpdk_worker* w = nullptr;
  EXPECT_EQ(ops_->worker_open(nullptr, nullptr, &w), -FI_EINVAL);
  EXPECT_EQ(ops_->worker_open(d_.domain, nullptr, nullptr), -FI_EINVAL);
  // A fid that is not one of our domains.
  EXPECT_EQ(ops_->worker_open(reinterpret_cast<fid_domain*>(d_.fabric), nullptr, &w), -FI_EINVAL);
  fi_dpdk_worker_attr attr{};
  attr.flags = 1;
  attr.slice_min_ns = attr.slice_max_ns = FI_DPDK_WORKER_SLICE_MIN_NS_DEFAULT;
  EXPECT_EQ(ops_->worker_open(d_.domain, &attr, &w), -FI_EINVAL) << "reserved flags";
  attr.flags = 0;
  attr.slice_min_ns = 0;
  EXPECT_EQ(ops_->worker_open(d_.domain, &attr, &w), -FI_EINVAL) << "zero slice";
  attr.slice_min_ns = 2000;
  attr.slice_max_ns = 1000;
  EXPECT_EQ(ops_->worker_open(d_.domain, &attr, &w), -FI_EINVAL) << "min > max";
  EXPECT_EQ(w, nullptr);
}

TEST_F(WorkerTest, NullWorkerArgumentsAreEINVAL) {
  int fd;
  alignas(8) uint64_t word = 0;
  EXPECT_EQ(ops_->worker_close(nullptr), -FI_EINVAL);
  EXPECT_EQ(ops_->worker_add(nullptr, &d_.domain->fid), -FI_EINVAL);
  EXPECT_EQ(ops_->worker_remove(nullptr, &d_.domain->fid), -FI_EINVAL);
  EXPECT_EQ(ops_->get_efd(nullptr, &fd), -FI_EINVAL);
  EXPECT_EQ(ops_->arm(nullptr), -FI_EINVAL);
  EXPECT_EQ(ops_->wait(nullptr, 0), -FI_EINVAL);
  EXPECT_EQ(ops_->wait_mem(nullptr, &word, 8, 0), -FI_EINVAL);
  EXPECT_EQ(ops_->signal(nullptr), -FI_EINVAL);
  EXPECT_EQ(ops_->progress(nullptr), -FI_EINVAL);
  open_worker();
  EXPECT_EQ(ops_->get_efd(worker_, nullptr), -FI_EINVAL);
}

TEST_F(WorkerTest, OnlyCqsCountersAndEqsCanBeMembers) {
  open_worker();
  EXPECT_EQ(ops_->worker_add(worker_, &d_.domain->fid), -FI_EINVAL);
  EXPECT_EQ(ops_->worker_add(worker_, &d_.fabric->fid), -FI_EINVAL);
  EXPECT_EQ(ops_->worker_add(worker_, nullptr), -FI_EINVAL);
  EXPECT_EQ(ops_->worker_remove(worker_, &d_.domain->fid), -FI_EINVAL);
}

// ---- get_efd, arm, signal, wait: no members needed --------------------------------------------

TEST_F(WorkerTest, GetEfdReturnsAValidFileDescriptorForPollingFunctions) {
  open_worker();
  ASSERT_GE(efd_, 0);
  int again = -1;
  ASSERT_EQ(ops_->get_efd(worker_, &again), 0);
  EXPECT_EQ(again, efd_) << "one fd per worker";
  EXPECT_FALSE(fd_readable(efd_));
  // select() takes it too.
  fd_set rd;
  FD_ZERO(&rd);
  FD_SET(efd_, &rd);
  timeval tv{0, 0};
  EXPECT_EQ(select(efd_ + 1, &rd, nullptr, nullptr, &tv), 0);
}

TEST_F(WorkerTest, ArmOnAWorkerWithoutEventsReturnsOk) {
  open_worker();
  EXPECT_EQ(ops_->arm(worker_), 0);
  EXPECT_FALSE(fd_readable(efd_));
}

TEST_F(WorkerTest, SignalCausesTheFileDescriptorToBeSignaled) {
  open_worker();
  ASSERT_EQ(ops_->arm(worker_), 0);
  After later(10ms, [&] { EXPECT_EQ(ops_->signal(worker_), 0); });
  EXPECT_TRUE(fd_readable(efd_, 5000));
}

TEST_F(WorkerTest, APendingSignalMakesArmBusyOnce) {
  open_worker();
  ASSERT_EQ(ops_->signal(worker_), 0);
  EXPECT_EQ(ops_->arm(worker_), -FI_EBUSY);
  EXPECT_EQ(ops_->arm(worker_), 0);
  EXPECT_FALSE(fd_readable(efd_));
}

TEST_F(WorkerTest, SignalCausesABlockingWaitToReturn) {
  open_worker();
  auto t0 = std::chrono::steady_clock::now();
  After later(20ms, [&] { EXPECT_EQ(ops_->signal(worker_), 0); });
  EXPECT_EQ(ops_->wait(worker_, 5000), 0);
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 19ms);
  EXPECT_LT(took, 4s);
}

TEST_F(WorkerTest, WaitWithoutEventsTimesOut) {
  open_worker();
  EXPECT_EQ(ops_->wait(worker_, 0), -FI_ETIMEDOUT);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(ops_->wait(worker_, 30), -FI_ETIMEDOUT);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 29ms);
}

TEST_F(WorkerTest, WaitMemReturnsWhenTheAddressIsWritten) {
  open_worker();
  alignas(8) uint64_t word = 1;
  After later(10ms, [&] { __atomic_store_n(&word, 2, __ATOMIC_RELEASE); });
  EXPECT_EQ(ops_->wait_mem(worker_, &word, sizeof(word), 5000), 0);
  EXPECT_EQ(__atomic_load_n(&word, __ATOMIC_ACQUIRE), 2u);
}

TEST_F(WorkerTest, WaitMemReturnsOnSignal) {
  fi_dpdk_worker_attr attr{};
  attr.spin_ns = 0;
  attr.slice_min_ns = attr.slice_max_ns = 900'000'000;  // only the signal ends the sleep early
  open_worker(&attr);
  alignas(4) uint32_t word = 0;
  auto t0 = std::chrono::steady_clock::now();
  After later(10ms, [&] { ops_->signal(worker_); });
  EXPECT_EQ(ops_->wait_mem(worker_, &word, sizeof(word), 5000), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 800ms);
}

TEST_F(WorkerTest, WaitMemTimesOutAndRejectsBadSizesAndAlignment) {
  open_worker();
  alignas(8) uint8_t bytes[16] = {};
  EXPECT_EQ(ops_->wait_mem(worker_, bytes, 8, 20), -FI_ETIMEDOUT);
  EXPECT_EQ(ops_->wait_mem(worker_, bytes, 3, 20), -FI_EINVAL);
  EXPECT_EQ(ops_->wait_mem(worker_, bytes, 16, 20), -FI_EINVAL);
  EXPECT_EQ(ops_->wait_mem(worker_, bytes, 0, 20), -FI_EINVAL);
  EXPECT_EQ(ops_->wait_mem(worker_, bytes + 1, 4, 20), -FI_EINVAL);
  EXPECT_EQ(ops_->wait_mem(worker_, nullptr, 8, 20), -FI_EINVAL);
  EXPECT_EQ(ops_->wait_mem(worker_, bytes + 1, 1, 0), -FI_ETIMEDOUT) << "bytes need no alignment";
}

TEST_F(WorkerTest, ProgressReturnsZeroWhenThereIsNothingToDo) {
  open_worker();
  EXPECT_EQ(ops_->progress(worker_), 0);
}

// ---- members: counters, CQs, EQs --------------------------------------------------------------
// These need fi_cntr_open / fi_cq_open / fi_eq_open (written in parallel on other branches).

namespace {

fid_cntr* open_cntr(fid_domain* domain, fi_wait_obj wait_obj) {
  fi_cntr_attr attr{};
  attr.events = FI_CNTR_EVENTS_COMP;
  attr.wait_obj = wait_obj;
  fid_cntr* c = nullptr;
  int r = fi_cntr_open(domain, &attr, &c, nullptr);
  EXPECT_EQ(r, 0) << fi_strerror(-r);
  return r == 0 ? c : nullptr;
}

}  // namespace

TEST_F(WorkerTest, CntrAddFromAnotherThreadWakesWorkerWait) {
  open_worker();
  fid_cntr* c = open_cntr(d_.domain, FI_WAIT_NONE);  // the worker signals for it
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(ops_->worker_add(worker_, &c->fid), 0);
  EXPECT_EQ(ops_->worker_add(worker_, &c->fid), -FI_EALREADY);
  ASSERT_EQ(ops_->arm(worker_), 0);
  {
    After later(20ms, [&] { EXPECT_EQ(fi_cntr_add(c, 1), 0); });
    EXPECT_EQ(ops_->wait(worker_, 5000), 0);
  }
  EXPECT_EQ(fi_cntr_read(c), 1u);
  EXPECT_EQ(ops_->arm(worker_), 0) << "the change was read";
  EXPECT_EQ(ops_->worker_remove(worker_, &c->fid), 0);
  EXPECT_EQ(ops_->worker_remove(worker_, &c->fid), -FI_ENOENT);
  EXPECT_EQ(fi_close(&c->fid), 0);
}

TEST_F(WorkerTest, CntrAddMakesTheEfdReadableOnlyOnceArmed) {
  open_worker();
  fid_cntr* c = open_cntr(d_.domain, FI_WAIT_UNSPEC);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(ops_->worker_add(worker_, &c->fid), 0);
  ASSERT_EQ(fi_cntr_add(c, 1), 0);
  EXPECT_FALSE(fd_readable(efd_)) << "not armed";
  EXPECT_EQ(ops_->arm(worker_), -FI_EBUSY) << "an unprocessed event";
  EXPECT_EQ(fi_cntr_read(c), 1u);
  ASSERT_EQ(ops_->arm(worker_), 0);
  EXPECT_FALSE(fd_readable(efd_));
  {
    After later(10ms, [&] { EXPECT_EQ(fi_cntr_add(c, 1), 0); });
    EXPECT_TRUE(fd_readable(efd_, 5000));
  }
  EXPECT_EQ(ops_->arm(worker_), -FI_EBUSY);
  EXPECT_EQ(fi_cntr_read(c), 2u);
  EXPECT_EQ(ops_->arm(worker_), 0);
  EXPECT_EQ(fi_close(&c->fid), 0) << "a member can be closed: it leaves the worker";
  EXPECT_EQ(ops_->arm(worker_), 0);
}

TEST_F(WorkerTest, CntrAddFromAnotherThreadEndsWaitMem) {
  fi_dpdk_worker_attr attr{};
  attr.spin_ns = 0;
  attr.slice_min_ns = attr.slice_max_ns = 900'000'000;  // only the event ends the sleep early
  open_worker(&attr);
  fid_cntr* c = open_cntr(d_.domain, FI_WAIT_NONE);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(ops_->worker_add(worker_, &c->fid), 0);
  alignas(8) uint64_t word = 0;
  auto t0 = std::chrono::steady_clock::now();
  {
    After later(10ms, [&] { EXPECT_EQ(fi_cntr_add(c, 1), 0); });
    EXPECT_EQ(ops_->wait_mem(worker_, &word, sizeof(word), 5000), 0);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 800ms);
  EXPECT_EQ(fi_close(&c->fid), 0);
}

TEST_F(WorkerTest, TheUcpLoopSleepsUntilEachCounterEvent) {
  // ucp_worker_arm(3)'s process_communication(): check, progress, arm, poll; BUSY: again.
  open_worker();
  fid_cntr* c = open_cntr(d_.domain, FI_WAIT_NONE);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(ops_->worker_add(worker_, &c->fid), 0);
  constexpr uint64_t kEvents = 100;
  std::atomic<uint64_t> seen{0};
  std::thread producer([&] {
    for (uint64_t i = 0; i < kEvents; ++i) {
      auto until = std::chrono::steady_clock::now() + 2s;
      while (seen.load() < i && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      fi_cntr_add(c, 1);
    }
  });
  int sleeps = 0, timeouts = 0;
  while (seen.load() < kEvents && timeouts == 0) {
    uint64_t v = fi_cntr_read(c);
    if (v > seen.load()) {
      seen.store(v);
      continue;
    }
    if (ops_->progress(worker_) > 0) continue;
    int r = ops_->arm(worker_);
    if (r == 0) {
      ++sleeps;
      if (!fd_readable(efd_, 2000)) ++timeouts;
    } else if (r != -FI_EBUSY) {
      ADD_FAILURE() << "arm: " << r;
      break;
    }
  }
  seen.store(kEvents);  // releases the producer if we stopped early
  producer.join();
  EXPECT_EQ(fi_cntr_read(c), kEvents);
  EXPECT_EQ(timeouts, 0) << "a wakeup was lost";
  EXPECT_GT(sleeps, 0);
  EXPECT_EQ(fi_close(&c->fid), 0);
}

TEST_F(WorkerTest, AnEmptyCqMemberLetsArmSucceed) {
  open_worker();
  fi_cq_attr attr{};
  attr.format = FI_CQ_FORMAT_CONTEXT;
  attr.wait_obj = FI_WAIT_NONE;
  attr.size = 64;
  fid_cq* cq = nullptr;
  ASSERT_EQ(fi_cq_open(d_.domain, &attr, &cq, nullptr), 0);
  ASSERT_EQ(ops_->worker_add(worker_, &cq->fid), 0);
  EXPECT_EQ(ops_->arm(worker_), 0);
  EXPECT_EQ(ops_->wait(worker_, 20), -FI_ETIMEDOUT);
  EXPECT_EQ(ops_->worker_remove(worker_, &cq->fid), 0);
  EXPECT_EQ(fi_close(&cq->fid), 0);
}

TEST_F(WorkerTest, EqWriteFromAnotherThreadWakesWorkerWait) {
  open_worker();
  fi_eq_attr attr{};
  attr.size = 16;
  attr.wait_obj = FI_WAIT_NONE;
  attr.flags = FI_WRITE;
  fid_eq* eq = nullptr;
  ASSERT_EQ(fi_eq_open(d_.fabric, &attr, &eq, nullptr), 0);
  ASSERT_EQ(ops_->worker_add(worker_, &eq->fid), 0);
  ASSERT_EQ(ops_->arm(worker_), 0);
  fi_eq_entry entry{};
  entry.context = &entry;
  {
    After later(20ms, [&] {
      EXPECT_EQ(fi_eq_write(eq, FI_NOTIFY, &entry, sizeof(entry), 0),
                static_cast<ssize_t>(sizeof(entry)));
    });
    EXPECT_EQ(ops_->wait(worker_, 5000), 0);
  }
  EXPECT_EQ(ops_->arm(worker_), -FI_EBUSY) << "the entry is still unread";
  uint32_t event;
  fi_eq_entry got{};
  EXPECT_EQ(fi_eq_read(eq, &event, &got, sizeof(got), 0), static_cast<ssize_t>(sizeof(got)));
  EXPECT_EQ(ops_->arm(worker_), 0);
  EXPECT_EQ(fi_close(&eq->fid), 0);
}
