// SPDX-License-Identifier: BSD-3-Clause
//
// Counters through the real libfabric core (fi_cntr(3), fi_poll(3), fi_trywait/fi_control): open
// with every wait object, FI_GETWAIT per kind, fi_cntr_wait woken from another thread, timeouts,
// errors, fi_trywait on an FD counter, counters in poll sets and wait sets, fi_close rules.
// meson runs it with FI_DPDK_PORTS=net_null0. Until the data path exists nothing produces
// completions, so every change here comes through fi_cntr_add/set/adderr/seterr.
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/fi_eq.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "fixture.h"

#include "test_util.h"

using dpfab::test::After;
using dpfab::test::fd_readable;

using namespace dpfab::test;
using namespace std::chrono_literals;

namespace {

class Cntr : public DomainTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(DomainTest::SetUp());
    ASSERT_GT(d_.info->domain_attr->cntr_cnt, 0u);
  }
  void TearDown() override {
    if (cntr) {
      EXPECT_EQ(fi_close(&cntr->fid), 0);
    }
    if (pollset) {
      EXPECT_EQ(fi_close(&pollset->fid), 0);
    }
    if (waitset) {
      EXPECT_EQ(fi_close(&waitset->fid), 0);
    }
    DomainTest::TearDown();
  }

  int open(fi_wait_obj wait_obj, fid_wait* set = nullptr) {
    fi_cntr_attr attr{};
    attr.events = FI_CNTR_EVENTS_COMP;
    attr.wait_obj = wait_obj;
    attr.wait_set = set;
    return fi_cntr_open(d_.domain, &attr, &cntr, &context);
  }
  int open_waitset(fi_wait_obj wait_obj) {
    fi_wait_attr attr{};
    attr.wait_obj = wait_obj;
    return fi_wait_open(d_.fabric, &attr, &waitset);
  }

  fid_cntr* cntr = nullptr;
  fid_wait* waitset = nullptr;
  fid_poll* pollset = nullptr;
  int context = 0;  // its address is the counter's context
};

// The wait objects a thread can block on in fi_cntr_wait.
const fi_wait_obj kBlockingKinds[] = {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_POLLFD,
                                      FI_WAIT_MUTEX_COND, FI_WAIT_YIELD};

}  // namespace

// ---- fi_cntr_open / fi_close --------------------------------------------------------------------

TEST_F(Cntr, OpensWithEachWaitObjectTheManPageLists) {
  struct Case {
    fi_wait_obj asked, reported;
  };
  for (auto [asked, reported] :
       {Case{FI_WAIT_NONE, FI_WAIT_NONE}, Case{FI_WAIT_UNSPEC, FI_WAIT_FD},
        Case{FI_WAIT_FD, FI_WAIT_FD}, Case{FI_WAIT_POLLFD, FI_WAIT_POLLFD},
        Case{FI_WAIT_MUTEX_COND, FI_WAIT_MUTEX_COND}, Case{FI_WAIT_YIELD, FI_WAIT_YIELD}}) {
    ASSERT_EQ(open(asked), 0) << asked;
    EXPECT_EQ(cntr->fid.fclass, static_cast<size_t>(FI_CLASS_CNTR));
    EXPECT_EQ(cntr->fid.context, &context);
    fi_wait_obj got = FI_WAIT_SET;
    EXPECT_EQ(fi_control(&cntr->fid, FI_GETWAITOBJ, &got), 0) << asked;
    EXPECT_EQ(got, reported) << asked;
    EXPECT_EQ(fi_cntr_read(cntr), 0u);
    EXPECT_EQ(fi_cntr_readerr(cntr), 0u);
    ASSERT_EQ(fi_close(&cntr->fid), 0);
    cntr = nullptr;
  }
}

