// SPDX-License-Identifier: BSD-3-Clause
//
// The fixture of the bad-input tests (bad_input_test.cc, bad_input_msg_test.cc): one DGRAM
// endpoint on the net_ring port, bound to a CQ, a counter and an AV holding its own address.
#pragma once

#include <gtest/gtest.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#include <chrono>

#include "fi_helpers.h"

namespace dpfab::test {

class BadInput : public testing::Test {
 protected:
  void SetUp() override {
    auto hints = dpdk_hints();
    hints->ep_attr->type = FI_EP_DGRAM;
    hints->caps = FI_MSG;
    ASSERT_EQ(getinfo(hints.get(), &info_), 0);
    e_ = first_dpdk(info_.get());
    ASSERT_NE(e_, nullptr);
    ASSERT_EQ(fi_fabric(e_->fabric_attr, &fabric_, nullptr), 0);
    ASSERT_EQ(fi_domain(fabric_, e_, &domain_, nullptr), 0);
    fi_av_attr av{};
    av.type = FI_AV_TABLE;
    ASSERT_EQ(fi_av_open(domain_, &av, &av_, nullptr), 0);
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_DATA;
    ca.size = 64;
    ASSERT_EQ(fi_cq_open(domain_, &ca, &cq_, nullptr), 0);
    fi_cntr_attr ct{};
    ct.events = FI_CNTR_EVENTS_COMP;
    ASSERT_EQ(fi_cntr_open(domain_, &ct, &cntr_, nullptr), 0);
    ASSERT_EQ(fi_endpoint(domain_, e_, &ep_, nullptr), 0);
    ASSERT_EQ(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_ep_bind(ep_, &cntr_->fid, FI_SEND | FI_RECV), 0);
    ASSERT_EQ(fi_ep_bind(ep_, &av_->fid, 0), 0);
    ASSERT_EQ(fi_enable(ep_), 0);
    char name[64];
    size_t len = sizeof(name);
    ASSERT_EQ(fi_getname(&ep_->fid, name, &len), 0);
    ASSERT_EQ(fi_av_insert(av_, name, 1, &self_, 0, nullptr), 1);  // the endpoint sends to itself
  }

  void TearDown() override {
    for (fid* f : {ep_ ? &ep_->fid : nullptr, cq_ ? &cq_->fid : nullptr,
                   cntr_ ? &cntr_->fid : nullptr, av_ ? &av_->fid : nullptr,
                   domain_ ? &domain_->fid : nullptr, fabric_ ? &fabric_->fid : nullptr})
      if (f) {
        EXPECT_EQ(fi_close(f), 0);
      }
  }

  // Reads completions until -FI_EAGAIN (bounded): what the calls above left behind.
  int drain() {
    fi_cq_data_entry e[8];
    int n = 0;
    for (int i = 0; i < 1000; ++i) {
      ssize_t r = fi_cq_read(cq_, e, 8);
      if (r == -FI_EAGAIN) break;
      if (r == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        (void)fi_cq_readerr(cq_, &err, 0);
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
      if (fi_cq_read(cq_, &e, 1) == 1) ++got;
    return got;
  }

  // A receive, then a send to ourselves: the data path still works after the bad calls.
  void expect_still_works() {
    char out[] = "still", in[16] = {};
    ASSERT_EQ(fi_recv(ep_, in, sizeof(in), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
    ASSERT_EQ(fi_send(ep_, out, sizeof(out), nullptr, self_, nullptr), 0);
    EXPECT_EQ(reap(2), 2);
    EXPECT_STREQ(in, "still");
  }

  InfoPtr info_;
  fi_info* e_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_av* av_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_cntr* cntr_ = nullptr;
  fid_ep* ep_ = nullptr;
  fi_addr_t self_ = FI_ADDR_NOTAVAIL;
};

}  // namespace dpfab::test
