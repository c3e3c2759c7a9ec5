// SPDX-License-Identifier: BSD-3-Clause
//
// FI_EP_DGRAM endpoints through the real libfabric core, on one net_ring port (a loopback): two
// endpoints learn each other's address with fi_getname, insert it into an AV and exchange
// datagrams. fi_endpoint(3), fi_msg(3), fi_cq(3), fi_cntr(3), fi_eq(3) on overrun.
#include <gtest/gtest.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#include <chrono>
#include <cstring>

#include "fixture.h"

using namespace dpfab::test;

namespace {

class Dgram : public DomainTest {
 protected:
  struct Ep : Endpoint {
    fi_addr_t peer = FI_ADDR_NOTAVAIL;  // the other endpoint
  };

  void SetUp() override {}  // open(): each test its resource management and sizes
  void open(fi_resource_mgmt rm = FI_RM_ENABLED, size_t cq_size = 64, bool source = true) {
    InfoPtr hints = dpdk_hints(FI_EP_DGRAM, FI_MSG | (source ? FI_SOURCE : 0));
    hints->domain_attr->resource_mgmt = rm;
    ASSERT_EQ(d_.open(hints.get()), 0) << d_.failed;
    ASSERT_EQ(d_.open_av(&av_), 0) << d_.failed;
    ASSERT_EQ(d_.open_eq(&eq_), 0) << d_.failed;
    EpOptions o;
    o.cq_size = cq_size;
    o.cntrs = EpOptions::Cntrs::kSplit;  // cntr counts sends, rx_cntr receives
    o.av = av_;
    o.eq = eq_;
    for (Ep* x : {&a_, &b_}) ASSERT_EQ(x->open(d_, o), 0) << x->failed;
    // Each learns the other's address, as fi_pingpong does out of band.
    ASSERT_EQ(fi_av_insert(av_, b_.addr, 1, &a_.peer, 0, nullptr), 1);
    ASSERT_EQ(fi_av_insert(av_, a_.addr, 1, &b_.peer, 0, nullptr), 1);
  }

  void TearDown() override {
    for (Ep* x : {&a_, &b_}) EXPECT_EQ(x->close(), 0) << x->failed;
    EXPECT_EQ(close_fid(&av_), 0);
    EXPECT_EQ(close_fid(&eq_), 0);
    DomainTest::TearDown();
  }

  // fi_cq_readfrom until something other than -FI_EAGAIN, at most 5 s.
  static ssize_t read(fid_cq* cq, fi_cq_data_entry* e, fi_addr_t* src = nullptr) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    ssize_t r;
    while ((r = fi_cq_readfrom(cq, e, 1, src)) == -FI_EAGAIN &&
           std::chrono::steady_clock::now() < deadline) {
    }
    return r;
  }

  fid_av* av_ = nullptr;
  fid_eq* eq_ = nullptr;
  Ep a_, b_;
};

}  // namespace

TEST_F(Dgram, SendAndReceiveWithFiSourceAndCounters) {
  open();
  char out[] = "ping", in[16] = {};
  int sctx, rctx;
  ASSERT_EQ(fi_recv(b_.ep, in, sizeof(in), nullptr, FI_ADDR_UNSPEC, &rctx), 0);
  ASSERT_EQ(fi_send(a_.ep, out, sizeof(out), nullptr, a_.peer, &sctx), 0);
  fi_cq_data_entry e{};
  ASSERT_EQ(read(a_.cq, &e), 1);
  EXPECT_EQ(e.op_context, &sctx);
  EXPECT_EQ(e.flags, FI_SEND | FI_MSG);
  fi_addr_t src = FI_ADDR_UNSPEC;
  ASSERT_EQ(read(b_.cq, &e, &src), 1);
  EXPECT_EQ(e.op_context, &rctx);
  EXPECT_EQ(e.len, sizeof(out));
  EXPECT_STREQ(in, "ping");
  EXPECT_EQ(src, b_.peer) << "fi_cq_readfrom names the sender's fi_addr (FI_SOURCE)";
  EXPECT_EQ(fi_cntr_read(a_.cntr), 1u);
  EXPECT_EQ(fi_cntr_read(b_.rx_cntr), 1u);
}

