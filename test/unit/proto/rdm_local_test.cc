// SPDX-License-Identifier: BSD-3-Clause
//
// What the RDM core offers the same-host path (rdm_core.h): a peer known to be gone is lost at
// once (lose_peer), a peer known to be a new instance is renewed (renew_peer), and a receiver
// that copies a rendezvous segment itself learns where it goes (rdv_placement), in segments as
// large as the sender was told (set_peer_rdv_segment). Two cores joined by hand: the test holds
// each frame and decides what happens to it.
#include <gtest/gtest.h>
#include <rdma/fi_errno.h>

#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "proto/rdm_core.h"
#include "wire/rdm.h"

using namespace dpfab::proto::rdm;
using dpfab::wire::RdmHeader;
using dpfab::wire::RdmKind;

namespace {

struct Packet {
  RdmHeader h;
  std::vector<uint8_t> data;
};

class Side final : public CoreSink {
 public:
  explicit Side(uint32_t epoch) {
    CoreConfig c;
    c.epoch = epoch;
    c.seg_size = 1024;
    auto r = RdmCore::create(c, this);
    EXPECT_TRUE(r.ok());
    core = std::move(r.value());
    EXPECT_EQ(core->add_peer(0), 0);  // the other side is peer 0 on both
  }
  bool transmit(fi_addr_t, const RdmHeader& h, std::span<const uint8_t> d) noexcept override {
    out.push_back({h, std::vector<uint8_t>(d.begin(), d.end())});
    return true;
  }
  void complete(const Completion& c) noexcept override { done.push_back(c); }
  // Both cores live in this process: the peer's memory is ours (process_vm_readv's stand-in).
  int read_peer(fi_addr_t, uint64_t addr, void* dst, size_t n) noexcept override {
    reads.push_back({addr, n});
    if (read_error != 0) return read_error;
    std::memcpy(dst, reinterpret_cast<const void*>(addr), n);
    return 0;
  }

  std::unique_ptr<RdmCore> core;
  std::vector<std::pair<uint64_t, size_t>> reads;
  int read_error = 0;
  std::deque<Packet> out;
  std::vector<Completion> done;
};

// Delivers what each side sent to the other until both are quiet; `take` may take a packet over
// (true: it handled it and removed it from the sender's queue).
template <typename Take>
void pump(Side& a, Side& b, uint64_t& now, Take&& take) {
  for (int round = 0; round < 1000 && (!a.out.empty() || !b.out.empty()); ++round) {
    for (auto [from, to] : {std::pair<Side*, Side*>{&a, &b}, {&b, &a}}) {
      while (!from->out.empty()) {
        if (take(*from, from->out.front())) continue;
        Packet p = std::move(from->out.front());
        from->out.pop_front();
        to->core->on_frame(0, p.h, p.data, now);
      }
    }
    now += 1000;
    a.core->progress(now);
    b.core->progress(now);
  }
}
void pump(Side& a, Side& b, uint64_t& now) {
  pump(a, b, now, [](Side&, const Packet&) { return false; });
}

SendOp send_op(const std::vector<uint8_t>& b, void* ctx) {
  SendOp op;
  op.dest = 0;
  op.buf = b.data();
  op.len = b.size();
  op.context = ctx;
  return op;
}
RecvOp recv_op(std::vector<uint8_t>& b, void* ctx) {
  RecvOp op;
  op.buf = b.data();
  op.len = b.size();
  op.context = ctx;
  op.match.src = FI_ADDR_UNSPEC;
  return op;
}

}  // namespace

TEST(RdmLocal, ALostPeersOperationsFailAtOnceAndLaterSendsAreRefused) {
  Side a(0x100), b(0x200);
  uint64_t now = 1000;
  std::vector<uint8_t> big(64 << 10, 7), small(100, 1);
  int ctx_big, ctx_small;
  // A rendezvous send waits for the receiver's grant (b posts nothing), an eager one for its ack.
  ASSERT_EQ(a.core->send(send_op(big, &ctx_big), now), 0);
  ASSERT_EQ(a.core->send(send_op(small, &ctx_small), now), 0);
  a.out.clear();  // lost with the peer
  a.core->lose_peer(0, now);
  ASSERT_EQ(a.done.size(), 2u) << "both complete at once, not at a timeout";
  for (const auto& c : a.done) EXPECT_EQ(c.err, FI_EHOSTUNREACH);
  EXPECT_EQ(a.core->send(send_op(small, &ctx_small), now), -FI_EHOSTUNREACH);
  EXPECT_EQ(a.core->tx_in_use(), 0u);
  a.core->lose_peer(7, now);  // an unknown peer: nothing
}

