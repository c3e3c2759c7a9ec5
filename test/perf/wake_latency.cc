// SPDX-License-Identifier: BSD-3-Clause
//
// wake-latency: what sleeping costs and what waking takes, between two processes on one link,
// through the libfabric core (run by test/perf/wake_latency.sh; root for tap and virtio).
//
//   wake-latency [pmd...]      pmd: tap, virtio, memif (default: all three)
//
// Per link, manual progress, FI_DPDK_SPIN_US=0 (blocking waits go to sleep at once):
//   busy       both sides busy-poll fi_cq_read: round-trip p50/p99, CPU s per 100k round trips
//   blocking   server fi_cq_sread, client FD + fi_trywait + epoll: the same figures
//   idle       the client sleeps >= 1 s before each message; the server sleeps in fi_cq_sread:
//              round trip of that first message, p50/p99 (the wakeup thread's path)
// and once: the raw eventfd write -> epoll_wait return latency between two threads on two CPUs
// (the floor of any blocking mode). Round trips are client-side; one-way is about half.
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "wake_link.h"
#include "wake_peer.h"

using namespace dpfab::test;

namespace {

constexpr int kBusyRounds = 3000;
constexpr int kBlockingRounds = 10000;
constexpr int kIdleRounds = 12;
constexpr int kIdleGapUs = 1'050'000;

Peer::Mode parse_mode(const std::string& m) {
  return m == "spin" ? Peer::Mode::kSpin : m == "sread" ? Peer::Mode::kSread : Peer::Mode::kFd;
}

std::string meet(Peer& p, int ctl) {
  std::string e = p.open();
  if (!e.empty()) return e;
  send_line(ctl, "name " + p.name());
  std::string line;
  if (!read_line(ctl, &line, 60'000) || line.rfind("peer ", 0) != 0) return "no peer name";
  return p.set_peer(line.substr(5));
}

// Server: "echo <mode> <n>" echoes n messages; "quit" ends.
int server(int ctl) {
  Peer p;
  if (auto e = meet(p, ctl); !e.empty()) return send_line(ctl, "fail " + e), 1;
  send_line(ctl, "ready");
  std::string line;
  while (read_line(ctl, &line, 600'000)) {
    if (line == "quit") return 0;
    char mode[16];
    int n = 0;
    if (std::sscanf(line.c_str(), "echo %15s %d", mode, &n) != 2) return 2;
    if (p.post_recv() != 0) return 3;
    send_line(ctl, "armed");
    for (int i = 0; i < n; ++i) {
      uint64_t seq = 0;
      if (p.wait_recv(parse_mode(mode), 10'000, &seq) != 1) return send_line(ctl, "fail wait"), 4;
      if (i + 1 < n && p.post_recv() != 0) return 5;
      if (p.send(seq) != 0) return 6;
    }
    send_line(ctl, "done");
  }
  return 0;
}

// Client: "rtt <mode> <n> <gap_us>" -> "res <p50_ns> <p99_ns> <mean_ns>".
int client(int ctl) {
  Peer p;
  if (auto e = meet(p, ctl); !e.empty()) return send_line(ctl, "fail " + e), 1;
  send_line(ctl, "ready");
  std::string line;
  std::vector<int64_t> rtt;
  while (read_line(ctl, &line, 600'000)) {
    if (line == "quit") return 0;
    char mode[16];
    int n = 0, gap_us = 0;
    if (std::sscanf(line.c_str(), "rtt %15s %d %d", mode, &n, &gap_us) != 3) return 2;
    rtt.clear();
    for (int i = 0; i < n; ++i) {
      if (gap_us) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
      if (p.post_recv() != 0) return 3;
      int64_t t0 = mono_ns();
      if (p.send(i) != 0) return 4;
      uint64_t seq = 0;
      if (p.wait_recv(parse_mode(mode), 10'000, &seq) != 1) return send_line(ctl, "fail wait"), 5;
      rtt.push_back(mono_ns() - t0);
    }
    std::sort(rtt.begin(), rtt.end());
    int64_t sum = 0;
    for (auto v : rtt) sum += v;
    auto pct = [&](double q) { return rtt[std::min(rtt.size() - 1, size_t(q * rtt.size()))]; };
    send_line(ctl, "res " + std::to_string(pct(0.5)) + " " + std::to_string(pct(0.99)) + " " +
                       std::to_string(sum / static_cast<int64_t>(rtt.size())));
  }
  return 0;
}

struct Child {
  pid_t pid = -1;
  int ctl = -1;
};

Child spawn(const std::vector<std::string>& env, int (*fn)(int)) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return {};
  std::fflush(stdout);  // or the child prints the parent's buffered lines again
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    for (const auto& e : env) putenv(strdup(e.c_str()));
    _exit(fn(sv[1]));
  }
  close(sv[1]);
  return {pid, sv[0]};
}

bool expect(Child& c, const std::string& want, std::string* rest = nullptr, int ms = 120'000) {
  std::string line;
  if (!read_line(c.ctl, &line, ms) || line.rfind(want, 0) != 0) {
    std::fprintf(stderr, "expected '%s', got '%s'\n", want.c_str(), line.c_str());
    return false;
  }
  if (rest) *rest = line.size() > want.size() ? line.substr(want.size() + 1) : "";
  return true;
}

struct Phase {
  double p50_us = 0, p99_us = 0, mean_us = 0, cpu_s_per_100k = 0;
  bool ok = false;
};

Phase run_phase(Child (&c)[2], const char* smode, const char* cmode, int n, int gap_us) {
  Phase ph;
  send_line(c[0].ctl, std::string("echo ") + smode + " " + std::to_string(n));
  if (!expect(c[0], "armed")) return ph;
  int64_t cpu0 = process_cpu_ns(c[0].pid) + process_cpu_ns(c[1].pid);
  send_line(c[1].ctl,
            std::string("rtt ") + cmode + " " + std::to_string(n) + " " + std::to_string(gap_us));
  std::string res;
  if (!expect(c[1], "res", &res, 600'000) || !expect(c[0], "done")) return ph;
  int64_t cpu1 = process_cpu_ns(c[0].pid) + process_cpu_ns(c[1].pid);
  long long p50, p99, mean;
  if (std::sscanf(res.c_str(), "%lld %lld %lld", &p50, &p99, &mean) != 3) return ph;
  ph.p50_us = p50 / 1e3;
  ph.p99_us = p99 / 1e3;
  ph.mean_us = mean / 1e3;
  ph.cpu_s_per_100k = (cpu1 - cpu0) / 1e9 * 100000.0 / n;
  ph.ok = true;
  return ph;
}

void measure(const std::string& pmd) {
  Link link(pmd, false);
  if (!link.error().empty()) {
    std::printf("%-7s skipped: %s\n", pmd.c_str(), link.error().c_str());
    return;
  }
  link.add_env("FI_DPDK_SPIN_US=0");
  Child c[2];
  int (*fn[2])(int) = {server, client};
  std::string names[2];
  bool ok = true;
  for (int i = 0; i < 2 && ok; ++i) {
    c[i] = spawn(link.env(i), fn[i]);
    if (link.sequential()) ok = expect(c[i], "name", &names[i]);
  }
  if (ok && !link.sequential())
    for (int i = 0; i < 2 && ok; ++i) ok = expect(c[i], "name", &names[i]);
  if (ok) {
    if (auto e = link.join(); !e.empty())
      std::printf("%s: %s\n", pmd.c_str(), e.c_str()), ok = false;
  }
  if (ok) {
    for (int i = 0; i < 2; ++i) send_line(c[i].ctl, "peer " + names[1 - i]);
    ok = expect(c[0], "ready") && expect(c[1], "ready");
  }
  if (ok) {
    Phase busy = run_phase(c, "spin", "spin", kBusyRounds, 0);
    Phase block = run_phase(c, "sread", "fd", kBlockingRounds, 0);
    Phase idle = run_phase(c, "sread", "sread", kIdleRounds, kIdleGapUs);
    std::printf("%-7s busy     rtt p50 %8.1f us  p99 %8.1f us   CPU %6.2f s per 100k round trips\n",
                pmd.c_str(), busy.p50_us, busy.p99_us, busy.cpu_s_per_100k);
    std::printf("%-7s blocking rtt p50 %8.1f us  p99 %8.1f us   CPU %6.2f s per 100k round trips\n",
                pmd.c_str(), block.p50_us, block.p99_us, block.cpu_s_per_100k);
    std::printf("%-7s after %.2f s idle: first rtt p50 %8.1f us  p99(max of %d) %8.1f us\n",
                pmd.c_str(), kIdleGapUs / 1e6, idle.p50_us, kIdleRounds, idle.p99_us);
    std::fflush(stdout);
  } else {
    std::printf("%-7s failed to start\n", pmd.c_str());
  }
  for (auto& ch : c) {
    if (ch.pid < 0) continue;
    send_line(ch.ctl, "quit");
    int status;
    for (int i = 0; i < 500 && waitpid(ch.pid, &status, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (waitpid(ch.pid, &status, WNOHANG) == 0) kill(ch.pid, SIGKILL), waitpid(ch.pid, &status, 0);
    close(ch.ctl);
  }
}

void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

// eventfd write on CPU 0 -> epoll_wait return on CPU 1.
void eventfd_floor() {
  constexpr int kSamples = 5000;
  int efd = eventfd(0, EFD_NONBLOCK);
  int ep = epoll_create1(0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev);
  std::atomic<int64_t> sent{0};
  std::vector<int64_t> lat;
  cpu_set_t before;
  pthread_getaffinity_np(pthread_self(), sizeof(before), &before);
  std::thread waiter([&] {
    pin(1);
    for (int i = 0; i < kSamples; ++i) {
      epoll_event e;
      epoll_wait(ep, &e, 1, 1000);
      int64_t now = mono_ns();
      uint64_t v;
      eventfd_read(efd, &v);
      lat.push_back(now - sent.load(std::memory_order_acquire));
    }
  });
  pin(0);
  for (int i = 0; i < kSamples; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // the waiter is asleep
    sent.store(mono_ns(), std::memory_order_release);
    eventfd_write(efd, 1);
  }
  waiter.join();
  // The children of measure() inherit this thread's affinity: give it back.
  pthread_setaffinity_np(pthread_self(), sizeof(before), &before);
  std::sort(lat.begin(), lat.end());
  std::printf("eventfd write -> epoll_wait return (2 CPUs): p50 %.1f us  p99 %.1f us\n",
              lat[kSamples / 2] / 1e3, lat[kSamples * 99 / 100] / 1e3);
  close(ep);
  close(efd);
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  std::vector<std::string> pmds;
  for (int i = 1; i < argc; ++i) pmds.push_back(argv[i]);
  if (pmds.empty()) pmds = {"tap", "virtio", "memif"};
  eventfd_floor();
  for (const auto& p : pmds) measure(p);
  return 0;
}
