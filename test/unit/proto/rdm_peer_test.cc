// SPDX-License-Identifier: BSD-3-Clause
//
// The reliability layer alone (lib/proto/rdm_peer.h): two RdmPeers joined by hand, frames moved
// (or dropped, reordered, duplicated) one by one by the test, time passed explicitly. Window,
// cumulative ack and SACK bits, duplicate suppression, in-order delivery from the reorder slots,
// RTT and RTO (Karn), exponential backoff, unreachable after max_retries, fast retransmit, RNR
// back-off, keepalive probes, epochs, acks of what was never sent.
#include <gtest/gtest.h>
#include <rdma/fi_errno.h>

#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "count_new.h"
#include "proto/rdm_peer.h"

using namespace dpfab::proto::rdm;
using dpfab::wire::RdmHeader;
using dpfab::wire::RdmKind;

namespace {

struct Sent {
  RdmHeader h;
  std::vector<uint8_t> data;
};

class Host final : public PeerHost {
 public:
  bool transmit(fi_addr_t, const RdmHeader& h, std::span<const uint8_t> d) noexcept override {
    if (refuse_tx) return false;
    out.push_back({h, {d.begin(), d.end()}});
    return true;
  }
  bool deliver(fi_addr_t, const RdmHeader& h, std::span<const uint8_t> d) noexcept override {
    if (refuse || h.seq == refuse_seq) return false;
    delivered.push_back({h, {d.begin(), d.end()}});
    return true;
  }
  void acked(fi_addr_t, uint32_t cookie) noexcept override { acks.push_back(cookie); }
  void unreachable(fi_addr_t) noexcept override { ++dead; }

  std::deque<Sent> out;
  std::vector<Sent> delivered;
  std::vector<uint32_t> acks;
  int dead = 0;
  bool refuse = false;
  bool refuse_tx = false;   // the port's TX queue is full
  int64_t refuse_seq = -1;  // refuse only this packet
};

ReliabilityConfig cfg() {
  ReliabilityConfig c;
  c.window = 8;
  c.rto_init_ns = 1000;
  c.rto_min_ns = 100;
  c.rto_max_ns = 64000;
  c.max_retries = 4;
  c.peer_timeout_ns = 0;  // retries alone decide (PeerTimeout... tests the time bound)
  c.ack_delay_ns = 50;
  c.ack_every = 2;
  c.dupthresh = 3;
  c.rnr_backoff_min_ns = 200;
  c.rnr_backoff_max_ns = 800;
  c.keepalive_ns = 5000;
  return c;
}

struct Side {
  explicit Side(uint32_t epoch, uint32_t initial_seq = 0) : slots(32, 256) {
    sh.host = &host;
    sh.cfg = cfg();
    sh.cfg.initial_seq = initial_seq;
    sh.epoch = epoch;
    sh.slots = &slots;
  }
  Host host;
  RxSlotPool slots;
  RdmShared sh;
};

struct Pair {
  explicit Pair(uint32_t initial_seq = 0) : a(0xa, initial_seq), b(0xb, initial_seq) {}
  Side a, b;
  RdmPeer pa{&a.sh, 1};  // a's view of b
  RdmPeer pb{&b.sh, 0};  // b's view of a
  uint64_t now = 1'000'000;

  int send(uint32_t cookie, uint8_t fill = 0, size_t len = 10) {
    static std::vector<uint8_t> bufs[64];
    auto& b = bufs[cookie % 64];
    b.assign(len, fill);
    RdmHeader h;
    h.kind = RdmKind::kEager;
    h.msg_id = cookie;
    h.length = len;
    return pa.send(h, b, cookie, now);
  }
  // Moves a's frames to b (`pick` chooses by index in a.host.out; default all) and b's back.
  void a_to_b(std::vector<size_t> pick = {}) {
    auto& q = a.host.out;
    if (pick.empty())
      for (size_t i = 0; i < q.size(); ++i) pick.push_back(i);
    std::vector<Sent> frames(q.begin(), q.end());
    q.clear();
    for (size_t i : pick) pb.on_frame(frames[i].h, frames[i].data, now);
  }
  // b hears from a first through a pure ack (one that names no epoch of b's): b knows a's epoch,
  // so a hole at the very start of a's stream is held like any other. (A first packet past the
  // start of a stream is not: it may be the tail of a stream a began with b's predecessor.)
  void introduce() {
    RdmHeader h;
    h.kind = RdmKind::kAck;
    h.epoch = a.sh.epoch;
    h.ack = a.sh.cfg.initial_seq;
    h.window = a.sh.cfg.window;
    pb.on_frame(h, {}, now);
  }
  void b_to_a() {
    auto q = std::move(b.host.out);
    b.host.out.clear();
    for (auto& s : q) pa.on_frame(s.h, s.data, now);
  }
  // a's frames reach b; `delay` later b's timers run (its delayed ack) and b's frames reach a.
  void round_trip(uint64_t delay) {
    a_to_b();
    now += delay;
    pb.poll(now);
    b_to_a();
  }
};

}  // namespace