TEST_F(Cntr, OpensWithFiWaitSetReferencingAnExistingWaitSet) {
  ASSERT_EQ(open_waitset(FI_WAIT_FD), 0);
  ASSERT_EQ(open(FI_WAIT_SET, waitset), 0);
  fi_wait_obj got = FI_WAIT_NONE;
  EXPECT_EQ(fi_control(&cntr->fid, FI_GETWAITOBJ, &got), 0);
  EXPECT_EQ(got, FI_WAIT_SET);
  EXPECT_EQ(fi_close(&waitset->fid), -FI_EBUSY) << "the counter still uses the set";
}

TEST_F(Cntr, TheDefaultAttributesAreUsedWithoutAttr) {
  ASSERT_EQ(fi_cntr_open(d_.domain, nullptr, &cntr, nullptr), 0);
  fi_wait_obj got = FI_WAIT_SET;
  EXPECT_EQ(fi_control(&cntr->fid, FI_GETWAITOBJ, &got), 0);
  EXPECT_EQ(got, FI_WAIT_NONE) << "The default is FI_WAIT_NONE";
}

TEST_F(Cntr, FlagsAreReservedAndMustBeZero) {
  fi_cntr_attr attr{};
  attr.flags = 1;
  EXPECT_EQ(fi_cntr_open(d_.domain, &attr, &cntr, nullptr), -FI_EINVAL);
  cntr = nullptr;
}

TEST_F(Cntr, OnlyFiCntrEventsCompIsSupported) {
  fi_cntr_attr attr{};
  attr.events = static_cast<fi_cntr_events>(1);
  EXPECT_EQ(fi_cntr_open(d_.domain, &attr, &cntr, nullptr), -FI_ENOSYS);
  cntr = nullptr;
}

TEST_F(Cntr, FiWaitSetWithoutAWaitSetIsRefused) {
  EXPECT_EQ(open(FI_WAIT_SET, nullptr), -FI_EINVAL);
  cntr = nullptr;
  EXPECT_EQ(open(static_cast<fi_wait_obj>(77)), -FI_EINVAL);
  cntr = nullptr;
}

TEST_F(Cntr, TheDomainCannotCloseWhileACounterIsOpen) {
  ASSERT_EQ(open(FI_WAIT_NONE), 0);
  EXPECT_EQ(fi_close(&d_.domain->fid), -FI_EBUSY);
}

// ---- values -------------------------------------------------------------------------------------

TEST_F(Cntr, ReadAddSetAdderrSeterrFollowTheManPage) {
  ASSERT_EQ(open(FI_WAIT_NONE), 0);
  EXPECT_EQ(fi_cntr_add(cntr, 5), 0);
  EXPECT_EQ(fi_cntr_read(cntr), 5u) << "fi_cntr_add adds the user-specified value";
  EXPECT_EQ(fi_cntr_set(cntr, 2), 0);
  EXPECT_EQ(fi_cntr_read(cntr), 2u) << "fi_cntr_set sets the counter to the specified value";
  EXPECT_EQ(fi_cntr_adderr(cntr, 3), 0);
  EXPECT_EQ(fi_cntr_readerr(cntr), 3u);
  EXPECT_EQ(fi_cntr_seterr(cntr, 1), 0);
  EXPECT_EQ(fi_cntr_readerr(cntr), 1u);
  EXPECT_EQ(fi_cntr_read(cntr), 2u) << "a counter stores two distinct values";
}

// ---- fi_control FI_GETWAIT ----------------------------------------------------------------------

TEST_F(Cntr, FiGetwaitOnAnFdCounterGivesAPollableFd) {
  ASSERT_EQ(open(FI_WAIT_FD), 0);
  int fd = -1;
  ASSERT_EQ(fi_control(&cntr->fid, FI_GETWAIT, &fd), 0);
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(fd_readable(fd));
  fid* fids[] = {&cntr->fid};
  ASSERT_EQ(fi_trywait(d_.fabric, fids, 1), 0);
  EXPECT_EQ(fi_cntr_add(cntr, 1), 0);
  EXPECT_TRUE(fd_readable(fd));
}

