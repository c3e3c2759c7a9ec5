// SPDX-License-Identifier: BSD-3-Clause
//
// Tagged matching (lib/proto/rdm_match.h and its use in rdm_core.h): the match rule (ignore bits,
// FI_DIRECTED_RECV, FI_MSG and FI_TAGGED kept apart), the index queues, and through the core over
// the simulated network: posted order and arrival order, unexpected eager and rendezvous messages,
// a receive that takes a message still arriving, FI_PEEK, FI_CLAIM, FI_DISCARD (fi_tagged(3)).
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "rdm_sim.h"

using namespace rdm_sim;

namespace {

struct Elem {
  uint32_t next = kNone;
  int v = 0;
};

RecvOp trecv(std::vector<uint8_t>& b, void* ctx, uint64_t tag, uint64_t ignore = 0,
             fi_addr_t src = FI_ADDR_UNSPEC, uint64_t flags = 0) {
  RecvOp r;
  r.buf = b.data();
  r.len = b.size();
  r.context = ctx;
  r.match = {src, tag, ignore, true};
  r.flags = flags;
  return r;
}

SendOp tsend(int dest, const std::vector<uint8_t>& b, void* ctx, uint64_t tag, bool tagged = true) {
  SendOp s;
  s.dest = dest;
  s.buf = b.data();
  s.len = b.size();
  s.context = ctx;
  s.tag = tag;
  s.tagged = tagged;
  return s;
}

// Runs until node `n` has `k` completions.
void settle(Net& net, int n, size_t k) {
  ASSERT_TRUE(net.run([&] { return net.node(n).done.size() >= k; }))
      << "node " << n << " has " << net.node(n).done.size() << " of " << k;
}

}  // namespace

TEST(RdmMatch, Rule) {
  RecvMatch any{FI_ADDR_UNSPEC, 0x1200, 0xff, true};
  EXPECT_TRUE(matches(any, 3, 0x12ab, true));
  EXPECT_TRUE(matches(any, 4, 0x1200, true));
  EXPECT_FALSE(matches(any, 3, 0x13ab, true));
  EXPECT_FALSE(matches(any, 3, 0x12ab, false));  // fi_send never matches fi_trecv
  RecvMatch directed{7, 5, 0, true};
  EXPECT_TRUE(matches(directed, 7, 5, true));
  EXPECT_FALSE(matches(directed, 8, 5, true));
  RecvMatch msg{FI_ADDR_UNSPEC, 0x99, 0, false};
  EXPECT_TRUE(matches(msg, 1, 0, false));  // FI_MSG: tags play no part
  EXPECT_FALSE(matches(msg, 1, 0x99, true));
  RecvMatch all{FI_ADDR_UNSPEC, 0, ~uint64_t{0}, true};
  EXPECT_TRUE(matches(all, 1, 0xdeadbeef, true));
}

TEST(RdmMatch, IndexFifoAndFreeList) {
  std::vector<Elem> pool(5);
  IndexFifo<std::vector<Elem>> q;
  EXPECT_TRUE(q.empty());
  for (uint32_t i = 0; i < 5; ++i) q.push_back(pool, i);
  auto [i, prev] = q.find(pool, [](uint32_t k) { return k == 2; });
  EXPECT_EQ(i, 2u);
  EXPECT_EQ(prev, 1u);
  q.remove(pool, i, prev);
  auto [t, tp] = q.find(pool, [](uint32_t k) { return k == 4; });
  q.remove(pool, t, tp);  // the tail
  q.push_back(pool, 2);
  std::vector<uint32_t> order;
  q.for_each(pool, [&](uint32_t k) { order.push_back(k); });
  EXPECT_EQ(order, (std::vector<uint32_t>{0, 1, 3, 2}));
  EXPECT_EQ(q.pop_front(pool), 0u);
  auto [h, hp] = q.find(pool, [](uint32_t k) { return k == 1; });
  EXPECT_EQ(hp, kNone);
  q.remove(pool, h, hp);  // the head
  EXPECT_EQ(q.pop_front(pool), 3u);
  EXPECT_EQ(q.pop_front(pool), 2u);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.pop_front(pool), kNone);

  FreeList f(3);
  EXPECT_EQ(f.get(), 0u);
  EXPECT_EQ(f.get(), 1u);
  EXPECT_EQ(f.get(), 2u);
  EXPECT_EQ(f.get(), kNone);
  f.put(1);
  EXPECT_EQ(f.available(), 1u);
  EXPECT_EQ(f.get(), 1u);
}

