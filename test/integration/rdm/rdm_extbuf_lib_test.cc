// SPDX-License-Identifier: BSD-3-Clause
//
// Frames sent by reference (lib/proto/rdm_endpoint_tx.cc), below libfabric: EAL with one net_ring
// port (a loopback), two RDM endpoints on it bound to each other. The sender's link is
// CopyingLink: the port engine behind a transmit that copies every frame it takes and frees
// the original before it returns, as memif and af_packet do (net_ring itself passes the
// mbufs on, so it never takes frames by reference). What it must show:
//   - messages of 1 B to 256 KiB (eager and rendezvous, their segments above and below the
//     threshold) arrive whole and intact, and the large ones went by reference (chained
//     frames the link copied; the endpoint's tx_by_reference);
//   - the sender's buffer is its own again at the send's completion: rewritten then, the
//     receiver still has what was sent;
//   - frames the port does not take at once are turned into copies before the call ends
//     (tx_by_reference_copied), and arrive intact once the port takes them;
//   - with tx_extbuf_min 0 nothing goes by reference;
//   - a send that completes at once (FI_INJECT_COMPLETE) hands its frame to the port before its
//     CQ entry is written (RdmEndpoint::send holds the core's completions until finish()).
#include <gtest/gtest.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "event/cq.h"
#include "progress/engine.h"
#include "proto/rdm_endpoint.h"
#include "ring_engine.h"
#include "wire/format.h"
#include "wire/rdm.h"

using namespace dpfab;
using test::make_data_cq;
using test::progress_until;
using test::ring_engine;

namespace {

// The ring engine behind a transmit that copies what it takes (see the file comment).
class CopyingLink final : public proto::Link {
 public:
  explicit CopyingLink(progress::PortEngine* e, uint32_t ext_min) : e_(e), ext_min_(ext_min) {}
  static bool by_reference(const rte_mbuf* m) noexcept {
    for (; m; m = m->next)
      if (RTE_MBUF_HAS_EXTBUF(m)) return true;
    return false;
  }
  uint16_t transmit(rte_mbuf** frames, uint16_t n) noexcept override {
    uint16_t take = n;
    if (refuse_ > 0 && n > 0 && by_reference(frames[n - 1])) {
      // A full port: the last frames of a burst of data stay the caller's.
      const auto r = static_cast<uint16_t>(std::min<uint32_t>(refuse_, n));
      refuse_ -= r;
      take = static_cast<uint16_t>(n - r);
    }
    if (watch) cq_at_tx.push_back(watch->count());
    for (uint16_t i = 0; i < take; ++i) {
      rte_mbuf* m = frames[i];
      by_reference_ += by_reference(m);
      rte_mbuf* c = rte_pktmbuf_copy(m, e_->pool(), 0, UINT32_MAX);  // what the PMD's copy reads
      if (!c) {  // as a PMD out of descriptors: not taken
        take = i;
        break;
      }
      rte_pktmbuf_free(m);
      frames[i] = c;
    }
    const uint16_t sent = e_->transmit(frames, take);
    // What the engine did not take is a copy now: still the caller's, as the contract says.
    return sent;
  }
  size_t progress() noexcept override { return e_->progress(); }
  void run_as_rx_owner(void (*fn)(void*), void* arg) noexcept override {
    e_->run_as_rx_owner(fn, arg);
  }
  rte_mempool* pool() const noexcept override { return e_->pool(); }
  const rte_ether_addr& mac() const noexcept override { return e_->mac(); }
  uint32_t ipv4_be() const noexcept override { return e_->ipv4_be(); }
  uint16_t mtu() const noexcept override { return e_->mtu(); }
  wire::TxChecksumCaps tx_caps() const noexcept override { return e_->tx_caps(); }
  uint32_t tx_extbuf_min() const noexcept override { return ext_min_; }

  void refuse_next(uint32_t n) noexcept { refuse_ = n; }
  // The entries `watch` held at each transmit (the sender's CQ).
  const event::Cq* watch = nullptr;
  std::vector<size_t> cq_at_tx;
  uint64_t by_reference() const noexcept { return by_reference_; }

 private:
  progress::PortEngine* e_;
  uint32_t ext_min_;
  uint32_t refuse_ = 0;
  uint64_t by_reference_ = 0;
};

// An RDM endpoint on `link`, bound to the engine with a CQ of its own.
struct Side {
  std::unique_ptr<event::Cq> cq = make_data_cq(256);
  std::unique_ptr<proto::RdmEndpoint> ep;
  uint16_t port = 0;
  explicit Side(proto::Link* link) {
    proto::RdmEndpoint::Config cfg;
    cfg.max_peers = 4;
    cfg.core.reorder_slots = 256;  // as the provider sets it (ep_rdm.cc)
    cfg.core.seg_size =
        static_cast<uint32_t>(wire::max_payload(ring_engine()->mtu()) - wire::kRdmHeaderLen);
    ep = std::move(proto::RdmEndpoint::create(link, cfg).value());
    ep->bind_cq(cq.get(), true, true, false);
    EXPECT_EQ(ep->enable(), 0);
    port = ring_engine()->bind_ephemeral(ep.get());
    ep->set_address(port, 0);
  }
  ~Side() { ring_engine()->unbind(port); }
  // The next completion, progressing the port (bounded); its flags (0: none came).
  uint64_t next(fi_cq_data_entry* out = nullptr) {
    fi_cq_data_entry e{};
    bool got = progress_until([&] { return cq->read(&e, 1, nullptr) == 1; });
    if (out) *out = e;
    return got ? e.flags : 0;
  }
};

// The sender on a CopyingLink, the receiver on the engine itself, bound to each other.
struct Pair {
  CopyingLink link;
  Side a{&link};
  Side b{ring_engine()};
  explicit Pair(uint32_t ext_min) : link(ring_engine(), ext_min) {
    a.ep->bind_peer(b.ep->address());
    b.ep->bind_peer(a.ep->address());
  }
};

uint8_t byte_of(size_t msg, size_t i) { return static_cast<uint8_t>(msg * 131 + i * 7 + (i >> 9)); }

class RdmExtbuf : public ::testing::Test {
 protected:
  void SetUp() override { ring_engine(test::RingProgress::kManual); }