TEST_F(Cntr, FiGetwaitOnAPollfdCounterGivesAPollfdArray) {
  ASSERT_EQ(open(FI_WAIT_POLLFD), 0);
  fi_wait_pollfd pf{};
  pf.nfds = 0;
  EXPECT_EQ(fi_control(&cntr->fid, FI_GETWAIT, &pf), -FI_ETOOSMALL);
  ASSERT_EQ(pf.nfds, 1u + same_host_fds());
  pollfd fds[4];
  pf.fd = fds;
  pf.nfds = 4;
  ASSERT_EQ(fi_control(&cntr->fid, FI_GETWAIT, &pf), 0);
  ASSERT_EQ(pf.nfds, 1u + same_host_fds());
  EXPECT_GE(fds[0].fd, 0);
  EXPECT_TRUE(fds[0].events & POLLIN);
  fid* fids[] = {&cntr->fid};
  ASSERT_EQ(fi_trywait(d_.fabric, fids, 1), 0);
  EXPECT_EQ(poll(fds, pf.nfds, 0), 0);
  {
    After app(20ms, [&] { fi_cntr_add(cntr, 1); });
    EXPECT_EQ(poll(fds, pf.nfds, 5000), 1) << "the add made the armed counter's fd readable";
  }
}

TEST_F(Cntr, FiGetwaitOnAMutexCondCounterGivesThePair) {
  ASSERT_EQ(open(FI_WAIT_MUTEX_COND), 0);
  fi_mutex_cond mc{};
  ASSERT_EQ(fi_control(&cntr->fid, FI_GETWAIT, &mc), 0);
  ASSERT_NE(mc.mutex, nullptr);
  ASSERT_NE(mc.cond, nullptr);
  EXPECT_EQ(pthread_mutex_lock(mc.mutex), 0);  // a usable mutex
  EXPECT_EQ(pthread_mutex_unlock(mc.mutex), 0);
}

TEST_F(Cntr, FiGetwaitOnAnUnspecCounterGivesItsFd) {
  // "Applications that select FI_WAIT_UNSPEC are not guaranteed to retrieve the underlying wait
  // object": dpfab resolves UNSPEC to an fd and hands it out.
  ASSERT_EQ(open(FI_WAIT_UNSPEC), 0);
  int fd = -1;
  ASSERT_EQ(fi_control(&cntr->fid, FI_GETWAIT, &fd), 0);
  EXPECT_GE(fd, 0);
}

TEST_F(Cntr, FiGetwaitWithoutANativeWaitObjectFails) {
  for (auto k : {FI_WAIT_NONE, FI_WAIT_YIELD}) {
    ASSERT_EQ(open(k), 0);
    int fd = -1;
    EXPECT_LT(fi_control(&cntr->fid, FI_GETWAIT, &fd), 0) << k;
    EXPECT_EQ(fd, -1);
    ASSERT_EQ(fi_close(&cntr->fid), 0);
    cntr = nullptr;
  }
}

TEST_F(Cntr, OtherControlCommandsAreNotSupported) {
  ASSERT_EQ(open(FI_WAIT_FD), 0);
  uint64_t flags = 0;
  EXPECT_EQ(fi_control(&cntr->fid, FI_GETOPSFLAG, &flags), -FI_ENOSYS);
}

// ---- fi_cntr_wait -------------------------------------------------------------------------------

TEST_F(Cntr, FiCntrAddFromAnotherThreadWakesFiCntrWait) {
  for (auto k : kBlockingKinds) {
    ASSERT_EQ(open(k), 0);
    {
      After app(30ms, [&] { fi_cntr_add(cntr, 3); });
      EXPECT_EQ(fi_cntr_wait(cntr, 3, 5000), 0) << k;
    }
    EXPECT_GE(fi_cntr_read(cntr), 3u) << "Upon successful return ... greater than or equal";
    ASSERT_EQ(fi_close(&cntr->fid), 0);
    cntr = nullptr;
  }
}