TEST(RdmMatch, IgnoreBitsAndPostedOrder) {
  Net net(2, test_config(), 21);
  std::vector<uint8_t> r1(16), r2(16), r3(16);
  ASSERT_EQ(net.core(1).recv(trecv(r1, &r1, 0x1200, 0xff), 0), 0);
  ASSERT_EQ(net.core(1).recv(trecv(r2, &r2, 0x12ab), 0), 0);
  ASSERT_EQ(net.core(1).recv(trecv(r3, &r3, 0x1300, 0xff), 0), 0);
  auto a = pattern(1, 16), b = pattern(2, 16), c = pattern(3, 16);
  ASSERT_EQ(net.core(0).send(tsend(1, a, &a, 0x13cd), 0), 0);  // only r3
  ASSERT_EQ(net.core(0).send(tsend(1, b, &b, 0x12ab), 0), 0);  // r1 and r2: r1 posted first
  ASSERT_EQ(net.core(0).send(tsend(1, c, &c, 0x12ab), 0), 0);  // r2
  settle(net, 1, 3);
  EXPECT_EQ(r3, a);
  EXPECT_EQ(r1, b);
  EXPECT_EQ(r2, c);
  auto& d = net.node(1).done;
  EXPECT_EQ(d[0].context, &r3);
  EXPECT_EQ(d[0].tag, 0x13cdu);  // the message's tag, not the receive's
  EXPECT_EQ(d[1].context, &r1);
  EXPECT_EQ(d[2].context, &r2);
}

TEST(RdmMatch, DirectedReceiveTakesOnlyItsSource) {
  Net net(3, test_config(), 22);
  std::vector<uint8_t> from1(8), any(8);
  ASSERT_EQ(net.core(2).recv(trecv(from1, &from1, 5, 0, 1), 0), 0);
  ASSERT_EQ(net.core(2).recv(trecv(any, &any, 5), 0), 0);
  auto a = pattern(1, 8), b = pattern(2, 8);
  ASSERT_EQ(net.core(0).send(tsend(2, a, &a, 5), 0), 0);
  settle(net, 2, 1);
  EXPECT_EQ(net.node(2).done[0].context, &any);  // node 0's message skips the directed receive
  EXPECT_EQ(net.node(2).done[0].src, 0u);
  ASSERT_EQ(net.core(1).send(tsend(2, b, &b, 5), net.now()), 0);
  settle(net, 2, 2);
  EXPECT_EQ(net.node(2).done[1].context, &from1);
  EXPECT_EQ(net.node(2).done[1].src, 1u);
  EXPECT_EQ(any, a);
  EXPECT_EQ(from1, b);
}

TEST(RdmMatch, MessagesAndTaggedMessagesNeverMix) {
  Net net(2, test_config(), 23);
  std::vector<uint8_t> plain(8), tagged(8);
  RecvOp r;
  r.buf = plain.data();
  r.len = plain.size();
  r.context = &plain;
  ASSERT_EQ(net.core(1).recv(r, 0), 0);
  auto t = pattern(1, 8), m = pattern(2, 8);
  ASSERT_EQ(net.core(0).send(tsend(1, t, &t, 0), 0), 0);  // tagged: unexpected
  net.run([] { return false; }, 1'000'000);
  EXPECT_TRUE(net.node(1).done.empty());
  EXPECT_EQ(net.core(1).unexpected_in_use(), 1u);
  ASSERT_EQ(net.core(0).send(tsend(1, m, &m, 0, false), net.now()), 0);  // fi_send
  settle(net, 1, 1);
  EXPECT_EQ(net.node(1).done[0].context, &plain);
  EXPECT_TRUE(net.node(1).done[0].flags & FI_MSG);
  ASSERT_EQ(net.core(1).recv(trecv(tagged, &tagged, 0), net.now()), 0);
  ASSERT_EQ(net.node(1).done.size(), 2u);  // taken from the unexpected queue at once
  EXPECT_EQ(net.node(1).done[1].context, &tagged);
  EXPECT_TRUE(net.node(1).done[1].flags & FI_TAGGED);
  EXPECT_EQ(plain, m);
  EXPECT_EQ(tagged, t);
}