TEST(RdmLocal, ARenewedPeerIsReachableAtOnceAsANewInstance) {
  Side a(0x100);
  auto b = std::make_unique<Side>(0x200);
  uint64_t now = 1000;
  std::vector<uint8_t> msg(200, 3), in(200);
  int sctx, rctx;
  ASSERT_EQ(b->core->recv(recv_op(in, &rctx), now), 0);
  ASSERT_EQ(a.core->send(send_op(msg, &sctx), now), 0);
  pump(a, *b, now);
  ASSERT_EQ(b->done.size(), 1u);
  a.done.clear();
  a.core->lose_peer(0, now);          // its process ended...
  b = std::make_unique<Side>(0x300);  // ...and another instance took its place
  a.core->renew_peer(0, now);         // its new address was inserted
  std::fill(in.begin(), in.end(), 0);
  ASSERT_EQ(b->core->recv(recv_op(in, &rctx), now), 0);
  ASSERT_EQ(a.core->send(send_op(msg, &sctx), now), 0) << "reachable again, without it sending";
  pump(a, *b, now);
  ASSERT_EQ(b->done.size(), 1u);
  EXPECT_EQ(b->done[0].err, 0);
  EXPECT_EQ(in, msg);
  ASSERT_EQ(a.done.size(), 1u);
  EXPECT_EQ(a.done[0].err, 0);
  EXPECT_EQ(a.core->stats().peer_restarts, 1u);
}

TEST(RdmLocal, TheReceiverPlacesARendezvousSegmentItselfWhereItGoes) {
  Side a(0x100), b(0x200);
  uint64_t now = 1000;
  std::vector<uint8_t> msg(200 << 10), in(msg.size());
  for (size_t i = 0; i < msg.size(); ++i) msg[i] = static_cast<uint8_t>(i * 31);
  int sctx, rctx;
  a.core->set_peer_rdv_segment(0, 1 << 20);  // one segment for the whole message
  ASSERT_EQ(b.core->recv(recv_op(in, &rctx), now), 0);
  ASSERT_EQ(a.core->send(send_op(msg, &sctx), now), 0);
  int rdv_segments = 0;
  pump(a, b, now, [&](Side& from, const Packet& p) {
    if (&from != &a || p.h.kind != RdmKind::kRdvData) return false;
    ++rdv_segments;
    EXPECT_EQ(p.data.size(), msg.size()) << "one segment of 1 MiB at most";
    // The receiver learns where the bytes go and puts them there (as process_vm_readv would)...
    std::span<uint8_t> dst = b.core->rdv_placement(0, p.h, p.data.size());
    EXPECT_EQ(dst.data(), in.data() + p.h.offset);
    EXPECT_EQ(dst.size(), p.data.size());
    if (!dst.empty()) {
      std::memcpy(dst.data(), p.data.data(), dst.size());
      // ...then gives the core the packet with the bytes in place: it copies nothing more.
      b.core->on_frame(0, p.h, dst, now);
      EXPECT_TRUE(b.core->rdv_placement(0, p.h, p.data.size()).empty())
          << "a duplicate of it goes nowhere";
    }
    a.out.pop_front();
    return true;
  });
  pump(a, b, now);
  EXPECT_EQ(rdv_segments, 1);
  ASSERT_EQ(b.done.size(), 1u);
  EXPECT_EQ(b.done[0].err, 0);
  EXPECT_EQ(b.done[0].len, msg.size());
  EXPECT_EQ(in, msg);
  ASSERT_EQ(a.done.size(), 1u);
  EXPECT_EQ(a.done[0].err, 0);
  RdmHeader eager;
  eager.kind = RdmKind::kEager;
  EXPECT_TRUE(b.core->rdv_placement(0, eager, 10).empty()) << "only rendezvous data";
}

// ---- rendezvous by reference (set_peer_reads_us, wire::kRdmRef) --------------------------------

namespace {

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 13 + 5);
  return v;
}

// What crossed between the two sides, by kind (a sees b's packets through `take`).
struct Seen {
  int rts = 0, rts_ref = 0, cts = 0, rdv_data = 0;
  uint64_t rts_offset = 0, cts_length = UINT64_MAX;
};
void pump_seen(Side& a, Side& b, uint64_t& now, Seen& s) {
  pump(a, b, now, [&](Side&, const Packet& p) {
    switch (p.h.kind) {
      case RdmKind::kRts:
        ++s.rts;
        if (p.h.flags & dpfab::wire::kRdmRef) {
          ++s.rts_ref;
          s.rts_offset = p.h.offset;
        }
        EXPECT_TRUE(p.data.empty());
        break;
      case RdmKind::kCts:
        ++s.cts;
        s.cts_length = p.h.length;
        break;
      case RdmKind::kRdvData:
        ++s.rdv_data;
        break;
      default:
        break;
    }
    return false;
  });
}

}  // namespace

