// SPDX-License-Identifier: BSD-3-Clause
//
// The deadline a sleeper arms its timer with (PortEngine::timer_due_ns) counts the work that the
// frames of prepare_sleep's own poll steps made due. Below libfabric: EAL with one net_ring port
// (a loopback), two RDM endpoints on it bound to each other, manual progress.
//
// A poll step runs its receivers' backlog pass (and takes their deadlines) before it receives:
// a message that arrives in the step prepare_sleep runs before the sleep leaves its receiver with
// a delayed ack due in ack_delay, which the step's deadline did not see. A sleeper that armed its
// timer with that deadline slept past the ack (until the sender's retransmission timeout, or
// longer): the sender's window stayed full of packets that had arrived.
#include <gtest/gtest.h>

#include <ctime>
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
using test::ring_engine;

namespace {

struct Side {
  std::unique_ptr<event::Cq> cq = make_data_cq(64);
  std::unique_ptr<proto::RdmEndpoint> ep;
  uint16_t port = 0;
  explicit Side(uint64_t ack_delay_ns) {
    proto::RdmEndpoint::Config cfg;
    cfg.max_peers = 4;
    cfg.core.reorder_slots = 64;
    cfg.core.seg_size =
        static_cast<uint32_t>(wire::max_payload(ring_engine()->mtu()) - wire::kRdmHeaderLen);
    cfg.core.rel.ack_delay_ns = ack_delay_ns;
    ep = std::move(proto::RdmEndpoint::create(ring_engine(), cfg).value());
    ep->bind_cq(cq.get(), true, true, false);
    EXPECT_EQ(ep->enable(), 0);
    port = ring_engine()->bind_ephemeral(ep.get());
    ep->set_address(port, 0);
  }
  ~Side() { ring_engine()->unbind(port); }
};

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

class RdmSleepDeadline : public ::testing::Test {
 protected:
  void SetUp() override { ring_engine(test::RingProgress::kManual); }
};

TEST_F(RdmSleepDeadline, PrepareSleepCountsTheDelayedAckOfAMessageItsOwnStepReceived) {
  constexpr uint64_t kAckDelay = 20'000;  // the default: far below the sender's RTO (1 ms)
  Side a(kAckDelay), b(kAckDelay);
  a.ep->bind_peer(b.ep->address());
  b.ep->bind_peer(a.ep->address());
  progress::PortEngine* e = ring_engine();
  while (e->progress() != 0) {
  }
  // An unexpected message (no receive posted) that asks for no ack: b holds it and owes a
  // delayed ack. Nothing polls
  // the port before prepare_sleep, so its step is the one that receives it.
  std::vector<uint8_t> msg(64, 0x5a);
  proto::rdm::SendOp s;
  s.buf = msg.data();
  s.len = msg.size();
  s.context = &msg;
  s.inject = true;  // FI_INJECT_COMPLETE: complete at once, no ack asked for (kRdmAckReq)
  s.complete_now = true;
  ASSERT_EQ(a.ep->send(s, 0), 0);
  const uint64_t rx0 = b.ep->stats().rx_frames.load();
  ASSERT_TRUE(e->prepare_sleep());
  const uint64_t after = monotonic_ns();
  ASSERT_EQ(b.ep->stats().rx_frames.load(), rx0 + 1) << "prepare_sleep's step took the message";
  // b's delayed ack is due at most ack_delay after the frame came (before `after`); a's
  // retransmission timeout, which is all the step's backlog pass saw, is 1 ms after the send.
  const uint64_t due = e->timer_due_ns();
  ASSERT_NE(due, UINT64_MAX);
  EXPECT_LE(due, after + kAckDelay + 5'000)
      << "the sleeper's deadline is " << (due - after) / 1000 << " us away: past b's delayed ack";
  // And the deadline is right: the ack leaves once it is due, and a's send window empties.
  const uint64_t until = monotonic_ns() + 1'000'000'000;
  fi_cq_data_entry c{};
  while (a.ep->in_use() != 0 && monotonic_ns() < until) {
    if (monotonic_ns() >= e->timer_due_ns()) e->progress();
    (void)a.cq->read(&c, 1, nullptr);
  }
  EXPECT_EQ(a.ep->in_use(), 0u) << "a's message was never acknowledged";
}

}  // namespace