TEST(RdmMatch, UnexpectedInArrivalOrderEagerAndRendezvous) {
  Net net(2, test_config(), 24);
  auto big = pattern(1, 50000), small = pattern(2, 100), big2 = pattern(3, 30000);
  ASSERT_EQ(net.core(0).send(tsend(1, big, &big, 9), 0), 0);
  ASSERT_EQ(net.core(0).send(tsend(1, small, &small, 9), 0), 0);
  ASSERT_EQ(net.core(0).send(tsend(1, big2, &big2, 8), 0), 0);
  net.run([] { return false; }, 1'000'000);
  EXPECT_EQ(net.core(1).unexpected_in_use(), 3u);
  EXPECT_TRUE(net.node(0).done.size() == 1);  // the eager one is delivered (buffered)
  std::vector<uint8_t> r1(50000), r2(50000), r3(50000);
  ASSERT_EQ(net.core(1).recv(trecv(r1, &r1, 0, ~uint64_t{0}), net.now()), 0);  // any tag
  ASSERT_EQ(net.core(1).recv(trecv(r2, &r2, 9), net.now()), 0);
  ASSERT_EQ(net.core(1).recv(trecv(r3, &r3, 8), net.now()), 0);
  settle(net, 1, 3);
  settle(net, 0, 3);
  EXPECT_TRUE(std::equal(big.begin(), big.end(), r1.begin()));
  EXPECT_TRUE(std::equal(small.begin(), small.end(), r2.begin()));
  EXPECT_TRUE(std::equal(big2.begin(), big2.end(), r3.begin()));
  EXPECT_EQ(net.core(1).unexpected_in_use(), 0u);
}

TEST(RdmMatch, AReceiveTakesAMessageStillArriving) {
  CoreConfig c = test_config();
  c.rel.window = 2;  // the 8 segments trickle in over several round trips
  Net net(2, c, 25);
  auto m = pattern(1, 8000);
  ASSERT_EQ(net.core(0).send(tsend(1, m, &m, 1), 0), 0);
  ASSERT_TRUE(net.run([&] { return net.core(1).unexpected_in_use() == 1; }));
  std::vector<uint8_t> r(8000);
  ASSERT_EQ(net.core(1).recv(trecv(r, &r, 1), net.now()), 0);
  EXPECT_TRUE(net.node(1).done.empty());  // bound, not complete
  settle(net, 1, 1);
  EXPECT_EQ(net.node(1).done[0].len, 8000u);
  EXPECT_EQ(r, m);
  EXPECT_EQ(net.core(1).unexpected_in_use(), 0u);
}

TEST(RdmMatch, PeekFindsWithoutTaking) {
  Net net(2, test_config(), 26);
  std::vector<uint8_t> none(0);
  // Nothing there: FI_ENOMSG.
  ASSERT_EQ(net.core(1).recv(trecv(none, &none, 4, 0, FI_ADDR_UNSPEC, FI_PEEK), 0), 0);
  ASSERT_EQ(net.node(1).done.size(), 1u);
  EXPECT_EQ(net.node(1).done[0].err, FI_ENOMSG);
  auto m = pattern(1, 3000);
  SendOp s = tsend(1, m, &m, 4);
  s.has_data = true;
  s.data = 77;
  ASSERT_EQ(net.core(0).send(s, net.now()), 0);
  net.run([] { return false; }, 1'000'000);
  ASSERT_EQ(net.core(1).recv(trecv(none, &none, 4, 0, FI_ADDR_UNSPEC, FI_PEEK), net.now()), 0);
  ASSERT_EQ(net.node(1).done.size(), 2u);
  const Completion& p = net.node(1).done[1];
  EXPECT_EQ(p.err, 0);
  EXPECT_EQ(p.len, 3000u);
  EXPECT_EQ(p.tag, 4u);
  EXPECT_EQ(p.data, 77u);
  EXPECT_TRUE(p.flags & FI_REMOTE_CQ_DATA);
  EXPECT_EQ(p.buf, nullptr);
  EXPECT_EQ(p.src, 0u);
  // Still there for a receive.
  std::vector<uint8_t> r(3000);
  ASSERT_EQ(net.core(1).recv(trecv(r, &r, 4), net.now()), 0);
  ASSERT_EQ(net.node(1).done.size(), 3u);
  EXPECT_EQ(r, m);
}

