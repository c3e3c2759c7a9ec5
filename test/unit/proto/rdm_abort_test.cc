// SPDX-License-Identifier: BSD-3-Clause
//
// RdmCore::abort (the FI_EP_MSG hook, rdm_core.h): when a connection ends, every operation in
// progress completes with the given error (sends queued, in flight or waiting for a grant;
// receives posted, bound to a message, multi-receive buffers), unexpected messages go, and nothing
// is resent afterwards. Over the simulated network of rdm_sim.h.
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "rdm_sim.h"

using namespace rdm_sim;

namespace {

size_t errors(const Node& n, int err) {
  return std::count_if(n.done.begin(), n.done.end(),
                       [err](const Completion& c) { return c.err == err; });
}

}  // namespace

TEST(RdmAbort, EveryOperationInProgressCompletesWithTheError) {
  Net net(2, test_config(), 7);
  net.cut(0, 1, true);  // nothing of node 0 arrives: sends stay in flight
  std::vector<uint8_t> small = pattern(1, 100), big = pattern(2, 100'000);
  SendOp s;
  s.dest = 1;
  s.buf = small.data();
  s.len = small.size();
  s.context = &small;
  ASSERT_EQ(net.core(0).send(s, net.now()), 0);
  s.buf = big.data();
  s.len = big.size();  // rendezvous: waits for a grant that never comes
  s.context = &big;
  ASSERT_EQ(net.core(0).send(s, net.now()), 0);
  std::vector<uint8_t> rx(64), trx(64), multi(4096);
  RecvOp r;
  r.buf = rx.data();
  r.len = rx.size();
  r.context = &rx;
  ASSERT_EQ(net.core(0).recv(r, net.now()), 0);
  r.buf = trx.data();
  r.context = &trx;
  r.match.tagged = true;
  ASSERT_EQ(net.core(0).recv(r, net.now()), 0);
  RecvOp m;
  m.buf = multi.data();
  m.len = multi.size();
  m.context = &multi;
  m.flags = FI_MULTI_RECV;
  ASSERT_EQ(net.core(0).recv(m, net.now()), 0);
  net.run([] { return false; }, 2'000'000);  // some retransmissions go (and vanish)
  ASSERT_EQ(net.core(0).tx_in_use(), 2u);

  net.core(0).abort(FI_ECANCELED);
  EXPECT_EQ(net.core(0).tx_in_use(), 0u);
  EXPECT_EQ(net.core(0).rx_in_use(), 0u);
  EXPECT_EQ(errors(net.node(0), FI_ECANCELED), 5u);  // two sends, three receives
  const auto multi_done = std::find_if(net.node(0).done.begin(), net.node(0).done.end(),
                                       [&](const Completion& c) { return c.context == &multi; });
  ASSERT_NE(multi_done, net.node(0).done.end());
  EXPECT_TRUE(multi_done->flags & FI_MULTI_RECV);  // the buffer is released
  // Nothing is resent afterwards, and nothing is left to time.
  const uint64_t sent = net.frames_sent;
  net.cut(0, 1, false);
  net.run([] { return false; }, 100'000'000);
  EXPECT_EQ(net.frames_sent, sent);
  EXPECT_EQ(net.core(0).next_deadline(), UINT64_MAX);
}

TEST(RdmAbort, MessagesArrivingAndUnexpectedOnesGo) {
  Net net(2, test_config(), 9);
  // Node 1 gets an unexpected eager message and the start of a rendezvous one it has a receive
  // for; then its connection ends.
  std::vector<uint8_t> a = pattern(1, 300), b = pattern(2, 50'000);
  SendOp s;
  s.dest = 1;
  s.buf = a.data();
  s.len = a.size();
  s.context = &a;
  ASSERT_EQ(net.core(0).send(s, net.now()), 0);
  ASSERT_TRUE(net.run([&] { return net.core(1).unexpected_in_use() == 1; }));
  std::vector<uint8_t> rx(60'000);
  RecvOp r;
  r.buf = rx.data();
  r.len = rx.size();
  r.context = &rx;
  r.match.tagged = true;  // not for the eager message: it stays unexpected
  ASSERT_EQ(net.core(1).recv(r, net.now()), 0);
  s.buf = b.data();
  s.len = b.size();
  s.context = &b;
  s.tagged = true;
  ASSERT_EQ(net.core(0).send(s, net.now()), 0);
  net.cut(1, 0, true);                     // node 1's grant (CTS) never reaches the sender
  net.run([] { return false; }, 100'000);  // the RTS arrives, the receive is bound to it
  net.core(1).abort(FI_EHOSTUNREACH);
  EXPECT_EQ(net.core(1).unexpected_in_use(), 0u);
  EXPECT_EQ(net.core(1).rx_in_use(), 0u);
  ASSERT_EQ(errors(net.node(1), FI_EHOSTUNREACH), 1u);
  EXPECT_EQ(net.node(1).done.back().context, &rx);
}
