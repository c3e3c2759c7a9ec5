// SPDX-License-Identifier: BSD-3-Clause
//
// Bad input through the real libfabric core, on one net_ring port (a loopback), single process:
// NULL and out-of-range arguments on every data entry point (fi_msg(3)) and on the CQ, counter,
// AV, EQ, poll set and endpoint calls; objects used before fi_enable or without bindings;
// addresses removed or never inserted. Each must give a clear -FI_E* (or the documented neutral
// answer) and never crash the process: the provider lives in someone else's process.
// The FI_EP_MSG cases are in bad_input_msg_test.cc.
#include <gtest/gtest.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <vector>

#include "bad_input.h"
#include "fixture.h"

using namespace dpfab::test;

namespace {

// ---- NULL buffers with a length ------------------------------------------------------------

TEST_F(BadInput, SendCallsRefuseANullBufferWithALength) {
  int ctx;
  EXPECT_EQ(fi_send(e_.ep, nullptr, 8, nullptr, self_, &ctx), -FI_EINVAL);
  EXPECT_EQ(fi_inject(e_.ep, nullptr, 8, self_), -FI_EINVAL);
  EXPECT_EQ(fi_senddata(e_.ep, nullptr, 8, nullptr, 1, self_, &ctx), -FI_EINVAL);
  EXPECT_EQ(fi_injectdata(e_.ep, nullptr, 8, 1, self_), -FI_EINVAL);
  iovec iov[2] = {{nullptr, 8}, {nullptr, 0}};
  EXPECT_EQ(fi_sendv(e_.ep, iov, nullptr, 1, self_, &ctx), -FI_EINVAL);
  char ok[4] = {};
  iovec mixed[2] = {{ok, sizeof(ok)}, {nullptr, 8}};
  EXPECT_EQ(fi_sendv(e_.ep, mixed, nullptr, 2, self_, &ctx), -FI_EINVAL) << "the second entry";
  fi_msg msg{};
  msg.msg_iov = iov;
  msg.iov_count = 1;
  msg.addr = self_;
  msg.context = &ctx;
  EXPECT_EQ(fi_sendmsg(e_.ep, &msg, 0), -FI_EINVAL);
  EXPECT_EQ(fi_sendmsg(e_.ep, &msg, FI_INJECT | FI_COMPLETION), -FI_EINVAL);
  EXPECT_EQ(drain(), 0) << "nothing was sent, nothing completes";
  EXPECT_EQ(fi_cntr_read(e_.cntr), 0u);
  expect_still_works();
}

TEST_F(BadInput, ReceiveCallsRefuseANullBufferWithALength) {
  int ctx;
  EXPECT_EQ(fi_recv(e_.ep, nullptr, 64, nullptr, FI_ADDR_UNSPEC, &ctx), -FI_EINVAL);
  iovec iov[2] = {{nullptr, 64}, {nullptr, 0}};
  EXPECT_EQ(fi_recvv(e_.ep, iov, nullptr, 1, FI_ADDR_UNSPEC, &ctx), -FI_EINVAL);
  char ok[4];
  iovec mixed[2] = {{ok, sizeof(ok)}, {nullptr, 64}};
  EXPECT_EQ(fi_recvv(e_.ep, mixed, nullptr, 2, FI_ADDR_UNSPEC, &ctx), -FI_EINVAL);
  fi_msg msg{};
  msg.msg_iov = iov;
  msg.iov_count = 1;
  msg.addr = FI_ADDR_UNSPEC;
  msg.context = &ctx;
  EXPECT_EQ(fi_recvmsg(e_.ep, &msg, 0), -FI_EINVAL);
  EXPECT_EQ(fi_cancel(&e_.ep->fid, &ctx), -FI_ENOENT) << "none of them was posted";
  // A datagram now would have crashed a receive posted with a NULL buffer.
  char out[8] = "x";
  ASSERT_EQ(fi_inject(e_.ep, out, sizeof(out), self_), 0);
  EXPECT_EQ(drain(), 0) << "no receive posted: the datagram waits";
  char in[8] = {};
  ASSERT_EQ(fi_recv(e_.ep, in, sizeof(in), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  EXPECT_EQ(reap(1), 1);
  EXPECT_STREQ(in, "x") << "it went to the first valid receive";
  expect_still_works();
}

TEST_F(BadInput, ANullIovArrayWithACountIsRefused) {
  int ctx;
  EXPECT_EQ(fi_sendv(e_.ep, nullptr, nullptr, 1, self_, &ctx), -FI_EINVAL);
  EXPECT_EQ(fi_recvv(e_.ep, nullptr, nullptr, 1, FI_ADDR_UNSPEC, &ctx), -FI_EINVAL);
  fi_msg msg{};
  msg.iov_count = 2;
  msg.addr = self_;
  EXPECT_EQ(fi_sendmsg(e_.ep, &msg, 0), -FI_EINVAL);
  EXPECT_EQ(fi_recvmsg(e_.ep, &msg, 0), -FI_EINVAL);
  EXPECT_EQ(fi_sendmsg(e_.ep, nullptr, 0), -FI_EINVAL);
  EXPECT_EQ(fi_recvmsg(e_.ep, nullptr, 0), -FI_EINVAL);
  expect_still_works();
}

TEST_F(BadInput, TooManyIovEntriesAreRefused) {
  char b[8][4];
  iovec iov[8];
  for (int i = 0; i < 8; ++i) iov[i] = {b[i], sizeof(b[i])};
  EXPECT_EQ(fi_sendv(e_.ep, iov, nullptr, 8, self_, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_recvv(e_.ep, iov, nullptr, 8, FI_ADDR_UNSPEC, nullptr), -FI_EINVAL);
  expect_still_works();
}

TEST_F(BadInput, ZeroLengthTransfersWithANullBufferAreValid) {
  // fi_msg(3): "Valid transfers are from 0 bytes up to the endpoint's max_msg_size".
  int rctx, sctx;
  ASSERT_EQ(fi_recv(e_.ep, nullptr, 0, nullptr, FI_ADDR_UNSPEC, &rctx), 0);
  ASSERT_EQ(fi_send(e_.ep, nullptr, 0, nullptr, self_, &sctx), 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int got = 0;
  fi_cq_data_entry e{};
  while (got < 2 && std::chrono::steady_clock::now() < deadline)
    if (fi_cq_read(e_.cq, &e, 1) == 1) {
      ++got;
      if (e.op_context == &rctx) {
        EXPECT_EQ(e.len, 0u);
      }
    }
  EXPECT_EQ(got, 2);
  expect_still_works();
}

// ---- flags ---------------------------------------------------------------------------------

TEST_F(BadInput, SendmsgRefusesUndefinedAndInapplicableFlags) {
  char buf[8] = {};
  iovec iov{buf, sizeof(buf)};
  fi_msg msg{};
  msg.msg_iov = &iov;
  msg.iov_count = 1;
  msg.addr = self_;
  EXPECT_EQ(fi_sendmsg(e_.ep, &msg, uint64_t{1} << 63), -FI_EINVAL) << "an undefined bit";
  EXPECT_EQ(fi_sendmsg(e_.ep, &msg, FI_MULTI_RECV), -FI_EINVAL) << "a receive flag";
  EXPECT_EQ(fi_sendmsg(e_.ep, &msg, FI_CLAIM), -FI_EINVAL) << "a receive flag";
  EXPECT_EQ(fi_sendmsg(e_.ep, &msg, FI_FENCE), -FI_EINVAL) << "FI_FENCE is not offered";
  EXPECT_EQ(fi_sendmsg(e_.ep, &msg, FI_DELIVERY_COMPLETE), -FI_EINVAL)
      << "fi_cq(3): delivery complete applies only to reliable endpoints";
  EXPECT_EQ(fi_sendmsg(e_.ep, &msg, FI_READ), -FI_EINVAL) << "a capability, not an op flag";
  EXPECT_EQ(drain(), 0);
  // What the provider supports is accepted.
  int sent = 0;
  for (uint64_t f :
       {uint64_t{0}, uint64_t{FI_COMPLETION}, uint64_t{FI_MORE}, uint64_t{FI_INJECT},
        uint64_t{FI_INJECT_COMPLETE}, uint64_t{FI_TRANSMIT_COMPLETE}, uint64_t{FI_REMOTE_CQ_DATA},
        uint64_t{FI_COMPLETION | FI_MORE | FI_TRANSMIT_COMPLETE}}) {
    EXPECT_EQ(fi_sendmsg(e_.ep, &msg, f), 0) << std::hex << f;
    ++sent;
  }
  EXPECT_EQ(fi_cntr_read(e_.cntr), static_cast<uint64_t>(sent));
}

TEST_F(BadInput, RecvmsgRefusesUndefinedAndInapplicableFlags) {
  char buf[8] = {};
  iovec iov{buf, sizeof(buf)};
  fi_msg msg{};
  msg.msg_iov = &iov;
  msg.iov_count = 1;
  msg.addr = FI_ADDR_UNSPEC;
  int ctx;
  msg.context = &ctx;
  EXPECT_EQ(fi_recvmsg(e_.ep, &msg, uint64_t{1} << 63), -FI_EINVAL) << "an undefined bit";
  EXPECT_EQ(fi_recvmsg(e_.ep, &msg, FI_MULTI_RECV), -FI_EINVAL) << "not offered";
  EXPECT_EQ(fi_recvmsg(e_.ep, &msg, FI_CLAIM), -FI_EINVAL) << "no FI_BUFFERED_RECV";
  EXPECT_EQ(fi_recvmsg(e_.ep, &msg, FI_DISCARD), -FI_EINVAL) << "no FI_BUFFERED_RECV";
  EXPECT_EQ(fi_recvmsg(e_.ep, &msg, FI_INJECT), -FI_EINVAL) << "a send flag";
  EXPECT_EQ(fi_recvmsg(e_.ep, &msg, FI_REMOTE_CQ_DATA), -FI_EINVAL) << "a send flag";
  EXPECT_EQ(fi_cancel(&e_.ep->fid, &ctx), -FI_ENOENT) << "none of them was posted";
  for (uint64_t f :
       {uint64_t{0}, uint64_t{FI_COMPLETION}, uint64_t{FI_MORE}, uint64_t{FI_TRANSMIT_COMPLETE}}) {
    EXPECT_EQ(fi_recvmsg(e_.ep, &msg, f), 0) << std::hex << f;
    EXPECT_EQ(fi_cancel(&e_.ep->fid, &ctx), 0);
  }
  drain();
}

// ---- sizes and addresses -------------------------------------------------------------------

TEST_F(BadInput, OversizedTransfersAreRefused) {
  std::vector<char> huge(d_.info->ep_attr->max_msg_size + 1);
  EXPECT_EQ(fi_send(e_.ep, huge.data(), huge.size(), nullptr, self_, nullptr), -FI_EMSGSIZE);
  std::vector<char> big_inject(d_.info->tx_attr->inject_size + 1);
  EXPECT_EQ(fi_inject(e_.ep, big_inject.data(), big_inject.size(), self_), -FI_EMSGSIZE);
  EXPECT_EQ(fi_injectdata(e_.ep, big_inject.data(), big_inject.size(), 1, self_), -FI_EMSGSIZE);
  EXPECT_EQ(drain(), 0);
  expect_still_works();
}

TEST_F(BadInput, AddressesNeverInsertedOrRemovedAreRefused) {
  char buf[8] = {};
  for (fi_addr_t bad : {fi_addr_t{12345}, fi_addr_t{FI_ADDR_NOTAVAIL}, fi_addr_t{1} << 62,
                        (fi_addr_t{1} << 62) | 63, fi_addr_t{1} << 40}) {
    EXPECT_EQ(fi_send(e_.ep, buf, sizeof(buf), nullptr, bad, nullptr), -FI_EINVAL) << bad;
    EXPECT_EQ(fi_inject(e_.ep, buf, sizeof(buf), bad), -FI_EINVAL) << bad;
  }
  // Inserted, then removed.
  char name[64];
  size_t len = sizeof(name);
  ASSERT_EQ(fi_getname(&e_.ep->fid, name, &len), 0);
  fi_addr_t second = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(fi_av_insert(av_, name, 1, &second, 0, nullptr), 1);
  char in[8];
  ASSERT_EQ(fi_recv(e_.ep, in, sizeof(in), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  EXPECT_EQ(fi_send(e_.ep, buf, sizeof(buf), nullptr, second, nullptr), 0);
  EXPECT_EQ(reap(2), 2) << "the send and its receive";
  ASSERT_EQ(fi_av_remove(av_, &second, 1, 0), 0);
  EXPECT_EQ(fi_send(e_.ep, buf, sizeof(buf), nullptr, second, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_senddata(e_.ep, buf, sizeof(buf), nullptr, 1, second, nullptr), -FI_EINVAL);
  iovec iov{buf, sizeof(buf)};
  fi_msg msg{};
  msg.msg_iov = &iov;
  msg.iov_count = 1;
  msg.addr = second;
  EXPECT_EQ(fi_sendmsg(e_.ep, &msg, 0), -FI_EINVAL);
  EXPECT_EQ(fi_av_remove(av_, &second, 1, 0), -FI_EINVAL) << "removed twice";
  fi_addr_t never = 777;
  EXPECT_EQ(fi_av_remove(av_, &never, 1, 0), -FI_EINVAL);
  size_t alen = sizeof(name);
  EXPECT_EQ(fi_av_lookup(av_, second, name, &alen), -FI_EINVAL);
  EXPECT_EQ(fi_av_lookup(av_, never, name, &alen), -FI_EINVAL);
  drain();
  expect_still_works();
}

// ---- state: before fi_enable, without bindings ---------------------------------------------

TEST_F(BadInput, DataCallsBeforeEnableAreRefused) {
  fid_ep* ep = nullptr;
  ASSERT_EQ(fi_endpoint(d_.domain, d_.info, &ep, nullptr), 0);
  char buf[8] = {};
  iovec iov{buf, sizeof(buf)};
  fi_msg msg{};
  msg.msg_iov = &iov;
  msg.iov_count = 1;
  msg.addr = 0;
  // Unbound: no CQ, no counter, no AV.
  EXPECT_EQ(fi_send(ep, buf, sizeof(buf), nullptr, 0, nullptr), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_sendv(ep, &iov, nullptr, 1, 0, nullptr), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_sendmsg(ep, &msg, 0), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_senddata(ep, buf, sizeof(buf), nullptr, 1, 0, nullptr), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_inject(ep, buf, sizeof(buf), 0), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_injectdata(ep, buf, sizeof(buf), 1, 0), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_recv(ep, buf, sizeof(buf), nullptr, 0, nullptr), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_recvv(ep, &iov, nullptr, 1, 0, nullptr), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_recvmsg(ep, &msg, 0), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_cancel(&ep->fid, buf), -FI_ENOENT);
  EXPECT_EQ(fi_enable(ep), -FI_ENOCQ);
  // NULL and wrong objects to bind.
  EXPECT_EQ(fi_ep_bind(ep, nullptr, 0), -FI_EINVAL);
  EXPECT_EQ(fi_ep_bind(ep, &d_.domain->fid, 0), -FI_EINVAL);
  EXPECT_EQ(fi_ep_bind(ep, &e_.cq->fid, 0), -FI_EBADFLAGS) << "neither direction";
  EXPECT_EQ(fi_ep_bind(ep, &e_.cq->fid, FI_TRANSMIT | (uint64_t{1} << 63)), -FI_EBADFLAGS);
  EXPECT_EQ(fi_ep_bind(ep, &e_.cntr->fid, FI_WRITE), -FI_EBADFLAGS);
  // Bound to a CQ but not to an AV.
  ASSERT_EQ(fi_ep_bind(ep, &e_.cq->fid, FI_TRANSMIT | FI_RECV), 0);
  EXPECT_EQ(fi_ep_bind(ep, &e_.cq->fid, FI_TRANSMIT), -FI_EINVAL) << "one CQ per direction";
  EXPECT_EQ(fi_enable(ep), -FI_ENOAV);
  EXPECT_EQ(fi_send(ep, buf, sizeof(buf), nullptr, self_, nullptr), -FI_EOPBADSTATE);
  // Enabled, then no more binds.
  ASSERT_EQ(fi_ep_bind(ep, &av_->fid, 0), 0);
  ASSERT_EQ(fi_enable(ep), 0);
  EXPECT_EQ(fi_enable(ep), 0) << "enabling twice is harmless";
  EXPECT_EQ(fi_ep_bind(ep, &e_.cntr->fid, FI_SEND), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_close(&ep->fid), 0);
  expect_still_works();
}

TEST_F(BadInput, EndpointCmCallsRefuseNullArguments) {
  EXPECT_EQ(fi_getname(&e_.ep->fid, nullptr, nullptr), -FI_EINVAL);
  size_t len = 2;
  char small[2];
  EXPECT_EQ(fi_getname(&e_.ep->fid, small, &len), -FI_ETOOSMALL);
  EXPECT_GT(len, 2u) << "the size needed";
  len = 64;
  EXPECT_EQ(fi_getname(&e_.ep->fid, nullptr, &len), -FI_ETOOSMALL);
  EXPECT_EQ(fi_setname(&e_.ep->fid, nullptr, 0), -FI_EOPBADSTATE) << "enabled already";
  fid_ep* ep = nullptr;
  ASSERT_EQ(fi_endpoint(d_.domain, d_.info, &ep, nullptr), 0);
  EXPECT_EQ(fi_setname(&ep->fid, nullptr, 16), -FI_EINVAL);
  char junk[4] = {};
  EXPECT_EQ(fi_setname(&ep->fid, junk, sizeof(junk)), -FI_EINVAL);
  size_t optlen = 0;
  EXPECT_EQ(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, nullptr, &optlen),
            -FI_ENOPROTOOPT);
  EXPECT_EQ(fi_close(&ep->fid), 0);
  EXPECT_EQ(fi_endpoint(d_.domain, nullptr, &ep, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_endpoint(d_.domain, d_.info, nullptr, nullptr), -FI_EINVAL);
}

// ---- completion queues, counters, EQs, poll sets --------------------------------------------

TEST_F(BadInput, CqCallsRefuseNullAndOutOfRangeArguments) {
  EXPECT_EQ(fi_cq_read(e_.cq, nullptr, 1), -FI_EINVAL);
  EXPECT_EQ(fi_cq_readfrom(e_.cq, nullptr, 4, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_cq_readerr(e_.cq, nullptr, 0), -FI_EINVAL);
  fi_cq_err_entry err{};
  err.err_data_size = 16;  // asks for error data into a NULL buffer
  EXPECT_EQ(fi_cq_readerr(e_.cq, &err, 0), -FI_EINVAL);
  fi_cq_data_entry e;
  EXPECT_EQ(fi_cq_sread(e_.cq, &e, 1, nullptr, 0), -FI_EINVAL) << "FI_WAIT_NONE: no sread";
  EXPECT_EQ(fi_cq_signal(e_.cq), -FI_EINVAL) << "FI_WAIT_NONE: nothing to signal";
  fid_cq* cq = nullptr;
  EXPECT_EQ(fi_cq_open(d_.domain, nullptr, &cq, nullptr), -FI_EINVAL);
  fi_cq_attr ca{};
  ca.format = static_cast<fi_cq_format>(99);
  EXPECT_EQ(fi_cq_open(d_.domain, &ca, &cq, nullptr), -FI_EINVAL);
  ca.format = FI_CQ_FORMAT_DATA;
  ca.size = size_t{1} << 40;
  EXPECT_EQ(fi_cq_open(d_.domain, &ca, &cq, nullptr), -FI_EINVAL);
  ca.size = 0;
  ca.wait_obj = static_cast<fi_wait_obj>(99);
  EXPECT_EQ(fi_cq_open(d_.domain, &ca, &cq, nullptr), -FI_EINVAL);
  ca.wait_obj = FI_WAIT_SET;  // without a wait set
  EXPECT_EQ(fi_cq_open(d_.domain, &ca, &cq, nullptr), -FI_EINVAL);
  ca.wait_obj = FI_WAIT_NONE;
  ca.flags = uint64_t{1} << 62;
  EXPECT_EQ(fi_cq_open(d_.domain, &ca, &cq, nullptr), -FI_EINVAL);
  EXPECT_EQ(cq, nullptr);
  EXPECT_EQ(fi_close(&e_.cq->fid), -FI_EBUSY) << "the endpoint is bound to it";
  expect_still_works();
}

TEST_F(BadInput, CntrCallsRefuseBadArguments) {
  fid_cntr* c = nullptr;
  fi_cntr_attr ca{};
  ca.events = FI_CNTR_EVENTS_COMP;
  ca.flags = 1;
  EXPECT_EQ(fi_cntr_open(d_.domain, &ca, &c, nullptr), -FI_EINVAL);
  ca.flags = 0;
  ca.events = static_cast<fi_cntr_events>(7);
  EXPECT_EQ(fi_cntr_open(d_.domain, &ca, &c, nullptr), -FI_ENOSYS);
  ca.events = FI_CNTR_EVENTS_COMP;
  ca.wait_obj = static_cast<fi_wait_obj>(99);
  EXPECT_EQ(fi_cntr_open(d_.domain, &ca, &c, nullptr), -FI_EINVAL);
  ca.wait_obj = FI_WAIT_SET;
  EXPECT_EQ(fi_cntr_open(d_.domain, &ca, &c, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_cntr_open(d_.domain, nullptr, nullptr, nullptr), -FI_EINVAL);
  EXPECT_EQ(c, nullptr);
  // Reads and waits on a counter nothing happens to.
  EXPECT_EQ(fi_cntr_read(e_.cntr), 0u);
  EXPECT_EQ(fi_cntr_readerr(e_.cntr), 0u);
  EXPECT_EQ(fi_cntr_wait(e_.cntr, 1, 0), -FI_ETIMEDOUT);
  EXPECT_EQ(fi_cntr_wait(e_.cntr, 1, 10), -FI_ETIMEDOUT);
  EXPECT_EQ(fi_cntr_wait(e_.cntr, 0, 0), 0) << "threshold reached already";
  EXPECT_EQ(fi_close(&e_.cntr->fid), -FI_EBUSY) << "the endpoint is bound to it";
  // An endpoint cannot bind the same direction twice.
  EXPECT_EQ(fi_ep_bind(e_.ep, &e_.cntr->fid, FI_SEND), -FI_EOPBADSTATE) << "enabled already";
}

TEST_F(BadInput, AvCallsRefuseNullAndMalformedArguments) {
  fi_addr_t out = 0;
  EXPECT_EQ(fi_av_insert(av_, nullptr, 1, &out, 0, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_av_insert(av_, nullptr, 0, &out, 0, nullptr), 0);
  char bad[64] = {};
  EXPECT_EQ(fi_av_insert(av_, bad, 1, &out, 0, nullptr), 0) << "a malformed address";
  EXPECT_EQ(out, FI_ADDR_NOTAVAIL);
  char name[64];
  size_t len = sizeof(name);
  ASSERT_EQ(fi_getname(&e_.ep->fid, name, &len), 0);
  EXPECT_EQ(fi_av_insert(av_, name, 1, &out, uint64_t{1} << 60, nullptr), -FI_EBADFLAGS);
  EXPECT_EQ(fi_av_remove(av_, nullptr, 1, 0), -FI_EINVAL);
  EXPECT_EQ(fi_av_remove(av_, &self_, 1, 1), -FI_EINVAL) << "flags must be 0";
  EXPECT_EQ(fi_av_lookup(av_, self_, name, nullptr), -FI_EINVAL);
  size_t alen = 16;
  EXPECT_EQ(fi_av_lookup(av_, self_, nullptr, &alen), -FI_EINVAL);
  EXPECT_EQ(fi_av_insertsvc(av_, nullptr, nullptr, &out, 0, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_av_insertsym(av_, nullptr, 1, nullptr, 1, &out, 0, nullptr), -FI_EINVAL);
  char sbuf[8];
  size_t slen = 0;
  (void)fi_av_straddr(av_, nullptr, sbuf, &slen);  // no crash is all that is asked
  EXPECT_EQ(fi_av_straddr(av_, name, sbuf, nullptr), nullptr);
  fid_av* av = nullptr;
  EXPECT_EQ(fi_av_open(d_.domain, nullptr, &av, nullptr), -FI_EINVAL);
  fi_av_attr aa{};
  aa.type = static_cast<fi_av_type>(42);
  EXPECT_EQ(fi_av_open(d_.domain, &aa, &av, nullptr), -FI_EINVAL);
  aa.type = FI_AV_TABLE;
  aa.flags = uint64_t{1} << 61;
  EXPECT_EQ(fi_av_open(d_.domain, &aa, &av, nullptr), -FI_EBADFLAGS);
  aa.flags = 0;
  aa.rx_ctx_bits = 4;
  EXPECT_EQ(fi_av_open(d_.domain, &aa, &av, nullptr), -FI_EINVAL);
  EXPECT_EQ(av, nullptr);
  EXPECT_EQ(fi_av_bind(av_, &e_.cq->fid, 0), -FI_EINVAL) << "not an EQ, and no FI_EVENT";
  EXPECT_EQ(fi_close(&av_->fid), -FI_EBUSY) << "the endpoint is bound to it";
  expect_still_works();
}

TEST_F(BadInput, EqAndPollSetCallsRefuseNullArguments) {
  fid_eq* eq = nullptr;
  fi_eq_attr ea{};
  ea.wait_obj = FI_WAIT_NONE;
  ea.flags = FI_WRITE;
  ASSERT_EQ(fi_eq_open(d_.fabric, &ea, &eq, nullptr), 0);
  uint32_t event;
  EXPECT_EQ(fi_eq_readerr(eq, nullptr, 0), -FI_EINVAL);
  EXPECT_EQ(fi_eq_write(eq, FI_NOTIFY, nullptr, 16, 0), -FI_EINVAL);
  fi_eq_entry entry{};
  ASSERT_EQ(fi_eq_write(eq, FI_NOTIFY, &entry, sizeof(entry), 0),
            static_cast<ssize_t>(sizeof(entry)));
  EXPECT_EQ(fi_eq_read(eq, &event, nullptr, sizeof(entry), 0), -FI_ETOOSMALL);
  EXPECT_EQ(fi_eq_read(eq, &event, &entry, sizeof(entry), uint64_t{1} << 50), -FI_EINVAL);
  EXPECT_EQ(fi_eq_read(eq, &event, &entry, sizeof(entry), 0), static_cast<ssize_t>(sizeof(entry)))
      << "the event stayed queued";
  EXPECT_EQ(fi_close(&eq->fid), 0);

  fid_poll* ps = nullptr;
  fi_poll_attr pa{};
  ASSERT_EQ(fi_poll_open(d_.domain, &pa, &ps), 0);
  EXPECT_EQ(fi_poll_add(ps, nullptr, 0), -FI_EINVAL);
  EXPECT_EQ(fi_poll_add(ps, &av_->fid, 0), -FI_EINVAL) << "not a CQ, EQ or counter";
  EXPECT_EQ(fi_poll_add(ps, &e_.cq->fid, 1), -FI_EINVAL) << "flags";
  EXPECT_EQ(fi_poll_del(ps, &e_.cq->fid, 0), -FI_ENOENT) << "never added";
  void* ctx[2];
  EXPECT_EQ(fi_poll(ps, nullptr, 2), -FI_EINVAL);
  EXPECT_EQ(fi_poll(ps, ctx, -1), -FI_EINVAL);
  EXPECT_EQ(fi_poll(ps, ctx, 2), 0);
  EXPECT_EQ(fi_close(&ps->fid), 0);
  pa.flags = 1;
  EXPECT_EQ(fi_poll_open(d_.domain, &pa, &ps), -FI_EINVAL);
}

}  // namespace