TEST(RdmMatch, PeekClaimReservesForTheClaimingContext) {
  Net net(2, test_config(), 27);
  auto m = pattern(1, 500), big = pattern(2, 40000);
  ASSERT_EQ(net.core(0).send(tsend(1, m, &m, 6), 0), 0);
  ASSERT_EQ(net.core(0).send(tsend(1, big, &big, 6), 0), 0);
  net.run([] { return false; }, 1'000'000);
  std::vector<uint8_t> none, r(500), other(40000);
  int claim_ctx = 0;
  ASSERT_EQ(net.core(1).recv(trecv(none, &claim_ctx, 6, 0, FI_ADDR_UNSPEC, FI_PEEK | FI_CLAIM),
                             net.now()),
            0);
  // A plain receive now skips the claimed message and takes the next (the rendezvous one).
  ASSERT_EQ(net.core(1).recv(trecv(other, &other, 6), net.now()), 0);
  settle(net, 1, 2);
  EXPECT_EQ(net.node(1).done[1].context, &other);
  EXPECT_EQ(other, big);
  // Another context cannot claim it; the claiming one receives it (tag arguments ignored).
  EXPECT_EQ(net.core(1).recv(trecv(r, &r, 6, 0, FI_ADDR_UNSPEC, FI_CLAIM), net.now()), -FI_EINVAL);
  ASSERT_EQ(net.core(1).recv(trecv(r, &claim_ctx, 0xffff, 0, FI_ADDR_UNSPEC, FI_CLAIM), net.now()),
            0);
  ASSERT_EQ(net.node(1).done.size(), 3u);
  EXPECT_EQ(net.node(1).done[2].context, &claim_ctx);
  EXPECT_EQ(net.node(1).done[2].len, 500u);
  EXPECT_EQ(r, m);
  EXPECT_EQ(net.core(1).unexpected_in_use(), 0u);
}

TEST(RdmMatch, DiscardDropsEagerAndAnswersRendezvousWithAZeroGrant) {
  Net net(2, test_config(), 28);
  auto m = pattern(1, 500), big = pattern(2, 400000);
  ASSERT_EQ(net.core(0).send(tsend(1, m, &m, 1), 0), 0);
  ASSERT_EQ(net.core(0).send(tsend(1, big, &big, 2), 0), 0);
  net.run([] { return false; }, 1'000'000);
  EXPECT_EQ(net.core(1).unexpected_in_use(), 2u);
  std::vector<uint8_t> none;
  int ctx1 = 0, ctx2 = 0;
  // PEEK|DISCARD the eager one.
  ASSERT_EQ(
      net.core(1).recv(trecv(none, &ctx1, 1, 0, FI_ADDR_UNSPEC, FI_PEEK | FI_DISCARD), net.now()),
      0);
  ASSERT_EQ(net.node(1).done.size(), 1u);
  EXPECT_EQ(net.node(1).done[0].err, 0);
  EXPECT_EQ(net.node(1).done[0].len, 500u);
  // PEEK|CLAIM then CLAIM|DISCARD the rendezvous one: its sender completes, no data moves.
  ASSERT_EQ(
      net.core(1).recv(trecv(none, &ctx2, 2, 0, FI_ADDR_UNSPEC, FI_PEEK | FI_CLAIM), net.now()), 0);
  const uint64_t frames = net.frames_sent;
  ASSERT_EQ(
      net.core(1).recv(trecv(none, &ctx2, 0, 0, FI_ADDR_UNSPEC, FI_CLAIM | FI_DISCARD), net.now()),
      0);
  settle(net, 0, 2);
  EXPECT_EQ(net.node(0).done[1].context, &big);
  EXPECT_EQ(net.node(0).done[1].err, 0);
  EXPECT_LT(net.frames_sent - frames, 10u);  // a CTS and acks, not 400 KB
  EXPECT_EQ(net.core(1).unexpected_in_use(), 0u);
  // Nothing left to receive.
  ASSERT_EQ(
      net.core(1).recv(trecv(none, &none, 0, ~uint64_t{0}, FI_ADDR_UNSPEC, FI_PEEK), net.now()), 0);
  EXPECT_EQ(net.node(1).done.back().err, FI_ENOMSG);
}

