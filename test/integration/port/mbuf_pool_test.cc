// SPDX-License-Identifier: BSD-3-Clause
//
// A small mbuf pool (FI_DPDK_MBUFS=64, set by meson) on one net_ring port (a loopback), single
// process: an FI_EP_DGRAM endpoint sends to itself with no receive posted. Every datagram comes
// back and finds no receive; the backlog holds some (a peer that answers before its receive is
// posted is not lost), but held datagrams must never pin the mbufs transmit needs: sends keep
// being accepted, and receives posted later still get the datagrams that were held.
#include <gtest/gtest.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fixture.h"

using namespace dpfab::test;

namespace {

class SmallPool : public EndpointTest {
 protected:
  void SetUp() override {
    const char* mbufs = std::getenv("FI_DPDK_MBUFS");
    ASSERT_NE(mbufs, nullptr) << "meson sets FI_DPDK_MBUFS";
    pool_ = std::strtoul(mbufs, nullptr, 10);
    ASSERT_NO_FATAL_FAILURE(EndpointTest::SetUp());
  }
  InfoPtr hints() const override { return dpdk_hints(FI_EP_DGRAM, FI_MSG); }
  EpOptions ep_options() const override {
    EpOptions o;
    o.cq_size = 256;
    return o;
  }

  // One fi_cq_read (it runs the poll step): counts send and receive completions.
  void poll_once() {
    fi_cq_data_entry e[16];
    ssize_t n = fi_cq_read(e_.cq, e, 16);
    for (ssize_t i = 0; i < n; ++i) {
      if (e[i].flags & FI_SEND) ++send_completions_;
      if (e[i].flags & FI_RECV) received_.push_back(*static_cast<uint32_t*>(e[i].buf));
    }
  }

  // Sends datagram `seq` to ourselves; on -FI_EAGAIN polls and retries, a bounded number of
  // times. Returns the last result.
  ssize_t send_seq(uint32_t seq) {
    ssize_t r = -FI_EAGAIN;
    for (int attempt = 0; attempt < 100 && r == -FI_EAGAIN; ++attempt) {
      r = fi_send(e_.ep, &seq, sizeof(seq), nullptr, self_, nullptr);
      poll_once();
    }
    return r;
  }

  size_t pool_ = 0;
  size_t send_completions_ = 0;
  std::vector<uint32_t> received_;
};

}  // namespace

TEST_F(SmallPool, HeldDatagramsNeverStarveTransmit) {
  // Many times the pool, and more than a backlog holds: each send's mbuf comes back on receive.
  const uint32_t kSends = static_cast<uint32_t>(pool_ * 16);
  uint32_t accepted = 0;
  for (uint32_t seq = 0; seq < kSends; ++seq) {
    ssize_t r = send_seq(seq);
    if (r != 0) {
      ADD_FAILURE() << "send " << seq << " refused for good: " << fi_strerror(static_cast<int>(-r))
                    << " (held datagrams pin the pool)";
      break;
    }
    ++accepted;
  }
  EXPECT_EQ(accepted, kSends);
  for (int i = 0; i < 100; ++i) poll_once();
  EXPECT_EQ(send_completions_, accepted);
  EXPECT_TRUE(received_.empty()) << "no receive was posted";

  // Receives posted now get the datagrams that were held, oldest first: at most half the pool.
  uint32_t buf[64][4] = {};
  const size_t posted = pool_ / 2 + 8;
  ASSERT_LE(posted, 64u);
  for (size_t i = 0; i < posted; ++i)
    ASSERT_EQ(fi_recv(e_.ep, buf[i], sizeof(buf[i]), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (received_.size() < pool_ / 2 && std::chrono::steady_clock::now() < deadline) poll_once();
  for (int i = 0; i < 100; ++i) poll_once();  // nothing more is held
  ASSERT_EQ(received_.size(), pool_ / 2) << "the backlog held half the pool";
  for (size_t i = 0; i < received_.size(); ++i) EXPECT_EQ(received_[i], i) << "oldest first";

  // The receives still posted take new datagrams at once.
  received_.clear();
  for (uint32_t seq = 0; seq < 8; ++seq) ASSERT_EQ(send_seq(1000 + seq), 0);
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (received_.size() < 8 && std::chrono::steady_clock::now() < deadline) poll_once();
  ASSERT_EQ(received_.size(), 8u);
  for (uint32_t i = 0; i < 8; ++i) EXPECT_EQ(received_[i], 1000 + i);
}
