// SPDX-License-Identifier: BSD-3-Clause
//
// The wakeup thread (lib/progress/wakeup.h) between two processes, through the libfabric core.
// DPFAB_WAKE_PMD chooses the link (meson runs one test per PMD):
//   tap     each process makes its own net_tap; the test joins the two kernel interfaces in a
//           Linux bridge of its own (removed at the end); the PMD's queue fd is the tap fd;
//   virtio  net_vhost in one process, net_virtio_user in the other (the virtio PMD of cloud VMs,
//           with real rx interrupts); needs hugepages: the test reserves some through
//           /proc/sys/vm/nr_hugepages, mounts a hugetlbfs of its own, and undoes both;
//   memif   net_memif (no rx interrupt: the memif kick between the two dpfab ends);
//   shm     no port: the same-host path alone (a sender writes the sleeper's node eventfd).
// Each scenario runs with manual progress and with worker lcores (one per process, on CPU 1 and
// CPU 0).
//
// IdleConsumersCostNoCpu: the two exchange messages in blocking mode (server fi_cq_sread, client
// FD + fi_trywait + epoll), then both block for a 10 s idle window: the CPU each process uses in
// it (every thread, from /proc/<pid>/task/*/schedstat) must stay within 1% of one core (tap's queue
// fd, virtio's rx interrupt, memif's kick between the two dpfab ends: memif_kick.h), and the first
// message after it must arrive.
// ParkedLcoreNeverStrandsAMessage: thousands of echoes separated by random gaps around the spin
// budget (and now and then longer than the wakeup thread's linger), alternating sread and fd
// waits: none lost, every wait bounded by 2 s and none longer than 1 s.
// WakeupPingPong (manual progress, FI_DPDK_SPIN_US=0): a blocking ping-pong where both ends
// sleep every round takes at most 1.1 OS wakeups per message, every thread of both processes
// counted (voluntary context switches), and prints each thread's share.
// DPFAB_WAKE_DEBUG=/run/dpdk/dpwk<pid of the test> makes the client print both processes'
// /dpfab/stats when a wait takes over 300 ms.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <random>
#include <thread>

#include "wake_link.h"
#include "wake_peer.h"

using namespace dpfab::test;

