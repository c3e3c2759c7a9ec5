// SPDX-License-Identifier: BSD-3-Clause
//
// memif pairs that come and go: DGRAM endpoints through the real libfabric core in pairs of child
// processes on one memif socket, brought up (a round trip), then torn down every way a job ends:
// either side exiting first, both at once, a side killed (SIGKILL) while its peer carries on or
// exits at once, a memif client left to reconnect (restart) to a server that is gone, a process
// ending without closing its fids. Pairs follow each other on the same sockets (quick
// reconnects), with explicit memif roles or role=auto.
//
// What fails: any child that dies of a signal we did not send (DPDK's interrupt thread running a
// memif control callback against a port being stopped or closed crashed a fabtests server once),
// exits non-zero, hangs, or prints a DPDK panic. A pair whose link never came up is counted and
// reported, and fails the test too.
//
// DPFAB_CHURN_PAIRS sets the number of pairs (default 60; the proof runs 500),
// DPFAB_CHURN_LANES how many pairs run at once (default 2, each lane its own socket).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "wake_peer.h"

using namespace dpfab::test;

namespace {

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

// ---- child side --------------------------------------------------------------------------------

// One side of a pair: open, swap names through the parent (fd `ctl`), one round trip (the pinger
// resends until answered: the link may still be coming up), then wait for "exit" or
// "exit-open" (leave the fids open: libfabric's own cleanup at exit closes the port).
[[noreturn]] void child_main(int ctl, bool pinger) {
  Peer p;
  std::string line;
  if (std::string e = p.open(); !e.empty()) {
    send_line(ctl, "error " + e);
    _exit(3);
  }
  send_line(ctl, "name " + p.name());
  if (!read_line(ctl, &line, 30'000) || line.rfind("peer ", 0) != 0) _exit(4);
  if (std::string e = p.set_peer(line.substr(5)); !e.empty()) {
    send_line(ctl, "error " + e);
    _exit(3);
  }
  bool up = false;
  const int64_t end = mono_ns() + 10'000'000'000;
  if (p.post_recv() != 0) _exit(5);
  while (!up && mono_ns() < end) {
    uint64_t seq = 0;
    // -FI_EAGAIN: the link is still coming up (refused sends wait for it up to a second).
    if (int r = pinger ? p.send(1) : 0; r != 0 && r != -FI_EAGAIN) _exit(6);
    int r = p.wait_recv(Peer::Mode::kSread, 50, &seq);
    if (r < 0) _exit(7);
    if (r == 1) {
      if (int s = pinger ? 0 : p.send(seq); s != 0 && s != -FI_EAGAIN) _exit(6);
      up = true;
      if (p.post_recv() != 0) _exit(5);
    }
  }
  send_line(ctl, up ? "up" : "nolink");
  // Until told to go: keep answering (the pinger may have resent before our answer came).
  for (;;) {
    pollfd pf{ctl, POLLIN, 0};
    if (poll(&pf, 1, 0) == 1) break;
    uint64_t seq = 0;
    if (p.wait_recv(Peer::Mode::kSread, 5, &seq) == 1) {
      if (!pinger) (void)p.send(seq);
      (void)p.post_recv();
    }
  }
  if (!read_line(ctl, &line, 1000)) line = "exit";
  if (line == "exit") p.close();
  std::exit(0);  // libfabric's destructor runs the provider's cleanup (ports stop and close)
}

// ---- parent side -------------------------------------------------------------------------------

struct Child {
  pid_t pid = -1;
  int ctl = -1;
  std::string log;
  bool killed = false;  // we sent SIGKILL
};

Child spawn(const std::string& ports, const std::string& ipv4, bool pinger,
            const std::string& log) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    FILE* f = std::freopen(log.c_str(), "w", stderr);
    (void)f;
    dup2(2, 1);
    setenv("FI_DPDK_PORTS", ports.c_str(), 1);
    setenv("FI_DPDK_IPV4", ipv4.c_str(), 1);
    setenv("FI_PROVIDER", "^ofi_rxd", 1);
    child_main(sv[1], pinger);
  }
  close(sv[1]);
  return Child{pid, sv[0], log, false};
}

// Waits for `c` within `timeout_ms` (SIGKILL after). Returns "" when it ended as expected (exit
// 0, or killed by us), else what happened, with the tail of its log.
std::string reap(Child& c, int timeout_ms) {
  int status = 0;
  const int64_t end = mono_ns() + int64_t{timeout_ms} * 1'000'000;
  pid_t r = 0;
  while ((r = waitpid(c.pid, &status, WNOHANG)) == 0 && mono_ns() < end) usleep(2000);
  std::string what;
  if (r == 0) {
    kill(c.pid, SIGKILL);
    waitpid(c.pid, &status, 0);
    what = "hung (killed after " + std::to_string(timeout_ms) + " ms)";
  } else if (WIFSIGNALED(status) && !(c.killed && WTERMSIG(status) == SIGKILL)) {
    what = std::string("died of signal ") + strsignal(WTERMSIG(status));
  } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    what = "exit status " + std::to_string(WEXITSTATUS(status));
  }
  if (c.ctl >= 0) close(c.ctl), c.ctl = -1;
  std::stringstream ss;
  ss << std::ifstream(c.log).rdbuf();
  std::string text = ss.str();
  if (what.empty() &&
      (text.find("PANIC") != std::string::npos || text.find("Segmentation") != std::string::npos))
    what = "printed a panic";
  if (!what.empty()) what += "; log: " + text.substr(text.size() > 1500 ? text.size() - 1500 : 0);
  unlink(c.log.c_str());
  return what;
}

