// SPDX-License-Identifier: BSD-3-Clause
//
// Completion queues through the real libfabric core (fi_cq(3)), on one net_null port. Nothing
// produces completions yet (no data path), so these check the consumer side, the wait objects
// and the attribute rules; the producer side is unit-tested in test/unit/event/cq_test.cc.
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "fixture.h"
#include "test_util.h"

using namespace dpfab::test;

namespace {

using Clock = std::chrono::steady_clock;

int64_t ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

class Cq : public DomainTest {
 protected:
  int open(fi_cq_attr a, fid_cq** out, void* ctx = nullptr) {
    return fi_cq_open(d_.domain, &a, out, ctx);
  }
  fid_cq* cq(fi_wait_obj w, fi_cq_format f = FI_CQ_FORMAT_CONTEXT, fid_wait* set = nullptr) {
    fi_cq_attr a{};
    a.format = f;
    a.wait_obj = w;
    a.wait_set = set;
    fid_cq* c = nullptr;
    EXPECT_EQ(open(a, &c), 0) << "wait_obj " << w << " format " << f;
    return c;
  }
  fid_wait* waitset(fi_wait_obj w) {
    fi_wait_attr a{};
    a.wait_obj = w;
    fid_wait* ws = nullptr;
    EXPECT_EQ(fi_wait_open(d_.fabric, &a, &ws), 0) << w;
    return ws;
  }
};

constexpr fi_cq_format kFormats[] = {FI_CQ_FORMAT_UNSPEC, FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_MSG,
                                     FI_CQ_FORMAT_DATA, FI_CQ_FORMAT_TAGGED};
constexpr fi_wait_obj kOwnWaitObjs[] = {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_POLLFD,
                                        FI_WAIT_MUTEX_COND, FI_WAIT_YIELD};

}  // namespace

// "fi_cq_open allocates a new completion queue" in each of the documented formats.
TEST_F(Cq, OpensAndClosesInEveryFormat) {
  for (auto f : kFormats) {
    fid_cq* c = cq(FI_WAIT_NONE, f);
    ASSERT_NE(c, nullptr);
    fi_cq_tagged_entry out[2];
    EXPECT_EQ(fi_cq_read(c, out, 2), -FI_EAGAIN) << f;
    EXPECT_EQ(fi_close(&c->fid), 0) << f;
  }
}

// "The following values may be used to specify the type of wait object associated with a CQ:
// FI_WAIT_NONE, FI_WAIT_UNSPEC, FI_WAIT_SET, FI_WAIT_FD, FI_WAIT_MUTEX_COND, and FI_WAIT_YIELD."
TEST_F(Cq, OpensWithEveryWaitObjectAndReportsItWithGetwaitobj) {
  for (auto w : {FI_WAIT_NONE, FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_POLLFD, FI_WAIT_MUTEX_COND,
                 FI_WAIT_YIELD}) {
    fid_cq* c = cq(w);
    ASSERT_NE(c, nullptr);
    fi_wait_obj got = static_cast<fi_wait_obj>(-1);
    EXPECT_EQ(fi_control(&c->fid, FI_GETWAITOBJ, &got), 0) << w;
    // FI_WAIT_UNSPEC: "the underlying provider may select the most appropriate ... wait object".
    EXPECT_EQ(got, w == FI_WAIT_UNSPEC ? FI_WAIT_FD : w);
    EXPECT_EQ(fi_close(&c->fid), 0) << w;
  }
}

