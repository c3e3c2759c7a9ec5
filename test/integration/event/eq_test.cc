// SPDX-License-Identifier: BSD-3-Clause
//
// Event queues through the real libfabric core (fi_eq_open on a dpdk fabric, FI_DPDK_PORTS =
// net_null0). Until the control path produces events (AV, CM, joins), an application reaches an
// EQ through fi_eq_write and the read side; the overrun error is the one provider-made event.
// Tests are named after the fi_eq(3) sentence they check. Every wait is bounded.
#include <gtest/gtest.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_eq.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "fixture.h"

#include "test_util.h"

using dpfab::test::fd_readable;
using dpfab::test::SignalWatchdog;

using namespace dpfab::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

long elapsed_ms(Clock::time_point since) {
  return static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count());
}

class EqTest : public DomainTest {
 protected:
  bool opens_domain() const override { return false; }  // open_domain(): the tests that need one
  void TearDown() override {
    if (eq_) {
      EXPECT_EQ(fi_close(&eq_->fid), 0);
    }
    if (pollset_) {
      EXPECT_EQ(fi_close(&pollset_->fid), 0);
    }
    if (waitset_) {
      EXPECT_EQ(fi_close(&waitset_->fid), 0);
    }
    DomainTest::TearDown();
  }

  int open_eq(fi_wait_obj wait_obj, uint64_t flags = FI_WRITE, size_t size = 32,
              fid_wait* wait_set = nullptr, void* context = nullptr) {
    fi_eq_attr attr{};
    attr.size = size;
    attr.flags = flags;
    attr.wait_obj = wait_obj;
    attr.wait_set = wait_set;
    return fi_eq_open(d_.fabric, &attr, &eq_, context);
  }

  ssize_t write_one(uintptr_t context) {
    fi_eq_entry e{};
    e.fid = &eq_->fid;
    e.context = reinterpret_cast<void*>(context);
    return fi_eq_write(eq_, FI_NOTIFY, &e, sizeof(e), 0);
  }

  ssize_t read_one(uintptr_t* context, uint64_t flags = 0) {
    fi_eq_entry e{};
    uint32_t event = ~0u;
    ssize_t r = fi_eq_read(eq_, &event, &e, sizeof(e), flags);
    if (r > 0) {
      EXPECT_EQ(event, static_cast<uint32_t>(FI_NOTIFY));
      EXPECT_EQ(e.fid, &eq_->fid);
      if (context) *context = reinterpret_cast<uintptr_t>(e.context);
    }
    return r;
  }

  void open_domain() { ASSERT_EQ(d_.open_domain(), 0) << d_.failed; }

  fid_eq* eq_ = nullptr;
  fid_poll* pollset_ = nullptr;
  fid_wait* waitset_ = nullptr;
};

// ---- fi_eq_open -------------------------------------------------------------------------------

struct WaitCase {
  fi_wait_obj wait_obj;
  fi_wait_obj reported;  // FI_GETWAITOBJ
  bool sread_ok;
};

class EqWaitObjTest : public EqTest, public ::testing::WithParamInterface<WaitCase> {};

