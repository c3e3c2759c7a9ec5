// SPDX-License-Identifier: BSD-3-Clause
//
// Wait sets, poll sets and fi_trywait through the real libfabric core (fi_poll(3) and its later
// revision, fi_trywait(3)): every wait object kind on CQs, counters and EQs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

#include <chrono>
#include <set>
#include <thread>

#include "fixture.h"
#include "test_util.h"

using namespace dpfab::test;
using namespace std::chrono_literals;

namespace {

class Wait : public DomainTest {
 protected:
  fid_cntr* cntr(fi_wait_obj w, fid_wait* set = nullptr, void* ctx = nullptr) {
    fi_cntr_attr a{};
    a.events = FI_CNTR_EVENTS_COMP;
    a.wait_obj = w;
    a.wait_set = set;
    fid_cntr* c = nullptr;
    EXPECT_EQ(fi_cntr_open(d_.domain, &a, &c, ctx), 0) << w;
    return c;
  }
  fid_cq* cq(fi_wait_obj w, fid_wait* set = nullptr, void* ctx = nullptr) {
    fi_cq_attr a{};
    a.format = FI_CQ_FORMAT_CONTEXT;
    a.wait_obj = w;
    a.wait_set = set;
    fid_cq* c = nullptr;
    EXPECT_EQ(fi_cq_open(d_.domain, &a, &c, ctx), 0) << w;
    return c;
  }
  fid_eq* eq(fi_wait_obj w, fid_wait* set = nullptr, void* ctx = nullptr) {
    fi_eq_attr a{};
    a.flags = FI_WRITE;
    a.wait_obj = w;
    a.wait_set = set;
    fid_eq* q = nullptr;
    EXPECT_EQ(fi_eq_open(d_.fabric, &a, &q, ctx), 0) << w;
    return q;
  }
  fid_wait* waitset(fi_wait_obj w) {
    fi_wait_attr a{};
    a.wait_obj = w;
    fid_wait* ws = nullptr;
    EXPECT_EQ(fi_wait_open(d_.fabric, &a, &ws), 0) << w;
    return ws;
  }
  static void write_eq(fid_eq* q) {
    fi_eq_entry e{};
    ASSERT_EQ(fi_eq_write(q, FI_NOTIFY, &e, sizeof(e), 0), static_cast<ssize_t>(sizeof(e)));
  }
  static void read_eq(fid_eq* q) {
    fi_eq_entry e{};
    uint32_t ev;
    ASSERT_EQ(fi_eq_read(q, &ev, &e, sizeof(e), 0), static_cast<ssize_t>(sizeof(e)));
  }
};

}  // namespace

TEST_F(Wait, WaitSetAcceptsTheDocumentedWaitObjects) {
  for (auto k : {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_POLLFD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD}) {
    fid_wait* ws = waitset(k);
    ASSERT_NE(ws, nullptr);
    fi_wait_obj got;
    ASSERT_EQ(fi_control(&ws->fid, FI_GETWAITOBJ, &got), 0);
    EXPECT_EQ(got, k);
    EXPECT_EQ(fi_close(&ws->fid), 0);
  }
  fi_wait_attr a{};
  fid_wait* ws = nullptr;
  a.wait_obj = FI_WAIT_NONE;
  EXPECT_EQ(fi_wait_open(d_.fabric, &a, &ws), -FI_EINVAL);
  a.wait_obj = FI_WAIT_FD;
  a.flags = 1;
  EXPECT_EQ(fi_wait_open(d_.fabric, &a, &ws), -FI_EINVAL) << "flags are reserved: must be 0";
}

TEST_F(Wait, WaitSetMustNotBeBoundWhenClosed) {
  fid_wait* ws = waitset(FI_WAIT_FD);
  fid_cntr* c = cntr(FI_WAIT_SET, ws);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(fi_close(&ws->fid), -FI_EBUSY);
  EXPECT_EQ(fi_close(&c->fid), 0);
  EXPECT_EQ(fi_close(&ws->fid), 0);
}

TEST_F(Wait, FiWaitReturnsWhenAMemberCounterChangesAndTimesOutOtherwise) {
  for (auto k : {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_POLLFD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD}) {
    fid_wait* ws = waitset(k);
    fid_cntr* c = cntr(FI_WAIT_SET, ws);
    ASSERT_NE(c, nullptr);
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(fi_wait(ws, 30), -FI_ETIMEDOUT) << k;
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 29ms);
    std::thread t([&] {
      std::this_thread::sleep_for(20ms);
      fi_cntr_add(c, 1);
    });
    EXPECT_EQ(fi_wait(ws, 10000), 0) << k;
    t.join();
    EXPECT_EQ(fi_cntr_read(c), 1u);
    EXPECT_EQ(fi_close(&c->fid), 0);
    EXPECT_EQ(fi_close(&ws->fid), 0);
  }
}

