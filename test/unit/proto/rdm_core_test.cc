// SPDX-License-Identifier: BSD-3-Clause
//
// The RDM core end to end over the simulated network of rdm_sim.h: messages of every size class
// (empty, one segment, segment boundaries, eager maximum, rendezvous, MiBs), exactly once, in
// order and intact over a link that loses, duplicates, reorders and corrupts; unexpected messages
// and receiver back-pressure (RNR); truncation; remote CQ data and the source address; inject;
// cancel; size limits; retries exhausted -> error completions and no hang.
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <chrono>
#include <deque>
#include <map>

#include "rdm_sim.h"

using namespace rdm_sim;

namespace {

// One message on its way: sender's buffer, receiver's buffer.
struct Msg {
  uint64_t id;
  std::vector<uint8_t> tx, rx;
  bool tagged;
};

SendOp send_op(int dest, const std::vector<uint8_t>& b, void* ctx, bool tagged = false,
               uint64_t tag = 0) {
  SendOp s;
  s.dest = dest;
  s.buf = b.data();
  s.len = b.size();
  s.context = ctx;
  s.tagged = tagged;
  s.tag = tag;
  return s;
}

RecvOp recv_op(std::vector<uint8_t>& b, void* ctx, bool tagged = false, uint64_t tag = 0,
               uint64_t ignore = 0, fi_addr_t src = FI_ADDR_UNSPEC) {
  RecvOp r;
  r.buf = b.data();
  r.len = b.size();
  r.context = ctx;
  r.match.tagged = tagged;
  r.match.tag = tag;
  r.match.ignore = ignore;
  r.match.src = src;
  return r;
}

// Sends `sizes` from node 0 to node 1 (receives posted first, or after when `late`), checks
// exactly-once, in-order, intact delivery and one send completion each.
void transfer(Net& net, const std::vector<size_t>& sizes, bool late = false) {
  std::deque<Msg> msgs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    msgs.push_back(
        {i, pattern(i, sizes[i]), std::vector<uint8_t>(sizes[i] + 16, 0xee), (i % 3) == 1});
  }
  auto post = [&] {
    for (auto& m : msgs)
      ASSERT_EQ(net.core(1).recv(recv_op(m.rx, &m, m.tagged, m.id), net.now()), 0);
  };
  if (!late) post();
  size_t sent = 0;
  auto pump = [&] {  // keep the sender busy without exceeding tx_ops
    while (sent < msgs.size()) {
      auto& m = msgs[sent];
      ssize_t rc = net.core(0).send(send_op(1, m.tx, &m, m.tagged, m.id), net.now());
      if (rc == -FI_EAGAIN) return;
      ASSERT_EQ(rc, 0);
      ++sent;
    }
  };
  pump();
  if (late) {
    net.run([&] { return false; }, 2'000'000);  // let them arrive unexpected
    post();
  }
  const bool ok = net.run([&] {
    pump();
    return sent == msgs.size() && net.node(1).done.size() == msgs.size() &&
           net.node(0).done.size() == msgs.size();
  });
  ASSERT_TRUE(ok) << "sent " << sent << " rx done " << net.node(1).done.size() << " tx done "
                  << net.node(0).done.size() << " at " << net.now() << " unexp "
                  << net.core(1).unexpected_in_use() << " rx " << net.core(1).rx_in_use()
                  << " perr " << net.core(1).stats().protocol_errors << " refused "
                  << net.core(1).stats().unexpected_refused << " dup "
                  << net.core(1).reliability_stats().rx_duplicates << " unexp total "
                  << net.core(1).stats().unexpected << " tx err0 " << net.node(0).done[0].err
                  << " unreach " << net.core(0).reliability_stats().unreachable << "/"
                  << net.core(1).reliability_stats().unreachable << " rto "
                  << net.core(0).reliability_stats().rto_expiries << " probes "
                  << net.core(0).reliability_stats().probes << "/"
                  << net.core(1).reliability_stats().probes << " rnr "
                  << net.core(0).reliability_stats().rnr_received << " badack "
                  << net.core(0).reliability_stats().rx_bad_ack << "/"
                  << net.core(1).reliability_stats().rx_bad_ack << " beyond "
                  << net.core(1).reliability_stats().rx_beyond_window << " noslot "
                  << net.core(1).reliability_stats().rx_no_slot << " rxrefused "
                  << net.core(1).reliability_stats().rx_refused << " rx_packets "
                  << net.core(1).reliability_stats().rx_packets << " tx_packets "
                  << net.core(0).reliability_stats().tx_packets;
  // Each receive completed once, with the message sent in its position (receives match in
  // order; completions need not be: a rendezvous completes after eager messages sent later).
  std::vector<Completion> rx(msgs.size());
  for (const auto& c : net.node(1).done) {
    const size_t i = static_cast<const Msg*>(c.context)->id;
    ASSERT_EQ(rx[i].context, nullptr) << "message " << i << " completed twice";
    rx[i] = c;
  }
  for (size_t i = 0; i < msgs.size(); ++i) {
    const Msg& m = msgs[i];
    ASSERT_EQ(rx[i].context, &m) << i;
    EXPECT_EQ(rx[i].err, 0) << i;
    EXPECT_EQ(rx[i].len, m.tx.size()) << i;
    EXPECT_EQ(rx[i].src, 0u);
    EXPECT_EQ(rx[i].flags & (FI_RECV | FI_TAGGED | FI_MSG),
              FI_RECV | (m.tagged ? FI_TAGGED : FI_MSG));
    if (m.tagged) {
      EXPECT_EQ(rx[i].tag, m.id);
    }
    ASSERT_TRUE(std::equal(m.tx.begin(), m.tx.end(), m.rx.begin())) << "message " << i;
    for (size_t k = m.tx.size(); k < m.rx.size(); ++k) ASSERT_EQ(m.rx[k], 0xee);
  }
  for (const auto& c : net.node(0).done) {
    EXPECT_EQ(c.err, 0);
    EXPECT_TRUE(c.flags & FI_SEND);
  }
  EXPECT_EQ(net.core(0).tx_in_use(), 0u);
  EXPECT_EQ(net.core(1).rx_in_use(), 0u);
  EXPECT_EQ(net.core(1).unexpected_in_use(), 0u);
  EXPECT_EQ(net.core(0).stats().protocol_errors + net.core(1).stats().protocol_errors, 0u);
  EXPECT_EQ(net.decode_stats.rejected(), 0u);
}

std::vector<size_t> mixed_sizes(uint64_t seed, size_t n, size_t big) {
  Rng r(seed);
  std::vector<size_t> v;
  for (size_t i = 0; i < n; ++i) {
    switch (r.below(5)) {
      case 0:
        v.push_back(r.below(64));
        break;
      case 1:
        v.push_back(r.below(4096));
        break;
      case 2:
        v.push_back(r.below(8193));
        break;
      case 3:
        v.push_back(8193 + r.below(100000));
        break;
      default:
        v.push_back(r.below(8) == 0 ? big : r.below(20000));
        break;
    }
  }
  return v;
}

}  // namespace