TEST(RdmMatch, MultiRecvPacksMessagesAndReleasesTheBuffer) {
  Net net(2, test_config(), 29);
  std::vector<uint8_t> buf(10000, 0xee);
  RecvOp r;
  r.buf = buf.data();
  r.len = buf.size();
  r.context = &buf;
  r.flags = FI_MULTI_RECV;
  ASSERT_EQ(net.core(1).recv(r, 0), 0);
  std::vector<std::vector<uint8_t>> m;
  for (int i = 0; i < 4; ++i) m.push_back(pattern(i, 3000));
  for (auto& x : m) ASSERT_EQ(net.core(0).send(tsend(1, x, &x, 0, false), 0), 0);
  settle(net, 1, 3);
  auto& d = net.node(1).done;
  ASSERT_EQ(d.size(), 3u);  // the fourth waits: the buffer was released after the third
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(d[i].context, &buf);
    EXPECT_EQ(d[i].buf, buf.data() + 3000 * i);
    EXPECT_EQ(d[i].len, 3000u);
    EXPECT_TRUE(std::equal(m[i].begin(), m[i].end(), buf.begin() + 3000 * i));
    EXPECT_EQ((d[i].flags & FI_MULTI_RECV) != 0, i == 2) << i;  // 1000 < min_multi_recv left
  }
  EXPECT_EQ(buf[9000], 0xee);
  EXPECT_EQ(net.core(1).unexpected_in_use(), 1u);
  EXPECT_EQ(net.core(1).rx_in_use(), 0u);
}

TEST(RdmMatch, MultiRecvTakesUnexpectedAndRendezvousMessagesThenCancel) {
  Net net(2, test_config(), 30);
  auto big = pattern(1, 20000), small = pattern(2, 100);
  ASSERT_EQ(net.core(0).send(tsend(1, big, &big, 0, false), 0), 0);
  ASSERT_EQ(net.core(0).send(tsend(1, small, &small, 0, false), 0), 0);
  net.run([] { return false; }, 1'000'000);
  std::vector<uint8_t> buf(30000);
  RecvOp r;
  r.buf = buf.data();
  r.len = buf.size();
  r.context = &buf;
  r.flags = FI_MULTI_RECV;
  ASSERT_EQ(net.core(1).recv(r, net.now()), 0);
  settle(net, 1, 2);
  auto& d = net.node(1).done;
  // The eager one completes at once, the rendezvous one after its data: both in place.
  EXPECT_TRUE(std::equal(big.begin(), big.end(), buf.begin()));
  EXPECT_TRUE(std::equal(small.begin(), small.end(), buf.begin() + 20000));
  for (auto& c : d) EXPECT_FALSE(c.flags & FI_MULTI_RECV);  // 9900 left: still posted
  EXPECT_EQ(net.core(1).cancel(&buf), 0);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[2].err, FI_ECANCELED);
  EXPECT_TRUE(d[2].flags & FI_MULTI_RECV);
  EXPECT_EQ(net.core(1).rx_in_use(), 0u);
  // Bad uses.
  r.len = 100;
  EXPECT_EQ(net.core(1).recv(r, net.now()), -FI_EINVAL);  // shorter than min_multi_recv
  r.len = buf.size();
  r.match.tagged = true;
  EXPECT_EQ(net.core(1).recv(r, net.now()), -FI_EINVAL);  // FI_MSG only
}