namespace {

constexpr double kIdleCpuPct = 1.0;  // the bound
constexpr int kIdleWindowMs = 10'000;
// A blocking ping-pong under manual progress: OS wakeups per message, every thread of both
// processes (the bound; sleeping on the port takes one per message when both ends sleep).
constexpr double kWakeupsPerMessage = 1.1;

// FI_DPDK_SPIN_US as the children see it (the config file says auto).
std::string spin_setting() {
  const char* s = std::getenv("FI_DPDK_SPIN_US");
  return s ? s : "auto";
}

std::string pmd() {
  const char* p = std::getenv("DPFAB_WAKE_PMD");
  return p ? p : "memif";
}

// ---- children -----------------------------------------------------------------------------------

// Opens the peer and exchanges names through the parent. Returns "" or what failed.
std::string meet(Peer& p, int ctl) {
  std::string e = p.open();
  if (!e.empty()) return e;
  if (!send_line(ctl, "name " + p.name())) return "ctl write";
  std::string line;
  if (!read_line(ctl, &line, 60'000) || line.rfind("peer ", 0) != 0) return "no peer name";
  return p.set_peer(line.substr(5));
}

int fail(int ctl, const std::string& why) {
  send_line(ctl, "fail " + why);
  return 1;
}

// Echoes `n` messages, waiting with `mode` (alternating sread/fd when `alternate`).
int server(int ctl, int n, int wait_ms, bool alternate) {
  Peer p;
  if (auto e = meet(p, ctl); !e.empty()) return fail(ctl, e);
  send_line(ctl, "ready");
  for (int i = 0; i < n; ++i) {
    if (p.post_recv() != 0) return fail(ctl, "post_recv");
    uint64_t seq = 0;
    Peer::Mode m = alternate && (i & 1) ? Peer::Mode::kFd : Peer::Mode::kSread;
    int r = p.wait_recv(m, wait_ms, &seq);
    if (r != 1)
      return fail(ctl, "server wait " + std::to_string(i) + " (" + Peer::mode_name(m) +
                           "): " + std::to_string(r));
    if (p.send(seq) != 0) return fail(ctl, "send");
  }
  send_line(ctl, "done");
  std::string line;
  read_line(ctl, &line, 10'000);  // "bye": close after the peer has its last reply
  return 0;
}

// Idle scenario, client side: warm-up ping-pongs in fd mode, "idle", block until the parent's
// "resume" (trywait + epoll on the CQ fd and the control socket), then one more, timed.
int idle_client(int ctl, int warmup) {
  Peer p;
  if (auto e = meet(p, ctl); !e.empty()) return fail(ctl, e);
  send_line(ctl, "ready");
  std::string go;
  if (!read_line(ctl, &go, 60'000) || go != "go") return fail(ctl, "no go");
  for (int i = 0; i < warmup; ++i) {
    if (p.post_recv() != 0 || p.send(i) != 0) return fail(ctl, "post/send");
    uint64_t seq = 0;
    if (int r = p.wait_recv(Peer::Mode::kFd, 5'000, &seq); r != 1 || seq != uint64_t(i))
      return fail(ctl, "warm-up " + std::to_string(i) + ": " + std::to_string(r));
  }
  if (p.post_recv() != 0) return fail(ctl, "post_recv");
  send_line(ctl, "idle");
  if (int r = p.wait_recv(Peer::Mode::kFd, 60'000, nullptr, ctl); r != 2)
    return fail(ctl, "idle wait returned " + std::to_string(r) + " instead of the control fd");
  std::string line;
  if (!read_line(ctl, &line, 1'000) || line != "resume") return fail(ctl, "no resume");
  int64_t t0 = mono_ns();
  if (p.send(warmup) != 0) return fail(ctl, "send");
  uint64_t seq = 0;
  if (int r = p.wait_recv(Peer::Mode::kFd, 5'000, &seq); r != 1)
    return fail(ctl, "first message after idle: " + std::to_string(r));
  send_line(ctl, "rtt " + std::to_string(mono_ns() - t0));
  return 0;
}

// Blocking ping-pong, client side: `n` round trips in fd mode (FI_GETWAIT fd + fi_trywait +
// epoll), between the parent's "go" and the client's "done".
int pingpong_client(int ctl, int n) {
  Peer p;
  if (auto e = meet(p, ctl); !e.empty()) return fail(ctl, e);
  send_line(ctl, "ready");
  std::string go;
  if (!read_line(ctl, &go, 60'000) || go != "go") return fail(ctl, "no go");
  for (int i = 0; i < n; ++i) {
    if (p.post_recv() != 0 || p.send(i) != 0) return fail(ctl, "post/send");
    uint64_t seq = 0;
    if (int r = p.wait_recv(Peer::Mode::kFd, 5'000, &seq); r != 1 || seq != uint64_t(i))
      return fail(ctl, "round trip " + std::to_string(i) + ": " + std::to_string(r));
  }
  send_line(ctl, "done");
  return 0;
}

// Stranding scenario, client side.
int gap_client(int ctl, int n, int64_t spin_ns, int64_t long_gap_ns) {
  Peer p;
  if (auto e = meet(p, ctl); !e.empty()) return fail(ctl, e);
  send_line(ctl, "ready");
  std::mt19937_64 rng(getpid());
  std::uniform_int_distribution<int64_t> gap(0, 3 * spin_ns);
  int64_t worst = 0;
  for (int i = 0; i < n; ++i) {
    int64_t g = i % 97 == 0 ? long_gap_ns : gap(rng);
    std::this_thread::sleep_for(std::chrono::nanoseconds(g));
    if (p.post_recv() != 0 || p.send(i) != 0) return fail(ctl, "post/send");
    uint64_t seq = 0;
    Peer::Mode m = (i & 1) ? Peer::Mode::kSread : Peer::Mode::kFd;
    int64_t t0 = mono_ns();
    int r = p.wait_recv(m, 2'000, &seq);
    worst = std::max(worst, mono_ns() - t0);
    if (mono_ns() - t0 > 300'000'000 && std::getenv("DPFAB_WAKE_DEBUG")) {
      for (int k = 0; k < 2; ++k)
        std::fprintf(stderr, "SLOW %d process %d: %s\n", i, k,
                     telemetry_query(std::string(std::getenv("DPFAB_WAKE_DEBUG")) +
                                         (k ? "b" : "a") + "/dpdk_telemetry.v2",
                                     "/dpfab/stats")
                         .c_str());
    }
    if (r != 1 || seq != uint64_t(i))
      return fail(ctl, "message " + std::to_string(i) + " (" + Peer::mode_name(m) +
                           "): wait returned " + std::to_string(r) + " seq " + std::to_string(seq));
  }
  send_line(ctl, "worst " + std::to_string(worst));
  return 0;
}

// ---- parent -------------------------------------------------------------------------------------

struct Child {
  pid_t pid = -1;
  int ctl = -1;
};

template <typename Fn>
Child spawn(const std::vector<std::string>& env, Fn fn) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    for (const auto& e : env) putenv(strdup(e.c_str()));
    _exit(fn(sv[1]));
  }
  close(sv[1]);
  return {pid, sv[0]};
}

// Reaps a child within `ms`, killing it past that. Returns its exit code (or -signal).
int reap(Child& c, int ms) {
  if (c.pid < 0) return -1000;
  int status = 0;
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  pid_t r;
  while ((r = waitpid(c.pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (r == 0) {
    kill(c.pid, SIGKILL);
    waitpid(c.pid, &status, 0);
    status = -SIGKILL;
  }
  if (c.ctl >= 0) close(c.ctl);
  c.pid = -1;
  if (status == -SIGKILL) return status;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// Reads a line that must start with `want`; else a failure with what came.
::testing::AssertionResult expect_line(Child& c, const std::string& want, std::string* rest,
                                       int ms = 60'000) {
  std::string line;
  if (!read_line(c.ctl, &line, ms))
    return ::testing::AssertionFailure() << "no '" << want << "' from child " << c.pid;
  if (line.rfind(want, 0) != 0)
    return ::testing::AssertionFailure() << "expected '" << want << "', child said: " << line;
  if (rest) *rest = line.size() > want.size() ? line.substr(want.size() + 1) : "";
  return ::testing::AssertionSuccess();
}

// Starts both children (the second after the first has its port when the PMD needs an order),
// joins the link, exchanges names.
::testing::AssertionResult start_pair(Link& link, Child (&c)[2],
                                      const std::function<int(int)> (&fn)[2]) {
  std::string names[2];
  for (int i = 0; i < 2; ++i) {
    c[i] = spawn(link.env(i), fn[i]);
    if (c[i].pid < 0) return ::testing::AssertionFailure() << "fork failed";
    if (link.sequential())
      if (auto r = expect_line(c[i], "name", &names[i]); !r) return r;
  }
  if (!link.sequential())
    for (int i = 0; i < 2; ++i)
      if (auto r = expect_line(c[i], "name", &names[i]); !r) return r;
  if (auto e = link.join(); !e.empty()) {
    std::string said[2];
    for (int i = 0; i < 2; ++i) read_line(c[i].ctl, &said[i], 100);
    return ::testing::AssertionFailure()
           << e << " (children said: '" << said[0] << "', '" << said[1] << "')";
  }
  for (int i = 0; i < 2; ++i) send_line(c[i].ctl, "peer " + names[1 - i]);
  for (int i = 0; i < 2; ++i)
    if (auto r = expect_line(c[i], "ready", nullptr); !r) return r;
  return ::testing::AssertionSuccess();
}

// A number in a flat telemetry dict ("key":value), or -1.
int64_t stat_u64(const std::string& stats, const std::string& key) {
  size_t at = stats.find("\"" + key + "\":");
  if (at == std::string::npos) return -1;
  return std::strtoll(stats.c_str() + at + key.size() + 3, nullptr, 10);
}

// Voluntary context switches of every thread of both children, for a per-thread breakdown.
struct VcswSnapshot {
  std::vector<ThreadVcsw> t[2];
};
VcswSnapshot vcsw_snapshot(Child (&c)[2]) {
  return {{thread_vcsw(c[0].pid), thread_vcsw(c[1].pid)}};
}

// Prints what every thread of both processes added since `before` (printed, not asserted: the
// next engineer sees where the wakeups went) and returns the total per message.
double report_wakeups(Child (&c)[2], const VcswSnapshot& before, int messages,
                      const std::string& label, std::string* breakdown) {
  VcswSnapshot after = vcsw_snapshot(c);
  int64_t total = 0;
  std::string out;
  for (int i = 0; i < 2; ++i) {
    int64_t sum = 0;
    std::string per = vcsw_breakdown(before.t[i], after.t[i], &sum);
    total += sum;
    out += "  process " + std::to_string(i) + (i ? " (fd+epoll)" : " (sread)") + ": " +
           std::to_string(sum) + " = " + per + "\n";
  }
  const double per_msg = static_cast<double>(total) / messages;
  std::printf("[ %s ] blocking ping-pong: %.2f OS wakeups per message (%lld over %d messages)\n%s",
              label.c_str(), per_msg, static_cast<long long>(total), messages, out.c_str());
  if (breakdown) *breakdown = out;
  return per_msg;
}

class Wakeup : public ::testing::TestWithParam<bool> {};

TEST_P(Wakeup, IdleConsumersCostNoCpuAndTheFirstMessageAfterIdleArrives) {
  const bool lcores = GetParam();
  Link link(pmd(), lcores);
  ASSERT_TRUE(link.error().empty()) << link.error();
  constexpr int kWarmup = 200;
  Child c[2];
  const std::function<int(int)> fn[2] = {
      [](int ctl) { return server(ctl, kWarmup + 1, 60'000, false); },
      [](int ctl) { return idle_client(ctl, kWarmup); }};
  auto started = start_pair(link, c, fn);
  if (started) {
    std::string rest;
    // The warm-up is a blocking ping-pong (client FD + fi_trywait + epoll, server fi_cq_sread).
    // Every thread of both processes counts. Measured on 2 vCPUs: 0.5-0.6 per message when the
    // server's learnt spin budget keeps it awake (or the scheduler runs the two on one CPU), 1.0
    // when both ends sleep every time (WakeupPingPong below); the relay through the wakeup thread
    // cost 2 per message.
    const VcswSnapshot vcsw0 = vcsw_snapshot(c);
    send_line(c[1].ctl, "go");
    EXPECT_TRUE(expect_line(c[1], "idle", nullptr, 30'000));
    std::string breakdown;
    const double per_msg = report_wakeups(
        c, vcsw0, 2 * kWarmup,
        pmd() + (lcores ? " lcores" : " manual") + ", spin " + spin_setting(), &breakdown);
    if (!lcores) {
      EXPECT_LE(per_msg, kWakeupsPerMessage)
          << "more OS wakeups per message than sleeping on the port takes:\n"
          << breakdown;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // lcores park, lingers end
    int64_t cpu0[2] = {process_cpu_ns(c[0].pid), process_cpu_ns(c[1].pid)};
    std::string idle_stats0;  // process 0's telemetry in the idle window
    int64_t t0 = mono_ns();
    std::this_thread::sleep_for(std::chrono::milliseconds(kIdleWindowMs));
    int64_t cpu1[2] = {process_cpu_ns(c[0].pid), process_cpu_ns(c[1].pid)};
    // dpdk-telemetry.py's protocol: the provider's statistics of the running, sleeping process.
    for (int i = 0; i < 2; ++i) {
      std::string stats = telemetry_query(Link::telemetry_socket(i), "/dpfab/stats");
      // Every PMD here wakes its sleepers itself (tap's queue fd, virtio's rx interrupt, the memif
      // kick): they sleep on the port, and the wakeup thread does not watch it for them.
      // With no port (shm), sleepers sleep on the node's eventfd, which same-host senders write.
      const char* sleep_on = pmd() == "shm" ? "\"port0_sleep\":\"no port (same-host path only)"
                                            : "\"port0_sleep\":\"on the port";
      EXPECT_NE(stats.find(sleep_on), std::string::npos)
          << "process " << i << ": its sleepers do not sleep on the port: " << stats;
      if (!lcores) {
        EXPECT_NE(stats.find("\"port0_watched\":0"), std::string::npos)
            << "process " << i << ": the wakeup thread watches the port: " << stats;
        EXPECT_EQ(stats.find("\"port0_sleep_arms\":0,"), std::string::npos)
            << "process " << i << ": no sleep was armed on the port: " << stats;
      }
      if (pmd() == "shm") {
        // Every message went through shared memory, and this process's sends woke the sleeping
        // peer by writing the peer node's eventfd (kicks_sent: counted at the sender).
        EXPECT_GE(stat_u64(stats, "port0_shm_rx_records"), kWarmup)
            << "process " << i << ": " << stats;
        EXPECT_GT(stat_u64(stats, "port0_shm_kicks_sent"), 0) << "process " << i << ": " << stats;
        EXPECT_EQ(stat_u64(stats, "port0_shm_links_up"), 1) << "process " << i << ": " << stats;
      }
      if (pmd() == "memif") {
        EXPECT_NE(stats.find("\"port0_memif_kick\":\"in use\""), std::string::npos)
            << "process " << i << ": the memif kick is not in use: " << stats;
      }
      if (lcores) {
        EXPECT_NE(stats.find("_parked\":1"), std::string::npos)
            << "process " << i << ": its lcore is not parked: " << stats;
      }
      if (i == 0) std::printf("telemetry /dpfab/stats of process 0: %s\n", stats.c_str());
      if (i == 0) idle_stats0 = stats;
    }
    // dpfab-info --stats reads the same from outside (meson passes its path).
    if (const char* info = std::getenv("DPFAB_INFO")) {
      std::string cmd = std::string(info) + " --stats " + Link::prefix(1) + " 2>&1";
      std::string out;
      if (FILE* f = popen(cmd.c_str(), "r")) {
        char line[512];
        while (std::fgets(line, sizeof(line), f)) out += line;
        pclose(f);
      }
      EXPECT_NE(out.find("port0_sleep"), std::string::npos) << cmd << ":\n" << out;
    }
    double window = static_cast<double>(mono_ns() - t0);
    send_line(c[1].ctl, "resume");
    const double bound = kIdleCpuPct;
    for (int i = 0; i < 2; ++i) {
      double pct = 100.0 * static_cast<double>(cpu1[i] - cpu0[i]) / window;
      std::printf("[ %s %s ] process %d (%s) used %.3f%% of one core in the %.1f s idle window\n",
                  pmd().c_str(), lcores ? "lcores" : "manual", i, i ? "fd+epoll" : "sread", pct,
                  window / 1e9);
      EXPECT_GE(cpu0[i], 0);
      EXPECT_LE(pct, bound) << "process " << i << " burnt CPU while every consumer slept";
    }
    EXPECT_TRUE(expect_line(c[1], "rtt", &rest, 10'000));
    if (!rest.empty())
      std::printf("[ %s %s ] first round trip after %.0f s idle: %.1f us\n", pmd().c_str(),
                  lcores ? "lcores" : "manual", window / 1e9, std::stod(rest) / 1e3);
    EXPECT_TRUE(expect_line(c[0], "done", nullptr, 10'000));
    if (lcores) {
      // The message after the idle window woke the server's parked lcore through its own port
      // (the kick, the interrupt, the queue fd), not through the wakeup thread. (The client has
      // exited by now.)
      std::string after = telemetry_query(Link::telemetry_socket(0), "/dpfab/stats");
      // On net_tap the frame also raises SIGIO, which may interrupt the application's sread
      // first: its next call then unparks the lcore through the doorbell. Either way, not the
      // wakeup thread.
      const bool by_port = stat_u64(after, "lcore1_unparks_rx_interrupt") >
                           stat_u64(idle_stats0, "lcore1_unparks_rx_interrupt");
      const bool by_app = stat_u64(after, "lcore1_unparks_doorbell") >
                          stat_u64(idle_stats0, "lcore1_unparks_doorbell");
      EXPECT_TRUE(by_port || (pmd() == "tap" && by_app))
          << "the server's lcore was not woken by its port: " << after;
      EXPECT_EQ(stat_u64(after, "port0_wakeups"), stat_u64(idle_stats0, "port0_wakeups"))
          << "the wakeup thread delivered the frame: " << after;
    }
    send_line(c[0].ctl, "bye");
  } else {
    ADD_FAILURE() << started.message();
  }
  EXPECT_EQ(reap(c[1], 15'000), 0);
  EXPECT_EQ(reap(c[0], 15'000), 0);
}

TEST_P(Wakeup, ParkedLcoreNeverStrandsAMessage) {
  const bool lcores = GetParam();
  Link link(pmd(), lcores);
  ASSERT_TRUE(link.error().empty()) << link.error();
  constexpr int kMessages = 3000;
  constexpr int64_t kSpinNs = 200'000;
  // Now and then a gap longer than the wakeup thread's linger (2 ms): watching stops and starts.
  constexpr int64_t kLongGapNs = 3'000'000;
  Child c[2];
  const std::function<int(int)> fn[2] = {
      [](int ctl) { return server(ctl, kMessages, 2'000, true); },
      [](int ctl) { return gap_client(ctl, kMessages, kSpinNs, kLongGapNs); }};
  link.add_env("FI_DPDK_LCORE_SPIN_US=" + std::to_string(kSpinNs / 1000));
  link.add_env("FI_DPDK_SPIN_US=" + std::to_string(kSpinNs / 1000));
  auto started = start_pair(link, c, fn);
  if (started) {
    std::string rest;
    EXPECT_TRUE(expect_line(c[1], "worst", &rest, 50'000));
    // A message that arrived only after a long stall (a fi_cq_read after the timeout rescued it)
    // is a stranded message too.
    if (!rest.empty()) {
      EXPECT_LT(std::stod(rest), 1e9) << "a wait took " << rest << " ns";
    }
    if (!rest.empty())
      std::printf("[ %s %s ] %d messages, random gaps 0-%lld us: longest wait %.1f us\n",
                  pmd().c_str(), lcores ? "lcores" : "manual", kMessages,
                  static_cast<long long>(3 * kSpinNs / 1000), std::stod(rest) / 1e3);
    EXPECT_TRUE(expect_line(c[0], "done", nullptr, 10'000));
    send_line(c[0].ctl, "bye");
  } else {
    ADD_FAILURE() << started.message();
  }
  EXPECT_EQ(reap(c[1], 15'000), 0);
  EXPECT_EQ(reap(c[0], 15'000), 0);
}

// Both ends sleep in every round (FI_DPDK_SPIN_US=0: no spin before a sleep), manual progress:
// each message wakes the one thread that waits for it (the peer's memif kick, rx interrupt or tap
// queue fd) and nothing else, so one OS wakeup per message, a little under when an answer comes
// before its receiver armed (on a loaded machine about 0.6). The window starts right after the
// link came up, so one-time costs of the first messages count too: the memif shared memory faulted
// in by both ends at once cost up to 26 extra sleeps on page locks (Port::prefault_shared_memory
// now walks it in opposite directions). Every thread's share is printed: a relay through the
// wakeup thread, or a helper thread woken per message, shows there.
TEST(WakeupPingPong, BothEndsSleepingTakeOneWakeupPerMessage) {
  Link link(pmd(), false);
  ASSERT_TRUE(link.error().empty()) << link.error();
  constexpr int kRounds = 500;
  link.add_env("FI_DPDK_SPIN_US=0");
  Child c[2];
  const std::function<int(int)> fn[2] = {
      [](int ctl) { return server(ctl, kRounds, 10'000, false); },
      [](int ctl) { return pingpong_client(ctl, kRounds); }};
  auto started = start_pair(link, c, fn);
  if (started) {
    const VcswSnapshot vcsw0 = vcsw_snapshot(c);
    send_line(c[1].ctl, "go");
    EXPECT_TRUE(expect_line(c[1], "done", nullptr, 60'000));
    std::string breakdown;
    const double per_msg =
        report_wakeups(c, vcsw0, 2 * kRounds, pmd() + " manual, spin 0", &breakdown);
    EXPECT_LE(per_msg, kWakeupsPerMessage)
        << "more OS wakeups per message than sleeping on the port takes:\n"
        << breakdown;
    EXPECT_TRUE(expect_line(c[0], "done", nullptr, 10'000));
    send_line(c[0].ctl, "bye");
  } else {
    ADD_FAILURE() << started.message();
  }
  EXPECT_EQ(reap(c[1], 15'000), 0);
  EXPECT_EQ(reap(c[0], 15'000), 0);
}

INSTANTIATE_TEST_SUITE_P(Progress, Wakeup, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "WorkerLcores" : "Manual"; });

}  // namespace