TEST_F(Dgram, SenddataDeliversRemoteCqData) {
  open();
  char buf[8] = {};
  ASSERT_EQ(fi_recv(b_.ep, buf, sizeof(buf), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  ASSERT_EQ(fi_senddata(a_.ep, buf, 4, nullptr, 0x1234, a_.peer, nullptr), 0);
  fi_cq_data_entry e{};
  ASSERT_EQ(read(b_.cq, &e), 1);
  EXPECT_TRUE(e.flags & FI_REMOTE_CQ_DATA);
  EXPECT_EQ(e.data, 0x1234u);
}

TEST_F(Dgram, InjectHasNoCompletionAndSendvGathers) {
  open();
  char in[32] = {};
  ASSERT_EQ(fi_recv(b_.ep, in, sizeof(in), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  char p1[] = "ab", p2[] = "cd";
  iovec iov[2] = {{p1, 2}, {p2, 3}};
  ASSERT_EQ(fi_sendv(a_.ep, iov, nullptr, 2, a_.peer, nullptr), 0);
  fi_cq_data_entry e{};
  ASSERT_EQ(read(b_.cq, &e), 1);
  EXPECT_STREQ(in, "abcd");
  ASSERT_EQ(read(a_.cq, &e), 1);  // sendv's completion
  ASSERT_EQ(fi_inject(a_.ep, p1, 2, a_.peer), 0);
  EXPECT_EQ(fi_cq_read(a_.cq, &e, 1), -FI_EAGAIN) << "inject generates no completion";
}

TEST_F(Dgram, ATooSmallBufferGivesAnEtruncErrorCompletion) {
  open();
  char big[200], small[10];
  std::memset(big, 'z', sizeof(big));
  int ctx;
  ASSERT_EQ(fi_recv(b_.ep, small, sizeof(small), nullptr, FI_ADDR_UNSPEC, &ctx), 0);
  ASSERT_EQ(fi_send(a_.ep, big, sizeof(big), nullptr, a_.peer, nullptr), 0);
  fi_cq_data_entry e{};
  ASSERT_EQ(read(b_.cq, &e), -FI_EAVAIL);
  fi_cq_err_entry err{};
  ASSERT_EQ(fi_cq_readerr(b_.cq, &err, 0), 1);
  EXPECT_EQ(err.err, FI_ETRUNC);
  EXPECT_EQ(err.op_context, &ctx);
  EXPECT_EQ(err.olen, sizeof(big) - sizeof(small));
}

TEST_F(Dgram, CancelCompletesThePostedReceiveWithEcanceled) {
  open();
  char buf[8];
  int ctx;
  ASSERT_EQ(fi_recv(b_.ep, buf, sizeof(buf), nullptr, FI_ADDR_UNSPEC, &ctx), 0);
  EXPECT_EQ(fi_cancel(&b_.ep->fid, &ctx), 0);
  EXPECT_EQ(fi_cancel(&b_.ep->fid, &ctx), -FI_ENOENT);
  fi_cq_data_entry e{};
  ASSERT_EQ(fi_cq_read(b_.cq, &e, 1), -FI_EAVAIL);
  fi_cq_err_entry err{};
  ASSERT_EQ(fi_cq_readerr(b_.cq, &err, 0), 1);
  EXPECT_EQ(err.err, FI_ECANCELED);
  EXPECT_EQ(err.op_context, &ctx);
}

TEST_F(Dgram, InvalidAddressesAndSizesAreRefused) {
  open();
  char buf[8];
  EXPECT_EQ(fi_send(a_.ep, buf, sizeof(buf), nullptr, 12345, nullptr), -FI_EINVAL);
  std::vector<char> huge(d_.info->ep_attr->max_msg_size + 1);
  EXPECT_EQ(fi_send(a_.ep, huge.data(), huge.size(), nullptr, a_.peer, nullptr), -FI_EMSGSIZE);
  // fi_av_insert reads a whole address (the AV's address length): the buffer must hold one.
  char bad[64] = {};
  fi_addr_t out;
  EXPECT_EQ(fi_av_insert(av_, bad, 1, &out, 0, nullptr), 0) << "a malformed address is refused";
}

TEST_F(Dgram, AFullCqRefusesSendsUnderResourceManagement) {
  open(FI_RM_ENABLED, 4);
  char buf[8] = {};
  ssize_t r = 0;
  int sent = 0;
  for (int i = 0; i < 64 && (r = fi_send(a_.ep, buf, sizeof(buf), nullptr, a_.peer, nullptr)) == 0;
       ++i)
    ++sent;
  EXPECT_EQ(r, -FI_EAGAIN) << "no work started that could not complete";
  fi_cq_data_entry e;
  int completions = 0;
  while (fi_cq_read(a_.cq, &e, 1) == 1) ++completions;
  EXPECT_EQ(completions, sent) << "no completion lost";
}

TEST_F(Dgram, WithResourceManagementDisabledAnOverrunIsAnEqError) {
  open(FI_RM_DISABLED, 4);
  char buf[8] = {};
  for (int i = 0; i < 16; ++i) fi_send(a_.ep, buf, sizeof(buf), nullptr, a_.peer, nullptr);
  fi_eq_entry ev;
  uint32_t event;
  ASSERT_EQ(fi_eq_read(eq_, &event, &ev, sizeof(ev), 0), -FI_EAVAIL);
  fi_eq_err_entry err{};
  ASSERT_GT(fi_eq_readerr(eq_, &err, 0), 0);
  EXPECT_EQ(err.err, FI_EOVERRUN);
  EXPECT_EQ(err.fid, &a_.cq->fid);
}

TEST_F(Dgram, EndpointsNeedACqAndAnAvBeforeEnable) {
  open();
  fid_ep* ep = nullptr;
  ASSERT_EQ(fi_endpoint(d_.domain, d_.info, &ep, nullptr), 0);
  EXPECT_EQ(fi_enable(ep), -FI_ENOCQ);
  char buf[8];
  EXPECT_EQ(fi_send(ep, buf, 1, nullptr, 0, nullptr), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_close(&av_->fid), -FI_EBUSY) << "endpoints are bound to the AV";
  EXPECT_EQ(fi_close(&ep->fid), 0);
}