// sizeof(RdmPeer) <= 256 is a static_assert (rdm_peer.cc). What it cannot see is the heap: a cold
// peer must be that object and nothing more, however often it is polled, kept alive and flushed
// without traffic; its window state comes with the first send (once, a few KiB) and goes with the
// peer. Measured with the counting operator new (count_new.h), for 1,024 peers.
TEST(RdmPeer, ColdPeerHoldsNoHeapUntilItsFirstSend) {
  class CountingHost final : public PeerHost {
   public:
    bool transmit(fi_addr_t, const RdmHeader&, std::span<const uint8_t>) noexcept override {
      ++sent;
      return true;
    }
    bool deliver(fi_addr_t, const RdmHeader&, std::span<const uint8_t>) noexcept override {
      return true;
    }
    void acked(fi_addr_t, uint32_t) noexcept override {}
    void unreachable(fi_addr_t) noexcept override {}
    int sent = 0;
  };
  constexpr size_t kPeers = 1024;
  CountingHost host;
  RxSlotPool slots(32, 256);
  RdmShared sh;
  sh.host = &host;
  sh.cfg = cfg();
  sh.slots = &slots;
  // Room for the peers first: only what the peers allocate themselves is counted.
  auto peers = std::make_unique<std::optional<RdmPeer>[]>(kPeers);
  static const uint8_t kData[16] = {1, 2, 3};
  RdmHeader h;
  h.kind = RdmKind::kEager;
  h.msg_id = 1;
  h.length = sizeof(kData);
  uint64_t now = 1'000'000;

  const size_t before = dpfab::test::new_bytes();
  for (size_t i = 0; i < kPeers; ++i) {
    RdmPeer& p = peers[i].emplace(&sh, i);
    for (int round = 0; round < 3; ++round, now += 10'000) {
      p.poll(now);
      p.keepalive(false, now);
      p.flush_ack(now);
    }
  }
  const size_t cold = dpfab::test::new_bytes();
  const int sent = peers[7]->send(h, kData, 1, now);
  const size_t first_send = dpfab::test::new_bytes();
  const int sent_again = peers[7]->send(h, kData, 2, now);
  const size_t second_send = dpfab::test::new_bytes();
  for (size_t i = 0; i < kPeers; ++i) peers[i].reset();
  const size_t gone = dpfab::test::new_bytes();

  ASSERT_EQ(sent, 0);
  ASSERT_EQ(sent_again, 0);
  EXPECT_EQ(host.sent, 2) << "a cold peer sends nothing of its own (no ack, no probe)";
  EXPECT_EQ(cold, before) << "cold peers hold no heap";
  EXPECT_GT(first_send - cold, 1024u) << "the first send allocates the window state";
  EXPECT_LT(first_send - cold, 16384u);
  EXPECT_EQ(second_send, first_send) << "once";
  EXPECT_EQ(gone, before) << "and the peer frees it";
  RecordProperty("sizeof_RdmPeer", static_cast<int>(sizeof(RdmPeer)));
  RecordProperty("window_state_bytes", static_cast<int>(first_send - cold));
}

TEST(RdmPeer, ConfigValidation) {
  EXPECT_EQ(validate(cfg()), 0);
  auto c = cfg();
  c.window = 65;
  EXPECT_EQ(validate(c), -FI_EINVAL);
  c = cfg();
  c.rto_min_ns = c.rto_max_ns + 1;
  EXPECT_EQ(validate(c), -FI_EINVAL);
  c = cfg();
  c.rto_init_ns = 1;
  EXPECT_EQ(validate(c), -FI_EINVAL);
}

