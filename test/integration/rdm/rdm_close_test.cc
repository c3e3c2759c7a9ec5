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

#include "fi_helpers.h"

using namespace dpfab::test;

namespace {

using Clock = std::chrono::steady_clock;

class RdmClose : public ::testing::Test {
 protected:
  void SetUp() override {
    InfoPtr hints = dpdk_hints(FI_EP_RDM);
    hints->caps = FI_MSG;
    ASSERT_EQ(getinfo(hints.get(), &info_), 0);
    info = first_dpdk(info_.get());
    ASSERT_NE(info, nullptr);
    ASSERT_EQ(info->ep_attr->type, FI_EP_RDM);
    ASSERT_EQ(fi_fabric(info->fabric_attr, &fabric_, nullptr), 0);
    ASSERT_EQ(fi_domain(fabric_, info, &domain_, nullptr), 0);
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    ASSERT_EQ(fi_av_open(domain_, &av_attr, &av_, nullptr), 0);
    for (int i = 0; i < 2; ++i) {
      fi_cq_attr cq_attr{};
      cq_attr.format = FI_CQ_FORMAT_DATA;
      cq_attr.size = 64;
      ASSERT_EQ(fi_cq_open(domain_, &cq_attr, &cq[i], nullptr), 0);
      ASSERT_EQ(fi_endpoint(domain_, info, &ep[i], nullptr), 0);
      ASSERT_EQ(fi_ep_bind(ep[i], &cq[i]->fid, FI_TRANSMIT | FI_RECV), 0);
      ASSERT_EQ(fi_ep_bind(ep[i], &av_->fid, 0), 0);
      ASSERT_EQ(fi_enable(ep[i]), 0);
    }
    char name[64];
    size_t len = sizeof(name);
    ASSERT_EQ(fi_getname(&ep[1]->fid, name, &len), 0);
    ASSERT_EQ(fi_av_insert(av_, name, 1, &to_b, 0, nullptr), 1);
  }
  void TearDown() override {
    std::vector<fid*> fids;
    for (int i = 0; i < 2; ++i) {
      if (ep[i]) fids.push_back(&ep[i]->fid);
      if (cq[i]) fids.push_back(&cq[i]->fid);
    }
    if (av_) fids.push_back(&av_->fid);
    if (domain_) fids.push_back(&domain_->fid);
    if (fabric_) fids.push_back(&fabric_->fid);
    for (fid* f : fids) EXPECT_EQ(fi_close(f), 0);
  }
  // Closes endpoint i now; returns how long fi_close took.
  double close_ep(int i) {
    const auto t0 = Clock::now();
    EXPECT_EQ(fi_close(&ep[i]->fid), 0);
    ep[i] = nullptr;
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }
  // Reads one completion from cq[i] within `seconds` (fi_cq_read runs the port's poll step).
  bool read_one(int i, double seconds, fi_cq_data_entry* out) {
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
      ssize_t n = fi_cq_read(cq[i], out, 1);
      if (n == 1) return true;
      EXPECT_EQ(n, -FI_EAGAIN);
      if (n != -FI_EAGAIN) return false;
    }
    return false;
  }

  fi_info* info = nullptr;
  fid_cq* cq[2] = {};
  fid_ep* ep[2] = {};
  fi_addr_t to_b = FI_ADDR_NOTAVAIL;

 private:
  InfoPtr info_;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_av* av_ = nullptr;
};

TEST_F(RdmClose, SmallSendClosedAtOnceStillArrivesThoughItsFirstPacketWasLost) {
  char rbuf[256] = {};
  ASSERT_EQ(fi_recv(ep[1], rbuf, sizeof(rbuf), nullptr, FI_ADDR_UNSPEC, rbuf), 0);
  static const char kMsg[] = "sent, completed, closed";
  static_assert(sizeof(kMsg) <= 64);  // below any inject_size: completes when copied
  ASSERT_LE(sizeof(kMsg), info->tx_attr->inject_size);
  ASSERT_EQ(fi_send(ep[0], kMsg, sizeof(kMsg), nullptr, to_b, const_cast<char*>(kMsg)), 0);
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
  ASSERT_EQ(fi_send(ep[0], kMsg, sizeof(kMsg), nullptr, to_b, nullptr), 0);
  const double took = close_ep(0);
  EXPECT_GT(took, 1.5);
  EXPECT_LT(took, 4.0);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