TEST(RdmMatch, MultiRecvCancelledWhileAMessageArrivesReleasesWithIt) {
  CoreConfig cfg = test_config();
  cfg.rel.window = 4;  // the data trickles in over several round trips
  Net net(2, cfg, 31);
  std::vector<uint8_t> buf(100000);
  RecvOp r;
  r.buf = buf.data();
  r.len = buf.size();
  r.context = &buf;
  r.flags = FI_MULTI_RECV;
  ASSERT_EQ(net.core(1).recv(r, 0), 0);
  auto big = pattern(1, 60000);
  ASSERT_EQ(net.core(0).send(tsend(1, big, &big, 0, false), 0), 0);
  ASSERT_TRUE(net.run([&] { return net.core(1).reliability_stats().rx_packets > 5; }));
  ASSERT_TRUE(net.node(1).done.empty());
  EXPECT_EQ(net.core(1).cancel(&buf), 0);  // released; no completion yet
  EXPECT_TRUE(net.node(1).done.empty());
  settle(net, 1, 1);
  const Completion& c = net.node(1).done[0];
  EXPECT_EQ(c.err, 0);
  EXPECT_EQ(c.len, 60000u);
  EXPECT_TRUE(c.flags & FI_MULTI_RECV);
  EXPECT_TRUE(std::equal(big.begin(), big.end(), buf.begin()));
  EXPECT_EQ(net.core(1).rx_in_use(), 0u);
  EXPECT_EQ(net.core(1).cancel(&buf), -FI_ENOENT);
}

TEST(RdmMatch, AClaimedMessageFromADeadPeerFailsItsClaim) {
  Net net(2, test_config(), 32);
  auto big = pattern(1, 50000), ping = pattern(2, 10);
  ASSERT_EQ(net.core(0).send(tsend(1, big, &big, 3), 0), 0);
  net.run([] { return false; }, 1'000'000);
  std::vector<uint8_t> none, r(50000);
  int ctx = 0;
  ASSERT_EQ(
      net.core(1).recv(trecv(none, &ctx, 3, 0, FI_ADDR_UNSPEC, FI_PEEK | FI_CLAIM), net.now()), 0);
  ASSERT_EQ(net.node(1).done.size(), 1u);
  // The link dies; the receiver learns it when its own send to the sender runs out of retries.
  net.cut(0, 1, true);
  net.cut(1, 0, true);
  ASSERT_EQ(net.core(1).send(tsend(0, ping, &ping, 0), net.now()), 0);
  settle(net, 1, 2);
  EXPECT_EQ(net.node(1).done[1].context, &ping);
  EXPECT_EQ(net.node(1).done[1].err, FI_EHOSTUNREACH);
  // The claimed message will never be whole: its FI_CLAIM receive completes with the error.
  ASSERT_EQ(net.core(1).recv(trecv(r, &ctx, 0, 0, FI_ADDR_UNSPEC, FI_CLAIM), net.now()), 0);
  ASSERT_EQ(net.node(1).done.size(), 3u);
  EXPECT_EQ(net.node(1).done[2].context, &ctx);
  EXPECT_EQ(net.node(1).done[2].err, FI_EHOSTUNREACH);
  EXPECT_EQ(net.core(1).unexpected_in_use(), 0u);
  EXPECT_EQ(net.core(1).rx_in_use(), 0u);
}

