// SPDX-License-Identifier: BSD-3-Clause
//
// The fixture of the bad-input tests (bad_input_test.cc, bad_input_msg_test.cc): fixture.h's
// EndpointTest with one DGRAM endpoint on the net_ring port, bound to a CQ, a counter and an AV
// holding its own address (self_).
#pragma once

#include <gtest/gtest.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#include <chrono>

#include "fixture.h"

namespace dpfab::test {

class BadInput : public EndpointTest {
 protected:
  InfoPtr hints() const override { return dpdk_hints(FI_EP_DGRAM, FI_MSG); }
  EpOptions ep_options() const override {
    EpOptions o;
    o.cntrs = EpOptions::Cntrs::kShared;
    return o;
  }

  // Reads completions until -FI_EAGAIN (bounded): what the calls above left behind.
  int drain() {
    fi_cq_data_entry e[8];
    int n = 0;
    for (int i = 0; i < 1000; ++i) {
      ssize_t r = fi_cq_read(e_.cq, e, 8);
      if (r == -FI_EAGAIN) break;
      if (r == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        (void)fi_cq_readerr(e_.cq, &err, 0);
        continue;
      }
      if (r > 0) n += static_cast<int>(r);
    }
    return n;
  }

  // Reads completions until `n` came (at most 5 s).
  int reap(int n) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    int got = 0;
    fi_cq_data_entry e{};
    while (got < n && std::chrono::steady_clock::now() < deadline)
      if (fi_cq_read(e_.cq, &e, 1) == 1) ++got;
    return got;
  }

  // A receive, then a send to ourselves: the data path still works after the bad calls.
  void expect_still_works() {
    char out[] = "still", in[16] = {};
    ASSERT_EQ(fi_recv(e_.ep, in, sizeof(in), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
    ASSERT_EQ(fi_send(e_.ep, out, sizeof(out), nullptr, self_, nullptr), 0);
    EXPECT_EQ(reap(2), 2);
    EXPECT_STREQ(in, "still");
  }
};

}  // namespace dpfab::test