// FI_WAIT_SET: "If specified, the wait_set field must reference an existing wait set object."
TEST_F(Cq, OpensIntoAWaitSetAndLeavesItOnClose) {
  for (auto k : {FI_WAIT_FD, FI_WAIT_POLLFD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD}) {
    fid_wait* ws = waitset(k);
    ASSERT_NE(ws, nullptr);
    fid_cq* c = cq(FI_WAIT_SET, FI_CQ_FORMAT_CONTEXT, ws);
    ASSERT_NE(c, nullptr);
    fi_wait_obj got;
    EXPECT_EQ(fi_control(&c->fid, FI_GETWAITOBJ, &got), 0);
    EXPECT_EQ(got, FI_WAIT_SET);
    EXPECT_EQ(fi_close(&ws->fid), -FI_EBUSY) << "the CQ is still a member";
    EXPECT_EQ(fi_wait(ws, 0), -FI_ETIMEDOUT) << "an empty member does not satisfy the set";
    EXPECT_EQ(fi_close(&c->fid), 0);
    EXPECT_EQ(fi_close(&ws->fid), 0) << "closing the CQ left the set";
  }
  fi_cq_attr a{};
  a.wait_obj = FI_WAIT_SET;
  fid_cq* c = nullptr;
  EXPECT_EQ(open(a, &c), -FI_EINVAL) << "FI_WAIT_SET without a wait set";
}

// FI_GETWAIT: "retrieve the low-level wait object associated with the CQ" (fi_eq(3) details).
TEST_F(Cq, GetwaitHandsOutTheWaitObjectOfEachKind) {
  {
    fid_cq* c = cq(FI_WAIT_FD);
    int fd = -1;
    ASSERT_EQ(fi_control(&c->fid, FI_GETWAIT, &fd), 0);
    EXPECT_GE(fd, 0);
    EXPECT_FALSE(fd_readable(fd)) << "nothing to read, nothing signalled";
    EXPECT_EQ(fi_close(&c->fid), 0);
  }
  {
    fid_cq* c = cq(FI_WAIT_POLLFD);
    fi_wait_pollfd pf{};
    pf.nfds = 0;
    ASSERT_EQ(fi_control(&c->fid, FI_GETWAIT, &pf), -FI_ETOOSMALL);
    ASSERT_GE(pf.nfds, 1u);
    std::vector<pollfd> fds(pf.nfds);
    pf.fd = fds.data();
    ASSERT_EQ(fi_control(&c->fid, FI_GETWAIT, &pf), 0);
    ASSERT_EQ(pf.nfds, 1u + same_host_fds());
    EXPECT_GE(fds[0].fd, 0);
    EXPECT_TRUE(fds[0].events & POLLIN);
    EXPECT_EQ(fi_close(&c->fid), 0);
  }
  {
    fid_cq* c = cq(FI_WAIT_MUTEX_COND);
    fi_mutex_cond mc{};
    ASSERT_EQ(fi_control(&c->fid, FI_GETWAIT, &mc), 0);
    EXPECT_NE(mc.mutex, nullptr);
    EXPECT_NE(mc.cond, nullptr);
    EXPECT_EQ(fi_close(&c->fid), 0);
  }
  for (auto w : {FI_WAIT_NONE, FI_WAIT_YIELD}) {
    fid_cq* c = cq(w);
    int fd = -1;
    EXPECT_EQ(fi_control(&c->fid, FI_GETWAIT, &fd), -FI_ENODATA) << "nothing native: " << w;
    EXPECT_EQ(fi_control(&c->fid, FI_GETWAIT, nullptr), -FI_EINVAL);
    EXPECT_EQ(fi_control(&c->fid, FI_ENABLE, nullptr), -FI_ENOSYS) << "not a CQ command";
    EXPECT_EQ(fi_close(&c->fid), 0);
  }
}

// fi_cq_read: "If no completions are available to read from the CQ, returns -FI_EAGAIN."
// fi_cq_readerr: "If no error completions are available to read from the CQ, returns -FI_EAGAIN."
TEST_F(Cq, ReadsOfAnEmptyCqReturnEagain) {
  fid_cq* c = cq(FI_WAIT_NONE, FI_CQ_FORMAT_TAGGED);
  fi_cq_tagged_entry out[4];
  fi_addr_t src[4];
  EXPECT_EQ(fi_cq_read(c, out, 4), -FI_EAGAIN);
  EXPECT_EQ(fi_cq_read(c, nullptr, 0), -FI_EAGAIN) << "count 0 drives progress";
  EXPECT_EQ(fi_cq_readfrom(c, out, 4, src), -FI_EAGAIN);
  fi_cq_err_entry err{};
  EXPECT_EQ(fi_cq_readerr(c, &err, 0), -FI_EAGAIN);
  EXPECT_EQ(fi_close(&c->fid), 0);
}

