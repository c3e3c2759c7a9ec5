// SPDX-License-Identifier: BSD-3-Clause
//
// The C++ side of "several hosts on one box" (hosts.h over hosts.sh): hosts get their addresses
// and carrier and reach each other; dpfab-info brings the provider's af_packet and af_xdp ports
// up inside each host; commands run inside a host are bounded and stopped; and nothing is left
// behind after a failed assertion or when the owning process is killed. Needs root, iproute2,
// ping (iputils-ping) and the built dpfab-info ($DPFAB_INFO, set by meson).
#include "hosts.h"

#include <fcntl.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace dpfab::test::hosts;
using namespace std::chrono_literals;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

bool netns_exists(const std::vector<std::string>& all, const std::string& name) {
  return std::find(all.begin(), all.end(), name) != all.end();
}

/// Names of `names` still listed by `ip netns list` after waiting up to `timeout` for none.
std::vector<std::string> left_after(const std::vector<std::string>& names,
                                    std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    std::vector<std::string> left;
    auto all = list_netns();
    for (auto& n : names)
      if (netns_exists(all, n)) left.push_back(n);
    if (left.empty() || Clock::now() >= deadline) return left;
    std::this_thread::sleep_for(100ms);
  }
}

/// Waits up to 5 s for pid to be in namespace ns (`ip netns exec` enters it, then execs).
bool wait_inside(const std::string& ns, pid_t pid) {
  for (auto deadline = Clock::now() + 5s; Clock::now() < deadline;) {
    RunResult pids = run({"ip", "netns", "pids", ns});
    if (contains("\n" + pids.out, "\n" + std::to_string(pid) + "\n")) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

std::string dpfab_info() {
  const char* p = std::getenv("DPFAB_INFO");
  return p ? p : "";
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

class HostsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "network namespaces need root";
    unsetenv("DPFAB_HOSTS_KEEP");  // the cleanup tests check that nothing is kept
  }
};

}  // namespace

using TwoHosts = HostsTest;
using ThreeHosts = HostsTest;
using InAHost = HostsTest;
using Memif = HostsTest;
using Cleanup = HostsTest;

TEST_F(TwoHosts, HaveTheirAddressesMacsAndCarrier) {
  Hosts h;
  ASSERT_TRUE(h.ok()) << h.error();
  ASSERT_EQ(h.size(), 2u);
  EXPECT_TRUE(h.bridge_ns().empty()) << "two hosts are a veth pair";
  std::string prefix = "dpfab-" + std::to_string(getpid()) + "-";
  auto all = list_netns();
  for (size_t i = 0; i < h.size(); ++i) {
    SCOPED_TRACE("host " + std::to_string(i));
    EXPECT_EQ(h[i].ns.compare(0, prefix.size(), prefix), 0) << h[i].ns;
    EXPECT_TRUE(netns_exists(all, h[i].ns)) << join(all);
    EXPECT_EQ(h[i].iface, "dp0");
    EXPECT_EQ(h[i].ip.compare(0, 7, "10.199."), 0) << h[i].ip;
    RunResult addr = run({"ip", "-n", h[i].ns, "-br", "addr", "show", "dev", h[i].iface});
    ASSERT_TRUE(addr.ok()) << addr.err;
    EXPECT_TRUE(contains(addr.out, " UP ")) << addr.out;
    EXPECT_TRUE(contains(addr.out, h[i].cidr())) << addr.out;
    RunResult link = run({"ip", "-n", h[i].ns, "link", "show", "dev", h[i].iface});
    ASSERT_TRUE(link.ok()) << link.err;
    EXPECT_TRUE(contains(link.out, "LOWER_UP")) << link.out;
    EXPECT_TRUE(contains(link.out, "link/ether " + h[i].mac + " ")) << link.out;
  }
  EXPECT_NE(h[0].ip, h[1].ip);
  EXPECT_NE(h[0].mac, h[1].mac);
  EXPECT_EQ(namespaces_of(getpid()).size(), 2u) << join(namespaces_of(getpid()));
}

TEST_F(TwoHosts, PingEachOther) {
  Hosts h;
  ASSERT_TRUE(h.ok()) << h.error();
  RunResult a = h.exec(0, {"ping", "-c1", "-W1", h[1].ip}, {}, 10s);
  EXPECT_TRUE(a.ok()) << a.out << a.err;
  RunResult b = h.exec(1, {"ping", "-c1", "-W1", h[0].ip}, {}, 10s);
  EXPECT_TRUE(b.ok()) << b.out << b.err;
}