TEST_F(Wait, FdWaitSetIsOneFdUsableInPoll) {
  fid_wait* ws = waitset(FI_WAIT_FD);
  fid_eq* q = eq(FI_WAIT_SET, ws);
  fid_cntr* c = cntr(FI_WAIT_SET, ws);
  int fd = -1;
  ASSERT_EQ(fi_control(&ws->fid, FI_GETWAIT, &fd), 0);
  ASSERT_GE(fd, 0);
  fid* fids[] = {&ws->fid};
  ASSERT_EQ(fi_trywait(d_.fabric, fids, 1), FI_SUCCESS);
  EXPECT_FALSE(fd_readable(fd));
  write_eq(q);
  EXPECT_TRUE(fd_readable(fd)) << "an EQ event signals the set";
  EXPECT_EQ(fi_trywait(d_.fabric, fids, 1), -FI_EAGAIN) << "the event is still queued";
  read_eq(q);
  ASSERT_EQ(fi_trywait(d_.fabric, fids, 1), FI_SUCCESS);
  EXPECT_FALSE(fd_readable(fd)) << "trywait reset the fd";
  EXPECT_EQ(fi_close(&q->fid), 0);
  EXPECT_EQ(fi_close(&c->fid), 0);
  EXPECT_EQ(fi_close(&ws->fid), 0);
}

TEST_F(Wait, PollFdWaitSetChangeIndexMovesWhenMembersChange) {
  fid_wait* ws = waitset(FI_WAIT_POLLFD);
  fi_wait_pollfd pf{};
  ASSERT_EQ(fi_control(&ws->fid, FI_GETWAIT, &pf), 0);
  uint64_t before = pf.change_index;
  fid_cq* a = cq(FI_WAIT_SET, ws);
  fid_cntr* b = cntr(FI_WAIT_SET, ws);
  pf = fi_wait_pollfd{};
  EXPECT_EQ(fi_control(&ws->fid, FI_GETWAIT, &pf), -FI_ETOOSMALL);
  EXPECT_EQ(pf.nfds, 2u + same_host_fds());
  EXPECT_NE(pf.change_index, before);
  pollfd fds[3];
  pf.fd = fds;
  ASSERT_EQ(fi_control(&ws->fid, FI_GETWAIT, &pf), 0);
  uint64_t with_two = pf.change_index;
  fid* fids[] = {&ws->fid};
  ASSERT_EQ(fi_trywait(d_.fabric, fids, 1), FI_SUCCESS);
  fi_cntr_add(b, 1);  // the application's own add is an event too
  EXPECT_EQ(poll(fds, pf.nfds, 5000), 1) << "one of the set's fds became readable";
  EXPECT_EQ(fi_close(&a->fid), 0);
  pf.nfds = 3;
  ASSERT_EQ(fi_control(&ws->fid, FI_GETWAIT, &pf), 0);
  EXPECT_EQ(pf.nfds, 1u + same_host_fds());
  EXPECT_NE(pf.change_index, with_two);
  EXPECT_EQ(fi_close(&b->fid), 0);
  EXPECT_EQ(fi_close(&ws->fid), 0);
}

TEST_F(Wait, MutexCondWaitSetHandsOutThePair) {
  fid_wait* ws = waitset(FI_WAIT_MUTEX_COND);
  fi_mutex_cond mc{};
  ASSERT_EQ(fi_control(&ws->fid, FI_GETWAIT, &mc), 0);
  EXPECT_NE(mc.mutex, nullptr);
  EXPECT_NE(mc.cond, nullptr);
  EXPECT_EQ(fi_close(&ws->fid), 0);
}

TEST_F(Wait, TrywaitOnAnEmptyFdCqCounterAndEqSucceeds) {
  fid_cq* q = cq(FI_WAIT_FD);
  fid_cntr* c = cntr(FI_WAIT_FD);
  fid_eq* e = eq(FI_WAIT_FD);
  fid* fids[] = {&q->fid, &c->fid, &e->fid};
  EXPECT_EQ(fi_trywait(d_.fabric, fids, 3), FI_SUCCESS);
  write_eq(e);
  EXPECT_EQ(fi_trywait(d_.fabric, fids, 3), -FI_EAGAIN);
  read_eq(e);
  EXPECT_EQ(fi_trywait(d_.fabric, fids, 3), FI_SUCCESS);
  for (fid* f : fids) EXPECT_EQ(fi_close(f), 0);
}