// "If the timeout expires or the calling thread is signaled and no data is available to be read
// from the completion queue, returns -FI_EAGAIN."
TEST_F(Cq, SreadOnAnEmptyCqTimesOutWithEagainAfterAboutTheTimeout) {
  for (auto w : kOwnWaitObjs) {
    fid_cq* c = cq(w);
    fi_cq_entry out;
    auto t0 = Clock::now();
    EXPECT_EQ(fi_cq_sread(c, &out, 1, nullptr, 200), -FI_EAGAIN) << w;
    int64_t ms = ms_since(t0);
    EXPECT_GE(ms, 200) << w;
    EXPECT_LT(ms, 1200) << w;
    fi_addr_t src;
    EXPECT_EQ(fi_cq_sreadfrom(c, &out, 1, &src, nullptr, 0), -FI_EAGAIN) << w;
    EXPECT_EQ(fi_close(&c->fid), 0);
  }
}

// FI_CQ_COND_THRESHOLD: "the cond field is interpreted as a size_t threshold value".
TEST_F(Cq, SreadWithAThresholdConditionTimesOutOnAnEmptyCq) {
  fi_cq_attr a{};
  a.wait_obj = FI_WAIT_FD;
  a.wait_cond = FI_CQ_COND_THRESHOLD;
  fid_cq* c = nullptr;
  ASSERT_EQ(open(a, &c), 0);
  size_t threshold = 4;
  fi_cq_entry out[4];
  auto t0 = Clock::now();
  EXPECT_EQ(fi_cq_sread(c, out, 4, &threshold, 100), -FI_EAGAIN);
  EXPECT_GE(ms_since(t0), 100);
  EXPECT_EQ(fi_close(&c->fid), 0);
}

// "It is invalid for applications to call these functions if the CQ has been configured with a
// wait object of FI_WAIT_NONE or FI_WAIT_SET."
TEST_F(Cq, SreadIsInvalidWithWaitNoneOrWaitSet) {
  fid_cq* none = cq(FI_WAIT_NONE);
  fi_cq_entry out;
  EXPECT_EQ(fi_cq_sread(none, &out, 1, nullptr, 10), -FI_EINVAL);
  EXPECT_EQ(fi_cq_sreadfrom(none, &out, 1, nullptr, nullptr, 10), -FI_EINVAL);
  // "The fi_cq_signal operation is only available if the CQ was configured with a wait object."
  EXPECT_EQ(fi_cq_signal(none), -FI_EINVAL);
  EXPECT_EQ(fi_close(&none->fid), 0);
  for (auto k : {FI_WAIT_FD, FI_WAIT_POLLFD}) {
    fid_wait* ws = waitset(k);
    fid_cq* member = cq(FI_WAIT_SET, FI_CQ_FORMAT_CONTEXT, ws);
    EXPECT_EQ(fi_cq_sread(member, &out, 1, nullptr, 10), -FI_EINVAL) << k;
    EXPECT_EQ(fi_close(&member->fid), 0);
    EXPECT_EQ(fi_close(&ws->fid), 0);
  }
}

// fi_cq_signal: "will unblock any thread waiting in fi_cq_sread or fi_cq_sreadfrom."
TEST_F(Cq, SignalWakesASreadBlockedInAnotherThread) {
  for (auto w : kOwnWaitObjs) {
    fid_cq* c = cq(w);
    std::atomic<bool> entered{false};
    ssize_t ret = 0;
    int64_t ms = 0;
    std::thread reader([&] {
      fi_cq_entry out;
      entered = true;
      auto t0 = Clock::now();
      ret = fi_cq_sread(c, &out, 1, nullptr, 5000);  // bounded: never hangs the test
      ms = ms_since(t0);
    });
    while (!entered) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(fi_cq_signal(c), 0);
    reader.join();
    EXPECT_EQ(ret, -FI_EAGAIN) << w;
    EXPECT_LT(ms, 2500) << "the signal was ignored: " << w;
    EXPECT_EQ(fi_close(&c->fid), 0);
  }
}

