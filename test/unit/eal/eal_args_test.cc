// SPDX-License-Identifier: BSD-3-Clause
//
// EAL argument planning, without starting EAL.
#include "eal/eal_args.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rdma/fi_errno.h>

using testing::Contains;
using testing::HasSubstr;

namespace {
dpfab::config::Config base() {
  dpfab::config::Config c;
  c.eal_args = {"--no-huge", "--no-shconf", "--no-pci"};
  return c;
}
}  // namespace

TEST(EalArgs, MainLcoreKeepsTheCallersCpuSet) {
  auto p = dpfab::eal::plan(base(), {2, 3, 5});
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->argv[0], "dpfab");
  EXPECT_THAT(p->argv, Contains("--no-huge"));
  EXPECT_THAT(p->argv, Contains("--lcores=0@(2-3,5)"));
  EXPECT_THAT(p->argv, Contains("--main-lcore=0"));
  EXPECT_EQ(p->main_lcore, 0u);
  EXPECT_TRUE(p->workers.empty());
}

TEST(EalArgs, WorkersArePinnedAndMainTakesAFreeId) {
  auto c = base();
  c.lcores = {1, 0};
  auto p = dpfab::eal::plan(c, {0, 1});
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->main_lcore, 2u);
  EXPECT_THAT(p->argv, Contains("--lcores=2@(0-1),0@0,1@1"));
  EXPECT_THAT(p->argv, Contains("--main-lcore=2"));
}

TEST(EalArgs, LcoreOptionsInExtraArgsAreRefused) {
  for (const char* a : {"-l", "-l1", "-c", "--lcores", "--lcores=1", "--main-lcore"}) {
    auto c = base();
    c.eal_args.push_back(a);
    auto p = dpfab::eal::plan(c, {0});
    ASSERT_FALSE(p) << a;
    EXPECT_EQ(p.code(), -FI_EINVAL);
    EXPECT_THAT(p.error().message, HasSubstr("FI_DPDK_LCORES"));
  }
}

TEST(EalArgs, PciPortsAreAllowListedAndNeedPci) {
  auto c = base();
  c.ports = {"0000:3b:00.0", "net_ring0"};
  auto p = dpfab::eal::plan(c, {0});
  ASSERT_FALSE(p);
  EXPECT_THAT(p.error().message, HasSubstr("--no-pci"));
  c.eal_args = {"--no-huge"};
  p = dpfab::eal::plan(c, {0});
  ASSERT_TRUE(p) << p.error().message;
  auto it = std::find(p->argv.begin(), p->argv.end(), "-a");
  ASSERT_NE(it, p->argv.end());
  EXPECT_EQ(*(it + 1), "0000:3b:00.0");
}

TEST(EalArgs, PciAddressRecognition) {
  EXPECT_TRUE(dpfab::eal::is_pci_address("0000:3b:00.0"));
  EXPECT_TRUE(dpfab::eal::is_pci_address("3b:00.1"));
  EXPECT_TRUE(dpfab::eal::is_pci_address("0000:3b:00.0,rxq_cqe_comp_en=1"));
  EXPECT_FALSE(dpfab::eal::is_pci_address("net_ring0"));
  EXPECT_FALSE(dpfab::eal::is_pci_address("net_memif0,socket=/a:b.c"));
}

TEST(EalArgs, EmptyCpuSetIsRefused) { EXPECT_FALSE(dpfab::eal::plan(base(), {})); }
