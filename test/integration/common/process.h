// SPDX-License-Identifier: BSD-3-Clause
//
// Tests of several processes: a child's bounded reaping, endpoint names exchanged over pipes, a
// line protocol on a socket pair between a parent and its children, CPU time and OS wakeups of a
// process from /proc/<pid>/task/*, and one DPDK telemetry query.
#pragma once

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace dpfab::test {

/// Writes `ep`'s name to `out_fd`, reads the peer's from `in_fd` and inserts it into `av`.
/// Returns 0, or the step that failed (20 getname, 21 write, 22 read, 23 insert).
inline int exchange_names(fid_ep* ep, fid_av* av, int out_fd, int in_fd, fi_addr_t* peer) {
  char name[64];
  size_t len = sizeof(name);
  if (fi_getname(&ep->fid, name, &len) != 0) return 20;
  if (write(out_fd, &len, sizeof(len)) != sizeof(len) ||
      write(out_fd, name, len) != static_cast<ssize_t>(len))
    return 21;
  char other[64];
  size_t olen = 0;
  if (read(in_fd, &olen, sizeof(olen)) != sizeof(olen) || olen > sizeof(other) ||
      read(in_fd, other, olen) != static_cast<ssize_t>(olen))
    return 22;
  if (fi_av_insert(av, other, 1, peer, 0, nullptr) != 1) return 23;
  return 0;
}

/// Reads exactly `len` bytes from `fd`; false on EOF or error.
inline bool read_all(int fd, void* buf, size_t len) {
  auto* p = static_cast<uint8_t*>(buf);
  while (len) {
    ssize_t n = read(fd, p, len);
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

/// A peer process's first words with its test over two pipes: writes its 16-byte endpoint name
/// `addr` to `to_test`, reads the test's from `from_test` and inserts it into `av` (`*test`).
/// Returns 0, or the step that failed as the peer's exit code (3 write, 4 read, 5 insert).
inline int greet_test(const uint8_t* addr, fid_av* av, int to_test, int from_test,
                      fi_addr_t* test) {
  constexpr ssize_t kLen = 16;
  if (write(to_test, addr, kLen) != kLen) return 3;
  uint8_t test_addr[kLen];
  if (!read_all(from_test, test_addr, kLen)) return 4;
  if (fi_av_insert(av, test_addr, 1, test, 0, nullptr) != 1) return 5;
  return 0;
}

/// Waits for child `pid` at most `bound` (SIGKILL after it). Returns its exit code, or -1 when it
/// died of a signal or was killed for not ending in time.
inline int wait_child(pid_t pid, std::chrono::seconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  int status = 0;
  pid_t r = 0;
  while ((r = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (r == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// wait_child: true when it exited with status 0.
inline bool reap_child(pid_t pid, std::chrono::seconds bound) {
  return wait_child(pid, bound) == 0;
}

inline int64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

/// Sums `read_one(stream)` over /proc/<pid>/task/*/<file>; -1 when the process is gone.
template <typename ReadOne>
int64_t sum_over_tasks(pid_t pid, const char* file, ReadOne read_one) {
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) return -1;
  int64_t total = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(dir + "/" + e->d_name + "/" + file);
    total += read_one(f);
  }
  closedir(d);
  return total;
}

/// CPU time of every thread of `pid` (schedstat: ns on CPU). -1 when the process is gone.
inline int64_t process_cpu_ns(pid_t pid) {
  return sum_over_tasks(pid, "schedstat", [](std::ifstream& f) -> int64_t {
    long long on_cpu = 0;
    return f >> on_cpu ? on_cpu : 0;
  });
}

/// Voluntary context switches of every thread of `pid` (each is one sleep that ended in an OS
/// wakeup). -1 when the process is gone.
inline int64_t process_vcsw(pid_t pid) {
  return sum_over_tasks(pid, "status", [](std::ifstream& f) -> int64_t {
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) return std::stoll(line.substr(24));
    return 0;
  });
}

/// One thread's voluntary context switches (each a sleep that ended in an OS wakeup).
struct ThreadVcsw {
  pid_t tid = 0;
  std::string comm;  ///< the thread's name (/proc/<pid>/task/<tid>/comm)
  int64_t vcsw = 0;
};

/// Every thread of `pid` with its voluntary context switches (empty when the process is gone).
inline std::vector<ThreadVcsw> thread_vcsw(pid_t pid) {
  std::vector<ThreadVcsw> out;
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    ThreadVcsw t;
    t.tid = static_cast<pid_t>(std::atoi(e->d_name));
    std::ifstream c(dir + "/" + e->d_name + "/comm");
    std::getline(c, t.comm);
    std::ifstream f(dir + "/" + e->d_name + "/status");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) t.vcsw = std::stoll(line.substr(24));
    out.push_back(std::move(t));
  }
  closedir(d);
  return out;
}

/// What each thread added between two thread_vcsw() snapshots of one process, as
/// "comm(tid) +n, ..." (threads that appeared count from 0), and the total in `*total`.
inline std::string vcsw_breakdown(const std::vector<ThreadVcsw>& before,
                                  const std::vector<ThreadVcsw>& after, int64_t* total) {
  std::string s;
  int64_t sum = 0;
  for (const auto& a : after) {
    int64_t base = 0;
    for (const auto& b : before)
      if (b.tid == a.tid) base = b.vcsw;
    const int64_t d = a.vcsw - base;
    sum += d;
    if (!s.empty()) s += ", ";
    s += a.comm + "(" + std::to_string(a.tid) + ") +" + std::to_string(d);
  }
  if (total) *total = sum;
  return s;
}

/// Writes one line ('\n' appended). False on error.
inline bool send_line(int fd, const std::string& s) {
  std::string l = s + "\n";
  return write(fd, l.data(), l.size()) == static_cast<ssize_t>(l.size());
}

/// Reads one line within `timeout_ms` (byte by byte: the peer may send more after it).
inline bool read_line(int fd, std::string* out, int timeout_ms) {
  out->clear();
  const int64_t end = mono_ns() + int64_t{timeout_ms} * 1'000'000;
  for (;;) {
    int64_t left = (end - mono_ns()) / 1'000'000;
    if (left < 0) return false;
    pollfd p{fd, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;  // net_tap raises SIGIO on every frame
    if (r <= 0) return false;
    char c;
    if (read(fd, &c, 1) != 1) return false;
    if (c == '\n') return true;
    *out += c;
  }
}

/// One DPDK telemetry query (the v2 socket of a running process): returns the JSON reply to
/// `cmd`, or "" when the socket cannot be reached.
inline std::string telemetry_query(const std::string& socket_path, const std::string& cmd) {
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, socket_path.c_str(), sizeof(sa.sun_path) - 1);
  std::string out;
  std::vector<char> buf(1 << 16);
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 &&
      read(fd, buf.data(), buf.size()) > 0 &&  // the greeting: version, pid, max_output_len
      write(fd, cmd.data(), cmd.size()) == static_cast<ssize_t>(cmd.size())) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n > 0) out.assign(buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace dpfab::test