// fabtests cq_signal: fi_cq_signal with nobody blocked makes the next fi_cq_sread return at once.
TEST_F(Cq, SignalBeforeSreadMakesTheNextSreadReturn) {
  fid_cq* c = cq(FI_WAIT_UNSPEC);
  ASSERT_EQ(fi_cq_signal(c), 0);
  fi_cq_entry out;
  auto t0 = Clock::now();
  EXPECT_EQ(fi_cq_sread(c, &out, 1, nullptr, 2000), -FI_EAGAIN);
  EXPECT_LT(ms_since(t0), 1000);
  EXPECT_EQ(fi_close(&c->fid), 0);
}

// fi_trywait(3): "FI_SUCCESS ... the application may block on the wait object"; afterwards the fd
// stays quiet while nothing arrives.
TEST_F(Cq, TrywaitOnAnEmptyFdCqSucceeds) {
  fid_cq* c = cq(FI_WAIT_FD);
  int fd = -1;
  ASSERT_EQ(fi_control(&c->fid, FI_GETWAIT, &fd), 0);
  fid* f = &c->fid;
  EXPECT_EQ(fi_trywait(d_.fabric, &f, 1), FI_SUCCESS);
  EXPECT_FALSE(fd_readable(fd));
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 50), 0) << "nothing arrives, nothing wakes";
  fid_cq* none = cq(FI_WAIT_NONE);
  f = &none->fid;
  EXPECT_EQ(fi_trywait(d_.fabric, &f, 1), -FI_EINVAL) << "nothing to block on";
  EXPECT_EQ(fi_close(&none->fid), 0);
  EXPECT_EQ(fi_close(&c->fid), 0);
}

// fi_poll(3): members are removed with fi_poll_del; a CQ closed while still in a poll set leaves
// it, so that neither the set nor its fi_poll touch the closed CQ.
TEST_F(Cq, ClosingACqInAPollSetLeavesTheSet) {
  fi_poll_attr pa{};
  fid_poll* ps = nullptr;
  ASSERT_EQ(fi_poll_open(d_.domain, &pa, &ps), 0);
  int ctx_a = 0, ctx_b = 0;
  fi_cq_attr a{};
  a.wait_obj = FI_WAIT_NONE;
  fid_cq* ca = nullptr;
  fid_cq* cb = nullptr;
  ASSERT_EQ(open(a, &ca, &ctx_a), 0);
  ASSERT_EQ(open(a, &cb, &ctx_b), 0);
  ASSERT_EQ(fi_poll_add(ps, &ca->fid, 0), 0);
  ASSERT_EQ(fi_poll_add(ps, &cb->fid, 0), 0);
  void* got[4];
  EXPECT_EQ(fi_poll(ps, got, 4), 0) << "empty CQs have no events";
  EXPECT_EQ(fi_close(&ca->fid), 0);
  EXPECT_EQ(fi_poll(ps, got, 4), 0);
  EXPECT_EQ(fi_poll_del(ps, &cb->fid, 0), 0);
  EXPECT_EQ(fi_close(&cb->fid), 0);
  EXPECT_EQ(fi_close(&ps->fid), 0) << "no members left";
}

// Attribute rules of fi_cq_open.
TEST_F(Cq, RejectsInvalidAttributes) {
  fid_cq* c = nullptr;
  fi_cq_attr a{};
  a.format = static_cast<fi_cq_format>(77);
  EXPECT_EQ(open(a, &c), -FI_EINVAL) << "unknown format";
  a = {};
  a.wait_obj = static_cast<fi_wait_obj>(77);
  EXPECT_EQ(open(a, &c), -FI_EINVAL) << "unknown wait_obj";
  a = {};
  a.wait_obj = FI_WAIT_FD;
  a.wait_cond = static_cast<fi_cq_wait_cond>(77);
  EXPECT_EQ(open(a, &c), -FI_EINVAL) << "unknown wait_cond";
  a = {};
  a.flags = FI_SEND;
  EXPECT_EQ(open(a, &c), -FI_EINVAL) << "not a CQ flag";
  a = {};
  a.flags = FI_PEER;
  EXPECT_EQ(open(a, &c), -FI_ENOSYS) << "peer CQs are not supported";
  a = {};
  a.size = size_t{1} << 40;
  EXPECT_EQ(open(a, &c), -FI_EINVAL) << "size beyond what the provider can hold";
  EXPECT_EQ(fi_cq_open(d_.domain, nullptr, &c, nullptr), -FI_EINVAL);
  EXPECT_EQ(c, nullptr);
}

