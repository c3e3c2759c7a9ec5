// SPDX-License-Identifier: BSD-3-Clause
//
// EAL argument planning, without starting EAL.
#include "eal/eal_args.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rdma/fi_errno.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

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

TEST(EalArgs, EachProcessGetsItsOwnFilePrefixWithoutHugepageFiles) {
  auto p = dpfab::eal::plan(base(), {0}, 4242);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->own_prefix, "dpfab-4242");
  EXPECT_THAT(p->argv, Contains("--file-prefix=dpfab-4242"));
  auto mem = base();
  mem.eal_args = {"--in-memory"};
  p = dpfab::eal::plan(mem, {0}, 7);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_THAT(p->argv, Contains("--file-prefix=dpfab-7"));
}

TEST(EalArgs, TheUsersPrefixAndHugepageFilesAreLeftAlone) {
  for (auto args : std::vector<std::vector<std::string>>{{"--no-huge", "--file-prefix", "mine"},
                                                         {"--no-huge", "--file-prefix=mine"},
                                                         {"--no-shconf", "--no-pci"}}) {
    auto c = base();
    c.eal_args = args;
    auto p = dpfab::eal::plan(c, {0}, 4242);
    ASSERT_TRUE(p) << p.error().message;
    EXPECT_TRUE(p->own_prefix.empty()) << args.back();
    for (const auto& a : p->argv) EXPECT_EQ(a.find("dpfab-"), std::string::npos) << a;
  }
}

TEST(EalArgs, SweepRemovesOnlyTheFoldersOfExitedProcesses) {
  char tmpl[] = "/tmp/dpfab-sweep-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string base = tmpl;
  pid_t gone = fork();
  ASSERT_GE(gone, 0);
  if (gone == 0) _exit(0);
  ASSERT_EQ(waitpid(gone, nullptr, 0), gone);
  const std::string dead = base + "/dpfab-" + std::to_string(gone);
  const std::string alive = base + "/dpfab-" + std::to_string(getpid());
  for (const auto& d : {dead, alive, base + "/rte", base + "/dpfab-x"}) {
    ASSERT_EQ(mkdir(d.c_str(), 0700), 0) << d;
    std::ofstream(d + "/dpdk_telemetry.v2") << "x";
  }
  EXPECT_EQ(dpfab::eal::sweep_stale_runtime_dirs(base), 1);
  struct stat st;
  EXPECT_NE(stat(dead.c_str(), &st), 0) << "the exited process's folder is still there";
  for (const auto& d : {alive, base + "/rte", base + "/dpfab-x"}) {
    EXPECT_EQ(stat(d.c_str(), &st), 0) << d << " was removed";
    unlink((d + "/dpdk_telemetry.v2").c_str());
    rmdir(d.c_str());
  }
  EXPECT_EQ(rmdir(base.c_str()), 0);
  EXPECT_EQ(dpfab::eal::sweep_stale_runtime_dirs(base), 0);  // a missing base is no error
}

TEST(EalArgs, RuntimeBaseIsEalsOwn) {
  if (getuid() == 0) {
    EXPECT_EQ(dpfab::eal::runtime_base(), "/var/run/dpdk");
  } else {
    const char* xdg = std::getenv("XDG_RUNTIME_DIR");
    EXPECT_EQ(dpfab::eal::runtime_base(), std::string(xdg && *xdg ? xdg : "/tmp") + "/dpdk");
  }
}