TEST(RdmLocal, ARendezvousByReferenceIsOneRoundTripAndTheReceiversOneCopy) {
  Side a(0x100), b(0x200);
  uint64_t now = 1000;
  const std::vector<uint8_t> msg = pattern(200 << 10);
  std::vector<uint8_t> in(msg.size());
  int sctx, rctx;
  a.core->set_peer_reads_us(0);
  ASSERT_EQ(b.core->recv(recv_op(in, &rctx), now), 0);
  ASSERT_EQ(a.core->send(send_op(msg, &sctx), now), 0);
  Seen s;
  pump_seen(a, b, now, s);
  EXPECT_EQ(s.rts_ref, 1) << "the RTS names the sender's buffer";
  EXPECT_EQ(s.rts_offset, reinterpret_cast<uintptr_t>(msg.data()));
  EXPECT_EQ(s.cts, 1);
  EXPECT_EQ(s.cts_length, 0u) << "a zero grant: the data is in place already";
  EXPECT_EQ(s.rdv_data, 0) << "no data packets";
  ASSERT_EQ(b.reads.size(), 1u) << "one copy";
  EXPECT_EQ(b.reads[0].second, msg.size());
  ASSERT_EQ(b.done.size(), 1u);
  EXPECT_EQ(b.done[0].err, 0);
  EXPECT_EQ(b.done[0].len, msg.size());
  EXPECT_EQ(b.done[0].context, &rctx);
  EXPECT_EQ(in, msg);
  ASSERT_EQ(a.done.size(), 1u);
  EXPECT_EQ(a.done[0].err, 0);
  EXPECT_EQ(a.done[0].context, &sctx);
  EXPECT_EQ(a.core->stats().ref_sent, 1u);
  EXPECT_EQ(b.core->stats().ref_received, 1u);
  EXPECT_EQ(a.core->tx_in_use(), 0u);
}

TEST(RdmLocal, AnUnexpectedRendezvousByReferenceIsCopiedWhenItsReceiveIsPosted) {
  Side a(0x100), b(0x200);
  uint64_t now = 1000;
  const std::vector<uint8_t> msg = pattern(64 << 10);
  std::vector<uint8_t> in(msg.size());
  int sctx, rctx;
  a.core->set_peer_reads_us(0);
  ASSERT_EQ(a.core->send(send_op(msg, &sctx), now), 0);
  Seen s;
  pump_seen(a, b, now, s);
  EXPECT_TRUE(b.reads.empty()) << "nothing to copy into yet";
  EXPECT_TRUE(a.done.empty()) << "the send waits for the receiver";
  ASSERT_EQ(b.core->recv(recv_op(in, &rctx), now), 0);
  ASSERT_EQ(b.done.size(), 1u) << "complete at the post: copied then";
  EXPECT_EQ(b.done[0].err, 0);
  EXPECT_EQ(in, msg);
  pump_seen(a, b, now, s);
  EXPECT_EQ(s.rdv_data, 0);
  EXPECT_EQ(s.cts_length, 0u);
  ASSERT_EQ(a.done.size(), 1u);
  EXPECT_EQ(a.done[0].err, 0);
}

TEST(RdmLocal, AShortOrScatteredReceiveTakesByReferenceWhatFitsWhereItGoes) {
  Side a(0x100), b(0x200);
  uint64_t now = 1000;
  const std::vector<uint8_t> msg = pattern(100 << 10);
  a.core->set_peer_reads_us(0);
  // Truncated: the first bytes, FI_ETRUNC with the rest in olen; the sender completes normally.
  std::vector<uint8_t> shorter(30000);
  int sctx, rctx;
  ASSERT_EQ(b.core->recv(recv_op(shorter, &rctx), now), 0);
  ASSERT_EQ(a.core->send(send_op(msg, &sctx), now), 0);
  pump(a, b, now);
  ASSERT_EQ(b.done.size(), 1u);
  EXPECT_EQ(b.done[0].err, FI_ETRUNC);
  EXPECT_EQ(b.done[0].len, shorter.size());
  EXPECT_EQ(b.done[0].olen, msg.size() - shorter.size());
  EXPECT_TRUE(std::equal(shorter.begin(), shorter.end(), msg.begin()));
  ASSERT_EQ(a.done.size(), 1u);
  EXPECT_EQ(a.done[0].err, 0);
  // Three buffers: one copy into each.
  std::vector<uint8_t> p1(10000), p2(1), p3(msg.size() - 10001);
  RecvOp op;
  op.iov_count = 3;
  op.iov[0] = {p1.data(), p1.size()};
  op.iov[1] = {p2.data(), p2.size()};
  op.iov[2] = {p3.data(), p3.size()};
  op.len = msg.size();
  op.context = &rctx;
  op.match.src = FI_ADDR_UNSPEC;
  b.done.clear();
  b.reads.clear();
  ASSERT_EQ(b.core->recv(op, now), 0);
  ASSERT_EQ(a.core->send(send_op(msg, &sctx), now), 0);
  pump(a, b, now);
  ASSERT_EQ(b.done.size(), 1u);
  EXPECT_EQ(b.done[0].err, 0);
  EXPECT_EQ(b.reads.size(), 3u);
  std::vector<uint8_t> got(p1);
  got.insert(got.end(), p2.begin(), p2.end());
  got.insert(got.end(), p3.begin(), p3.end());
  EXPECT_EQ(got, msg);
}

