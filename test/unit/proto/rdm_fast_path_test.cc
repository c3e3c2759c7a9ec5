// SPDX-License-Identifier: BSD-3-Clause
//
// The RDM core's fast paths (rdm_core.h, "Fast paths"): a one-packet send to a peer with nothing
// queued goes out from send() itself; a packet that holds a whole message matched by a posted
// receive completes it at once.
//   - Equivalence: seeded random conversations (both directions, every size class, tagged and
//     not, ignore bits, directed receives, CQ data, fi_inject, FI_INJECT_COMPLETE, selective
//     completion, truncation, unexpected messages, multi-recv, peek, cancel) over perfect, lossy
//     and refusing links run twice, fast paths on and off: the same frames in the same order
//     (a hash of their bytes), the same completions in the same order, the same bytes received,
//     the same statistics.
//   - The boundary, one case each: what takes a fast path, and what falls back to the general
//     code (a multi-segment message, an unexpected one, a full window, a queued message before
//     it, a refused frame, a receive that has to wait, a tag that does not match, truncation,
//     multi-recv, completions nobody counts).
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <deque>
#include <map>

#include "rdm_sim.h"

using namespace rdm_sim;

namespace {

SendOp send_op(int dest, const void* buf, size_t len, void* ctx, bool tagged = false,
               uint64_t tag = 0) {
  SendOp s;
  s.dest = dest;
  s.buf = buf;
  s.len = len;
  s.context = ctx;
  s.tagged = tagged;
  s.tag = tag;
  return s;
}

RecvOp recv_op(void* buf, size_t len, void* ctx, bool tagged = false, uint64_t tag = 0,
               uint64_t ignore = 0, fi_addr_t src = FI_ADDR_UNSPEC) {
  RecvOp r;
  r.buf = buf;
  r.len = len;
  r.context = ctx;
  r.match = {src, tag, ignore, tagged};
  return r;
}

void* ctx_of(uint64_t id) { return reinterpret_cast<void*>(static_cast<uintptr_t>(id + 1)); }

// ---- equivalence -------------------------------------------------------------------------------

// A completion with its pointers made comparable across runs: the context is an operation id
// already, the buffer becomes (receive buffer id, offset).
struct Seen {
  uintptr_t context;
  uint64_t flags, data, tag, src;
  size_t len, olen;
  int err;
  bool cq, count;
  long buf_id;
  size_t buf_off;
  bool operator==(const Seen&) const = default;
};

struct Outcome {
  std::vector<Seen> done[2];
  uint64_t counted[2] = {}, counted_err[2] = {};
  std::vector<ssize_t> returns;  // of every send/recv/cancel call, in order
  std::vector<std::vector<uint8_t>> rx_bufs;
  uint64_t wire_hash = 0, frames = 0, now = 0;
  CoreStats stats[2];
  ReliabilityStats rel[2];
};

// A seeded conversation between nodes 0 and 1, run with fast paths on or off.
Outcome converse(uint64_t seed, const LinkModel& model, bool fast, size_t steps) {
  CoreConfig cfg = test_config();
  cfg.fast_paths = fast;
  cfg.rx_ops = 512;
  cfg.tx_ops = 512;
  Net net(2, cfg, seed, model);
  Rng r(seed * 31 + 7);
  Outcome out;
  std::deque<std::vector<uint8_t>> tx_bufs;  // alive until the end (sends may read them)
  std::deque<std::vector<uint8_t>> rx_bufs;
  std::vector<uint64_t> posted[2];  // receive ids that may be cancelled
  uint64_t next_id = 0;
  const size_t seg = cfg.seg_size;
  auto size = [&]() -> size_t {
    switch (r.below(8)) {
      case 0:
        return 0;
      case 1:
      case 2:
        return 1 + r.below(64);  // fi_inject sizes
      case 3:
      case 4:
        return 65 + r.below(seg - 64);  // one packet
      case 5:
        return seg;  // exactly one packet
      case 6:
        return seg + 1 + r.below(cfg.eager_max - seg);  // several eager packets
      default:
        return cfg.eager_max + 1 + r.below(40000);  // rendezvous
    }
  };
  for (size_t step = 0; step < steps; ++step) {
    const int a = static_cast<int>(r.below(2)), b = 1 - a;
    const uint64_t id = next_id++;
    switch (r.below(10)) {
      case 0:
      case 1:
      case 2:
      case 3: {  // a sends to b
        const size_t len = size();
        tx_bufs.push_back(pattern(id, len));
        SendOp s = send_op(b, tx_bufs.back().data(), len, ctx_of(id), r.below(2), r.below(4));
        if (r.below(4) == 0) {
          s.has_data = true;
          s.data = id * 1000 + 1;
        }
        switch (r.below(4)) {
          case 0:  // fi_inject
            if (len <= cfg.inject_size) s.inject = true, s.completion = false;
            break;
          case 1:  // FI_INJECT_COMPLETE, as drivers/ofi makes of a small fi_send
            if (len <= cfg.inject_size) s.inject = s.complete_now = true;
            break;
          case 2:  // selective completion without FI_COMPLETION
            s.completion = false;
            break;
          default:
            break;
        }
        out.returns.push_back(net.core(a).send(s, net.now()));
        break;
      }
      case 4:
      case 5:
      case 6:
      case 7: {  // b posts a receive
        const bool tagged = r.below(2);
        size_t len = r.below(6) == 0 ? r.below(200) : cfg.eager_max + 50000;  // some truncate
        RecvOp op;
        if (!tagged && r.below(10) == 0) {
          len = 3 * seg + r.below(3 * seg);
          rx_bufs.emplace_back(len, 0xee);
          op = recv_op(rx_bufs.back().data(), len, ctx_of(id));
          op.flags = FI_MULTI_RECV;
        } else {
          rx_bufs.emplace_back(len, 0xee);
          op = recv_op(rx_bufs.back().data(), len, ctx_of(id), tagged, r.below(4),
                       r.below(3) == 0 ? 1 : 0, r.below(5) == 0 ? a : FI_ADDR_UNSPEC);
        }
        if (r.below(4) == 0) op.completion = false;
        // recv_needs_time() false: the receive sends nothing and moves no deadline.
        const bool needs_time = net.core(b).recv_needs_time();
        const uint64_t frames = net.frames_sent + net.frames_refused;
        const uint64_t due = net.core(b).next_deadline();
        const ssize_t rc = net.core(b).recv(op, net.now());
        if (!needs_time) {
          EXPECT_EQ(net.frames_sent + net.frames_refused, frames);
          EXPECT_EQ(net.core(b).next_deadline(), due);
        }
        out.returns.push_back(rc);
        if (rc == 0) posted[b].push_back(id);
        break;
      }
      case 8: {  // b peeks for a tagged message
        RecvOp op = recv_op(nullptr, 0, ctx_of(id), true, r.below(4), r.below(2) ? 1 : 0);
        op.flags = FI_PEEK;
        out.returns.push_back(net.core(b).recv(op, net.now()));
        break;
      }
      default:  // b cancels one of its receives (it may have completed already: -FI_ENOENT)
        if (!posted[b].empty()) {
          const uint64_t victim = posted[b][r.below(posted[b].size())];
          out.returns.push_back(net.core(b).cancel(ctx_of(victim)));
        }
        break;
    }
    if (r.below(3) == 0) net.run([] { return false; }, r.below(40'000));
  }
  net.run([] { return false; }, 200'000'000);  // everything that can complete does
  // Make completions comparable: which receive buffer, at which offset.
  std::map<const uint8_t*, long> base;
  for (size_t i = 0; i < rx_bufs.size(); ++i) base[rx_bufs[i].data()] = static_cast<long>(i);
  for (int n = 0; n < 2; ++n) {
    for (const Completion& c : net.node(n).done) {
      Seen s{};
      s.context = reinterpret_cast<uintptr_t>(c.context);
      s.flags = c.flags;
      s.data = c.data;
      s.tag = c.tag;
      s.src = c.src;
      s.len = c.len;
      s.olen = c.olen;
      s.err = c.err;
      s.cq = c.cq;
      s.count = c.count;
      s.buf_id = -1;
      if (c.buf) {
        auto* p = static_cast<const uint8_t*>(c.buf);
        auto it = base.upper_bound(p);
        EXPECT_NE(it, base.begin()) << "a completion's buffer is no receive's";
        if (it != base.begin()) {
          --it;
          s.buf_id = it->second;
          s.buf_off = static_cast<size_t>(p - it->first);
        }
      }
      out.done[n].push_back(s);
    }
    out.counted[n] = net.node(n).counted;
    out.counted_err[n] = net.node(n).counted_err;
    out.stats[n] = net.core(n).stats();
    out.rel[n] = net.core(n).reliability_stats();
  }
  out.rx_bufs.assign(rx_bufs.begin(), rx_bufs.end());
  out.wire_hash = net.wire_hash;
  out.frames = net.frames_sent;
  out.now = net.now();
  return out;
}

bool same_rel(const ReliabilityStats& x, const ReliabilityStats& y) {
  return std::memcmp(&x, &y, sizeof(x)) == 0;
}

void expect_equivalent(uint64_t seed, const LinkModel& m, size_t steps) {
  const Outcome fast = converse(seed, m, true, steps);
  const Outcome slow = converse(seed, m, false, steps);
  EXPECT_EQ(fast.returns, slow.returns);
  EXPECT_EQ(fast.frames, slow.frames);
  EXPECT_EQ(fast.wire_hash, slow.wire_hash) << "different frames, or in another order";
  EXPECT_EQ(fast.now, slow.now);
  for (int n = 0; n < 2; ++n) {
    ASSERT_EQ(fast.done[n].size(), slow.done[n].size()) << "node " << n;
    for (size_t i = 0; i < fast.done[n].size(); ++i)
      ASSERT_TRUE(fast.done[n][i] == slow.done[n][i]) << "node " << n << " completion " << i;
    EXPECT_EQ(fast.counted[n], slow.counted[n]);
    EXPECT_EQ(fast.counted_err[n], slow.counted_err[n]);
    CoreStats a = fast.stats[n], b = slow.stats[n];
    EXPECT_GT(a.fast_sends, 0u) << "node " << n << ": the fast send path was never taken";
    EXPECT_GT(a.fast_receives, 0u) << "node " << n << ": the fast receive path was never taken";
    EXPECT_EQ(b.fast_sends + b.fast_receives, 0u) << "fast paths off, yet taken";
    a.fast_sends = a.fast_receives = 0;
    EXPECT_EQ(std::memcmp(&a, &b, sizeof(a)), 0) << "core statistics of node " << n;
    EXPECT_TRUE(same_rel(fast.rel[n], slow.rel[n])) << "reliability statistics of node " << n;
  }
  EXPECT_EQ(fast.rx_bufs, slow.rx_bufs);
}

TEST(RdmFastPath, SameFramesAndCompletionsAsTheGeneralPathOverAPerfectLink) {
  for (uint64_t seed : {101, 102, 103}) {
    SCOPED_TRACE(seed);
    expect_equivalent(seed, LinkModel{}, 600);
  }
}

TEST(RdmFastPath, SameFramesAndCompletionsAsTheGeneralPathOverALossyLink) {
  LinkModel m;
  m.loss_ppm = 30'000;
  m.dup_ppm = 20'000;
  m.corrupt_ppm = 10'000;
  m.jitter_ns = 30'000;  // reordering
  for (uint64_t seed : {201, 202, 203}) {
    SCOPED_TRACE(seed);
    expect_equivalent(seed, m, 600);
  }
}

TEST(RdmFastPath, SameFramesAndCompletionsAsTheGeneralPathWhenThePortRefusesFrames) {
  LinkModel m;
  m.refuse_ppm = 150'000;
  m.loss_ppm = 10'000;
  for (uint64_t seed : {301, 302}) {
    SCOPED_TRACE(seed);
    expect_equivalent(seed, m, 600);
  }
}

// ---- the boundary ------------------------------------------------------------------------------

struct Pair {
  explicit Pair(CoreConfig c = test_config(), LinkModel m = {}) : net(2, c, 77, m) {}
  RdmCore& tx() { return net.core(0); }
  RdmCore& rx() { return net.core(1); }
  void settle(size_t rx_done, size_t tx_done) {
    auto& rx = net.node(1).done;
    auto& tx = net.node(0).done;
    ASSERT_TRUE(net.run([&] { return rx.size() >= rx_done && tx.size() >= tx_done; }))
        << "rx " << rx.size() << " tx " << tx.size();
  }
  Net net;
};

TEST(RdmFastPath, OnePacketToAPostedReceiveTakesBothFastPaths) {
  Pair p;
  std::vector<uint8_t> rx(100, 0xee);
  const auto tx = pattern(1, 64);
  ASSERT_EQ(p.rx().recv(recv_op(rx.data(), rx.size(), ctx_of(1)), 0), 0);
  ASSERT_EQ(p.tx().send(send_op(1, tx.data(), tx.size(), ctx_of(2)), 0), 0);
  EXPECT_EQ(p.tx().stats().fast_sends, 1u);
  EXPECT_EQ(p.net.frames_sent, 1u);  // sent from send() itself
  p.settle(1, 1);
  EXPECT_EQ(p.rx().stats().fast_receives, 1u);
  const Completion& c = p.net.node(1).done[0];
  EXPECT_EQ(c.context, ctx_of(1));
  EXPECT_EQ(c.len, 64u);
  EXPECT_EQ(c.err, 0);
  EXPECT_EQ(c.flags, FI_RECV | FI_MSG);
  EXPECT_EQ(std::vector<uint8_t>(rx.begin(), rx.begin() + 64), tx);
  EXPECT_EQ(rx[64], 0xee);
  EXPECT_EQ(p.net.node(0).done[0].context, ctx_of(2));
}

TEST(RdmFastPath, ASeveralPacketMessageTakesTheGeneralPaths) {
  Pair p;
  const size_t len = test_config().seg_size + 1;
  std::vector<uint8_t> rx(len);
  const auto tx = pattern(2, len);
  ASSERT_EQ(p.rx().recv(recv_op(rx.data(), rx.size(), ctx_of(1)), 0), 0);
  ASSERT_EQ(p.tx().send(send_op(1, tx.data(), tx.size(), ctx_of(2)), 0), 0);
  p.settle(1, 1);
  EXPECT_EQ(p.tx().stats().fast_sends, 0u);
  EXPECT_EQ(p.rx().stats().fast_receives, 0u);
  EXPECT_EQ(rx, tx);
  // A message of exactly seg_size bytes is still one packet.
  const auto one = pattern(3, test_config().seg_size);
  ASSERT_EQ(p.rx().recv(recv_op(rx.data(), rx.size(), ctx_of(3)), p.net.now()), 0);
  ASSERT_EQ(p.tx().send(send_op(1, one.data(), one.size(), ctx_of(4)), p.net.now()), 0);
  p.settle(2, 2);
  EXPECT_EQ(p.tx().stats().fast_sends, 1u);
  EXPECT_EQ(p.rx().stats().fast_receives, 1u);
}

TEST(RdmFastPath, AnUnexpectedMessageTakesTheGeneralPath) {
  Pair p;
  const auto tx = pattern(4, 200);
  ASSERT_EQ(p.tx().send(send_op(1, tx.data(), tx.size(), ctx_of(1)), 0), 0);
  p.net.run([] { return false; }, 1'000'000);
  EXPECT_EQ(p.rx().unexpected_in_use(), 1u);
  EXPECT_EQ(p.rx().stats().fast_receives, 0u);
  std::vector<uint8_t> rx(200);
  ASSERT_EQ(p.rx().recv(recv_op(rx.data(), rx.size(), ctx_of(2)), p.net.now()), 0);
  ASSERT_EQ(p.net.node(1).done.size(), 1u);  // taken from the unexpected queue at once
  EXPECT_EQ(rx, tx);
  EXPECT_EQ(p.rx().stats().fast_receives, 0u);
}

TEST(RdmFastPath, ATagThatDoesNotMatchLeavesTheMessageUnexpected) {
  Pair p;
  std::vector<uint8_t> rx(100), rx2(100);
  const auto tx = pattern(5, 50);
  ASSERT_EQ(p.rx().recv(recv_op(rx.data(), rx.size(), ctx_of(1), true, 0x10, 0x0f), 0), 0);
  ASSERT_EQ(p.tx().send(send_op(1, tx.data(), tx.size(), ctx_of(2), true, 0x20), 0), 0);
  p.net.run([] { return false; }, 1'000'000);
  EXPECT_TRUE(p.net.node(1).done.empty());
  EXPECT_EQ(p.rx().unexpected_in_use(), 1u);
  // Ignore bits do match: 0x1f against 0x10 with 0x0f ignored.
  ASSERT_EQ(p.tx().send(send_op(1, tx.data(), tx.size(), ctx_of(3), true, 0x1f), p.net.now()), 0);
  p.settle(1, 2);
  EXPECT_EQ(p.net.node(1).done[0].tag, 0x1fu);
  EXPECT_EQ(p.rx().stats().fast_receives, 1u);
  // A directed receive for another source does not take it either.
  ASSERT_EQ(p.rx().recv(recv_op(rx2.data(), rx2.size(), ctx_of(4), true, 0x20, 0, 5), p.net.now()),
            0);
  EXPECT_EQ(p.net.node(1).done.size(), 1u);
}

TEST(RdmFastPath, TruncationOnTheFastPath) {
  Pair p;
  std::vector<uint8_t> rx(10, 0xee);
  const auto tx = pattern(6, 300);
  ASSERT_EQ(p.rx().recv(recv_op(rx.data(), rx.size(), ctx_of(1)), 0), 0);
  ASSERT_EQ(p.tx().send(send_op(1, tx.data(), tx.size(), ctx_of(2)), 0), 0);
  p.settle(1, 1);
  EXPECT_EQ(p.rx().stats().fast_receives, 1u);
  const Completion& c = p.net.node(1).done[0];
  EXPECT_EQ(c.err, FI_ETRUNC);
  EXPECT_EQ(c.len, 10u);
  EXPECT_EQ(c.olen, 290u);
  EXPECT_EQ(std::vector<uint8_t>(tx.begin(), tx.begin() + 10), rx);
  EXPECT_EQ(p.rx().stats().truncated, 1u);
  EXPECT_EQ(p.net.node(0).done[0].err, 0);  // the sender completes normally
}

TEST(RdmFastPath, MultiRecvPartsOnTheFastPath) {
  Pair p;
  std::vector<uint8_t> buf(3000, 0xee);
  RecvOp r = recv_op(buf.data(), buf.size(), ctx_of(1));
  r.flags = FI_MULTI_RECV;
  ASSERT_EQ(p.rx().recv(r, 0), 0);
  std::vector<std::vector<uint8_t>> m;
  for (int i = 0; i < 3; ++i) m.push_back(pattern(10 + i, 900));
  for (auto& x : m) ASSERT_EQ(p.tx().send(send_op(1, x.data(), x.size(), nullptr), 0), 0);
  p.settle(3, 3);
  EXPECT_EQ(p.rx().stats().fast_receives, 3u);
  auto& d = p.net.node(1).done;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(d[i].buf, buf.data() + 900 * i);
    EXPECT_TRUE(std::equal(m[i].begin(), m[i].end(), buf.begin() + 900 * i));
    // 3000 - 2 * 900 = 1200 >= min_multi_recv (1024) left after the second; 300 after the third.
    EXPECT_EQ((d[i].flags & FI_MULTI_RECV) != 0, i == 2) << i;
  }
}

TEST(RdmFastPath, AReceiveThatHasToWaitIsRefusedAndTakesTheRetry) {
  // A multi-recv buffer but no receive op to carve a part into: the packet is refused (RNR) and
  // the sender backs off; once an op frees up the message arrives.
  CoreConfig c = test_config();
  c.rx_ops = 2;
  Pair p(c);
  std::vector<uint8_t> buf(4000), one(100);
  ASSERT_EQ(p.rx().recv(recv_op(one.data(), one.size(), ctx_of(1), true, 9), 0), 0);
  RecvOp r = recv_op(buf.data(), buf.size(), ctx_of(2));
  r.flags = FI_MULTI_RECV;
  ASSERT_EQ(p.rx().recv(r, 0), 0);
  const auto tx = pattern(7, 100);
  ASSERT_EQ(p.tx().send(send_op(1, tx.data(), tx.size(), ctx_of(3)), 0), 0);
  p.net.run([] { return false; }, 200'000);
  EXPECT_GT(p.rx().stats().unexpected_refused, 0u);
  EXPECT_TRUE(p.net.node(1).done.empty());
  ASSERT_EQ(p.rx().cancel(ctx_of(1)), 0);  // frees an op
  p.settle(2, 1);
  EXPECT_EQ(p.net.node(1).done[1].context, ctx_of(2));
  EXPECT_TRUE(std::equal(tx.begin(), tx.end(), buf.begin()));
}

TEST(RdmFastPath, AFullWindowQueuesTheSendAndOrderIsKept) {
  CoreConfig c = test_config();
  c.rel.window = 2;
  Pair p(c);
  std::vector<std::vector<uint8_t>> rx(5, std::vector<uint8_t>(100));
  for (size_t i = 0; i < rx.size(); ++i)
    ASSERT_EQ(p.rx().recv(recv_op(rx[i].data(), 100, ctx_of(i)), 0), 0);
  std::vector<std::vector<uint8_t>> tx;
  for (int i = 0; i < 5; ++i) tx.push_back(pattern(20 + i, 60));
  for (size_t i = 0; i < tx.size(); ++i)
    ASSERT_EQ(p.tx().send(send_op(1, tx[i].data(), 60, ctx_of(10 + i)), 0), 0);
  // Two went at once; the third found the window full, and the ones after it found it queued.
  EXPECT_EQ(p.tx().stats().fast_sends, 2u);
  EXPECT_EQ(p.net.frames_sent, 2u);
  p.settle(5, 5);
  for (size_t i = 0; i < rx.size(); ++i) {
    EXPECT_EQ(p.net.node(1).done[i].context, ctx_of(i));
    EXPECT_TRUE(std::equal(tx[i].begin(), tx[i].end(), rx[i].begin())) << i;
  }
  // Once the queue drained, the next one goes at once again.
  std::vector<uint8_t> last(100);
  ASSERT_EQ(p.rx().recv(recv_op(last.data(), 100, ctx_of(99)), p.net.now()), 0);
  ASSERT_EQ(p.tx().send(send_op(1, tx[0].data(), 60, ctx_of(98)), p.net.now()), 0);
  EXPECT_EQ(p.tx().stats().fast_sends, 3u);
}

TEST(RdmFastPath, AMessageBehindARendezvousWaitsItsTurn) {
  // A rendezvous message granted and still sending: a small message after it is queued (the
  // general path alternates the two), not sent ahead by the fast path.
  CoreConfig c = test_config();
  c.rel.window = 4;
  Pair p(c);
  std::vector<uint8_t> big_rx(200000), small_rx(100);
  const auto big = pattern(30, 200000), small = pattern(31, 50);
  ASSERT_EQ(p.rx().recv(recv_op(big_rx.data(), big_rx.size(), ctx_of(1)), 0), 0);
  ASSERT_EQ(p.rx().recv(recv_op(small_rx.data(), small_rx.size(), ctx_of(2)), 0), 0);
  ASSERT_EQ(p.tx().send(send_op(1, big.data(), big.size(), ctx_of(3)), 0), 0);
  // Until the grant and some data went, then the small one.
  ASSERT_TRUE(p.net.run([&] { return p.rx().reliability_stats().rx_packets > 10; }));
  ASSERT_EQ(p.tx().send(send_op(1, small.data(), small.size(), ctx_of(4)), p.net.now()), 0);
  EXPECT_EQ(p.tx().stats().fast_sends, 0u);
  p.settle(2, 2);
  EXPECT_EQ(big_rx, big);
  EXPECT_TRUE(std::equal(small.begin(), small.end(), small_rx.begin()));
}

TEST(RdmFastPath, AFrameThePortRefusesIsQueuedAndSentSoon) {
  LinkModel m;
  m.refuse_ppm = 1'000'000;  // the TX queue is full
  Pair p(test_config(), m);
  std::vector<uint8_t> rx(100);
  const auto tx = pattern(8, 40);
  ASSERT_EQ(p.rx().recv(recv_op(rx.data(), rx.size(), ctx_of(1)), 0), 0);
  ASSERT_EQ(p.tx().send(send_op(1, tx.data(), tx.size(), ctx_of(2)), 0), 0);
  EXPECT_EQ(p.tx().stats().fast_sends, 0u);
  EXPECT_EQ(p.net.frames_sent, 0u);
  EXPECT_EQ(p.tx().tx_in_use(), 1u);
  // The core asks to be run again within tx_retry_ns, not after a retransmission timeout.
  EXPECT_LE(p.tx().next_deadline(), p.net.now() + test_config().tx_retry_ns);
  p.net.model().refuse_ppm = 0;
  const uint64_t t0 = p.net.now();
  p.settle(1, 1);
  EXPECT_EQ(std::vector<uint8_t>(rx.begin(), rx.begin() + 40), tx);
  EXPECT_LT(p.net.now() - t0, test_config().rel.rto_min_ns);
}

TEST(RdmFastPath, AnUnreachablePeerFailsTheSendAtOnce) {
  Pair p;
  p.net.cut(0, 1, true);
  p.net.cut(1, 0, true);
  const auto tx = pattern(9, 30);
  ASSERT_EQ(p.tx().send(send_op(1, tx.data(), tx.size(), ctx_of(1)), 0), 0);
  ASSERT_TRUE(p.net.run([&] { return !p.net.node(0).done.empty(); }));
  EXPECT_EQ(p.net.node(0).done[0].err, FI_EHOSTUNREACH);
  EXPECT_EQ(p.tx().send(send_op(1, tx.data(), tx.size(), ctx_of(2)), p.net.now()),
            -FI_EHOSTUNREACH);
  EXPECT_EQ(p.tx().stats().fast_sends, 1u);  // the first went, and was never acknowledged
}

TEST(RdmFastPath, CompletionsNobodyCountsAreNotMadeAndTheRestAreTheSame) {
  // tx_counted/rx_counted false (no counter bound): the CQ sees the same completions; the calls
  // that would only have bumped a counter are not made.
  for (bool counted : {true, false}) {
    SCOPED_TRACE(counted);
    CoreConfig c = test_config();
    c.tx_counted = c.rx_counted = counted;
    Pair p(c);
    std::vector<uint8_t> rx1(100), rx2(100);
    RecvOp quiet = recv_op(rx1.data(), rx1.size(), ctx_of(1));
    quiet.completion = false;  // selective completion
    ASSERT_EQ(p.rx().recv(quiet, 0), 0);
    ASSERT_EQ(p.rx().recv(recv_op(rx2.data(), rx2.size(), ctx_of(2)), 0), 0);
    const auto tx = pattern(10, 20);
    SendOp inj = send_op(1, tx.data(), tx.size(), nullptr);
    inj.inject = true;
    inj.completion = false;  // fi_inject
    ASSERT_EQ(p.tx().send(inj, 0), 0);
    ASSERT_EQ(p.tx().send(send_op(1, tx.data(), tx.size(), ctx_of(3)), 0), 0);
    ASSERT_TRUE(p.net.run([&] {
      return p.net.node(1).done.size() == 1 && p.net.node(0).done.size() == 1 &&
             p.tx().tx_in_use() == 0;
    }));
    EXPECT_EQ(p.net.node(1).done[0].context, ctx_of(2));
    EXPECT_EQ(p.net.node(0).done[0].context, ctx_of(3));
    EXPECT_EQ(p.net.node(0).counted, counted ? 2u : 1u);  // the inject counts when counted
    EXPECT_EQ(p.net.node(1).counted, counted ? 2u : 1u);
  }
}

}  // namespace
