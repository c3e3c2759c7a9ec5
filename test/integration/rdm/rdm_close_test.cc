// SPDX-License-Identifier: BSD-3-Clause
//
// Closing an FI_EP_RDM endpoint right after a small send (fabtests fi_cq_data's client: post,
// read the completion, close, exit). A send of at most inject_size bytes completes when it is
// copied (FI_INJECT_COMPLETE); its message must still reach the peer when the endpoint is closed
// at once and its first packet was lost: fi_close waits (boundedly) until the peer acknowledged
// it, retransmitting meanwhile. Without that the message died with the endpoint, and fi_cq_data
// failed (the server waited for ever) whenever the client's first packet went out before the
// memif link was up.
//
// One process, two endpoints on one net_ring loopback port, with injected loss on what the port
// receives (meson: FI_DPDK_FAULT_LOSS=0.5, FI_DPDK_FAULT_SEED=2; the seed's first decision drops
// the first frame, the send's only packet, and later ones let a retransmission and its ack
// through). The send is closed before any poll step has run, so only the close can resend.
#include <gtest/gtest.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "fixture.h"

using namespace dpfab::test;

namespace {

using Clock = std::chrono::steady_clock;

class RdmClose : public DomainTest {
 protected:
  InfoPtr hints() const override { return dpdk_hints(FI_EP_RDM, FI_MSG); }
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(DomainTest::SetUp());
    ASSERT_EQ(d_.open_av(&av_), 0) << d_.failed;
    EpOptions o;
    o.av = av_;
    for (Endpoint& x : e) ASSERT_EQ(x.open(d_, o), 0) << x.failed;
    ASSERT_EQ(fi_av_insert(av_, e[1].addr, 1, &to_b, 0, nullptr), 1);
  }
  void TearDown() override {
    for (Endpoint& x : e) EXPECT_EQ(x.close(), 0) << x.failed;
    EXPECT_EQ(close_fid(&av_), 0);
    DomainTest::TearDown();
  }
  // Closes endpoint i now; returns how long fi_close took.
  double close_ep(int i) {
    const auto t0 = Clock::now();
    EXPECT_EQ(close_fid(&e[i].ep), 0);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }
  // Reads one completion from e[i].cq within `seconds` (fi_cq_read runs the port's poll step).
  bool read_one(int i, double seconds, fi_cq_data_entry* out) {
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
      ssize_t n = fi_cq_read(e[i].cq, out, 1);
      if (n == 1) return true;
      EXPECT_EQ(n, -FI_EAGAIN);
      if (n != -FI_EAGAIN) return false;
    }
    return false;
  }

  Endpoint e[2];  // two RDM endpoints, each with its CQ; e[0] sends to e[1]
  fi_addr_t to_b = FI_ADDR_NOTAVAIL;

 private:
  fid_av* av_ = nullptr;
};

TEST_F(RdmClose, SmallSendClosedAtOnceStillArrivesThoughItsFirstPacketWasLost) {
  char rbuf[256] = {};
  ASSERT_EQ(fi_recv(e[1].ep, rbuf, sizeof(rbuf), nullptr, FI_ADDR_UNSPEC, rbuf), 0);
  static const char kMsg[] = "sent, completed, closed";
  static_assert(sizeof(kMsg) <= 64);  // below any inject_size: completes when copied
  ASSERT_LE(sizeof(kMsg), d_.info->tx_attr->inject_size);
  ASSERT_EQ(fi_send(e[0].ep, kMsg, sizeof(kMsg), nullptr, to_b, const_cast<char*>(kMsg)), 0);
  const double took = close_ep(0);  // before any poll step: the loss-injecting port drops it
  fi_cq_data_entry c{};
  ASSERT_TRUE(read_one(0, 1.0, &c)) << "the send wrote no completion";
  EXPECT_EQ(c.op_context, kMsg);
  EXPECT_TRUE(c.flags & FI_SEND);
  ASSERT_TRUE(read_one(1, 3.0, &c))
      << "the message died with its endpoint (fi_close took " << took << " s)";
  EXPECT_EQ(c.op_context, rbuf);
  EXPECT_EQ(c.len, sizeof(kMsg));
  EXPECT_STREQ(rbuf, kMsg);
  EXPECT_LT(took, 2.0);
}

TEST_F(RdmClose, CloseWaitsForAnUnansweredPeerAtMostTheLingerBound) {
  // Endpoint B goes away: nothing acknowledges A's message; fi_close(A) gives up after
  // min(peer timeout, 2 s) and returns.
  close_ep(1);
  static const char kMsg[] = "to nobody";
  ASSERT_EQ(fi_send(e[0].ep, kMsg, sizeof(kMsg), nullptr, to_b, nullptr), 0);
  const double took = close_ep(0);
  EXPECT_GT(took, 1.5);
  EXPECT_LT(took, 4.0);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