TEST_F(TwoHosts, MtuOptionSetsBothEnds) {
  Hosts h({.mtu = 3000});
  ASSERT_TRUE(h.ok()) << h.error();
  RunResult fits = h.exec(0, {"ping", "-c1", "-W1", "-M", "do", "-s", "2972", h[1].ip}, {}, 10s);
  EXPECT_TRUE(fits.ok()) << fits.out << fits.err;
  RunResult too_big = h.exec(1, {"ping", "-c1", "-W1", "-M", "do", "-s", "2973", h[0].ip}, {}, 10s);
  EXPECT_FALSE(too_big.ok()) << too_big.out;
}

TEST_F(ThreeHosts, PingEveryPairThroughTheBridge) {
  Hosts h({.hosts = 3});
  ASSERT_TRUE(h.ok()) << h.error();
  ASSERT_EQ(h.size(), 3u);
  ASSERT_FALSE(h.bridge_ns().empty());
  RunResult ports = run({"ip", "-n", h.bridge_ns(), "-br", "link", "show", "master", "br0"});
  EXPECT_EQ(std::count(ports.out.begin(), ports.out.end(), '\n'), 3) << ports.out;
  for (size_t a = 0; a < 3; ++a)
    for (size_t b = 0; b < 3; ++b) {
      if (a == b) continue;
      RunResult r = h.exec(a, {"ping", "-c1", "-W1", h[b].ip}, {}, 10s);
      EXPECT_TRUE(r.ok()) << a << " -> " << b << ": " << r.out << r.err;
    }
}

// dpfab-info in each of the two hosts at once, with the provider's port on the host's veth.
class ProviderPort : public HostsTest, public ::testing::WithParamInterface<Pmd> {};