  // Sends `len` bytes from a to b (message `k`), rewrites a's buffer once the send completed,
  // then checks what b received.
  void exchange(Side& a, Side& b, size_t k, size_t len) {
    std::vector<uint8_t> out(len), in(len + 1, 0xee);
    for (size_t i = 0; i < len; ++i) out[i] = byte_of(k, i);
    proto::rdm::RecvOp r;
    r.buf = in.data();
    r.len = in.size();
    r.context = &in;
    ASSERT_EQ(b.ep->recv(r), 0);
    proto::rdm::SendOp s;
    s.buf = out.data();
    s.len = len;
    s.context = &out;
    ASSERT_EQ(a.ep->send(s, 0), 0);
    fi_cq_data_entry e{};
    const uint64_t f = a.next(&e);
    ASSERT_NE(f & FI_SEND, 0u) << "message " << k << " of " << len << " B: no send completion";
    EXPECT_EQ(e.op_context, &out);
    std::fill(out.begin(), out.end(), 0x5a);  // the application's buffer is its own again
    ASSERT_NE(b.next(&e) & FI_RECV, 0u) << "message " << k << " of " << len << " B: not received";
    EXPECT_EQ(e.op_context, &in);
    ASSERT_EQ(e.len, len);
    size_t bad = 0;
    for (size_t i = 0; i < len; ++i) bad += in[i] != byte_of(k, i);
    EXPECT_EQ(bad, 0u) << "message " << k << " of " << len << " B";
    EXPECT_EQ(in[len], 0xee) << "written past the message";
  }
};

TEST_F(RdmExtbuf, LargeDataGoesByReferenceAndArrivesIntact) {
  Pair p(1024);
  const size_t sizes[] = {1, 64, 1023, 1024, 4096, 8000, 16384, 16385, 65536, 100000, 262144};
  size_t k = 0;
  for (size_t len : sizes) exchange(p.a, p.b, k++, len);
  EXPECT_GT(p.link.by_reference(), 0u);
  EXPECT_EQ(p.a.ep->stats().tx_by_reference.load(), p.link.by_reference());
  EXPECT_EQ(p.a.ep->stats().tx_by_reference_copied.load(), 0u);
  EXPECT_EQ(p.a.ep->in_use(), 0u);
}

TEST_F(RdmExtbuf, FramesThePortDidNotTakeBecomeCopies) {
  Pair p(1024);
  for (size_t k = 0; k < 6; ++k) {
    // The data segments of a rendezvous leave in bursts: the port refuses the last frames of
    // the next one, which then wait in the endpoint for the next burst.
    p.link.refuse_next(2);
    exchange(p.a, p.b, k, 65536 + k * 1000);
  }
  EXPECT_GT(p.a.ep->stats().tx_by_reference_copied.load(), 0u);
  EXPECT_GT(p.a.ep->stats().tx_deferred.load(), 0u);
  EXPECT_EQ(p.a.ep->in_use(), 0u);
}

TEST_F(RdmExtbuf, ThresholdZeroCopiesEverything) {
  Pair p(0);
  exchange(p.a, p.b, 0, 65536);
  EXPECT_EQ(p.link.by_reference(), 0u);
  EXPECT_EQ(p.a.ep->stats().tx_by_reference.load(), 0u);
}

TEST_F(RdmExtbuf, AFrameLeavesBeforeItsSendsCompletionIsWritten) {
  Pair p(0);
  std::vector<uint8_t> out(64, 3), in(64);
  proto::rdm::RecvOp r;
  r.buf = in.data();
  r.len = in.size();
  r.context = &in;
  ASSERT_EQ(p.b.ep->recv(r), 0);
  proto::rdm::SendOp s;
  s.buf = out.data();
  s.len = out.size();
  s.context = &out;
  s.inject = s.complete_now = true;  // as fi_send of at most inject_size bytes (ep_rdm_data.h)
  p.link.watch = p.a.cq.get();
  ASSERT_EQ(p.a.ep->send(s, 0), 0);
  p.link.watch = nullptr;
  ASSERT_EQ(p.link.cq_at_tx.size(), 1u) << "one frame, in the send call";
  EXPECT_EQ(p.link.cq_at_tx[0], 0u) << "the completion was written before the frame left";
  EXPECT_EQ(p.a.cq->count(), 1u) << "and is there when the call returns";
  fi_cq_data_entry e{};
  ASSERT_NE(p.a.next(&e) & FI_SEND, 0u);
  EXPECT_EQ(e.op_context, &out);
  ASSERT_NE(p.b.next(&e) & FI_RECV, 0u);
  EXPECT_EQ(in, out);
}

}  // namespace