TEST(RdmCore, EverySizeClassOverAPerfectLink) {
  Net net(2, test_config(), 1);
  transfer(net, {0, 1, 1023, 1024, 1025, 4096, 8191, 8192, 8193, 100000, 3u << 20, 0, 7});
  EXPECT_EQ(net.core(0).stats().sent_rendezvous, 3u);
  EXPECT_EQ(net.core(0).reliability_stats().tx_retransmits, 0u);
}

TEST(RdmCore, ASameHostPeerHasItsOwnEagerLimit) {
  // eager_max 8192 (test_config); same-host peers eagerly only up to 2048. The receiver takes
  // eager messages up to eager_max whoever sent them.
  CoreConfig cfg = test_config();
  cfg.eager_max_same_host = 2048;
  {
    Net net(2, cfg, 1);
    transfer(net, {2048, 2049, 8192, 8193});
    EXPECT_EQ(net.core(0).stats().sent_eager, 3u) << "a port peer: eager up to eager_max";
    EXPECT_EQ(net.core(0).stats().sent_rendezvous, 1u);
  }
  {
    Net net(2, cfg, 1);
    net.core(0).set_peer_same_host(1);
    net.core(0).set_peer_same_host(7);  // unknown: nothing
    transfer(net, {0, 2048, 2049, 8192, 8193});
    EXPECT_EQ(net.core(0).stats().sent_eager, 2u) << "same-host: eager up to 2048";
    EXPECT_EQ(net.core(0).stats().sent_rendezvous, 3u);
  }
  // A configuration whose same-host limit exceeds eager_max is refused.
  cfg.eager_max_same_host = cfg.eager_max + 1;
  struct Quiet final : CoreSink {
    bool transmit(fi_addr_t, const RdmHeader&, std::span<const uint8_t>) noexcept override {
      return true;
    }
    void complete(const Completion&) noexcept override {}
  } sink;
  EXPECT_EQ(RdmCore::create(cfg, &sink).code(), -FI_EINVAL);
}