enum Ending {
  kPingerFirst,  // the pinger exits, the echo follows after 0-30 ms
  kEchoFirst,    // the other way round
  kTogether,     // both told at once
  kKillPinger,   // the pinger is SIGKILLed; the echo exits after 0-300 ms
  kKillEcho,     // the echo is SIGKILLed; the pinger exits after 0-300 ms
  kLingerAlone,  // the pinger exits; the echo stays 0.6-1.2 s (a memif client restarts meanwhile)
  kKillBoth,     // both SIGKILLed
  kEndings
};
const char* kEndingNames[] = {"pinger-first", "echo-first", "together", "kill-pinger",
                              "kill-echo",    "linger",     "kill-both"};

struct Tally {
  int pairs = 0, nolink = 0;
  std::vector<std::string> failures;
};

void run_pair(int lane, int n, std::mt19937& rng, Tally* t) {
  const std::string sock =
      "/tmp/dpfab-churn-" + std::to_string(getpid()) + "-" + std::to_string(lane) + ".sock";
  // Roles: explicit (pinger is the server, or the client), or role=auto (who comes first serves).
  const int roles = static_cast<int>(rng() % 3);
  const bool abstract = rng() % 2;
  auto spec = [&](const char* role) {
    return std::string("net_memif0,role=") + role + (abstract ? "" : ",socket-abstract=no") +
           ",socket=" + sock;
  };
  std::string ping_spec = spec(roles == 0 ? "server" : roles == 1 ? "client" : "auto");
  std::string echo_spec = spec(roles == 0 ? "client" : roles == 1 ? "server" : "auto");
  const std::string base = "/tmp/dpfab-churn-" + std::to_string(getpid()) + "-" +
                           std::to_string(lane) + "-" + std::to_string(n);
  const std::string net = "10.79." + std::to_string(lane) + ".";
  // A memif client needs its server listening: the server starts first.
  // An explicit server has opened its port (it listens) once it sends its name: its client starts
  // then. With role=auto the second process starts 0-300 ms after the first (either may serve).
  Child a, b;
  std::string la, lb;
  const bool echo_first = roles == 1 || (roles == 2 && rng() % 2);
  if (echo_first) {
    b = spawn(echo_spec, net + "2/24", false, base + "-echo.log");
    if (roles == 1)
      (void)read_line(b.ctl, &lb, 30'000);
    else
      usleep(static_cast<useconds_t>(rng() % 300'000));
    a = spawn(ping_spec, net + "1/24", true, base + "-ping.log");
  } else {
    a = spawn(ping_spec, net + "1/24", true, base + "-ping.log");
    if (roles == 0)
      (void)read_line(a.ctl, &la, 30'000);
    else
      usleep(static_cast<useconds_t>(rng() % 300'000));
    b = spawn(echo_spec, net + "2/24", false, base + "-echo.log");
  }
  const Ending ending = static_cast<Ending>(rng() % kEndings);
  const std::string label =
      "pair " + std::to_string(t->pairs) + " (lane " + std::to_string(lane) + ", " +
      (roles == 0   ? "pinger serves"
       : roles == 1 ? "echo serves"
                    : "role=auto") +
      (abstract ? ", abstract socket" : ", file socket") + ", " + kEndingNames[ending] + ")";
  ++t->pairs;
  bool ok = (!la.empty() || read_line(a.ctl, &la, 30'000)) &&
            (!lb.empty() || read_line(b.ctl, &lb, 30'000)) && la.rfind("name ", 0) == 0 &&
            lb.rfind("name ", 0) == 0;
  if (ok) {
    send_line(a.ctl, "peer " + lb.substr(5));
    send_line(b.ctl, "peer " + la.substr(5));
    ok = read_line(a.ctl, &la, 30'000) && read_line(b.ctl, &lb, 30'000);
    if (ok && (la != "up" || lb != "up")) {
      ++t->nolink;
      t->failures.push_back(label + ": no link (" + la + ", " + lb + ")");
    }
  } else {
    t->failures.push_back(label + ": start-up: " + la + " / " + lb);
  }
  const bool exit_open = rng() % 2;  // leave the fids to libfabric's cleanup at exit
  const char* cmd = exit_open ? "exit-open" : "exit";
  auto later = [&](int max_ms) { usleep(static_cast<useconds_t>(rng() % (max_ms * 1000 + 1))); };
  switch (ending) {
    case kPingerFirst:
      send_line(a.ctl, cmd), later(30), send_line(b.ctl, cmd);
      break;
    case kEchoFirst:
      send_line(b.ctl, cmd), later(30), send_line(a.ctl, cmd);
      break;
    case kTogether:
      send_line(a.ctl, cmd), send_line(b.ctl, cmd);
      break;
    case kKillPinger:
      kill(a.pid, SIGKILL), a.killed = true, later(300), send_line(b.ctl, cmd);
      break;
    case kKillEcho:
      kill(b.pid, SIGKILL), b.killed = true, later(300), send_line(a.ctl, cmd);
      break;
    case kLingerAlone:
      send_line(a.ctl, cmd), usleep(600'000), later(600), send_line(b.ctl, cmd);
      break;
    case kKillBoth:
      kill(a.pid, SIGKILL), a.killed = true, kill(b.pid, SIGKILL), b.killed = true;
      break;
    case kEndings:
      break;
  }
  if (std::string w = reap(a, 20'000); !w.empty()) t->failures.push_back(label + ": pinger " + w);
  if (std::string w = reap(b, 20'000); !w.empty()) t->failures.push_back(label + ": echo " + w);
  if (!abstract) unlink(sock.c_str());
}

TEST(MemifChurn, PairsComeAndGoWithoutACrash) {
  const int pairs = env_int("DPFAB_CHURN_PAIRS", 60);
  const int lanes = std::max(1, env_int("DPFAB_CHURN_LANES", 2));
  std::mt19937 seed_rng(
      static_cast<unsigned>(env_int("DPFAB_CHURN_SEED", static_cast<int>(getpid()))));
  // Lanes are processes of their own (a lane waits on its pair); each reports its tally on a pipe.
  std::vector<std::pair<pid_t, int>> workers;
  for (int lane = 0; lane < lanes; ++lane) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const unsigned seed = seed_rng();
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      signal(SIGPIPE, SIG_IGN);  // a child that died early must not take its lane with it
      std::mt19937 rng(seed);
      Tally t;
      // Each pair's result as it comes ("pair" or "nolink", then its failures), so that nothing
      // is lost if the lane itself ends early.
      for (int n = lane; n < pairs; n += lanes) {
        const int nolink = t.nolink;
        t.failures.clear();
        run_pair(lane, n, rng, &t);
        std::string out = t.nolink != nolink ? "nolink\n" : "pair\n";
        for (const auto& f : t.failures) out += "failure " + f + "\n";
        (void)!write(fds[1], out.data(), out.size());
      }
      _exit(0);
    }
    close(fds[1]);
    workers.emplace_back(pid, fds[0]);
  }
  int total = 0, nolink = 0;
  std::vector<std::string> failures;
  for (auto [pid, fd] : workers) {
    std::string out;
    char buf[4096];
    for (ssize_t r; (r = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(r));
    close(fd);
    int status = 0;
    waitpid(pid, &status, 0);
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      if (line == "pair" || line == "nolink") ++total;
      if (line == "nolink") ++nolink;
      if (line.rfind("failure ", 0) == 0) failures.push_back(line.substr(8));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      failures.push_back("a lane process ended abnormally (status " + std::to_string(status) + ")");
  }
  std::printf("memif churn: %d pairs, %d without a link, %zu failures\n", total, nolink,
              failures.size());
  for (const auto& f : failures) ADD_FAILURE() << f;
  EXPECT_EQ(total, pairs);
}

}  // namespace