TEST_F(Cntr, FiCntrSetFromAnotherThreadWakesFiCntrWait) {
  ASSERT_EQ(open(FI_WAIT_FD), 0);
  After app(30ms, [&] { fi_cntr_set(cntr, 10); });
  EXPECT_EQ(fi_cntr_wait(cntr, 7, 5000), 0);
}

TEST_F(Cntr, IfTheCallReturnsDueToTimeoutFiEtimedoutIsReturned) {
  for (auto k : kBlockingKinds) {
    ASSERT_EQ(open(k), 0);
    ASSERT_EQ(fi_cntr_adderr(cntr, 2), 0);
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(fi_cntr_wait(cntr, 1, 100), -FI_ETIMEDOUT) << k;
    auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_GE(took, 99ms);
    EXPECT_LT(took, 3000ms);
    EXPECT_EQ(fi_cntr_readerr(cntr), 2u) << "The error value ... remains unchanged";
    ASSERT_EQ(fi_close(&cntr->fid), 0);
    cntr = nullptr;
  }
}

TEST_F(Cntr, AnyChangeInTheErrorValueUnblocksAThreadInsideFiCntrWait) {
  for (auto k : kBlockingKinds) {
    ASSERT_EQ(open(k), 0);
    {
      After app(30ms, [&] { fi_cntr_adderr(cntr, 1); });
      EXPECT_EQ(fi_cntr_wait(cntr, 1, 5000), -FI_EAVAIL) << k;
    }
    EXPECT_EQ(fi_cntr_readerr(cntr), 1u);
    ASSERT_EQ(fi_close(&cntr->fid), 0);
    cntr = nullptr;
  }
}

TEST_F(Cntr, FiCntrWaitWithFiWaitNoneBusyPollsInsteadOfFailing) {
  // The man page calls this invalid; dpfab spins with progress until the threshold or the
  // timeout, as libfabric's util counters do (man/fi_dpdk.7.md).
  ASSERT_EQ(open(FI_WAIT_NONE), 0);
  EXPECT_EQ(fi_cntr_wait(cntr, 1, 20), -FI_ETIMEDOUT);
  After app(20ms, [&] { fi_cntr_add(cntr, 1); });
  EXPECT_EQ(fi_cntr_wait(cntr, 1, 5000), 0);
}

TEST_F(Cntr, FiCntrWaitOnACounterInAWaitSetBusyPollsToo) {
  ASSERT_EQ(open_waitset(FI_WAIT_FD), 0);
  ASSERT_EQ(open(FI_WAIT_SET, waitset), 0);
  After app(20ms, [&] { fi_cntr_add(cntr, 1); });
  EXPECT_EQ(fi_cntr_wait(cntr, 1, 5000), 0);
}

// ---- fi_trywait ---------------------------------------------------------------------------------

TEST_F(Cntr, FiTrywaitOnAnFdCounterSucceedsWhenUnchangedSinceRead) {
  ASSERT_EQ(open(FI_WAIT_FD), 0);
  int fd = -1;
  ASSERT_EQ(fi_control(&cntr->fid, FI_GETWAIT, &fd), 0);
  fid* fids[] = {&cntr->fid};
  EXPECT_EQ(fi_trywait(d_.fabric, fids, 1), 0);
  EXPECT_EQ(fi_cntr_add(cntr, 1), 0);
  EXPECT_EQ(fi_trywait(d_.fabric, fids, 1), -FI_EAGAIN) << "changed since the application read it";
  EXPECT_EQ(fi_cntr_read(cntr), 1u);
  EXPECT_EQ(fi_trywait(d_.fabric, fids, 1), 0);
  EXPECT_FALSE(fd_readable(fd)) << "fi_trywait lowered the fd the add raised";
  {
    After app(20ms, [&] { fi_cntr_add(cntr, 1); });
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 5000), 1) << "blocking on the fd after FI_SUCCESS is safe";
  }
  EXPECT_EQ(fi_trywait(d_.fabric, fids, 1), -FI_EAGAIN);
}

