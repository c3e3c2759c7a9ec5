// SPDX-License-Identifier: BSD-3-Clause
//
// Mixed hosts: two "hosts" (network namespaces joined by a veth pair, test/integration/hosts),
// two shm-peer processes in each on one net_af_packet port of the host's interface (same MAC and
// IPv4, their own UDP ports). Every process talks to every other (RDM rounds): the pair of a host
// through the same-host path, the pairs across hosts through the port. Each process's telemetry
// (dpfab-info --stats) says what each path carried, and the test checks it: exactly one link on
// the same-host path (to the other process of its host), none across hosts, records through it in
// both directions, and the port's frames for the other host's two processes. Root.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "hosts.h"
#include "procs_test.h"

using namespace dpfab::test::shm;
namespace hosts = dpfab::test::hosts;

namespace {

// "port0_k = v" lines of dpfab-info --stats for process `pid`.
std::map<std::string, uint64_t> stats_of(pid_t pid) {
  std::map<std::string, uint64_t> m;
  const char* info = std::getenv("DPFAB_INFO");
  if (!info) return m;
  hosts::RunResult r =
      hosts::run({info, "--stats", "dpfab-" + std::to_string(pid)}, {}, std::chrono::seconds(20));
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);) {
    std::istringstream w(l);
    std::string k, eq;
    std::string v;
    if (w >> k >> eq >> v && eq == "=") try {
        m[k] = std::stoull(v);
      } catch (...) {
      }
  }
  return m;
}

}  // namespace

TEST(ShmHosts, SameHostPairsUseSharedMemoryCrossHostPairsThePort) {
  const char* exe = std::getenv("DPFAB_SHM_PEER");
  ASSERT_TRUE(exe);
  if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
  hosts::Options o;
  o.kernel_ip = false;  // the kernel answers nothing on the interfaces
  hosts::Hosts h(o);
  ASSERT_TRUE(h.ok()) << h.error();
  constexpr size_t kN = 4;  // process i in host i / 2
  std::vector<std::unique_ptr<PeerProc>> ps;
  for (size_t i = 0; i < kN; ++i) {
    std::vector<std::string> env = h.provider_env(i / 2, hosts::Pmd::af_packet);
    env.push_back("FI_DPDK_SHM=on");
    ps.push_back(std::make_unique<PeerProc>());
    ASSERT_TRUE(ps.back()->start(exe, static_cast<unsigned>(i), env, h[i / 2].ns))
        << ps.back()->error();
    EXPECT_EQ(ps.back()->domain(), "net_af_packet0");
  }
  for (size_t i = 0; i < kN; ++i)
    for (size_t j = 0; j < kN; ++j)
      if (i != j) ps[i]->send("peer " + std::to_string(j) + " " + ps[j]->name());
  for (size_t i = 0; i < kN; ++i)
    for (size_t j = 0; j + 1 < kN; ++j) ASSERT_EQ(ps[i]->line().rfind("ok peer", 0), 0u);
  constexpr unsigned kRounds = 20;
  for (unsigned r = 0; r < kRounds; ++r) {
    for (auto& p : ps) p->send("round " + std::to_string(r) + " " + (r % 2 ? "4096" : "64"));
    for (size_t i = 0; i < kN; ++i) {
      const std::string l = ps[i]->line(90s);
      ASSERT_EQ(field(l, "recv"), std::to_string(kN - 1)) << i << ": " << l;
      ASSERT_EQ(field(l, "err"), "0") << i << ": " << l;
    }
  }
  for (size_t i = 0; i < kN; ++i) {
    SCOPED_TRACE("process " + std::to_string(i) + " in host " + std::to_string(i / 2));
    auto s = stats_of(ps[i]->pid());
    ASSERT_EQ(s["port0_shm"], 1u) << "no statistics (dpfab-info --stats)";
    EXPECT_EQ(s["port0_shm_links_up"], 1u) << "one link: the other process of its host";
    EXPECT_EQ(s["port0_shm_links_failed"], 0u) << "no attempt across hosts";
    // The same-host peer's messages, one per round, came through shared memory as RDM records,
    // and ours went to it the same way (plus acks).
    EXPECT_GE(s["port0_shm_rx_rdm"], kRounds);
    EXPECT_GE(s["port0_shm_tx_records"], kRounds);
    // The other host's two processes: through the port, at least a frame per message each way.
    EXPECT_GE(s["port0_tx_frames"], 2 * kRounds);
    EXPECT_GE(s["port0_rx_frames"], 2 * kRounds);
    std::printf("process %zu: shm tx %llu rx %llu records, port tx %llu rx %llu frames\n", i,
                static_cast<unsigned long long>(s["port0_shm_tx_records"]),
                static_cast<unsigned long long>(s["port0_shm_rx_records"]),
                static_cast<unsigned long long>(s["port0_tx_frames"]),
                static_cast<unsigned long long>(s["port0_rx_frames"]));
  }
  for (auto& p : ps) EXPECT_EQ(p->quit(), 0);
}