TEST_P(EqWaitObjTest, OpensWritesReadsAndControlsWithEveryWaitObject) {
  const WaitCase c = GetParam();
  if (c.wait_obj == FI_WAIT_SET) {
    fi_wait_attr wa{};
    wa.wait_obj = FI_WAIT_FD;
    ASSERT_EQ(fi_wait_open(d_.fabric, &wa, &waitset_), 0);
  }
  int ctx = 0;
  ASSERT_EQ(open_eq(c.wait_obj, FI_WRITE, 32, waitset_, &ctx), 0);
  EXPECT_EQ(eq_->fid.fclass, static_cast<size_t>(FI_CLASS_EQ));
  EXPECT_EQ(eq_->fid.context, &ctx);

  fi_wait_obj obj = FI_WAIT_NONE;
  ASSERT_EQ(fi_control(&eq_->fid, FI_GETWAITOBJ, &obj), 0);
  EXPECT_EQ(obj, c.reported);

  // FI_GETWAIT: "an 'int *' for FI_WAIT_FD, or 'struct fi_mutex_cond' for FI_WAIT_MUTEX_COND".
  switch (c.reported) {
    case FI_WAIT_FD: {
      int fd = -1;
      ASSERT_EQ(fi_control(&eq_->fid, FI_GETWAIT, &fd), 0);
      EXPECT_GE(fd, 0);
      break;
    }
    case FI_WAIT_POLLFD: {
      pollfd pfd[4];
      fi_wait_pollfd pf{};
      pf.nfds = 4;
      pf.fd = pfd;
      ASSERT_EQ(fi_control(&eq_->fid, FI_GETWAIT, &pf), 0);
      ASSERT_EQ(pf.nfds, 1u + same_host_fds());
      EXPECT_GE(pfd[0].fd, 0);
      EXPECT_EQ(pfd[0].events, POLLIN);
      break;
    }
    case FI_WAIT_MUTEX_COND: {
      fi_mutex_cond mc{};
      ASSERT_EQ(fi_control(&eq_->fid, FI_GETWAIT, &mc), 0);
      EXPECT_NE(mc.mutex, nullptr);
      EXPECT_NE(mc.cond, nullptr);
      break;
    }
    case FI_WAIT_SET: {
      int fd = -1;  // the set's own object (an FD set here)
      ASSERT_EQ(fi_control(&eq_->fid, FI_GETWAIT, &fd), 0);
      EXPECT_GE(fd, 0);
      break;
    }
    default: {  // NONE, YIELD: nothing native to hand out
      int fd = -1;
      EXPECT_EQ(fi_control(&eq_->fid, FI_GETWAIT, &fd), -FI_ENODATA);
      break;
    }
  }

  ASSERT_EQ(write_one(11), static_cast<ssize_t>(sizeof(fi_eq_entry)));
  uintptr_t got = 0;
  ASSERT_EQ(read_one(&got), static_cast<ssize_t>(sizeof(fi_eq_entry)));
  EXPECT_EQ(got, 11u);
  EXPECT_EQ(read_one(nullptr), -FI_EAGAIN);

  fi_eq_entry e{};
  uint32_t event;
  if (c.sread_ok) {
    auto t0 = Clock::now();
    EXPECT_EQ(fi_eq_sread(eq_, &event, &e, sizeof(e), 50, 0), -FI_EAGAIN);
    EXPECT_GE(elapsed_ms(t0), 45);
    ASSERT_GT(write_one(12), 0);
    EXPECT_EQ(fi_eq_sread(eq_, &event, &e, sizeof(e), 1000, 0), static_cast<ssize_t>(sizeof(e)));
    EXPECT_EQ(e.context, reinterpret_cast<void*>(12));
  } else {
    // "It is invalid for applications to call this function if the EQ has been configured with a
    // wait object of FI_WAIT_NONE or FI_WAIT_SET."
    ASSERT_GT(write_one(12), 0);
    EXPECT_EQ(fi_eq_sread(eq_, &event, &e, sizeof(e), 0, 0), -FI_EINVAL);
    EXPECT_EQ(read_one(nullptr), static_cast<ssize_t>(sizeof(e)));  // the event is still there
  }
}

INSTANTIATE_TEST_SUITE_P(EveryWaitObj, EqWaitObjTest,
                         ::testing::Values(WaitCase{FI_WAIT_NONE, FI_WAIT_NONE, false},
                                           WaitCase{FI_WAIT_UNSPEC, FI_WAIT_FD, true},
                                           WaitCase{FI_WAIT_FD, FI_WAIT_FD, true},
                                           WaitCase{FI_WAIT_POLLFD, FI_WAIT_POLLFD, true},
                                           WaitCase{FI_WAIT_MUTEX_COND, FI_WAIT_MUTEX_COND, true},
                                           WaitCase{FI_WAIT_YIELD, FI_WAIT_YIELD, true},
                                           WaitCase{FI_WAIT_SET, FI_WAIT_SET, false}),
                         [](const auto& info) {
                           switch (info.param.wait_obj) {
                             case FI_WAIT_NONE:
                               return "None";
                             case FI_WAIT_UNSPEC:
                               return "Unspec";
                             case FI_WAIT_FD:
                               return "Fd";
                             case FI_WAIT_POLLFD:
                               return "Pollfd";
                             case FI_WAIT_MUTEX_COND:
                               return "MutexCond";
                             case FI_WAIT_YIELD:
                               return "Yield";
                             case FI_WAIT_SET:
                               return "Set";
                           }
                           return "Unknown";
                         });

