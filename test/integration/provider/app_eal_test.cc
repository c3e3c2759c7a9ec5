// SPDX-License-Identifier: BSD-3-Clause
//
// An application that initialised EAL itself (and made its own net_ring0 port) still gets a
// working provider: dpfab attaches instead of failing, uses the application's port as it is, and
// creates the ports it lacks.
#include <gtest/gtest.h>
#include <rdma/fi_domain.h>
#include <rte_eal.h>
#include <rte_ethdev.h>

#include <set>

#include "fixture.h"

using namespace dpfab::test;

TEST(AppEal, ProviderAttachesToTheApplicationsEal) {
  const char* argv[] = {"app", "--no-huge",        "--no-shconf",           "--no-pci", "-m",
                        "64",  "--vdev=net_ring0", "--log-level=*:warning", nullptr};
  ASSERT_GE(rte_eal_init(8, const_cast<char**>(argv)), 0);
  ASSERT_EQ(rte_eth_dev_count_avail(), 1u);

  setenv("FI_DPDK_PORTS", "net_ring0;net_null7", 1);
  InfoPtr info;
  ASSERT_EQ(getinfo(dpdk_hints().get(), &info), 0);
  std::set<std::string> names;
  for (auto* e : as_list(info.get())) names.insert(e->domain_attr->name);
  EXPECT_EQ(names, (std::set<std::string>{"net_ring0", "net_null7"}));
  EXPECT_EQ(rte_eth_dev_count_avail(), 2u) << "dpfab created the missing port";

  fid_fabric* fabric = nullptr;
  ASSERT_NE(first_dpdk(info.get()), nullptr);
  ASSERT_EQ(fi_fabric(first_dpdk(info.get())->fabric_attr, &fabric, nullptr), 0);
  for (auto* e : as_list(info.get())) {
    fid_domain* d = nullptr;
    ASSERT_EQ(fi_domain(fabric, e, &d, nullptr), 0) << e->domain_attr->name;
    EXPECT_EQ(fi_close(&d->fid), 0);
  }
  EXPECT_EQ(fi_close(&fabric->fid), 0);

  // The application's own port is untouched: it can still start and stop it.
  uint16_t ring = 0;
  ASSERT_EQ(rte_eth_dev_get_port_by_name("net_ring0", &ring), 0);
  rte_eth_dev_info dev{};
  EXPECT_EQ(rte_eth_dev_info_get(ring, &dev), 0);
}