TEST(RdmPeer, WindowAndCumulativeAck) {
  Pair p;
  for (uint32_t i = 0; i < 8; ++i) ASSERT_EQ(p.send(i), 0);
  EXPECT_FALSE(p.pa.can_send());
  EXPECT_EQ(p.send(8), -FI_EAGAIN);
  EXPECT_EQ(p.pa.in_flight(), 8u);
  p.a_to_b();
  ASSERT_EQ(p.b.host.delivered.size(), 8u);
  for (uint32_t i = 0; i < 8; ++i) EXPECT_EQ(p.b.host.delivered[i].h.seq, i);
  // ack_every = 2: acks went out already.
  ASSERT_FALSE(p.b.host.out.empty());
  EXPECT_EQ(p.b.host.out.back().h.ack, 8u);
  p.b_to_a();
  EXPECT_EQ(p.a.host.acks, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(p.pa.in_flight(), 0u);
  EXPECT_TRUE(p.pa.can_send());
  EXPECT_EQ(p.pa.next_deadline(), UINT64_MAX);  // nothing in flight: no RTO armed
}

TEST(RdmPeer, DelayedAckAndPiggyback) {
  Pair p;
  ASSERT_EQ(p.send(0), 0);
  p.a_to_b();
  EXPECT_TRUE(p.b.host.out.empty());  // one packet: the ack waits ack_delay
  EXPECT_EQ(p.pb.next_deadline(), p.now + cfg().ack_delay_ns);
  // A packet from b to a carries the ack instead.
  RdmHeader h;
  h.kind = RdmKind::kEager;
  h.length = 1;
  uint8_t x = 7;
  ASSERT_EQ(p.pb.send(h, {&x, 1}, 99, p.now), 0);
  ASSERT_EQ(p.b.host.out.size(), 1u);
  EXPECT_EQ(p.b.host.out[0].h.ack, 1u);
  EXPECT_NE(p.pb.next_deadline(), p.now + cfg().ack_delay_ns);  // the delayed ack is cancelled
  p.b_to_a();
  EXPECT_EQ(p.a.host.acks, std::vector<uint32_t>{0});
  // And the delayed ack fires on its own when nothing goes the other way.
  p.now += 10;
  p.pa.poll(p.now);
  EXPECT_TRUE(p.a.host.out.empty());
  p.now += cfg().ack_delay_ns;
  p.pa.poll(p.now);
  ASSERT_EQ(p.a.host.out.size(), 1u);
  EXPECT_EQ(p.a.host.out[0].h.kind, RdmKind::kAck);
  EXPECT_EQ(p.a.host.out[0].h.ack, 1u);
}

TEST(RdmPeer, ReorderHeldInSlotsDeliveredInOrderWithSack) {
  Pair p;
  p.introduce();  // the holes below include the stream's first packet
  for (uint32_t i = 0; i < 5; ++i) ASSERT_EQ(p.send(i, static_cast<uint8_t>(i)), 0);
  p.a_to_b({4, 2, 3});  // 0 and 1 lost
  EXPECT_TRUE(p.b.host.delivered.empty());
  ASSERT_EQ(p.b.host.out.size(), 3u);  // an immediate ack per out-of-order packet
  const auto& last = p.b.host.out.back().h;
  EXPECT_EQ(last.ack, 0u);
  EXPECT_EQ(last.sack, 0b1110u);  // seqs 2, 3, 4 = ack + 1 + {1, 2, 3}
  EXPECT_EQ(p.b.slots.available(), 32u - 3);
  // The SACK triggers a fast retransmit of 0 and 1 (three SACKed above each)...
  p.b_to_a();
  EXPECT_EQ(p.a.sh.stats.tx_fast_retransmits, 2u);
  // ... which fills the hole: everything delivered in order, slots returned.
  p.a_to_b();
  ASSERT_EQ(p.b.host.delivered.size(), 5u);
  for (uint32_t i = 0; i < 5; ++i) {
    EXPECT_EQ(p.b.host.delivered[i].h.seq, i);
    EXPECT_EQ(p.b.host.delivered[i].data, std::vector<uint8_t>(10, static_cast<uint8_t>(i)));
  }
  EXPECT_EQ(p.b.slots.available(), 32u);
  p.b_to_a();
  EXPECT_EQ(p.pa.in_flight(), 0u);
}

// The first packet b has from a is past the start of a's stream: the tail of a stream a began
// with an earlier instance of b. Not held, not SACKed, and a's epoch is not learnt from it; the
// stream's start then arrives and everything is delivered in order (a resends what was dropped).
TEST(RdmPeer, AFirstPacketPastTheStartOfAStreamIsNotTaken) {
  Pair p;
  for (uint32_t i = 0; i < 3; ++i) ASSERT_EQ(p.send(i, static_cast<uint8_t>(i)), 0);
  p.a_to_b({2});
  EXPECT_EQ(p.b.sh.stats.rx_stale_epoch, 1u);
  EXPECT_EQ(p.pb.peer_epoch(), 0u);
  EXPECT_TRUE(p.b.host.out.empty()) << "no SACK for it";
  EXPECT_EQ(p.b.slots.available(), 32u);
  p.now = p.pa.next_deadline();
  p.pa.poll(p.now);  // the RTO resends the oldest
  p.a_to_b();
  p.now += 50;
  p.pb.poll(p.now);  // its (delayed) ack: 1 and 2, sent an RTO before it, are resent
  p.b_to_a();
  p.a_to_b();
  ASSERT_EQ(p.b.host.delivered.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(p.b.host.delivered[i].h.seq, i);
  EXPECT_EQ(p.pb.peer_epoch(), 0xau);
}

TEST(RdmPeer, DuplicatesAndOutOfWindowAreDropped) {
  Pair p;
  ASSERT_EQ(p.send(0), 0);
  ASSERT_EQ(p.send(1), 0);
  std::vector<Sent> frames(p.a.host.out.begin(), p.a.host.out.end());
  p.a_to_b({0, 1, 1, 0});
  EXPECT_EQ(p.b.host.delivered.size(), 2u);
  EXPECT_EQ(p.b.sh.stats.rx_duplicates, 2u);
  // Held twice is a duplicate too.
  RdmHeader far = frames[1].h;
  far.seq = 5;
  p.pb.on_frame(far, frames[1].data, p.now);
  p.pb.on_frame(far, frames[1].data, p.now);
  EXPECT_EQ(p.b.sh.stats.rx_duplicates, 3u);
  // Beyond the window (8 from the cumulative ack 2).
  far.seq = 10;
  p.pb.on_frame(far, frames[1].data, p.now);
  EXPECT_EQ(p.b.sh.stats.rx_beyond_window, 1u);
  EXPECT_EQ(p.b.host.delivered.size(), 2u);
}

TEST(RdmPeer, StaleEpochAndBogusAcksAreDropped) {
  Pair p;
  ASSERT_EQ(p.send(0), 0);
  Sent f = p.a.host.out.front();
  p.a_to_b();
  RdmHeader other = f.h;
  other.epoch = 0x77;
  other.seq = 1;
  p.pb.on_frame(other, f.data, p.now);
  EXPECT_EQ(p.b.sh.stats.rx_stale_epoch, 1u);
  // An ack of seq 5 when a sent only 1 packet: not this conversation.
  RdmHeader ack;
  ack.kind = RdmKind::kAck;
  ack.epoch = 0xb;
  ack.ack = 5;
  ack.window = 8;
  p.pa.on_frame(ack, {}, p.now);
  EXPECT_EQ(p.a.sh.stats.rx_bad_ack, 1u);
  EXPECT_EQ(p.pa.in_flight(), 1u);
}

TEST(RdmPeer, RttRtoKarnBackoffAndUnreachable) {
  Pair p;
  ASSERT_EQ(p.send(0), 0);
  p.round_trip(400);  // round trip 400 ns, the delayed ack
  EXPECT_EQ(p.pa.srtt_ns(), 400u);
  EXPECT_EQ(p.pa.rto_ns(), 400u + 4 * 200);  // SRTT + 4 RTTVAR, RTTVAR = R/2
  // Karn: a retransmitted packet's ack gives no sample.
  ASSERT_EQ(p.send(1), 0);
  p.a.host.out.clear();  // lost
  p.now += p.pa.rto_ns();
  p.pa.poll(p.now);
  EXPECT_EQ(p.a.sh.stats.rto_expiries, 1u);
  EXPECT_EQ(p.pa.rto_ns(), 2400u);  // doubled
  p.round_trip(5000);
  EXPECT_EQ(p.a.sh.stats.rtt_samples, 1u);
  // No sample and nothing left in flight: the backoff stays for the next packet (Karn)...
  EXPECT_EQ(p.pa.rto_ns(), 2400u);
  // ...until a packet sent once is acked: its sample ends it (400: RTTVAR 150, RTO 400 + 600).
  ASSERT_EQ(p.send(2), 0);
  p.round_trip(400);
  EXPECT_EQ(p.a.sh.stats.rtt_samples, 2u);
  EXPECT_EQ(p.pa.rto_ns(), 1000u);
  // Progress with packets still in flight ends the backoff too (a stream under loss, whose
  // packets are mostly resent and give no sample, must not stall at rto_max).
  ASSERT_EQ(p.send(3), 0);
  ASSERT_EQ(p.send(4), 0);
  p.a.host.out.clear();  // both lost
  p.now += p.pa.rto_ns();
  p.pa.poll(p.now);  // 3 resent
  EXPECT_EQ(p.pa.rto_ns(), 2000u);
  p.round_trip(100);  // 3 arrives, its delayed ack moves the cumulative ack past it; 4 still out
  EXPECT_EQ(p.pa.in_flight(), 1u);
  EXPECT_EQ(p.a.sh.stats.rtt_samples, 2u);
  EXPECT_EQ(p.pa.rto_ns(), 1000u);
  p.now += p.pa.rto_ns();
  p.pa.poll(p.now);  // 4 resent
  p.round_trip(100);
  ASSERT_EQ(p.pa.in_flight(), 0u);
  EXPECT_EQ(p.a.host.acks.size(), 5u);
  EXPECT_EQ(p.pa.rto_ns(), 2000u);  // the window emptied without a sample: kept
  // Black hole: RTO doubles up to rto_max; after max_retries expiries + 1 the peer is dead.
  ASSERT_EQ(p.send(5), 0);
  ASSERT_EQ(p.send(6), 0);
  std::vector<uint64_t> rtos;
  while (p.a.host.dead == 0) {
    p.a.host.out.clear();
    p.now = p.pa.next_deadline();
    ASSERT_NE(p.now, UINT64_MAX);
    p.pa.poll(p.now);
    rtos.push_back(p.pa.rto_ns());
  }
  // (the fifth expiry declares the peer unreachable: nothing doubles after it)
  EXPECT_EQ(rtos, (std::vector<uint64_t>{4000, 8000, 16000, 32000, 32000}));
  EXPECT_TRUE(p.pa.unreachable());
  EXPECT_EQ(p.a.host.acks.size(), 5u);  // 5 and 6 were never acked
  EXPECT_EQ(p.send(7), -FI_EHOSTUNREACH);
  EXPECT_EQ(p.pa.next_deadline(), UINT64_MAX);
}

// An application that takes each message and then works (or sleeps) longer than the RTO before it
// calls in again, under manual progress: its ack leaves only then, with its next message, so the
// first packets are resent once each (the receiver drops the copy and acks at once). Karn's
// backoff, kept from one packet to the next while no sample comes, grows the RTO past that delay;
// from then on every packet is sent once and its ack is a sample, so the estimate follows the
// delay and the sender, asleep, is not woken by its retransmission timer every message.
TEST(RdmPeer, APeerThatAcksLaterThanTheRtoEveryTimeIsNotResentEveryPacket) {
  Pair p;
  p.b.sh.cfg.ack_delay_ns = 1'000'000'000;  // b's delayed ack never fires: b's reply carries it
  const uint64_t think = 20'000;            // b's turn-around: 20x the initial RTO
  std::vector<uint64_t> resent;
  for (uint32_t round = 0; round < 16; ++round) {
    const uint64_t before = p.a.sh.stats.tx_retransmits;
    ASSERT_EQ(p.send(round), 0);
    p.a_to_b();  // arrives; b's application takes it, then is away for `think`
    const uint64_t reply_at = p.now + think;
    for (uint64_t t = p.pa.next_deadline(); t < reply_at; t = p.pa.next_deadline()) {
      p.now = t;
      p.pa.poll(p.now);  // a's RTO: the resent copy waits at b with the first
    }
    p.now = reply_at;
    p.a_to_b();   // b calls in again: the duplicate (dropped, acked at once)...
    RdmHeader h;  // ...and its reply, which carries the ack
    h.kind = RdmKind::kEager;
    h.msg_id = 1000 + round;
    h.length = 1;
    static const uint8_t one = 1;
    ASSERT_EQ(p.pb.send(h, {&one, 1}, 1000 + round, p.now), 0);
    p.now += 100;
    p.b_to_a();
    ASSERT_EQ(p.pa.in_flight(), 0u);
    p.now += 100;
    p.pa.poll(p.now);  // a's ack of the reply goes...
    p.a_to_b();        // ...before a's next message
    ASSERT_EQ(p.pb.in_flight(), 0u);
    resent.push_back(p.a.sh.stats.tx_retransmits - before);
  }
  EXPECT_EQ(p.a.host.acks.size(), 16u);
  EXPECT_EQ(p.b.host.delivered.size(), 16u) << "each message delivered once";
  // 1000 ns doubled per resend: 2, 4, 8, 16, 32 us; the fifth RTO is past the 20 us turn-around.
  uint64_t total = 0;
  for (uint64_t r : resent) total += r;
  EXPECT_LE(total, 5u);
  for (size_t i = 8; i < resent.size(); ++i) EXPECT_EQ(resent[i], 0u) << "round " << i;
  EXPECT_GE(p.pa.srtt_ns(), think / 2) << "the estimate learnt the peer's delay";
  EXPECT_GT(p.pa.rto_ns(), think);
}

// A lossless link (a same-host peer's rings): the RTO estimate keeps following the samples, but a
// retransmission waits at least lossless_rto_min_ns. A peer that has not run for a few scheduler
// slices gets no duplicates; a packet the peer itself dropped is still resent, and liveness is
// unchanged (a dead peer is still declared unreachable).
TEST(RdmPeer, ALosslessLinkRetransmitsNoSoonerThanItsFloor) {
  Pair p;
  p.a.sh.cfg.lossless_rto_min_ns = 50'000;
  p.pa.set_lossless();
  EXPECT_TRUE(p.pa.lossless());
  ASSERT_EQ(p.send(0), 0);
  p.round_trip(400);
  EXPECT_EQ(p.pa.srtt_ns(), 400u);    // the estimate as on any link...
  EXPECT_EQ(p.pa.rto_ns(), 50'000u);  // ...under the floor
  ASSERT_EQ(p.send(1), 0);
  p.a.host.out.clear();  // dropped by the receiving process (no endpoint yet)
  p.now += 1200;         // the lossy RTO (400 + 4 * 200) would have fired here
  p.pa.poll(p.now);
  EXPECT_EQ(p.a.sh.stats.rto_expiries, 0u);
  EXPECT_TRUE(p.a.host.out.empty()) << "resent before the floor";
  p.now = p.pa.next_deadline();
  EXPECT_LE(p.now, 1'000'000u + 400 + 50'000 + 1200);
  p.pa.poll(p.now);
  EXPECT_EQ(p.a.sh.stats.rto_expiries, 1u);
  ASSERT_EQ(p.a.host.out.size(), 1u) << "still recovered";
  p.round_trip(400);
  EXPECT_EQ(p.a.host.acks.size(), 2u);
  // A floor above rto_max is rto_max; a black hole still ends unreachable.
  p.a.sh.cfg.lossless_rto_min_ns = p.a.sh.cfg.rto_max_ns * 2;
  EXPECT_EQ(p.pa.rto_ns(), p.a.sh.cfg.rto_max_ns);
  ASSERT_EQ(p.send(2), 0);
  for (int i = 0; i < 100 && p.a.host.dead == 0; ++i) {
    p.a.host.out.clear();
    p.now = std::max(p.pa.next_deadline(), p.now + p.a.sh.cfg.peer_timeout_ns);
    p.pa.poll(p.now);
  }
  EXPECT_TRUE(p.pa.unreachable());
}

// A late ack (a slow or descheduled peer) lets the RTO resend the oldest packet although it
// arrived. The ack for its first transmission must not date it as sent at the resend: that would
// declare lost every packet sent an RTO before, all of which arrived too (RFC 8985 6.2 step 2).
TEST(RdmPeer, ALateAckAfterASpuriousRtoCausesNoFastRetransmits) {
  Pair p;
  ASSERT_EQ(p.send(0), 0);  // one round trip first: min_rtt = 400
  p.round_trip(400);
  p.b.sh.cfg.ack_every = 1;  // one ack per packet: the first names the oldest alone
  for (uint32_t c = 1; c <= 5; ++c) ASSERT_EQ(p.send(c), 0);  // one burst, one send time
  p.a_to_b();  // all arrive; b's acks are held back (late)
  ASSERT_FALSE(p.b.host.out.empty());
  p.now += p.pa.rto_ns();
  p.pa.poll(p.now);
  ASSERT_EQ(p.a.sh.stats.rto_expiries, 1u);
  ASSERT_EQ(p.a.sh.stats.tx_retransmits, 1u);  // the oldest only
  p.a.host.out.clear();
  p.now += 10;       // the late acks arrive just after the resend, one at a time
  p.pb.poll(p.now);  // with the delayed one
  auto acks = std::move(p.b.host.out);
  p.b.host.out.clear();
  for (auto& s : acks) p.pa.on_frame(s.h, s.data, p.now);
  EXPECT_EQ(p.a.sh.stats.tx_fast_retransmits, 0u);
  EXPECT_TRUE(p.a.host.out.empty()) << "spurious resends";
  EXPECT_EQ(p.a.host.acks.size(), 6u);
  EXPECT_EQ(p.pa.in_flight(), 0u);
}

TEST(RdmPeer, ReceiverWithoutBufferAnswersRnrAndTheSenderBacksOff) {
  Pair p;
  p.b.host.refuse = true;
  ASSERT_EQ(p.send(0), 0);
  ASSERT_EQ(p.send(1), 0);
  p.a_to_b();
  // 0 refused (RNR ack), 1 held out of order.
  EXPECT_TRUE(p.b.host.delivered.empty());
  EXPECT_EQ(p.b.sh.stats.rx_refused, 1u);
  ASSERT_FALSE(p.b.host.out.empty());
  EXPECT_TRUE(p.b.host.out.front().h.flags & dpfab::wire::kRdmRnr);
  p.b_to_a();
  EXPECT_FALSE(p.pa.can_send());  // paused
  EXPECT_EQ(p.send(2), -FI_EAGAIN);
  // Resent after 200, then 400, then 800, 800 ... never declared dead.
  std::vector<uint64_t> waits;
  for (int i = 0; i < 10; ++i) {
    const uint64_t before = p.now;
    p.now = p.pa.next_deadline();
    p.pa.poll(p.now);
    waits.push_back(p.now - before);
    p.a_to_b();
    p.b_to_a();
  }
  EXPECT_EQ(waits[0], 200u);
  EXPECT_EQ(waits[1], 400u);
  EXPECT_EQ(waits[2], 800u);
  EXPECT_EQ(waits[9], 800u);
  EXPECT_EQ(p.a.sh.stats.rto_expiries, 0u);
  EXPECT_FALSE(p.pa.unreachable());
  // A buffer appears: the next resend goes through, the held packet follows, the pause ends.
  p.b.host.refuse = false;
  p.now = p.pa.next_deadline();
  p.pa.poll(p.now);
  p.a_to_b();
  ASSERT_EQ(p.b.host.delivered.size(), 2u);
  EXPECT_EQ(p.b.host.delivered[1].h.seq, 1u);
  p.b_to_a();
  EXPECT_EQ(p.pa.in_flight(), 0u);
  EXPECT_TRUE(p.pa.can_send());
}

// A peer that does not answer for a while (its application computes without progressing the
// endpoint) is not declared unreachable before peer_timeout_ns, however many RTOs expired; once
// the time has passed it is, at the next expiry.
TEST(RdmPeer, PeerTimeoutBoundsUnreachableInTime) {
  Pair p;
  p.a.sh.cfg.peer_timeout_ns = 1'000'000;  // 1 ms, against an RTO capped at 64 us
  const uint64_t start = p.now;
  ASSERT_EQ(p.send(1), 0);
  while (p.a.host.dead == 0) {
    p.a.host.out.clear();
    p.now = p.pa.next_deadline();
    ASSERT_NE(p.now, UINT64_MAX);
    p.pa.poll(p.now);
  }
  EXPECT_GE(p.now - start, 1'000'000u);
  EXPECT_LT(p.now - start, 1'000'000u + 2 * 64'000u);
  EXPECT_GT(p.a.sh.stats.rto_expiries, cfg().max_retries + 1);  // it kept trying meanwhile
}

// A slow peer that answers before the timeout is not given up.
TEST(RdmPeer, PeerTimeoutSpareASlowPeer) {
  Pair p;
  p.a.sh.cfg.peer_timeout_ns = 1'000'000;
  ASSERT_EQ(p.send(1), 0);
  for (int i = 0; i < 12; ++i) {  // well past max_retries expiries, under 1 ms
    p.a.host.out.clear();
    p.now = p.pa.next_deadline();
    p.pa.poll(p.now);
  }
  ASSERT_EQ(p.a.host.dead, 0);
  p.a_to_b();  // the latest retransmission arrives
  p.now += 100;
  p.pb.poll(p.now + 1'000'000);
  p.b_to_a();
  EXPECT_EQ(p.pa.in_flight(), 0u);
  EXPECT_FALSE(p.pa.unreachable());
}

// The last packet of a message whose sender waits for its ack (kRdmAckReq) is acked at once;
// other in-order packets wait for the delayed ack.
TEST(RdmPeer, AckRequestOnDataIsAnsweredAtOnce) {
  Pair p;
  ASSERT_EQ(p.send(1), 0);
  p.a_to_b();
  EXPECT_TRUE(p.b.host.out.empty());  // delayed
  p.now += cfg().ack_delay_ns;
  p.pb.poll(p.now);
  ASSERT_EQ(p.b.host.out.size(), 1u);
  p.b_to_a();
  static std::vector<uint8_t> buf(10, 7);
  RdmHeader h;
  h.kind = RdmKind::kEager;
  h.flags = dpfab::wire::kRdmAckReq;
  h.msg_id = 2;
  h.length = buf.size();
  ASSERT_EQ(p.pa.send(h, buf, 2, p.now), 0);
  p.a_to_b();
  ASSERT_EQ(p.b.host.out.size(), 1u);  // at once
  EXPECT_EQ(p.b.host.out[0].h.kind, RdmKind::kAck);
  p.b_to_a();
  EXPECT_EQ(p.pa.in_flight(), 0u);
}

TEST(RdmPeer, KeepaliveProbesASilentPeerAndGivesUp) {
  Pair p;
  ASSERT_EQ(p.send(0), 0);
  p.a_to_b();
  p.now += 100;
  p.pb.poll(p.now + 1000);
  p.b_to_a();
  ASSERT_EQ(p.pa.in_flight(), 0u);
  // Not waiting on b: no probe, no deadline.
  p.pa.keepalive(false, p.now);
  EXPECT_EQ(p.pa.next_deadline(), UINT64_MAX);
  // Waiting (say for a CTS): probes after keepalive_ns; b answers each one.
  p.pa.keepalive(true, p.now);
  const uint64_t first = p.pa.next_deadline();
  EXPECT_EQ(first, p.now + cfg().keepalive_ns);
  p.now = first;
  p.pa.keepalive(true, p.now);
  ASSERT_EQ(p.a.host.out.size(), 1u);
  EXPECT_TRUE(p.a.host.out[0].h.flags & dpfab::wire::kRdmAckReq);
  p.a_to_b();
  ASSERT_EQ(p.b.host.out.size(), 1u);  // the answer
  EXPECT_FALSE(p.b.host.out[0].h.flags & dpfab::wire::kRdmAckReq);
  p.b_to_a();
  p.pa.keepalive(true, p.now);
  EXPECT_EQ(p.pa.next_deadline(), p.now + cfg().keepalive_ns);  // heard: back to the idle wait
  // b goes silent: max_retries probes, then unreachable.
  while (!p.pa.unreachable()) {
    p.now = p.pa.next_deadline();
    ASSERT_NE(p.now, UINT64_MAX);
    p.pa.keepalive(true, p.now);
    p.a.host.out.clear();
  }
  EXPECT_EQ(p.a.sh.stats.probes, 1u + cfg().max_retries);
  EXPECT_EQ(p.a.host.dead, 1);
}

TEST(RdmPeer, SequenceNumbersWrap) {
  Pair p(0xfffffffe);
  p.introduce();  // the holes below include the stream's first packet
  for (uint32_t i = 0; i < 6; ++i) ASSERT_EQ(p.send(i, static_cast<uint8_t>(i)), 0);
  EXPECT_EQ(p.a.host.out[2].h.seq, 0u);  // ..., 0xfffffffe, 0xffffffff, 0, 1, ...
  p.a_to_b({2, 3, 4, 5});                // the two before the wrap are lost
  EXPECT_TRUE(p.b.host.delivered.empty());
  EXPECT_EQ(p.b.host.out.back().h.ack, 0xfffffffeu);
  EXPECT_EQ(p.b.host.out.back().h.sack, 0b11110u);  // seqs 0..3 = ack + 1 + {1..4}
  p.b_to_a();                                       // fast retransmit of both holes
  EXPECT_EQ(p.a.sh.stats.tx_fast_retransmits, 2u);
  p.a_to_b();
  ASSERT_EQ(p.b.host.delivered.size(), 6u);
  for (uint32_t i = 0; i < 6; ++i) EXPECT_EQ(p.b.host.delivered[i].h.seq, 0xfffffffeu + i);
  p.b_to_a();
  EXPECT_EQ(p.pa.in_flight(), 0u);
  EXPECT_EQ(p.a.host.acks, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5}));
}

TEST(RdmPeer, APacketThePortRefusesIsNotSentAtAll) {
  Pair p;
  p.a.host.refuse_tx = true;
  EXPECT_EQ(p.send(0), -FI_EAGAIN);
  EXPECT_EQ(p.pa.in_flight(), 0u);
  EXPECT_EQ(p.pa.next_deadline(), UINT64_MAX);  // no RTO for what never left
  EXPECT_EQ(p.a.sh.stats.tx_refused, 1u);
  p.a.host.refuse_tx = false;
  ASSERT_EQ(p.send(0), 0);
  EXPECT_EQ(p.a.host.out.back().h.seq, 0u);  // the seq was not used up
  p.a_to_b();
  ASSERT_EQ(p.b.host.delivered.size(), 1u);
}

TEST(RdmPeer, APacketSackedThenRefusedIsResentEvenWhenTheRnrIsLost) {
  Pair p;
  p.introduce();  // the holes below include the stream's first packet
  for (uint32_t i = 0; i < 3; ++i) ASSERT_EQ(p.send(i), 0);
  p.a_to_b({1, 2});  // 0 lost; 1 and 2 held and SACKed
  p.b_to_a();
  // The RTO resends 0; b takes it, then refuses the held 1 (no buffer) and drops it: it reneges
  // on its SACK. Its RNR ack is lost.
  p.b.host.refuse_seq = 1;
  p.now = p.pa.next_deadline();
  p.pa.poll(p.now);
  ASSERT_EQ(p.a.host.out.size(), 1u);  // 1 and 2 are SACKed: only 0 goes
  p.a_to_b();
  EXPECT_EQ(p.b.host.delivered.size(), 1u);
  EXPECT_TRUE(p.b.host.out.back().h.flags & dpfab::wire::kRdmRnr);
  p.b.host.out.clear();
  // Next RTO: 0 again (not acked yet); b's answer, ack 1, tells a that 1 is missing after all.
  p.b.host.refuse_seq = -1;
  p.now = p.pa.next_deadline();
  p.pa.poll(p.now);
  p.a_to_b();
  p.b_to_a();
  EXPECT_EQ(p.pa.in_flight(), 2u);
  // And 1 goes again at the next RTO although it was SACKed once.
  p.now = p.pa.next_deadline();
  p.pa.poll(p.now);
  p.a_to_b();
  ASSERT_EQ(p.b.host.delivered.size(), 3u);
  p.b_to_a();
  EXPECT_EQ(p.pa.in_flight(), 0u);
  EXPECT_FALSE(p.pa.unreachable());
}