TEST_F(Cntr, FiTrywaitAfterAnErrorAsksForFiCntrReaderr) {
  ASSERT_EQ(open(FI_WAIT_FD), 0);
  fid* fids[] = {&cntr->fid};
  EXPECT_EQ(fi_cntr_adderr(cntr, 1), 0);
  EXPECT_EQ(fi_trywait(d_.fabric, fids, 1), -FI_EAGAIN);
  fi_cntr_read(cntr);
  EXPECT_EQ(fi_trywait(d_.fabric, fids, 1), -FI_EAGAIN);
  fi_cntr_readerr(cntr);
  EXPECT_EQ(fi_trywait(d_.fabric, fids, 1), 0);
}

TEST_F(Cntr, FiTrywaitOnAFiWaitNoneCounterIsRefused) {
  ASSERT_EQ(open(FI_WAIT_NONE), 0);
  fid* fids[] = {&cntr->fid};
  EXPECT_EQ(fi_trywait(d_.fabric, fids, 1), -FI_EINVAL);
}

// ---- poll sets ----------------------------------------------------------------------------------
// "The context associated with a counter will be returned if the counter's success value or error
// value have changed since the last time fi_poll, fi_cntr_set, or fi_cntr_add were called." Changes
// made by the application (fi_cntr_add/set/adderr/seterr) are changes too.

TEST_F(Cntr, FiPollReturnsTheCounterWhenItsErrorValueChangedSinceTheLastFiPoll) {
  ASSERT_EQ(open(FI_WAIT_NONE), 0);
  ASSERT_EQ(fi_poll_open(d_.domain, nullptr, &pollset), 0);
  ASSERT_EQ(fi_poll_add(pollset, &cntr->fid, 0), 0);
  void* ctx[4] = {};
  EXPECT_EQ(fi_poll(pollset, ctx, 4), 0) << "nothing changed yet";
  {
    After app(0ms, [&] { fi_cntr_adderr(cntr, 1); });  // another thread
  }
  ASSERT_EQ(fi_poll(pollset, ctx, 4), 1);
  EXPECT_EQ(ctx[0], &context);
  EXPECT_EQ(fi_poll(pollset, ctx, 4), 0) << "unchanged since the last fi_poll";
  EXPECT_EQ(fi_cntr_seterr(cntr, 9), 0);
  EXPECT_EQ(fi_poll(pollset, ctx, 4), 1);
  EXPECT_EQ(fi_poll_del(pollset, &cntr->fid, 0), 0);
}

// The man page's sentence could be read as "fi_cntr_add and fi_cntr_set reset what counts as a
// change"; an application that adds to a counter in its poll set expects to see it reported, as
// completion-driven changes are. So every fi_cntr_add/set/adderr/seterr counts as a change.
TEST_F(Cntr, FiPollReturnsACounterChangedByTheApplication) {
  ASSERT_EQ(open(FI_WAIT_NONE), 0);
  ASSERT_EQ(fi_poll_open(d_.domain, nullptr, &pollset), 0);
  ASSERT_EQ(fi_poll_add(pollset, &cntr->fid, 0), 0);
  void* ctx[4] = {};
  EXPECT_EQ(fi_poll(pollset, ctx, 4), 0) << "nothing changed yet";
  EXPECT_EQ(fi_cntr_add(cntr, 1), 0);
  ASSERT_EQ(fi_poll(pollset, ctx, 4), 1) << "fi_cntr_add changed the value";
  EXPECT_EQ(ctx[0], &context);
  EXPECT_EQ(fi_poll(pollset, ctx, 4), 0) << "reported once";
  EXPECT_EQ(fi_cntr_set(cntr, 5), 0);
  ASSERT_EQ(fi_poll(pollset, ctx, 4), 1) << "fi_cntr_set";
  EXPECT_EQ(ctx[0], &context);
  EXPECT_EQ(fi_cntr_adderr(cntr, 1), 0);
  EXPECT_EQ(fi_poll(pollset, ctx, 4), 1) << "fi_cntr_adderr";
  EXPECT_EQ(fi_cntr_seterr(cntr, 7), 0);
  EXPECT_EQ(fi_poll(pollset, ctx, 4), 1) << "fi_cntr_seterr";
  EXPECT_EQ(fi_poll(pollset, ctx, 4), 0);
  // Set to another value and back before fi_poll looks: the counter was still changed.
  EXPECT_EQ(fi_cntr_set(cntr, 6), 0);
  EXPECT_EQ(fi_cntr_set(cntr, 5), 0);
  EXPECT_EQ(fi_poll(pollset, ctx, 4), 1) << "set and set back";
  EXPECT_EQ(fi_poll_del(pollset, &cntr->fid, 0), 0);
}