TEST_P(ProviderPort, DpfabInfoBringsThePortUpWithLinkUpInEachHost) {
  ASSERT_FALSE(dpfab_info().empty()) << "set DPFAB_INFO to the dpfab-info binary";
  Hosts h;
  ASSERT_TRUE(h.ok()) << h.error();
  std::vector<std::string> logs;
  std::vector<Process> procs;
  for (size_t i = 0; i < h.size(); ++i) {
    logs.push_back(owner_dir() + "/dpfab-info-" + std::to_string(h.set()) + "-" +
                   std::to_string(i) + ".log");
    procs.push_back(h.spawn(i, {dpfab_info()}, h.provider_env(i, GetParam()), logs.back()));
    ASSERT_GT(procs.back().pid(), 0) << "cannot start dpfab-info (log " << logs.back() << ")";
  }
  std::string driver = std::string("net_") + name(GetParam());
  for (size_t i = 0; i < h.size(); ++i) {
    SCOPED_TRACE("host " + std::to_string(i));
    auto status = procs[i].wait(60s);
    std::string out = read_file(logs[i]);
    ASSERT_TRUE(status.has_value()) << "dpfab-info still runs after 60 s:\n" << out;
    EXPECT_EQ(*status, 0) << out;
    EXPECT_TRUE(contains(out, "spec          " + h.port_spec(i, GetParam()))) << out;
    EXPECT_TRUE(contains(out, "driver        " + driver + "\n")) << out;
    EXPECT_TRUE(contains(out, "ipv4          " + h[i].cidr() + "\n")) << out;
    EXPECT_TRUE(contains(out, "link          up")) << out;
    EXPECT_TRUE(contains(out, "mac           ")) << out;
    unlink(logs[i].c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(Pmds, ProviderPort, ::testing::Values(Pmd::af_packet, Pmd::af_xdp),
                         [](const auto& info) { return std::string(name(info.param)); });

TEST_F(TwoHosts, ProviderEnvironmentNamesThePortAndAddress) {
  Hosts h;
  ASSERT_TRUE(h.ok()) << h.error();
  EXPECT_EQ(h.port_spec(0, Pmd::af_packet), "net_af_packet0,iface=dp0");
  EXPECT_EQ(h.port_spec(1, Pmd::af_xdp), "net_af_xdp0,iface=dp0,start_queue=0,queue_count=1");
  EXPECT_EQ(h.port_spec(1, Pmd::af_xdp, 2), "net_af_xdp2,iface=dp0,start_queue=0,queue_count=1");
  auto env = h.provider_env(1, Pmd::af_packet);
  ASSERT_EQ(env.size(), 2u);
  EXPECT_EQ(env[0], "FI_DPDK_PORTS=net_af_packet0,iface=dp0");
  EXPECT_EQ(env[1], "FI_DPDK_IPV4=" + h[1].cidr());
  // The same spec as the bash side gives.
  RunResult sh = run({"bash", hosts_sh(), "port-spec", "af_xdp", "dp0"});
  EXPECT_EQ(sh.out, h.port_spec(0, Pmd::af_xdp) + "\n") << sh.err;
}

TEST_F(InAHost, ACommandInAHostSeesOnlyThatHostsInterface) {
  Hosts h;
  ASSERT_TRUE(h.ok()) << h.error();
  RunResult r = h.exec(1, {"ip", "-br", "-4", "addr"});
  ASSERT_TRUE(r.ok()) << r.err;
  EXPECT_TRUE(contains(r.out, h[1].cidr())) << r.out;
  EXPECT_FALSE(contains(r.out, h[0].cidr())) << r.out;
  RunResult env = h.exec(0, {"sh", "-c", "echo $FI_DPDK_PORTS"}, h.provider_env(0, Pmd::af_xdp));
  EXPECT_EQ(env.out, h.port_spec(0, Pmd::af_xdp) + "\n");
}

TEST_F(InAHost, ACommandThatOverrunsItsTimeoutIsKilled) {
  Hosts h;
  ASSERT_TRUE(h.ok()) << h.error();
  auto t0 = Clock::now();
  RunResult r = h.exec(0, {"sleep", "30"}, {}, 300ms);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.status, 128 + SIGKILL);
  EXPECT_LT(Clock::now() - t0, 5s);
}

TEST_F(InAHost, ASpawnedProcessRunsInTheHostAndIsStopped) {
  Hosts h;
  ASSERT_TRUE(h.ok()) << h.error();
  Process p = h.spawn(0, {"sleep", "30"});
  ASSERT_GT(p.pid(), 0);
  EXPECT_TRUE(wait_inside(h[0].ns, p.pid())) << run({"ip", "netns", "pids", h[0].ns}).out;
  EXPECT_TRUE(p.running());
  EXPECT_EQ(p.stop(), 128 + SIGTERM);
  EXPECT_FALSE(p.running());
  EXPECT_TRUE(run({"ip", "netns", "pids", h[0].ns}).out.empty());
}

TEST_F(InAHost, DestroyEndsWhatStillRunsInTheHosts) {
  auto h = std::make_unique<Hosts>();
  ASSERT_TRUE(h->ok()) << h->error();
  Process p = h->spawn(1, {"sleep", "30"});
  ASSERT_GT(p.pid(), 0);
  ASSERT_TRUE(wait_inside((*h)[1].ns, p.pid()));
  auto names = h->namespaces();
  h.reset();
  EXPECT_EQ(p.wait(5s), 128 + SIGTERM);
  EXPECT_TRUE(left_after(names, 0ms).empty());
}

TEST_F(Memif, PairsHaveTheirOwnSocketRemovedAfterwards) {
  ASSERT_FALSE(dpfab_info().empty()) << "set DPFAB_INFO to the dpfab-info binary";
  std::string path;
  {
    MemifPair a, b;
    path = a.socket();
    EXPECT_NE(a.socket(), b.socket());
    EXPECT_EQ(a.socket().compare(0, owner_dir().size(), owner_dir()), 0) << a.socket();
    EXPECT_EQ(a.server_spec(), "net_memif0,role=server,socket-abstract=no,socket=" + a.socket());
    EXPECT_EQ(a.client_spec(1), "net_memif1,role=client,socket-abstract=no,socket=" + a.socket());
    EXPECT_EQ(a.auto_spec(), "net_memif0,role=auto,socket-abstract=no,socket=" + a.socket());
    // The provider accepts the server spec inside a host (no client: the link stays down).
    Hosts h;
    ASSERT_TRUE(h.ok()) << h.error();
    RunResult r = h.exec(0, {dpfab_info()}, {"FI_DPDK_PORTS=" + a.server_spec()}, 60s);
    EXPECT_TRUE(r.ok()) << r.out << r.err;
    EXPECT_TRUE(contains(r.out, "driver        net_memif\n")) << r.out;
    EXPECT_TRUE(contains(r.out, "socket=" + a.socket())) << r.out;
    std::ofstream(a.socket()) << "";  // as a killed server leaves it
  }
  struct stat st;
  EXPECT_NE(stat(path.c_str(), &st), 0) << path << " is still there";
}

// The cleanup after a failed test: an ASSERT_* returns from the test body, ~Hosts runs.
namespace {
std::vector<std::string> g_failed_body_names;
void body_that_fails_an_assertion() {
  Hosts h({.hosts = 3});
  ASSERT_TRUE(h.ok()) << h.error();
  g_failed_body_names = h.namespaces();
  ASSERT_TRUE(false) << "fails on purpose";
}
}  // namespace

TEST_F(Cleanup, AfterAFailedAssertionTheHostsAreGone) {
  EXPECT_FATAL_FAILURE(body_that_fails_an_assertion(), "fails on purpose");
  ASSERT_EQ(g_failed_body_names.size(), 4u);
  EXPECT_TRUE(left_after(g_failed_body_names, 0ms).empty())
      << join(left_after(g_failed_body_names, 0ms));
}

// The cleanup when the process that owns the hosts dies without running destructors: a child
// makes hosts (and a memif socket), reports them, and is killed; the reaper removes them.
class OwnerKilled : public HostsTest, public ::testing::WithParamInterface<int> {};

TEST_P(OwnerKilled, ItsHostsFolderAndProcessesAreGone) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    std::string report;
    {
      Hosts h({.hosts = 3});
      MemifPair m;
      std::ofstream(m.socket()) << "";
      Process p = h.spawn(0, {"sleep", "100"});
      report =
          h.ok() ? join(h.namespaces()) + "\n" + owner_dir() + "\n" + std::to_string(p.pid()) + "\n"
                 : "ERROR " + h.error();
      (void)!write(fds[1], report.data(), report.size());
      close(fds[1]);
      sleep(60);  // killed long before
    }
    _exit(3);
  }
  close(fds[1]);
  // The report is three lines; the child then waits to be killed.
  std::string report;
  auto deadline = Clock::now() + 60s;
  while (std::count(report.begin(), report.end(), '\n') < 3 && Clock::now() < deadline) {
    pollfd pfd = {fds[0], POLLIN, 0};
    if (poll(&pfd, 1, 100) <= 0) continue;
    char buf[1024];
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    report.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  std::istringstream lines(report);
  std::string names_line, dir;
  std::getline(lines, names_line);
  std::getline(lines, dir);
  std::string sleeper;
  std::getline(lines, sleeper);
  std::vector<std::string> names;
  std::istringstream words(names_line);
  for (std::string w; words >> w;) names.push_back(w);
  auto all = list_netns();
  for (auto& n : names) EXPECT_TRUE(netns_exists(all, n)) << n << " was not made";
  ASSERT_EQ(kill(child, GetParam()), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_EQ(names.size(), 4u) << report;
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == GetParam());
  // The reaper, not the child's destructors: the child would sleep 60 s before running them.
  auto left = left_after(names, 10s);
  EXPECT_TRUE(left.empty()) << "left: " << join(left);
  EXPECT_TRUE(namespaces_of(child).empty()) << join(namespaces_of(child));
  // The reaper removes the folder after the namespaces: give it a moment more.
  struct stat st;
  bool dir_gone = false;
  for (auto deadline1 = Clock::now() + 5s; !dir_gone && Clock::now() < deadline1;) {
    dir_gone = stat(dir.c_str(), &st) != 0;
    if (!dir_gone) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(dir_gone) << dir << " is still there";
  // The process it started in a host (its parent gone, init reaps it once it is ended).
  bool sleeper_gone = false;
  for (auto deadline2 = Clock::now() + 5s; !sleeper_gone && Clock::now() < deadline2;) {
    sleeper_gone = stat(("/proc/" + sleeper).c_str(), &st) != 0;
    if (!sleeper_gone) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(sleeper_gone) << "the child's 'sleep 100' (pid " << sleeper << ") still runs";
}

INSTANTIATE_TEST_SUITE_P(Signals, OwnerKilled, ::testing::Values(SIGKILL, SIGTERM),
                         [](const auto& info) {
                           return std::string(info.param == SIGKILL ? "SIGKILL" : "SIGTERM");
                         });

TEST_F(Cleanup, StaleSetsOfEndedOwnersAreRemovedAndLiveOnesKept) {
  Hosts mine;
  ASSERT_TRUE(mine.ok()) << mine.error();
  // An owner that ends without a reaper: hosts.sh create for a short-lived process.
  Process owner = spawn({"sleep", "30"});
  ASSERT_GT(owner.pid(), 0);
  RunResult made =
      run({"bash", hosts_sh(), "create", "--owner", std::to_string(owner.pid()), "-n", "2"});
  ASSERT_TRUE(made.ok()) << made.err;
  auto theirs = namespaces_of(owner.pid());
  ASSERT_EQ(theirs.size(), 2u) << made.out;
  owner.stop();
  RunResult clean = run({"bash", hosts_sh(), "cleanup-stale"});
  EXPECT_TRUE(clean.ok()) << clean.err;
  EXPECT_TRUE(left_after(theirs, 0ms).empty()) << clean.out;
  EXPECT_TRUE(left_after(mine.namespaces(), 0ms).size() == mine.namespaces().size())
      << "cleanup-stale removed a live owner's hosts";
}