TEST(RdmCore, RttEstimateFollowsTheLink) {
  Net net(2, test_config(), 2);
  transfer(net, std::vector<size_t>(50, 100));
  const RdmPeer* p = net.core(0).peer(1);
  ASSERT_NE(p, nullptr);
  // Round trip 20 us (+ up to the 5 us ack delay): SRTT there, RTO clamped at rto_min.
  EXPECT_GE(p->srtt_ns(), 19'000u);
  EXPECT_LE(p->srtt_ns(), 30'000u);
  EXPECT_EQ(p->rto_ns(), test_config().rel.rto_min_ns);
}

class RdmLossy : public ::testing::TestWithParam<uint64_t> {};

TEST_P(RdmLossy, ExactlyOnceInOrderIntact) {
  const uint64_t seed = GetParam();
  LinkModel m;
  m.loss_ppm = 50'000;     // 5 %
  m.dup_ppm = 30'000;      // 3 %
  m.corrupt_ppm = 20'000;  // 2 %
  m.jitter_ns = 30'000;    // reordering
  Net net(2, test_config(), seed, m);
  transfer(net, mixed_sizes(seed, 120, 2u << 20));
  const auto& rs = net.core(0).reliability_stats();
  const auto& rr = net.core(1).reliability_stats();
  EXPECT_GT(rs.tx_retransmits + rs.tx_fast_retransmits, 0u);
  EXPECT_GT(rr.rx_duplicates, 0u);
  EXPECT_GT(rr.rx_out_of_order, 0u);
  EXPECT_GT(net.frames_rejected, 0u);
  EXPECT_EQ(rs.unreachable + rr.unreachable, 0u);
}

INSTANTIATE_TEST_SUITE_P(Seeds, RdmLossy, ::testing::Values(11, 12, 13, 14));

TEST(RdmCore, APortThatRefusesFramesSlowsNothingDown) {
  // A TX queue that is often full: refused frames are tried again within microseconds, not after
  // a retransmission timeout, and nothing is lost or reordered.
  LinkModel m;
  m.refuse_ppm = 200'000;  // one frame in five
  m.loss_ppm = 10'000;
  Net net(2, test_config(), 16, m);
  const uint64_t t0 = net.now();
  transfer(net, mixed_sizes(16, 40, 300000));
  EXPECT_GT(net.frames_refused, 100u);
  EXPECT_GT(net.core(0).reliability_stats().tx_refused, 0u);
  EXPECT_LT(net.now() - t0, 1'000'000'000u);  // simulated: far from retry-bound
}

TEST(RdmCore, SequenceNumbersWrapOverALossyLink) {
  LinkModel m;
  m.loss_ppm = 50'000;
  m.dup_ppm = 30'000;
  m.jitter_ns = 30'000;
  CoreConfig c = test_config();
  c.rel.initial_seq = 0xffffffffu - 300;  // the wrap comes some 300 packets in
  Net net(2, c, 15, m);
  transfer(net, mixed_sizes(15, 60, 200000));
  EXPECT_GT(net.core(0).reliability_stats().tx_packets, 600u);
}

TEST(RdmCore, UnexpectedMessagesThenBackPressure) {
  // Everything arrives before the receives: 16 unexpected buffers for 40 eager messages, so the
  // receiver refuses (RNR) and the senders back off until receives are posted: no loss, no
  // unreachable peer.
  CoreConfig c = test_config();
  Net net(2, c, 3);
  std::vector<size_t> sizes;
  for (int i = 0; i < 40; ++i) sizes.push_back(i % 4 == 3 ? 20000 : 500 + i);
  transfer(net, sizes, /*late=*/true);
  EXPECT_GT(net.core(1).stats().unexpected, 0u);
  EXPECT_GT(net.core(1).stats().unexpected_refused, 0u);
  EXPECT_GT(net.core(0).reliability_stats().rnr_received, 0u);
  EXPECT_EQ(net.core(0).reliability_stats().unreachable, 0u);
}

class RdmBackPressureLossy : public ::testing::TestWithParam<uint64_t> {};

TEST_P(RdmBackPressureLossy, NothingLostNoPeerDeclaredDead) {
  // Few unexpected buffers, messages sent before the receives are posted, and a lossy link: RNR
  // answers and their loss interleave with SACKs the receiver reneges on.
  LinkModel m;
  m.loss_ppm = 30'000;
  m.dup_ppm = 20'000;
  m.jitter_ns = 20'000;
  CoreConfig c = test_config();
  c.unexpected_slots = 2;
  c.unexpected = 4;
  Net net(2, c, GetParam(), m);
  transfer(net, mixed_sizes(GetParam(), 60, 1u << 20), /*late=*/true);
  EXPECT_EQ(net.core(0).reliability_stats().unreachable, 0u);
}

INSTANTIATE_TEST_SUITE_P(Seeds, RdmBackPressureLossy, ::testing::Values(4, 5, 6, 7, 8, 9));

TEST(RdmCore, TruncationAndSenderCompletesNormally) {
  Net net(2, test_config(), 5);
  auto small_tx = pattern(1, 3000), big_tx = pattern(2, 50000);
  std::vector<uint8_t> small_rx(100), big_rx(10000);
  ASSERT_EQ(net.core(1).recv(recv_op(small_rx, &small_rx), 0), 0);
  ASSERT_EQ(net.core(1).recv(recv_op(big_rx, &big_rx), 0), 0);
  ASSERT_EQ(net.core(0).send(send_op(1, small_tx, &small_tx), 0), 0);
  ASSERT_EQ(net.core(0).send(send_op(1, big_tx, &big_tx), 0), 0);
  ASSERT_TRUE(
      net.run([&] { return net.node(1).done.size() == 2 && net.node(0).done.size() == 2; }));
  auto& rx = net.node(1).done;
  EXPECT_EQ(rx[0].err, FI_ETRUNC);
  EXPECT_EQ(rx[0].len, 100u);
  EXPECT_EQ(rx[0].olen, 2900u);
  EXPECT_EQ(0, std::memcmp(small_rx.data(), small_tx.data(), 100));
  EXPECT_EQ(rx[1].err, FI_ETRUNC);
  EXPECT_EQ(rx[1].len, 10000u);
  EXPECT_EQ(rx[1].olen, 40000u);
  EXPECT_EQ(0, std::memcmp(big_rx.data(), big_tx.data(), 10000));
  for (auto& t : net.node(0).done) EXPECT_EQ(t.err, 0);
  // Only the granted part of the rendezvous went over the wire.
  EXPECT_LT(net.frames_sent, 30u);
}

TEST(RdmCore, RemoteCqDataSourceAndInject) {
  Net net(3, test_config(), 6);
  std::vector<uint8_t> rx1(64), rx2(20000);
  ASSERT_EQ(net.core(1).recv(recv_op(rx1, &rx1), 0), 0);
  ASSERT_EQ(net.core(1).recv(recv_op(rx2, &rx2), 0), 0);
  std::vector<uint8_t> tx1 = pattern(3, 48);
  SendOp s = send_op(1, tx1, nullptr);
  s.inject = true;
  s.completion = false;  // fi_inject
  s.has_data = true;
  s.data = 0xfeedface;
  ASSERT_EQ(net.core(2).send(s, 0), 0);
  std::fill(tx1.begin(), tx1.end(), 0);  // inject copied it: the buffer is ours again
  std::vector<uint8_t> tx2 = pattern(4, 20000);
  SendOp s2 = send_op(1, tx2, &tx2);
  s2.has_data = true;
  s2.data = 42;
  ASSERT_EQ(net.core(2).send(s2, 0), 0);
  ASSERT_TRUE(
      net.run([&] { return net.node(1).done.size() == 2 && net.node(2).done.size() == 1; }));
  auto& rx = net.node(1).done;
  EXPECT_EQ(rx[0].src, 2u);
  EXPECT_EQ(rx[0].data, 0xfeedfaceu);
  EXPECT_TRUE(rx[0].flags & FI_REMOTE_CQ_DATA);
  EXPECT_EQ(rx[0].len, 48u);
  EXPECT_EQ(pattern(3, 48), std::vector<uint8_t>(rx1.begin(), rx1.begin() + 48));
  EXPECT_EQ(rx[1].src, 2u);
  EXPECT_EQ(rx[1].data, 42u);
  EXPECT_TRUE(rx[1].flags & FI_REMOTE_CQ_DATA);
  EXPECT_EQ(rx2, tx2);
  // The inject wrote no completion; the other send did.
  ASSERT_EQ(net.node(2).done.size(), 1u);
  EXPECT_EQ(net.node(2).done[0].context, &tx2);
  EXPECT_EQ(net.core(2).tx_in_use(), 0u);
}

TEST(RdmCore, SizeLimitsAndBadArguments) {
  CoreConfig c = test_config();
  c.max_msg_size = 1 << 20;
  Net net(2, c, 7);
  std::vector<uint8_t> big((1 << 20) + 1), inj(c.inject_size + 1);
  EXPECT_EQ(net.core(0).send(send_op(1, big, nullptr), 0), -FI_EMSGSIZE);
  SendOp s = send_op(1, inj, nullptr);
  s.inject = true;
  EXPECT_EQ(net.core(0).send(s, 0), -FI_EMSGSIZE);
  EXPECT_EQ(net.core(0).send(send_op(9, inj, nullptr), 0), -FI_EINVAL);  // not a peer
  RecvOp r = recv_op(inj, nullptr);
  r.flags = FI_PEEK;  // untagged
  EXPECT_EQ(net.core(0).recv(r, 0), -FI_EINVAL);
  r.match.tagged = true;
  r.flags = FI_DISCARD;  // without PEEK or CLAIM
  EXPECT_EQ(net.core(0).recv(r, 0), -FI_EINVAL);
  r.flags = FI_CLAIM;  // nothing claimed
  EXPECT_EQ(net.core(0).recv(r, 0), -FI_EINVAL);
  // tx_ops bound: -FI_EAGAIN, not a hang or an allocation.
  CoreConfig few = test_config();
  few.tx_ops = 2;
  Net n2(2, few, 8);
  std::vector<uint8_t> b(10);
  EXPECT_EQ(n2.core(0).send(send_op(1, b, nullptr), 0), 0);
  EXPECT_EQ(n2.core(0).send(send_op(1, b, nullptr), 0), 0);
  EXPECT_EQ(n2.core(0).send(send_op(1, b, nullptr), 0), -FI_EAGAIN);
  EXPECT_FALSE(RdmCore::create(
                   [] {
                     CoreConfig bad = test_config();
                     bad.rel.window = 65;
                     return bad;
                   }(),
                   &n2.node(0))
                   .ok());
}

TEST(RdmCore, CancelPostedReceive) {
  Net net(2, test_config(), 9);
  std::vector<uint8_t> b(100);
  ASSERT_EQ(net.core(1).recv(recv_op(b, &b, true, 5), 0), 0);
  EXPECT_EQ(net.core(1).cancel(&b), 0);
  EXPECT_EQ(net.core(1).cancel(&b), -FI_ENOENT);
  ASSERT_EQ(net.node(1).done.size(), 1u);
  EXPECT_EQ(net.node(1).done[0].err, FI_ECANCELED);
  EXPECT_EQ(net.node(1).done[0].context, &b);
  EXPECT_EQ(net.core(1).rx_in_use(), 0u);
}

TEST(RdmCore, RetriesExhaustedCompleteWithErrorsNoHang) {
  Net net(2, test_config(), 10);
  // A message goes through, then the link dies both ways.
  transfer(net, {100});
  net.node(0).done.clear();
  net.node(1).done.clear();
  net.cut(0, 1, true);
  net.cut(1, 0, true);
  auto a = pattern(1, 500), b = pattern(2, 30000), c = pattern(3, 5000);
  ASSERT_EQ(net.core(0).send(send_op(1, a, &a), net.now()), 0);
  ASSERT_EQ(net.core(0).send(send_op(1, b, &b), net.now()), 0);
  ASSERT_EQ(net.core(0).send(send_op(1, c, &c), net.now()), 0);
  const uint64_t start = net.now();
  ASSERT_TRUE(net.run([&] { return net.node(0).done.size() == 3; }));
  for (auto& d : net.node(0).done) EXPECT_EQ(d.err, FI_EHOSTUNREACH);
  EXPECT_TRUE(net.core(0).peer(1)->unreachable());
  EXPECT_EQ(net.core(0).tx_in_use(), 0u);
  EXPECT_EQ(net.core(0).send(send_op(1, a, &a), net.now()), -FI_EHOSTUNREACH);
  // Exponential backoff: 8 retries from 50 us doubling take milliseconds, not seconds.
  const uint64_t took = net.now() - start;
  EXPECT_GT(took, 2'000'000u);
  EXPECT_LT(took, 200'000'000u);
  EXPECT_EQ(net.core(0).reliability_stats().rto_expiries, test_config().rel.max_retries + 1);
}

TEST(RdmCore, ReceiverOfADeadPeersRendezvousGetsAnError) {
  Net net(2, test_config(), 11);
  const uint64_t t0 = net.now();
  std::vector<uint8_t> rx(200000);
  auto tx = pattern(5, 200000);
  ASSERT_EQ(net.core(1).recv(recv_op(rx, &rx), 0), 0);
  ASSERT_EQ(net.core(0).send(send_op(1, tx, &tx), 0), 0);
  // Let the RTS/CTS and some data through, then the sender goes silent for good.
  ASSERT_TRUE(net.run([&] { return net.core(1).reliability_stats().rx_packets > 20; }));
  net.cut(0, 1, true);
  net.cut(1, 0, true);
  ASSERT_TRUE(net.run([&] { return !net.node(1).done.empty() && !net.node(0).done.empty(); }));
  // The sender's retries run out; the receiver, with nothing of its own in flight, probes the
  // silent sender in the middle of the message and gives up when the probes go unanswered.
  EXPECT_EQ(net.node(0).done[0].err, FI_EHOSTUNREACH);
  EXPECT_EQ(net.node(1).done[0].err, FI_EHOSTUNREACH);
  EXPECT_GE(net.now() - t0, test_config().rel.keepalive_ns);
  EXPECT_GT(net.core(1).reliability_stats().probes, 0u);
  EXPECT_EQ(net.core(1).rx_in_use(), 0u);
}

TEST(RdmCore, SenderWaitingForTheCtsOfADeadReceiverGetsAnError) {
  Net net(2, test_config(), 12);
  auto tx = pattern(6, 100000);
  ASSERT_EQ(net.core(0).send(send_op(1, tx, &tx), 0), 0);
  // The RTS arrives and is acked (no receive: unexpected), then the receiver dies.
  ASSERT_TRUE(net.run([&] { return net.core(0).peer(1)->in_flight() == 0; }));
  EXPECT_EQ(net.core(1).unexpected_in_use(), 1u);
  net.cut(0, 1, true);
  net.cut(1, 0, true);
  ASSERT_TRUE(net.run([&] { return !net.node(0).done.empty(); }));
  EXPECT_EQ(net.node(0).done[0].err, FI_EHOSTUNREACH);
  EXPECT_EQ(net.core(0).reliability_stats().probes, test_config().rel.max_retries);
  EXPECT_EQ(net.core(0).tx_in_use(), 0u);
}

TEST(RdmCore, AReceiverThatPostsLateIsAliveNotDead) {
  // The sender waits for the CTS for many keepalive periods: the receiver answers the probes.
  Net net(2, test_config(), 13);
  auto tx = pattern(7, 100000);
  std::vector<uint8_t> rx(100000);
  ASSERT_EQ(net.core(0).send(send_op(1, tx, &tx), 0), 0);
  net.run([&] { return false; }, 200 * test_config().rel.keepalive_ns);
  EXPECT_GT(net.core(0).reliability_stats().probes, 10u);
  EXPECT_FALSE(net.core(0).peer(1)->unreachable());
  EXPECT_TRUE(net.node(0).done.empty());
  ASSERT_EQ(net.core(1).recv(recv_op(rx, &rx), net.now()), 0);
  ASSERT_TRUE(
      net.run([&] { return net.node(0).done.size() == 1 && net.node(1).done.size() == 1; }));
  EXPECT_EQ(net.node(0).done[0].err, 0);
  EXPECT_EQ(net.node(1).done[0].err, 0);
  EXPECT_EQ(rx, tx);
}

TEST(RdmCore, BidirectionalStressBoundedInTime) {
  const auto t0 = std::chrono::steady_clock::now();
  LinkModel m;
  m.loss_ppm = 20'000;
  m.dup_ppm = 10'000;
  m.corrupt_ppm = 10'000;
  m.jitter_ns = 25'000;
  CoreConfig cfg = test_config();
  cfg.rx_ops = 1024;
  Net net(2, cfg, 99, m);
  // Both directions at once: 0 -> 1 and 1 -> 0, many small and some rendezvous messages.
  const size_t n = 400;
  std::vector<Msg> fwd, back;
  Rng r(99);
  for (size_t i = 0; i < n; ++i) {
    size_t len = r.below(10) == 0 ? 30000 + r.below(200000) : r.below(3000);
    fwd.push_back({i, pattern(i, len), std::vector<uint8_t>(len), true});
    back.push_back({i + n, pattern(i + n, len), std::vector<uint8_t>(len), true});
  }
  for (auto& x : fwd) ASSERT_EQ(net.core(1).recv(recv_op(x.rx, &x, true, 7), 0), 0);
  for (auto& x : back) ASSERT_EQ(net.core(0).recv(recv_op(x.rx, &x, true, 7), 0), 0);
  size_t fs = 0, bs = 0;
  auto pump = [&] {
    while (fs < n && net.core(0).send(send_op(1, fwd[fs].tx, &fwd[fs], true, 7), net.now()) == 0)
      ++fs;
    while (bs < n && net.core(1).send(send_op(0, back[bs].tx, &back[bs], true, 7), net.now()) == 0)
      ++bs;
  };
  ASSERT_TRUE(net.run([&] {
    pump();
    return net.node(0).done.size() == 2 * n && net.node(1).done.size() == 2 * n;
  }));
  for (auto& x : fwd) ASSERT_EQ(x.rx, x.tx) << x.id;
  for (auto& x : back) ASSERT_EQ(x.rx, x.tx) << x.id;
  // Receives match in order: each buffer got the message sent in its position (checked above);
  // eager ones (the same tag everywhere) also complete in order on both sides.
  for (auto [done, msgs] :
       {std::pair{&net.node(1).done, &fwd}, std::pair{&net.node(0).done, &back}}) {
    size_t k = 0;
    for (auto& c : *done) {
      if (!(c.flags & FI_RECV) || c.len >= 8192) continue;
      while ((*msgs)[k].tx.size() >= 8192) ++k;
      ASSERT_EQ(c.context, &(*msgs)[k++]);
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

namespace {

// A core alone, fed frames by hand (a peer that breaks the protocol).
struct Capture final : CoreSink {
  bool transmit(fi_addr_t, const RdmHeader& h, std::span<const uint8_t> d) noexcept override {
    EXPECT_EQ(dpfab::wire::rdm_validate(h, d.size()), dpfab::wire::RdmVerdict::kOk);
    sent.push_back(h);
    return true;
  }
  void complete(const Completion& c) noexcept override {
    if (c.cq) done.push_back(c);  // what a CQ would get (cq false: counters only)
  }
  std::vector<RdmHeader> sent;
  std::vector<Completion> done;
};

RdmHeader eager_from_peer(uint32_t seq, uint32_t msg, uint64_t off, uint64_t len) {
  RdmHeader h;
  h.kind = dpfab::wire::RdmKind::kEager;
  h.epoch = 77;
  h.seq = seq;
  h.window = 64;
  h.msg_id = msg;
  h.offset = off;
  h.length = len;
  return h;
}

// A pure ack from the peer (epoch 77, as eager_from_peer) of our packets before `ack`.
RdmHeader ack_from_peer(uint32_t ack) {
  RdmHeader h;
  h.kind = dpfab::wire::RdmKind::kAck;
  h.epoch = 77;
  h.ack = ack;
  h.window = 64;
  return h;
}

}  // namespace

TEST(RdmCore, AProtocolViolationFailsTheMessageNotTheEndpoint) {
  Capture cap;
  auto made = RdmCore::create(test_config(), &cap);
  ASSERT_TRUE(made.ok());
  RdmCore& core = *made.value();
  ASSERT_EQ(core.add_peer(0), 0);
  std::vector<uint8_t> a(100), b(100), c(100);
  ASSERT_EQ(core.recv(recv_op(a, &a), 0), 0);
  ASSERT_EQ(core.recv(recv_op(b, &b), 0), 0);
  ASSERT_EQ(core.recv(recv_op(c, &c), 0), 0);
  const uint8_t bytes[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  // The first segment of a 20-byte message, then a new message instead of its second half.
  core.on_frame(0, eager_from_peer(0, 1, 0, 20), {bytes, 10}, 10);
  core.on_frame(0, eager_from_peer(1, 2, 0, 10), {bytes, 10}, 20);
  ASSERT_EQ(cap.done.size(), 2u);
  EXPECT_EQ(cap.done[0].context, &a);
  EXPECT_EQ(cap.done[0].err, FI_EIO);
  EXPECT_EQ(cap.done[1].context, &b);
  EXPECT_EQ(cap.done[1].err, 0);
  // A segment that does not follow: the message it claims to continue is failed.
  core.on_frame(0, eager_from_peer(2, 3, 0, 20), {bytes, 10}, 30);
  core.on_frame(0, eager_from_peer(3, 3, 15, 20), {bytes, 5}, 40);
  ASSERT_EQ(cap.done.size(), 3u);
  EXPECT_EQ(cap.done[2].context, &c);
  EXPECT_EQ(cap.done[2].err, FI_EIO);
  EXPECT_EQ(core.stats().protocol_errors, 2u);
  EXPECT_EQ(core.rx_in_use(), 0u);
  // Frames from an address that is not a peer are counted and dropped.
  core.on_frame(5, eager_from_peer(0, 1, 0, 10), {bytes, 10}, 50);
  EXPECT_EQ(core.stats().unknown_peer, 1u);
  EXPECT_FALSE(core.peer(0)->unreachable());
}

// A peer that comes back with a new epoch (a restarted process at the same address): what
// involved the old instance fails with FI_EHOSTUNREACH, the new one is heard and reachable; a
// packet of the old epoch after that is stale, and so is an ack naming another epoch of ours.
TEST(RdmCore, ARestartedPeerIsReachableAgain) {
  Capture cap;
  auto made = RdmCore::create(test_config(), &cap);
  ASSERT_TRUE(made.ok());
  RdmCore& core = *made.value();
  ASSERT_EQ(core.add_peer(0), 0);
  std::vector<uint8_t> a(100), b(100), out(50, 1);
  ASSERT_EQ(core.recv(recv_op(a, &a), 0), 0);
  ASSERT_EQ(core.recv(recv_op(b, &b), 0), 0);
  const uint8_t bytes[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  core.on_frame(0, eager_from_peer(0, 1, 0, 10), {bytes, 10}, 10);  // epoch 77 heard
  ASSERT_EQ(cap.done.size(), 1u);
  SendOp s;
  s.dest = 0;
  s.buf = out.data();
  s.len = out.size();
  s.context = &out;
  ASSERT_EQ(core.send(s, 20), 0);  // in flight to the old instance, never acked
  // An ack naming an epoch of ours we never had: dropped, the send stays in flight.
  RdmHeader stale;
  stale.kind = dpfab::wire::RdmKind::kAck;
  stale.epoch = 77;
  stale.ack = 1;
  stale.window = 64;
  stale.msg_id = core.epoch() + 1;
  core.on_frame(0, stale, {}, 25);
  EXPECT_EQ(core.tx_in_use(), 1u);
  // The restarted peer: epoch 78, its stream from the start.
  RdmHeader h = eager_from_peer(0, 1, 0, 10);
  h.epoch = 78;
  core.on_frame(0, h, {bytes, 10}, 30);
  EXPECT_EQ(core.stats().peer_restarts, 1u);
  ASSERT_EQ(cap.done.size(), 3u);
  EXPECT_EQ(cap.done[1].context, &out);
  EXPECT_EQ(cap.done[1].err, FI_EHOSTUNREACH);
  EXPECT_EQ(cap.done[2].context, &b);
  EXPECT_EQ(cap.done[2].err, 0);
  EXPECT_FALSE(core.peer(0)->unreachable());
  EXPECT_EQ(core.peer(0)->peer_epoch(), 78u);
  // A late packet of the old instance is stale, not a restart.
  core.on_frame(0, eager_from_peer(1, 2, 0, 10), {bytes, 10}, 40);
  EXPECT_EQ(core.stats().peer_restarts, 1u);
  EXPECT_EQ(core.reliability_stats().rx_stale_epoch, 2u);
  // Sends to the new instance work.
  ASSERT_EQ(core.send(s, 50), 0);
  EXPECT_EQ(core.tx_in_use(), 1u);
}

// A restarted endpoint (this core) whose peer still retransmits the stream it had begun with our
// predecessor: a first packet past the start of a stream is not taken (it would be held, SACKed
// and delivered into the new stream once seqs below it filled in, and the new stream's own packet
// at that seq dropped as a duplicate). The peer's new stream from initial_seq is delivered intact.
TEST(RdmCore, ANewInstanceDropsTheTailOfAStreamMeantForItsPredecessor) {
  Capture cap;
  auto made = RdmCore::create(test_config(), &cap);
  ASSERT_TRUE(made.ok());
  RdmCore& core = *made.value();
  ASSERT_EQ(core.add_peer(0), 0);
  std::vector<std::vector<uint8_t>> rx(4, std::vector<uint8_t>(100));
  for (auto& b : rx) ASSERT_EQ(core.recv(recv_op(b, &b), 0), 0);
  const uint8_t stale[10] = {9, 9, 9, 9, 9, 9, 9, 9, 9, 9};
  core.on_frame(0, eager_from_peer(3, 40, 0, 10), {stale, 10}, 10);  // the old stream's seq 3
  EXPECT_EQ(core.reliability_stats().rx_stale_epoch, 1u);
  EXPECT_EQ(core.peer(0)->peer_epoch(), 0u) << "the epoch is learnt from a stream's start";
  EXPECT_EQ(core.reliability_stats().rx_out_of_order, 0u);
  // The peer's new stream (after it noticed the restart): seqs 0..3, messages 1..4.
  uint8_t bytes[10];
  for (uint32_t seq = 0; seq < 4; ++seq) {
    std::memset(bytes, static_cast<int>(seq + 1), sizeof(bytes));
    core.on_frame(0, eager_from_peer(seq, seq + 1, 0, 10), {bytes, 10}, 20 + seq);
    ASSERT_EQ(cap.done.size(), seq + 1) << "seq " << seq;
  }
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(cap.done[i].err, 0);
    EXPECT_EQ(cap.done[i].context, &rx[i]);
    EXPECT_EQ(rx[i][0], i + 1) << "receive " << i << " got another stream's data";
  }
  EXPECT_EQ(core.peer(0)->peer_epoch(), 77u);
}

// A restarted peer that took the start of our stream to its predecessor (our retransmissions
// reached it before it spoke) acknowledges it in its first packet: our stream to it goes on from
// there. Starting again at initial_seq, our next packets would be taken as duplicates and acked
// without being delivered.
TEST(RdmCore, OurStreamToARestartedPeerGoesOnWhereItExpectsIt) {
  Capture cap;
  auto made = RdmCore::create(test_config(), &cap);
  ASSERT_TRUE(made.ok());
  RdmCore& core = *made.value();
  ASSERT_EQ(core.add_peer(0), 0);
  std::vector<uint8_t> a(100), out(50, 1);
  ASSERT_EQ(core.recv(recv_op(a, &a), 0), 0);
  const uint8_t bytes[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  core.on_frame(0, eager_from_peer(0, 1, 0, 10), {bytes, 10}, 10);  // epoch 77 heard
  SendOp s;
  s.dest = 0;
  s.buf = out.data();
  s.len = out.size();
  s.context = &out;
  ASSERT_EQ(core.send(s, 20), 0);  // our seq 0: the new instance takes it, the old never acks
  auto last_sequenced = [&] {
    for (auto it = cap.sent.rbegin(); it != cap.sent.rend(); ++it)
      if (it->kind != dpfab::wire::RdmKind::kAck) return *it;
    return RdmHeader{};
  };
  EXPECT_EQ(last_sequenced().seq, 0u);
  // The new instance (epoch 78) speaks: its stream's start, acknowledging our seq 0.
  RdmHeader h = eager_from_peer(0, 1, 0, 10);
  h.epoch = 78;
  h.ack = 1;
  core.on_frame(0, h, {bytes, 10}, 30);
  EXPECT_EQ(core.stats().peer_restarts, 1u);
  ASSERT_GE(cap.done.size(), 2u);
  EXPECT_EQ(cap.done[1].context, &out);
  EXPECT_EQ(cap.done[1].err, FI_EHOSTUNREACH);
  ASSERT_EQ(core.send(s, 40), 0);
  EXPECT_EQ(last_sequenced().seq, 1u) << "our stream must go on where the new instance expects it";
  // Its ack of that packet completes the send.
  RdmHeader ack;
  ack.kind = dpfab::wire::RdmKind::kAck;
  ack.epoch = 78;
  ack.ack = 2;
  ack.window = 64;
  ack.msg_id = core.epoch();
  core.on_frame(0, ack, {}, 50);
  EXPECT_EQ(core.tx_in_use(), 0u);
  EXPECT_EQ(cap.done.back().context, &out);
  EXPECT_EQ(cap.done.back().err, 0);
}

// FI_INJECT_COMPLETE (SendOp::complete_now): the send completes when it is copied, once; the
// message still arrives reliably, and its data is the copy's.
TEST(RdmCore, InjectCompleteCompletesAtOnceAndOnlyOnce) {
  Net net(2, test_config(), 21);
  std::vector<uint8_t> rx(64);
  ASSERT_EQ(net.core(1).recv(recv_op(rx, &rx), 0), 0);
  std::vector<uint8_t> tx = pattern(9, 48);
  SendOp s = send_op(1, tx, &tx);
  s.inject = true;
  s.complete_now = true;
  ASSERT_EQ(net.core(0).send(s, 0), 0);
  ASSERT_EQ(net.node(0).done.size(), 1u);  // before anything was acknowledged
  EXPECT_EQ(net.node(0).done[0].context, &tx);
  EXPECT_EQ(net.node(0).done[0].err, 0);
  std::fill(tx.begin(), tx.end(), 0);  // the application's buffer is its own again
  ASSERT_TRUE(
      net.run([&] { return net.node(1).done.size() == 1 && net.core(0).tx_in_use() == 0; }));
  EXPECT_EQ(std::vector<uint8_t>(rx.begin(), rx.begin() + 48), pattern(9, 48));
  EXPECT_EQ(net.node(0).done.size(), 1u);  // no second completion at the ack
}

// CoreConfig::copy_max (FI_DPDK_RDM_COPY_MAX): a message of up to copy_max bytes that asks to
// complete at once is copied into its op's slot, beyond inject_size and over several segments,
// and completes before anything is acknowledged; the peer asks for no immediate ack of it. A
// longer one must not ask (-FI_EMSGSIZE), and a plain inject stays within inject_size.
TEST(RdmCore, AMessageUpToCopyMaxCompletesOnceCopied) {
  CoreConfig cfg = test_config();
  cfg.inject_size = 64;
  cfg.copy_max = 3000;    // three segments of 1024
  cfg.rel.ack_every = 8;  // no ack for the count of packets: only a delayed or an asked one
  Net net(2, cfg, 22);
  int ack_req = 0, data = 0;  // node 0's data packets, and those that ask for an ack at once
  net.on_send = [&](int from, int, const RdmHeader& h) {
    if (from != 0 || h.kind != dpfab::wire::RdmKind::kEager) return;
    ++data;
    ack_req += (h.flags & dpfab::wire::kRdmAckReq) != 0;
  };
  std::vector<uint8_t> rx(4096);
  ASSERT_EQ(net.core(1).recv(recv_op(rx, &rx), net.now()), 0);
  std::vector<uint8_t> tx = pattern(10, 3000);
  SendOp s = send_op(1, tx, &tx);
  s.inject = s.complete_now = true;
  ASSERT_EQ(net.core(0).send(s, net.now()), 0);
  ASSERT_EQ(net.node(0).done.size(), 1u);  // before anything was acknowledged
  EXPECT_EQ(net.node(0).done[0].err, 0);
  EXPECT_EQ(net.node(0).done[0].len, 3000u);
  std::fill(tx.begin(), tx.end(), 0);  // the application's buffer is its own again
  ASSERT_TRUE(
      net.run([&] { return net.node(1).done.size() == 1 && net.core(0).tx_in_use() == 0; }));
  // Its ack was left to the receiver's delayed ack (or a reply): none was asked at once.
  EXPECT_EQ(data, 3);
  EXPECT_EQ(ack_req, 0);
  EXPECT_EQ(net.node(1).done[0].len, 3000u);
  EXPECT_EQ(std::vector<uint8_t>(rx.begin(), rx.begin() + 3000), pattern(10, 3000));
  EXPECT_EQ(net.node(0).done.size(), 1u);  // no second completion at the ack
  // The same message sent from its buffer (no complete_now) asks for its ack at once.
  ASSERT_EQ(net.core(1).recv(recv_op(rx, &rx), net.now()), 0);
  tx = pattern(11, 3000);
  ASSERT_EQ(net.core(0).send(send_op(1, tx, &tx), net.now()), 0);
  EXPECT_EQ(net.node(0).done.size(), 1u);
  ASSERT_TRUE(
      net.run([&] { return net.node(1).done.size() == 2 && net.node(0).done.size() == 2; }));
  EXPECT_EQ(data, 6);
  EXPECT_EQ(ack_req, 1);  // its last packet
  // Beyond the slot, or a plain inject (no complete_now) beyond inject_size: refused.
  std::vector<uint8_t> big(3001), mid(65);
  SendOp b = send_op(1, big, &big);
  b.inject = b.complete_now = true;
  EXPECT_EQ(net.core(0).send(b, net.now()), -FI_EMSGSIZE);
  SendOp m = send_op(1, mid, &mid);
  m.inject = true;
  EXPECT_EQ(net.core(0).send(m, net.now()), -FI_EMSGSIZE);
  // A bad copy_max is refused when the core is made.
  cfg.copy_max = 65537;
  Capture cap;
  EXPECT_EQ(RdmCore::create(cfg, &cap).code(), -FI_EINVAL);
}

TEST(RdmCore, ManyToOneOverALossyLinkKeepsEachSendersOrder) {
  LinkModel m;
  m.loss_ppm = 30'000;
  m.dup_ppm = 20'000;
  m.corrupt_ppm = 10'000;
  m.jitter_ns = 30'000;
  CoreConfig cfg = test_config();
  cfg.rx_ops = 1024;
  Net net(4, cfg, 77, m);
  constexpr int kSenders = 3;
  constexpr size_t kPer = 80;
  // Any-source receives, posted up front: each message says who sent it and its index.
  std::vector<std::vector<uint8_t>> rx(kSenders * kPer, std::vector<uint8_t>(40000));
  for (auto& b : rx) ASSERT_EQ(net.core(0).recv(recv_op(b, &b), 0), 0);
  std::vector<std::vector<uint8_t>> tx;
  Rng r(77);
  for (int s = 0; s < kSenders; ++s) {
    for (size_t i = 0; i < kPer; ++i) {
      auto b = pattern(s * 1000 + i, 16 + r.below(r.below(4) == 0 ? 30000 : 2000));
      std::memcpy(b.data(), &s, sizeof(s));
      std::memcpy(b.data() + 4, &i, sizeof(i));
      tx.push_back(std::move(b));
    }
  }
  std::vector<size_t> next(kSenders, 0);
  auto pump = [&] {
    for (int s = 0; s < kSenders; ++s) {
      while (next[s] < kPer) {
        auto& b = tx[s * kPer + next[s]];
        if (net.core(s + 1).send(send_op(0, b, &b), net.now()) != 0) break;
        ++next[s];
      }
    }
  };
  ASSERT_TRUE(net.run([&] {
    pump();
    return net.node(0).done.size() == kSenders * kPer;
  }));
  // In posting (= matching) order, each sender's messages appear in its sending order, intact.
  std::vector<size_t> seen(kSenders, 0);
  for (auto& b : rx) {
    int s;
    size_t i;
    std::memcpy(&s, b.data(), sizeof(s));
    std::memcpy(&i, b.data() + 4, sizeof(i));
    ASSERT_TRUE(s >= 0 && s < kSenders);
    ASSERT_EQ(i, seen[s]++) << "sender " << s;
    const auto& t = tx[s * kPer + i];
    ASSERT_TRUE(std::equal(t.begin(), t.end(), b.begin())) << s << "/" << i;
  }
  for (auto& c : net.node(0).done) {
    EXPECT_EQ(c.err, 0);
    int s;
    std::memcpy(&s, static_cast<uint8_t*>(c.buf), sizeof(s));
    EXPECT_EQ(c.src, static_cast<fi_addr_t>(s + 1));  // FI_SOURCE
  }
}

// next_deadline is read after every call into the core. With many peers in flight it comes from
// the timer heap (RdmShared::timers, on past kTimerHeapFrom active peers), which must follow
// every timer as it moves: each ack takes one peer's RTO away and the next earliest is reported;
// progress() drops the idle peers and turns the heap off; a second burst turns it on again.
TEST(RdmCore, NextDeadlineFollowsEveryPeersTimerWithManyInFlight) {
  Capture cap;
  CoreConfig cfg = test_config();
  cfg.timer_heap_from = CoreConfig{}.timer_heap_from;  // on past 8 active peers, off at 2
  auto made = RdmCore::create(cfg, &cap);
  ASSERT_TRUE(made.ok());
  RdmCore& core = *made.value();
  constexpr fi_addr_t kPeers = 40;
  for (fi_addr_t a = 0; a < kPeers; ++a) ASSERT_EQ(core.add_peer(a), 0);
  std::vector<uint8_t> b(10);
  const uint64_t rto = cfg.rel.rto_init_ns;
  for (int round = 0; round < 2; ++round) {
    const uint64_t t0 = 1000 + static_cast<uint64_t>(round) * 10 * rto;
    // Sent in a scrambled order, each at its own time: peer a's RTO is due at t0 + 7a + its RTO.
    std::vector<fi_addr_t> order;
    for (fi_addr_t k = 0; k < kPeers; ++k) order.push_back((k * 17) % kPeers);
    std::map<uint64_t, fi_addr_t> due;  // deadline -> peer
    for (fi_addr_t a : order) {
      const uint64_t peer_rto = core.peer(a)->rto_ns();  // rto_init, then from the RTT samples
      ASSERT_EQ(core.send(send_op(static_cast<int>(a), b, &b), a, t0 + 7 * a), 0);
      due[t0 + 7 * a + peer_rto] = a;
      ASSERT_EQ(core.next_deadline(), due.begin()->first) << "after the send to " << a;
      ASSERT_TRUE(core.timers_consistent());
    }
    // Acked in another order: the earliest left is reported after each.
    for (fi_addr_t k = 0; k < kPeers; ++k) {
      const fi_addr_t a = (k * 23 + 5) % kPeers;
      core.on_frame(a, ack_from_peer(static_cast<uint32_t>(round) + 1), {}, t0 + 500);
      for (auto it = due.begin(); it != due.end(); ++it) {
        if (it->second == a) {
          due.erase(it);
          break;
        }
      }
      ASSERT_EQ(core.next_deadline(), due.empty() ? UINT64_MAX : due.begin()->first)
          << "round " << round << ", after the ack from " << a;
      ASSERT_TRUE(core.timers_consistent());
    }
    core.progress(t0 + 600);  // every peer idle again: the heap goes off
    EXPECT_EQ(core.next_deadline(), UINT64_MAX);
  }
  EXPECT_EQ(cap.done.size(), 2 * kPeers);  // every send completed once, on its ack
  for (fi_addr_t a = 0; a < kPeers; ++a) EXPECT_FALSE(core.peer(a)->unreachable());
}

// With the timer heap on, the timer pass runs only the peers whose timers are due (an
// all-to-all's receiver runs one for nearly every message), and visits every active peer after
// the port refused a frame and every timer_visit_ns: each RTO comes due on its own and retransmits
// to its peer alone; a retransmission the port refused goes at the next pass; idle peers leave
// and the heap goes off at the periodic visit.
TEST(RdmCore, TimerPassRunsOnlyTheDuePeersWithManyInFlight) {
  struct Sink final : CoreSink {
    bool transmit(fi_addr_t peer, const RdmHeader& h, std::span<const uint8_t>) noexcept override {
      if (refuse) return false;
      sent.emplace_back(peer, h);
      return true;
    }
    void complete(const Completion& c) noexcept override {
      if (c.cq) done.push_back(c);
    }
    bool refuse = false;
    std::vector<std::pair<fi_addr_t, RdmHeader>> sent;
    std::vector<Completion> done;
  } sink;
  CoreConfig cfg = test_config();
  cfg.timer_heap_from = CoreConfig{}.timer_heap_from;  // on past 8 active peers
  cfg.timer_visit_ns = 1'000'000'000;                  // no periodic visit in the first part
  auto made = RdmCore::create(cfg, &sink);
  ASSERT_TRUE(made.ok());
  RdmCore& core = *made.value();
  constexpr fi_addr_t kPeers = 40;
  for (fi_addr_t a = 0; a < kPeers; ++a) ASSERT_EQ(core.add_peer(a), 0);
  std::vector<uint8_t> b(10);
  const uint64_t t0 = 1000, rto = cfg.rel.rto_init_ns;
  core.progress(t0);  // a full visit (the first): the next is due in timer_visit_ns
  for (fi_addr_t a = 0; a < kPeers; ++a)
    ASSERT_EQ(core.send(send_op(static_cast<int>(a), b, &b), a, t0 + 7 * a), 0);
  ASSERT_EQ(sink.sent.size(), kPeers);
  // Peer a's RTO is due at t0 + 7a + rto: a pass at that time resends to a, and only to a.
  for (fi_addr_t a = 0; a < kPeers; ++a) {
    const uint64_t due = t0 + 7 * a + rto;
    ASSERT_EQ(core.next_deadline(), due);
    sink.sent.clear();
    const uint64_t run = core.stats().timer_peers;
    core.progress(due);
    EXPECT_EQ(core.stats().timer_peers, run + 1) << "a pass visited more than the due peer";
    ASSERT_EQ(sink.sent.size(), 1u) << "at peer " << a << "'s RTO";
    EXPECT_EQ(sink.sent[0].first, a);
    EXPECT_EQ(sink.sent[0].second.kind, dpfab::wire::RdmKind::kEager);
    ASSERT_TRUE(core.timers_consistent());
  }
  EXPECT_EQ(core.reliability_stats().tx_retransmits, kPeers);
  // The port refuses a new send to peer 0 (queued): the core retries soon (tx_retry_ns), with a
  // visit of every peer, which sends it once the port takes frames again; no timer of peer 0 is
  // due then (the due pass alone would not send it).
  const uint64_t t1 = core.next_deadline() - 5000;
  sink.refuse = true;
  ASSERT_EQ(core.send(send_op(1000, b, &b), 0, t1), 0);
  sink.refuse = false;
  const uint64_t retry = core.next_deadline();
  ASSERT_EQ(retry, t1 + cfg.tx_retry_ns);
  sink.sent.clear();
  const uint64_t visits = core.stats().timer_visits;
  core.progress(retry);
  EXPECT_EQ(core.stats().timer_visits, visits + 1);
  ASSERT_EQ(sink.sent.size(), 1u);
  EXPECT_EQ(sink.sent[0].first, 0u);
  EXPECT_EQ(sink.sent[0].second.kind, dpfab::wire::RdmKind::kEager);
  EXPECT_EQ(core.reliability_stats().tx_retransmits, kPeers);
  ASSERT_TRUE(core.timers_consistent());
  // Every peer acks: their RTOs go, they are idle but still active (the due pass does not visit
  // them) until the next periodic visit drops them and turns the heap off.
  for (fi_addr_t a = 0; a < kPeers; ++a) {
    core.on_frame(a, ack_from_peer(a == 0 ? 2 : 1), {}, retry + 10);  // peer 0 has two packets
    ASSERT_TRUE(core.timers_consistent());
  }
  EXPECT_EQ(sink.done.size(), kPeers + 1);
  EXPECT_EQ(core.next_deadline(), UINT64_MAX);
  core.progress(retry + cfg.timer_visit_ns + 1);
  EXPECT_EQ(core.next_deadline(), UINT64_MAX);
  ASSERT_TRUE(core.timers_consistent());  // true: the heap is off
  for (fi_addr_t a = 0; a < kPeers; ++a) EXPECT_FALSE(core.peer(a)->unreachable());
}

TEST(RdmCore, IdlePeersCostTheProgressStepNothing) {
  Capture cap;
  auto made = RdmCore::create(test_config(), &cap);
  ASSERT_TRUE(made.ok());
  RdmCore& core = *made.value();
  for (fi_addr_t a = 0; a < 20000; ++a) ASSERT_EQ(core.add_peer(a), 0);
  EXPECT_EQ(core.next_deadline(), UINT64_MAX);
  std::vector<uint8_t> b(10);
  ASSERT_EQ(core.send(send_op(4321, b, &b), 100), 0);
  EXPECT_EQ(core.next_deadline(), 100 + test_config().rel.rto_init_ns);
  // A frame from another peer, acked after the delay; then both go idle again.
  core.on_frame(17, eager_from_peer(0, 1, 0, 10), {b.data(), 10}, 200);
  EXPECT_EQ(core.next_deadline(), 200 + test_config().rel.ack_delay_ns);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20000; ++i) core.progress(300);  // visiting every peer: 4e8 visits
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  EXPECT_FALSE(core.peer(4321)->unreachable());
}

// Throughput under loss, in simulated time (a link of 5 us each way and infinitely fast hosts):
// 200 messages of mixed sizes up to 4 MiB, clean and with 10 % loss, 10 % duplication and 0.1 %
// corruption, without and with reordering. Losses are repaired from SACKs (a retransmission that
// is lost again included), not by waiting for the RTO, and a backoff ends with progress: the lossy
// link takes at most 6 times the clean one (it took 11 times, and 330 times with reordering,
// before those two).
TEST(RdmCore, ThroughputUnderLossStaysWithinAFewTimesTheCleanLink) {
  CoreConfig cfg;  // the provider's reliability parameters (rto_min 200 us)
  cfg.max_msg_size = 64ull << 20;
  const auto sizes = mixed_sizes(5, 200, 4u << 20);
  auto run = [&](uint32_t ppm, uint64_t jitter_ns) {
    LinkModel m;
    m.loss_ppm = m.dup_ppm = ppm;
    m.corrupt_ppm = ppm / 100;
    m.latency_ns = 5'000;
    m.jitter_ns = jitter_ns;
    Net net(2, cfg, 5, m);
    const uint64_t t0 = net.now();
    transfer(net, sizes);
    const auto& rs = net.core(0).reliability_stats();
    std::printf(
        "loss %.0f %%, jitter %lu ns: %.2f ms; packets %lu, retransmitted %lu on RTO, "
        "%lu on SACK; RTO expiries %lu\n",
        ppm / 1e4, static_cast<unsigned long>(jitter_ns), (net.now() - t0) / 1e6,
        static_cast<unsigned long>(rs.tx_packets), static_cast<unsigned long>(rs.tx_retransmits),
        static_cast<unsigned long>(rs.tx_fast_retransmits),
        static_cast<unsigned long>(rs.rto_expiries));
    return net.now() - t0;
  };
  for (uint64_t jitter : {0, 2'000}) {
    const uint64_t clean = run(0, jitter), lossy = run(100'000, jitter);
    EXPECT_LE(lossy, 6 * clean) << "jitter " << jitter;
  }
}