namespace {

// copy_op (rdm_core.h): what the send and receive paths copy into the core's tables. Every field
// arrives, the iov/result entries in use too, and the entries beyond the counts are not touched
// (they are not copied: a one-buffer op is a third of the struct).
TEST(CopyOp, SendCopiesEveryFieldAndTheEntriesInUse) {
  SendOp a;
  a.dest = 7;
  a.buf = &a;
  a.len = 1234;
  a.context = &a.len;
  a.tag = 0x1122334455667788ull;
  a.data = 99;
  a.tagged = a.has_data = a.inject = a.complete_now = a.fence = a.fetch = a.compare_op = true;
  a.completion = false;
  a.kind = OpKind::kAtomic;
  a.rkey = 0xabcdef;
  a.raddr = 0x1000;
  a.atomic_op = 3;
  a.datatype = 5;
  a.compare = &a.tag;
  a.iov_count = 2;
  a.result_count = 1;
  uint8_t bytes[8];
  for (size_t k = 0; k < kMaxIov; ++k) {
    a.iov[k] = {bytes + k, k + 1};
    a.result[k] = {bytes + k + 4, k + 10};
  }
  SendOp b;
  const Iov untouched{bytes + 7, 77};
  for (size_t k = 0; k < kMaxIov; ++k) b.iov[k] = b.result[k] = untouched;
  copy_op(b, a);
  EXPECT_EQ(b.dest, a.dest);
  EXPECT_EQ(b.buf, a.buf);
  EXPECT_EQ(b.len, a.len);
  EXPECT_EQ(b.context, a.context);
  EXPECT_EQ(b.tag, a.tag);
  EXPECT_EQ(b.data, a.data);
  EXPECT_TRUE(b.tagged && b.has_data && b.inject && b.complete_now && b.fence && b.fetch &&
              b.compare_op);
  EXPECT_FALSE(b.completion);
  EXPECT_EQ(b.kind, OpKind::kAtomic);
  EXPECT_EQ(b.rkey, a.rkey);
  EXPECT_EQ(b.raddr, a.raddr);
  EXPECT_EQ(b.atomic_op, 3);
  EXPECT_EQ(b.datatype, 5);
  EXPECT_EQ(b.compare, a.compare);
  EXPECT_EQ(b.iov_count, 2);
  EXPECT_EQ(b.result_count, 1);
  for (size_t k = 0; k < kMaxIov; ++k) {
    const Iov& want_iov = k < 2 ? a.iov[k] : untouched;
    const Iov& want_res = k < 1 ? a.result[k] : untouched;
    EXPECT_EQ(b.iov[k].base, want_iov.base) << k;
    EXPECT_EQ(b.iov[k].len, want_iov.len) << k;
    EXPECT_EQ(b.result[k].base, want_res.base) << k;
    EXPECT_EQ(b.result[k].len, want_res.len) << k;
  }
}

TEST(CopyOp, RecvCopiesEveryFieldAndTheEntriesInUse) {
  RecvOp a;
  a.buf = &a;
  a.len = 4321;
  a.context = &a.len;
  a.match.src = 3;
  a.match.tag = 0x55;
  a.match.ignore = 0xf0;
  a.match.tagged = true;
  a.flags = FI_PEEK;
  a.completion = false;
  a.iov_count = 3;
  uint8_t bytes[4];
  for (size_t k = 0; k < kMaxIov; ++k) a.iov[k] = {bytes + k, k + 1};
  RecvOp b;
  const Iov untouched{bytes, 77};
  for (size_t k = 0; k < kMaxIov; ++k) b.iov[k] = untouched;
  copy_op(b, a);
  EXPECT_EQ(b.buf, a.buf);
  EXPECT_EQ(b.len, a.len);
  EXPECT_EQ(b.context, a.context);
  EXPECT_EQ(b.match.src, 3u);
  EXPECT_EQ(b.match.tag, 0x55u);
  EXPECT_EQ(b.match.ignore, 0xf0u);
  EXPECT_TRUE(b.match.tagged);
  EXPECT_EQ(b.flags, uint64_t{FI_PEEK});
  EXPECT_FALSE(b.completion);
  EXPECT_EQ(b.iov_count, 3);
  for (size_t k = 0; k < kMaxIov; ++k) {
    EXPECT_EQ(b.iov[k].base, k < 3 ? a.iov[k].base : untouched.base) << k;
    EXPECT_EQ(b.iov[k].len, k < 3 ? a.iov[k].len : untouched.len) << k;
  }
}

}  // namespace