TEST_F(Wait, TrywaitRefusesMixedWaitObjectsAndNone) {
  fid_cq* fd_cq = cq(FI_WAIT_FD);
  fid_cq* mc_cq = cq(FI_WAIT_MUTEX_COND);
  fid_cq* none_cq = cq(FI_WAIT_NONE);
  fid* mixed[] = {&fd_cq->fid, &mc_cq->fid};
  EXPECT_EQ(fi_trywait(d_.fabric, mixed, 2), -FI_EINVAL)
      << "all descriptors must use the same wait object type";
  fid* none[] = {&none_cq->fid};
  EXPECT_EQ(fi_trywait(d_.fabric, none, 1), -FI_EINVAL);
  EXPECT_EQ(fi_trywait(d_.fabric, mixed, 0), -FI_EINVAL);
  for (fid_cq* q : {fd_cq, mc_cq, none_cq}) EXPECT_EQ(fi_close(&q->fid), 0);
}

TEST_F(Wait, TrywaitPollLoopFromTheManPageSeesEveryEvent) {
  // The select(2) loop of fi_trywait(3), with epoll-free poll(2) and events from another thread.
  fid_eq* e = eq(FI_WAIT_FD);
  int fd = -1;
  ASSERT_EQ(fi_control(&e->fid, FI_GETWAIT, &fd), 0);
  constexpr int kEvents = 2000;
  std::thread producer([&] {
    for (int i = 0; i < kEvents; ++i) {
      write_eq(e);
      if (i % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  int got = 0;
  fid* fids[] = {&e->fid};
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (got < kEvents && std::chrono::steady_clock::now() < deadline) {
    if (fi_trywait(d_.fabric, fids, 1) == FI_SUCCESS) {
      pollfd p{fd, POLLIN, 0};
      ASSERT_GE(poll(&p, 1, 2000), 0);
    }
    fi_eq_entry entry;
    uint32_t ev;
    while (fi_eq_read(e, &ev, &entry, sizeof(entry), 0) > 0) ++got;
  }
  producer.join();
  EXPECT_EQ(got, kEvents);
  EXPECT_EQ(fi_close(&e->fid), 0);
}

TEST_F(Wait, PollSetReportsCountersThatChangedAndQueuesThatAreNotEmpty) {
  fid_poll* ps = nullptr;
  fi_poll_attr pa{};
  ASSERT_EQ(fi_poll_open(d_.domain, &pa, &ps), 0);
  int cctx, ectx, qctx;
  fid_cntr* c = cntr(FI_WAIT_NONE, nullptr, &cctx);
  fid_eq* e = eq(FI_WAIT_NONE, nullptr, &ectx);
  fid_cq* q = cq(FI_WAIT_NONE, nullptr, &qctx);
  ASSERT_EQ(fi_poll_add(ps, &c->fid, 0), 0);
  ASSERT_EQ(fi_poll_add(ps, &e->fid, 0), 0);
  ASSERT_EQ(fi_poll_add(ps, &q->fid, 0), 0);
  void* ctx[8];
  EXPECT_EQ(fi_poll(ps, ctx, 8), 0);
  write_eq(e);
  ASSERT_EQ(fi_poll(ps, ctx, 8), 1);
  EXPECT_EQ(ctx[0], &ectx);
  ASSERT_EQ(fi_poll(ps, ctx, 8), 1) << "the EQ is still not empty";
  read_eq(e);
  EXPECT_EQ(fi_poll(ps, ctx, 8), 0);
  EXPECT_EQ(fi_close(&ps->fid), -FI_EBUSY) << "members remain";
  EXPECT_EQ(fi_poll_del(ps, &c->fid, 0), 0);
  EXPECT_EQ(fi_poll_del(ps, &c->fid, 0), -FI_ENOENT);
  EXPECT_EQ(fi_poll_del(ps, &e->fid, 0), 0);
  EXPECT_EQ(fi_close(&q->fid), 0) << "closing a member removes it from the set";
  EXPECT_EQ(fi_close(&ps->fid), 0);
  EXPECT_EQ(fi_close(&c->fid), 0);
  EXPECT_EQ(fi_close(&e->fid), 0);
}

TEST_F(Wait, PollSetOnManyMembersReportsOnlyTheActiveOne) {
  fid_poll* ps = nullptr;
  ASSERT_EQ(fi_poll_open(d_.domain, nullptr, &ps), 0);
  std::vector<fid_eq*> eqs;
  std::vector<int> ctx(200);
  for (int i = 0; i < 200; ++i) {
    eqs.push_back(eq(FI_WAIT_NONE, nullptr, &ctx[i]));
    ASSERT_EQ(fi_poll_add(ps, &eqs.back()->fid, 0), 0);
  }
  write_eq(eqs[123]);
  void* out[8];
  ASSERT_EQ(fi_poll(ps, out, 8), 1);
  EXPECT_EQ(out[0], &ctx[123]);
  for (fid_eq* q : eqs) EXPECT_EQ(fi_close(&q->fid), 0);
  EXPECT_EQ(fi_close(&ps->fid), 0);
}
