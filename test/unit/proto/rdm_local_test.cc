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

  std::unique_ptr<RdmCore> core;
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