TEST_F(Cntr, AClosedCounterLeavesItsPollSet) {
  ASSERT_EQ(open(FI_WAIT_FD), 0);
  ASSERT_EQ(fi_poll_open(d_.domain, nullptr, &pollset), 0);
  ASSERT_EQ(fi_poll_add(pollset, &cntr->fid, 0), 0);
  EXPECT_EQ(fi_cntr_adderr(cntr, 1), 0);
  ASSERT_EQ(fi_close(&cntr->fid), 0);
  cntr = nullptr;
  void* ctx[4] = {};
  EXPECT_EQ(fi_poll(pollset, ctx, 4), 0);
  // TearDown closes the poll set: it has no members left.
}

// ---- wait sets ----------------------------------------------------------------------------------

TEST_F(Cntr, ACounterInAWaitSetWakesFiWait) {
  for (auto k : {FI_WAIT_FD, FI_WAIT_POLLFD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD}) {
    ASSERT_EQ(open_waitset(k), 0) << k;
    ASSERT_EQ(open(FI_WAIT_SET, waitset), 0) << k;
    EXPECT_EQ(fi_wait(waitset, 20), -FI_ETIMEDOUT) << k;
    {
      After app(30ms, [&] { fi_cntr_add(cntr, 1); });
      EXPECT_EQ(fi_wait(waitset, 5000), 0) << k;
    }
    EXPECT_EQ(fi_cntr_read(cntr), 1u);
    EXPECT_EQ(fi_wait(waitset, 20), -FI_ETIMEDOUT) << "read since: nothing new " << k;
    {
      After app(30ms, [&] { fi_cntr_adderr(cntr, 1); });
      EXPECT_EQ(fi_wait(waitset, 5000), 0) << "an error wakes the set too " << k;
    }
    ASSERT_EQ(fi_close(&cntr->fid), 0);
    cntr = nullptr;
    ASSERT_EQ(fi_close(&waitset->fid), 0) << "the closed counter left the set";
    waitset = nullptr;
  }
}

TEST_F(Cntr, FiTrywaitOnTheWaitSetOfACounter) {
  ASSERT_EQ(open_waitset(FI_WAIT_FD), 0);
  ASSERT_EQ(open(FI_WAIT_SET, waitset), 0);
  int fd = -1;
  ASSERT_EQ(fi_control(&waitset->fid, FI_GETWAIT, &fd), 0);
  fid* fids[] = {&waitset->fid};
  EXPECT_EQ(fi_trywait(d_.fabric, fids, 1), 0);
  EXPECT_EQ(fi_cntr_add(cntr, 1), 0);
  EXPECT_TRUE(fd_readable(fd));
  EXPECT_EQ(fi_trywait(d_.fabric, fids, 1), -FI_EAGAIN);
  fi_cntr_read(cntr);
  EXPECT_EQ(fi_trywait(d_.fabric, fids, 1), 0);
}