TEST_F(EqTest, OpenClosesOverARangeOfSizes) {
  for (int i = 0; i < 17; ++i) {
    ASSERT_EQ(open_eq(FI_WAIT_UNSPEC, 0, size_t{1} << i), 0) << i;
    ASSERT_EQ(fi_close(&eq_->fid), 0);
    eq_ = nullptr;
  }
}

TEST_F(EqTest, InvalidAttributesAreRefused) {
  EXPECT_EQ(open_eq(FI_WAIT_FD, FI_READ), -FI_EINVAL);
  EXPECT_EQ(open_eq(static_cast<fi_wait_obj>(99)), -FI_EINVAL);
  // "If specified, the wait_set field must reference an existing wait set object."
  EXPECT_EQ(open_eq(FI_WAIT_SET, FI_WRITE, 32, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_eq_open(d_.fabric, nullptr, &eq_, nullptr), -FI_EINVAL);
  EXPECT_EQ(eq_, nullptr);
}

TEST_F(EqTest, SignalingVectorIsAHintThatMayBeIgnored) {
  fi_eq_attr attr{};
  attr.flags = FI_AFFINITY | FI_WRITE;
  attr.signaling_vector = 1 << 20;  // no such CPU: a hint, ignored
  attr.wait_obj = FI_WAIT_FD;
  ASSERT_EQ(fi_eq_open(d_.fabric, &attr, &eq_, nullptr), 0);
  EXPECT_EQ(write_one(1), static_cast<ssize_t>(sizeof(fi_eq_entry)));
}

TEST_F(EqTest, WaitSetIsIgnoredIfWaitObjIsNotWaitSet) {
  ASSERT_EQ(open_eq(FI_WAIT_FD, FI_WRITE, 32, reinterpret_cast<fid_wait*>(0x10)), 0);
  fi_wait_obj obj;
  ASSERT_EQ(fi_control(&eq_->fid, FI_GETWAITOBJ, &obj), 0);
  EXPECT_EQ(obj, FI_WAIT_FD);
}

// ---- fi_eq_write ------------------------------------------------------------------------------

TEST_F(EqTest, WithoutFiWriteTheApplicationMayNotInvokeFiEqWrite) {
  ASSERT_EQ(open_eq(FI_WAIT_NONE, 0), 0);
  EXPECT_EQ(write_one(1), -FI_EINVAL);
  EXPECT_EQ(read_one(nullptr), -FI_EAGAIN);
}

TEST_F(EqTest, WriteReadRoundTripWithPeek) {
  ASSERT_EQ(open_eq(FI_WAIT_NONE), 0);
  for (uintptr_t i = 0; i < 5; ++i) ASSERT_EQ(write_one(i), 24);
  for (uintptr_t i = 0; i < 5; ++i) {
    uintptr_t got = 99;
    ASSERT_EQ(read_one(&got, FI_PEEK), 24);
    EXPECT_EQ(got, i);
    ASSERT_EQ(read_one(&got), 24);
    EXPECT_EQ(got, i);
  }
  EXPECT_EQ(read_one(nullptr), -FI_EAGAIN);
  fi_eq_err_entry err{};
  EXPECT_EQ(fi_eq_readerr(eq_, &err, 0), -FI_EAGAIN);
}

TEST_F(EqTest, BufferTooSmallReturnsEtoosmallAndKeepsTheEvent) {
  ASSERT_EQ(open_eq(FI_WAIT_NONE), 0);
  ASSERT_EQ(write_one(3), 24);
  char small[8];
  uint32_t event;
  EXPECT_EQ(fi_eq_read(eq_, &event, small, sizeof(small), 0), -FI_ETOOSMALL);
  uintptr_t got = 0;
  EXPECT_EQ(read_one(&got), 24);
  EXPECT_EQ(got, 3u);
}

TEST_F(EqTest, ConnectionDataWrittenBeyondTheCmEntryIsReturned) {
  ASSERT_EQ(open_eq(FI_WAIT_NONE), 0);
  alignas(fi_eq_cm_entry) uint8_t in[sizeof(fi_eq_cm_entry) + 6] = {};
  reinterpret_cast<fi_eq_cm_entry*>(in)->fid = &eq_->fid;
  std::memcpy(in + sizeof(fi_eq_cm_entry), "hello", 6);
  ASSERT_EQ(fi_eq_write(eq_, FI_CONNECTED, in, sizeof(in), 0), static_cast<ssize_t>(sizeof(in)));
  alignas(fi_eq_cm_entry) uint8_t out[sizeof(fi_eq_cm_entry) + 64] = {};
  uint32_t event;
  ssize_t n = fi_eq_read(eq_, &event, out, sizeof(out), 0);
  ASSERT_EQ(n, static_cast<ssize_t>(sizeof(in)));
  EXPECT_EQ(event, static_cast<uint32_t>(FI_CONNECTED));
  EXPECT_STREQ(reinterpret_cast<char*>(out + sizeof(fi_eq_cm_entry)), "hello");
}

// ---- size and overrun -------------------------------------------------------------------------

TEST_F(EqTest, SizeIsHonouredAndAnOverrunEqIsFatal) {
  ASSERT_EQ(open_eq(FI_WAIT_FD, FI_WRITE, 4), 0);
  for (uintptr_t i = 0; i < 4; ++i) ASSERT_EQ(write_one(i), 24) << i;
  EXPECT_EQ(write_one(4), -FI_EOVERRUN);
  EXPECT_EQ(write_one(5), -FI_EOVERRUN);
  for (uintptr_t i = 0; i < 4; ++i) {
    uintptr_t got = 99;
    ASSERT_EQ(read_one(&got), 24);
    EXPECT_EQ(got, i);
  }
  EXPECT_EQ(read_one(nullptr), -FI_EAVAIL);
  fi_eq_entry e{};
  uint32_t event;
  EXPECT_EQ(fi_eq_sread(eq_, &event, &e, sizeof(e), 1000, 0), -FI_EAVAIL);
  fi_eq_err_entry err{};
  ASSERT_EQ(fi_eq_readerr(eq_, &err, 0), static_cast<ssize_t>(sizeof(err)));
  EXPECT_EQ(err.err, FI_EOVERRUN);
  EXPECT_EQ(err.fid, &eq_->fid);
  EXPECT_EQ(err.err_data_size, 0u);
  EXPECT_NE(fi_eq_strerror(eq_, err.prov_errno, err.err_data, nullptr, 0), nullptr);
  char text[64] = {};
  EXPECT_EQ(fi_eq_strerror(eq_, err.prov_errno, err.err_data, text, sizeof(text)), text);
  EXPECT_STREQ(text, fi_strerror(FI_EOVERRUN));
  // Still overrun: every read attempt reports the error, every write fails.
  EXPECT_EQ(read_one(nullptr), -FI_EAVAIL);
  EXPECT_EQ(fi_eq_readerr(eq_, &err, 0), static_cast<ssize_t>(sizeof(err)));
  EXPECT_EQ(write_one(6), -FI_EOVERRUN);
}

// ---- fi_eq_sread ------------------------------------------------------------------------------

TEST_F(EqTest, SreadTimeoutIsBounded) {
  ASSERT_EQ(open_eq(FI_WAIT_FD), 0);
  fi_eq_entry e{};
  uint32_t event;
  auto t0 = Clock::now();
  EXPECT_EQ(fi_eq_sread(eq_, &event, &e, sizeof(e), 300, 0), -FI_EAGAIN);
  long ms = elapsed_ms(t0);
  EXPECT_GE(ms, 290);
  EXPECT_LT(ms, 1500);
}

TEST_F(EqTest, AThreadBlockedInSreadForeverReturnsWhenAnotherThreadWrites) {
  for (fi_wait_obj w : {FI_WAIT_FD, FI_WAIT_UNSPEC, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD}) {
    ASSERT_EQ(open_eq(w), 0);
    // The watchdog turns a lost wakeup into a failure instead of a hang (it cannot interrupt a
    // condition-variable wait, so that case has a finite timeout).
    SignalWatchdog dog(pthread_self(), 5000ms);
    std::thread writer([this] {
      std::this_thread::sleep_for(50ms);
      EXPECT_EQ(write_one(77), 24);
    });
    fi_eq_entry e{};
    uint32_t event = ~0u;
    auto t0 = Clock::now();
    ssize_t r = fi_eq_sread(eq_, &event, &e, sizeof(e), w == FI_WAIT_MUTEX_COND ? 10000 : -1, 0);
    long ms = elapsed_ms(t0);
    dog.stop();
    writer.join();
    EXPECT_FALSE(dog.fired()) << w;
    ASSERT_EQ(r, static_cast<ssize_t>(sizeof(e))) << w;
    EXPECT_EQ(event, static_cast<uint32_t>(FI_NOTIFY));
    EXPECT_EQ(e.context, reinterpret_cast<void*>(77));
    EXPECT_LT(ms, 5000) << w;
    ASSERT_EQ(fi_close(&eq_->fid), 0);
    eq_ = nullptr;
  }
}

TEST_F(EqTest, AThreadSignaledInSreadReturnsEagain) {
  ASSERT_EQ(open_eq(FI_WAIT_FD), 0);
  SignalWatchdog dog(pthread_self(), 100ms);
  fi_eq_entry e{};
  uint32_t event;
  ssize_t r = fi_eq_sread(eq_, &event, &e, sizeof(e), -1, 0);
  dog.stop();
  EXPECT_TRUE(dog.fired());
  EXPECT_EQ(r, -FI_EAGAIN);
}

// ---- fi_trywait, poll sets, wait sets ---------------------------------------------------------

TEST_F(EqTest, TrywaitOnAnFdEqSucceedsWhenEmptyAndTheFdWakesOnAWrite) {
  ASSERT_EQ(open_eq(FI_WAIT_FD), 0);
  int fd = -1;
  ASSERT_EQ(fi_control(&eq_->fid, FI_GETWAIT, &fd), 0);
  fid* fids[1] = {&eq_->fid};
  ASSERT_EQ(fi_trywait(d_.fabric, fids, 1), FI_SUCCESS);
  EXPECT_FALSE(fd_readable(fd));
  ASSERT_EQ(write_one(1), 24);
  EXPECT_TRUE(fd_readable(fd, 1000));
  EXPECT_EQ(fi_trywait(d_.fabric, fids, 1), -FI_EAGAIN);
  ASSERT_EQ(read_one(nullptr), 24);
  EXPECT_EQ(fi_trywait(d_.fabric, fids, 1), FI_SUCCESS);
  EXPECT_FALSE(fd_readable(fd));
}

TEST_F(EqTest, TrywaitWakesAThreadBlockedInPollOnTheFd) {
  ASSERT_EQ(open_eq(FI_WAIT_FD), 0);
  int fd = -1;
  ASSERT_EQ(fi_control(&eq_->fid, FI_GETWAIT, &fd), 0);
  fid* fids[1] = {&eq_->fid};
  ASSERT_EQ(fi_trywait(d_.fabric, fids, 1), FI_SUCCESS);
  std::thread writer([this] {
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(write_one(2), 24);
  });
  auto t0 = Clock::now();
  EXPECT_TRUE(fd_readable(fd, 5000));
  EXPECT_LT(elapsed_ms(t0), 4000);
  writer.join();
  EXPECT_EQ(read_one(nullptr), 24);
}

TEST_F(EqTest, AnEqInAPollSetIsReportedWhileNotEmpty) {
  open_domain();
  fi_poll_attr pa{};
  ASSERT_EQ(fi_poll_open(d_.domain, &pa, &pollset_), 0);
  int ctx = 0;
  ASSERT_EQ(open_eq(FI_WAIT_NONE, FI_WRITE, 32, nullptr, &ctx), 0);
  ASSERT_EQ(fi_poll_add(pollset_, &eq_->fid, 0), 0);
  void* got[4] = {};
  EXPECT_EQ(fi_poll(pollset_, got, 4), 0);
  ASSERT_EQ(write_one(1), 24);
  ASSERT_EQ(fi_poll(pollset_, got, 4), 1);
  EXPECT_EQ(got[0], &ctx);
  EXPECT_EQ(fi_poll(pollset_, got, 4), 1);  // still not empty
  ASSERT_EQ(read_one(nullptr), 24);
  EXPECT_EQ(fi_poll(pollset_, got, 4), 0);
  ASSERT_EQ(fi_poll_del(pollset_, &eq_->fid, 0), 0);
}

TEST_F(EqTest, ClosingAnEqLeavesThePollSet) {
  open_domain();
  fi_poll_attr pa{};
  ASSERT_EQ(fi_poll_open(d_.domain, &pa, &pollset_), 0);
  ASSERT_EQ(open_eq(FI_WAIT_NONE), 0);
  ASSERT_EQ(fi_poll_add(pollset_, &eq_->fid, 0), 0);
  ASSERT_EQ(write_one(1), 24);
  ASSERT_EQ(fi_close(&eq_->fid), 0);
  eq_ = nullptr;
  void* got[4] = {};
  EXPECT_EQ(fi_poll(pollset_, got, 4), 0);
}

TEST_F(EqTest, WhenAnEventIsInsertedTheWaitSetIsSignaled) {
  fi_wait_attr wa{};
  wa.wait_obj = FI_WAIT_FD;
  ASSERT_EQ(fi_wait_open(d_.fabric, &wa, &waitset_), 0);
  ASSERT_EQ(open_eq(FI_WAIT_SET, FI_WRITE, 32, waitset_), 0);
  auto t0 = Clock::now();
  EXPECT_EQ(fi_wait(waitset_, 100), -FI_ETIMEDOUT);
  EXPECT_GE(elapsed_ms(t0), 95);
  std::thread writer([this] {
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(write_one(3), 24);
  });
  t0 = Clock::now();
  EXPECT_EQ(fi_wait(waitset_, 5000), 0);
  EXPECT_LT(elapsed_ms(t0), 4000);
  writer.join();
  // fi_trywait on the EQ stands for its set: busy while the event is queued.
  fid* fids[1] = {&eq_->fid};
  EXPECT_EQ(fi_trywait(d_.fabric, fids, 1), -FI_EAGAIN);
  uintptr_t got = 0;
  ASSERT_EQ(read_one(&got), 24);
  EXPECT_EQ(got, 3u);
  EXPECT_EQ(fi_trywait(d_.fabric, fids, 1), FI_SUCCESS);
  // The set cannot close while the EQ uses it.
  EXPECT_EQ(fi_close(&waitset_->fid), -FI_EBUSY);
}

TEST_F(EqTest, AnEqCanJoinAPollfdWaitSet) {
  fi_wait_attr wa{};
  wa.wait_obj = FI_WAIT_POLLFD;
  ASSERT_EQ(fi_wait_open(d_.fabric, &wa, &waitset_), 0);
  ASSERT_EQ(open_eq(FI_WAIT_SET, FI_WRITE, 32, waitset_), 0);
  pollfd pfd[4];
  fi_wait_pollfd pf{};
  pf.nfds = 4;
  pf.fd = pfd;
  ASSERT_EQ(fi_control(&eq_->fid, FI_GETWAIT, &pf), 0);
  EXPECT_EQ(pf.nfds, 1u + same_host_fds());
  ASSERT_EQ(write_one(4), 24);
  EXPECT_EQ(fi_wait(waitset_, 1000), 0);
  ASSERT_EQ(read_one(nullptr), 24);
}

// ---- fi_close ---------------------------------------------------------------------------------

TEST_F(EqTest, TheFabricCannotCloseWhileAnEqIsOpen) {
  ASSERT_EQ(open_eq(FI_WAIT_FD), 0);
  EXPECT_EQ(fi_close(&d_.fabric->fid), -FI_EBUSY);
  ASSERT_EQ(fi_close(&eq_->fid), 0);
  eq_ = nullptr;
  EXPECT_EQ(fi_close(&d_.fabric->fid), 0);
  d_.fabric = nullptr;
}

TEST_F(EqTest, EventsWhichRemainOnTheEqWhenItIsClosedAreLost) {
  ASSERT_EQ(open_eq(FI_WAIT_FD), 0);
  for (uintptr_t i = 0; i < 3; ++i) ASSERT_EQ(write_one(i), 24);
  EXPECT_EQ(fi_close(&eq_->fid), 0);
  eq_ = nullptr;
}

TEST_F(EqTest, UnsupportedFidOpsReturnEnosys) {
  ASSERT_EQ(open_eq(FI_WAIT_FD), 0);
  EXPECT_EQ(fi_control(&eq_->fid, FI_GETOPSFLAG, nullptr), -FI_ENOSYS);
  EXPECT_STREQ(fi_eq_strerror(eq_, FI_EIO, nullptr, nullptr, 0), fi_strerror(FI_EIO));
}

}  // namespace