TEST(RdmLocal, ACopyByReferenceThatFailsFailsTheReceiveAndLetsTheSenderGo) {
  Side a(0x100), b(0x200);
  uint64_t now = 1000;
  const std::vector<uint8_t> msg = pattern(64 << 10);
  std::vector<uint8_t> in(msg.size());
  int sctx, rctx;
  a.core->set_peer_reads_us(0);
  b.read_error = FI_EHOSTUNREACH;  // the sender's process went away during the copy
  ASSERT_EQ(b.core->recv(recv_op(in, &rctx), now), 0);
  ASSERT_EQ(a.core->send(send_op(msg, &sctx), now), 0);
  pump(a, b, now);
  ASSERT_EQ(b.done.size(), 1u);
  EXPECT_EQ(b.done[0].err, FI_EHOSTUNREACH);
  EXPECT_EQ(b.done[0].context, &rctx);
  ASSERT_EQ(a.done.size(), 1u) << "the zero grant still goes: a sender that is there is done";
  EXPECT_EQ(b.core->stats().ref_received, 0u);
  // The next message is unaffected.
  b.read_error = 0;
  b.done.clear();
  ASSERT_EQ(b.core->recv(recv_op(in, &rctx), now), 0);
  ASSERT_EQ(a.core->send(send_op(msg, &sctx), now), 0);
  pump(a, b, now);
  ASSERT_EQ(b.done.size(), 1u);
  EXPECT_EQ(b.done[0].err, 0);
  EXPECT_EQ(in, msg);
}

TEST(RdmLocal, LargeOrGatheredMessagesAndRenewedPeersKeepTheGrantedRendezvous) {
  Side a(0x100);
  auto b = std::make_unique<Side>(0x200);
  uint64_t now = 1000;
  int sctx, rctx;
  a.core->set_peer_reads_us(0);
  auto check_granted = [&](const SendOp& op, const std::vector<uint8_t>& want) {
    std::vector<uint8_t> in(want.size());
    a.done.clear();
    b->done.clear();
    ASSERT_EQ(b->core->recv(recv_op(in, &rctx), now), 0);
    ASSERT_EQ(a.core->send(op, now), 0);
    Seen s;
    pump_seen(a, *b, now, s);
    EXPECT_EQ(s.rts, 1);
    EXPECT_EQ(s.rts_ref, 0);
    EXPECT_GT(s.rdv_data, 0);
    EXPECT_TRUE(b->reads.empty());
    ASSERT_EQ(b->done.size(), 1u);
    EXPECT_EQ(b->done[0].err, 0);
    EXPECT_EQ(in, want);
    ASSERT_EQ(a.done.size(), 1u);
    EXPECT_EQ(a.done[0].err, 0);
  };
  // Over kRefMax: granted, in segments.
  const std::vector<uint8_t> big = pattern(RdmCore::kRefMax + 4096);
  check_granted(send_op(big, &sctx), big);
  // Two buffers: not one place to read from.
  const std::vector<uint8_t> msg = pattern(64 << 10);
  SendOp two;
  two.iov_count = 2;
  two.iov[0] = {const_cast<uint8_t*>(msg.data()), 1000};
  two.iov[1] = {const_cast<uint8_t*>(msg.data()) + 1000, msg.size() - 1000};
  two.len = msg.size();
  two.context = &sctx;
  check_granted(two, msg);
  // A new instance of the peer says again whether it reads us.
  a.core->lose_peer(0, now);
  b = std::make_unique<Side>(0x300);
  a.core->renew_peer(0, now);
  check_granted(send_op(msg, &sctx), msg);
  EXPECT_EQ(a.core->stats().ref_sent, 0u);
}
