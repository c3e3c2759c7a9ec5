// SPDX-License-Identifier: BSD-3-Clause
//
// FI_RM_ENABLED (the domain default) on an FI_EP_RDM endpoint: the provider refuses, with
// -FI_EAGAIN, an operation whose completion the CQ might not take (fi_domain(3), "Resource
// Management"). The endpoint counts what it owes the CQ (the receives and sends in progress, plus
// the one asked for) against the CQ's free entries, on every fi_recv and fi_send
// (RdmEndpoint::cq_room). Through the libfabric core, one endpoint with one small CQ for both
// directions on a net_ring loopback port, sending to itself.
#include <gtest/gtest.h>
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

// A CQ of 2^k - 1 entries holds exactly that many (at least what was asked, and its ring of 2^k
// slots holds no more): the number of receives it accepts is then known.
constexpr size_t kCqSize = 15;
constexpr size_t kMsg = 64;

class RdmResource : public EndpointTest {
 protected:
  InfoPtr hints() const override { return dpdk_hints(FI_EP_RDM, FI_MSG); }
  EpOptions ep_options() const override {
    EpOptions o;
    o.cq_size = kCqSize;
    return o;
  }
  // Reads completions until `want` arrived or `seconds` passed (fi_cq_read runs the port's poll
  // step); an error entry is taken with fi_cq_readerr and counted in errors_. @return how many.
  size_t drain(size_t want, double seconds = 5) {
    size_t got = 0;
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (got < want && Clock::now() < end) {
      fi_cq_data_entry c[8];
      const ssize_t n = fi_cq_read(e_.cq, c, 8);
      if (n > 0) {
        got += static_cast<size_t>(n);
      } else if (n == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        if (fi_cq_readerr(e_.cq, &err, 0) == 1) {
          ++errors_;
          ++got;
        }
      } else {
        EXPECT_EQ(n, -FI_EAGAIN);
      }
    }
    return got;
  }

  std::vector<char> rx_ = std::vector<char>(kMsg * 1024);
  std::vector<char> ctx_ = std::vector<char>(1024);
  char tx_[kMsg] = "resource management";
  size_t errors_ = 0;
};

TEST_F(RdmResource, PostsStopAtTheCqsRoomAndResumeOnceItIsRead) {
  // Receives: each owes the CQ one entry. They are accepted while the CQ could hold them all
  // (at least the size asked for), then refused without being posted.
  size_t posted = 0;
  ssize_t r = 0;
  while (posted < 1024) {
    r = fi_recv(e_.ep, &rx_[posted * kMsg], kMsg, nullptr, FI_ADDR_UNSPEC, &ctx_[posted]);
    if (r != 0) break;
    ++posted;
  }
  ASSERT_EQ(r, -FI_EAGAIN) << "the receives were never refused";
  ASSERT_EQ(posted, kCqSize) << "the receives accepted are not what the CQ holds";
  // A send owes an entry too: refused as well, and nothing leaves.
  EXPECT_EQ(fi_send(e_.ep, tx_, kMsg, nullptr, self_, &ctx_[posted]), -FI_EAGAIN);
  EXPECT_EQ(drain(1, 0.2), 0u) << "a refused operation completed";

  // Cancelling a receive writes its error completion: the CQ holds it, so the room is still
  // one short until fi_cq_readerr takes it.
  ASSERT_EQ(fi_cancel(&e_.ep->fid, &ctx_[posted - 1]), 0);
  EXPECT_EQ(fi_send(e_.ep, tx_, kMsg, nullptr, self_, &ctx_[posted]), -FI_EAGAIN);
  ASSERT_EQ(drain(1), 1u);
  ASSERT_EQ(errors_, 1u);

  // Now the send fits: it goes to ourselves, lands in the first receive, and both complete.
  ASSERT_EQ(fi_send(e_.ep, tx_, kMsg, nullptr, self_, &ctx_[posted]), 0);
  ASSERT_EQ(drain(2), 2u);
  EXPECT_EQ(std::memcmp(&rx_[0], tx_, kMsg), 0);
  // The receive taken and the send done (its op is held until our own ack, which may come
  // later), there is room for one receive again.
  EXPECT_EQ(
      fi_recv(e_.ep, &rx_[(posted - 1) * kMsg], kMsg, nullptr, FI_ADDR_UNSPEC, &ctx_[posted - 1]),
      0);
  // The rest are cancelled before the endpoint closes (their errors read).
  for (size_t k = 1; k < posted; ++k) ASSERT_EQ(fi_cancel(&e_.ep->fid, &ctx_[k]), 0);
  EXPECT_EQ(drain(posted - 1), posted - 1);
  EXPECT_EQ(errors_, posted);
}

}  // namespace