TEST_F(Cq, AcceptsTheAffinityHintAndIgnoresWaitCondWithWaitNone) {
  fid_cq* c = nullptr;
  fi_cq_attr a{};
  a.flags = FI_AFFINITY;
  a.signaling_vector = 0;
  a.wait_obj = FI_WAIT_FD;
  ASSERT_EQ(open(a, &c), 0) << "FI_AFFINITY: a hint that may be ignored";
  EXPECT_EQ(fi_close(&c->fid), 0);
  a = {};
  a.wait_obj = FI_WAIT_NONE;
  a.wait_cond = static_cast<fi_cq_wait_cond>(77);
  ASSERT_EQ(open(a, &c), 0) << "wait_cond: this field is ignored if wait_obj is FI_WAIT_NONE";
  EXPECT_EQ(fi_close(&c->fid), 0);
}

// "size: Specifies the minimum size of a completion queue. A value of 0 indicates that the
// provider may choose a default value."
TEST_F(Cq, OpensOverARangeOfSizes) {
  for (size_t size : {size_t{0}, size_t{1}, size_t{3}, size_t{1024}, size_t{65536}}) {
    fi_cq_attr a{};
    a.size = size;
    a.wait_obj = FI_WAIT_UNSPEC;
    fid_cq* c = nullptr;
    ASSERT_EQ(open(a, &c), 0) << size;
    EXPECT_EQ(fi_close(&c->fid), 0);
  }
}

// domain_attr->cq_cnt: that many CQs can be open at once.
TEST_F(Cq, OpensCqCntCqsAtOnce) {
  std::vector<fid_cq*> cqs;
  for (size_t i = 0; i < d_.info->domain_attr->cq_cnt; ++i) {
    fid_cq* c = cq(FI_WAIT_UNSPEC);
    if (!c) break;
    cqs.push_back(c);
  }
  EXPECT_EQ(cqs.size(), d_.info->domain_attr->cq_cnt);
  for (auto* c : cqs) EXPECT_EQ(fi_close(&c->fid), 0);
}

// fi_domain(3): "When closing the domain, there must be no opened endpoints, CQs, ... associated
// with it. If resources are still associated with the domain when attempting to close, the call
// will return -FI_EBUSY."
TEST_F(Cq, DomainCloseIsBusyWhileACqIsOpen) {
  fid_cq* c = cq(FI_WAIT_FD);
  EXPECT_EQ(fi_close(&d_.domain->fid), -FI_EBUSY);
  EXPECT_EQ(fi_close(&c->fid), 0);
  // TearDown closes the domain: now it succeeds.
}

// fi_cq_strerror: "Returns a character string interpretation of the provider specific error".
TEST_F(Cq, StrerrorReturnsAReadableString) {
  fid_cq* c = cq(FI_WAIT_NONE);
  char buf[128];
  const char* s = fi_cq_strerror(c, FI_ETIMEDOUT, nullptr, buf, sizeof(buf));
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s, buf);
  EXPECT_NE(std::string(s).find("prov_errno"), std::string::npos) << s;
  EXPECT_NE(fi_cq_strerror(c, FI_EIO, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(fi_close(&c->fid), 0);
}

// Unsupported fid operations answer -FI_ENOSYS rather than crash.
TEST_F(Cq, UnsupportedOperationsReturnEnosys) {
  fid_cq* c = cq(FI_WAIT_NONE);
  void* ops = nullptr;
  EXPECT_EQ(fi_open_ops(&c->fid, "no_such_ops", 0, &ops, nullptr), -FI_ENOSYS);
  EXPECT_EQ(fi_close(&c->fid), 0);
}
