// SPDX-License-Identifier: BSD-3-Clause
//
// A DGRAM endpoint through the real libfabric core for tests and measurements that put two
// processes to sleep and wake them with traffic (wakeup_test.cc, test/perf/wake_latency.cc):
// open, exchange names out of band, send, and wait for a receive by busy polling, fi_cq_sread, or
// FI_GETWAIT fd + fi_trywait + epoll. Plus the small pieces those programs share: a line protocol
// on a socket pair between a parent and its children, and CPU time of a process from
// /proc/<pid>/task/*/schedstat (nanoseconds, every thread).
#pragma once

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "fi_helpers.h"

namespace dpfab::test {

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

class Peer {
 public:
  enum class Mode { kSpin, kSread, kFd };
  static const char* mode_name(Mode m) {
    return m == Mode::kSpin ? "spin" : m == Mode::kSread ? "sread" : "fd";
  }

  ~Peer() { close(); }

  /// Opens fabric, domain, AV, a CQ with an fd wait object, and a DGRAM endpoint.
  /// Returns "" or what failed.
  std::string open() {
    auto hints = dpdk_hints();
    hints->ep_attr->type = FI_EP_DGRAM;
    hints->caps = FI_MSG;
    if (int r = getinfo(hints.get(), &info_); r != 0) return "fi_getinfo " + std::to_string(r);
    fi_info* e = first_dpdk(info_.get());
    if (!e) return "no dpdk entry";
    if (int r = fi_fabric(e->fabric_attr, &fabric_, nullptr); r) return "fi_fabric " + err(r);
    if (int r = fi_domain(fabric_, e, &domain_, nullptr); r) return "fi_domain " + err(r);
    fi_av_attr av{};
    av.type = FI_AV_TABLE;
    if (int r = fi_av_open(domain_, &av, &av_, nullptr); r) return "fi_av_open " + err(r);
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_DATA;
    ca.size = 1024;
    ca.wait_obj = FI_WAIT_FD;
    if (int r = fi_cq_open(domain_, &ca, &cq_, nullptr); r) return "fi_cq_open " + err(r);
    if (int r = fi_control(&cq_->fid, FI_GETWAIT, &cq_fd_); r) return "FI_GETWAIT " + err(r);
    if (int r = fi_endpoint(domain_, e, &ep_, nullptr); r) return "fi_endpoint " + err(r);
    if (int r = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV); r) return "bind cq " + err(r);
    if (int r = fi_ep_bind(ep_, &av_->fid, 0); r) return "bind av " + err(r);
    if (int r = fi_enable(ep_); r) return "fi_enable " + err(r);
    epfd_ = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = cq_fd_;
    epoll_ctl(epfd_, EPOLL_CTL_ADD, cq_fd_, &ev);
    return "";
  }

  /// Our endpoint name, hex-encoded.
  std::string name() {
    uint8_t buf[64];
    size_t len = sizeof(buf);
    if (fi_getname(&ep_->fid, buf, &len) != 0) return "";
    std::string hex;
    char b[3];
    for (size_t i = 0; i < len; ++i) std::snprintf(b, sizeof(b), "%02x", buf[i]), hex += b;
    return hex;
  }

  /// Inserts the peer's hex name. Returns "" or what failed.
  std::string set_peer(const std::string& hex) {
    std::vector<uint8_t> raw(hex.size() / 2);
    for (size_t i = 0; i < raw.size(); ++i) raw[i] = std::stoi(hex.substr(2 * i, 2), nullptr, 16);
    if (fi_av_insert(av_, raw.data(), 1, &peer_, 0, nullptr) != 1) return "fi_av_insert failed";
    return "";
  }

  /// Posts one receive (64 KiB-free: messages are small).
  int post_recv() {
    for (int i = 0; i < 100000; ++i) {
      ssize_t r = fi_recv(ep_, rx_, sizeof(rx_), nullptr, FI_ADDR_UNSPEC, rx_);
      if (r != -FI_EAGAIN) return static_cast<int>(r);
      drain(0);
    }
    return -FI_EAGAIN;
  }

  /// Sends `len` bytes carrying `seq` in the first 8.
  int send(uint64_t seq, size_t len = 64) {
    std::memcpy(tx_, &seq, sizeof(seq));
    for (int i = 0; i < 100000; ++i) {
      ssize_t r = fi_send(ep_, tx_, std::max(len, sizeof(seq)), nullptr, peer_, tx_);
      if (r != -FI_EAGAIN) return static_cast<int>(r);
      drain(0);
    }
    return -FI_EAGAIN;
  }

  /// Waits for one receive completion with `mode`, bounded by `timeout_ms`. Send completions are
  /// skipped. `extra_fd` (fd mode only): also returns 2 when it becomes readable.
  /// @return 1 received (its seq in *seq), 0 timeout, 2 extra fd, < 0 error.
  int wait_recv(Mode mode, int timeout_ms, uint64_t* seq = nullptr, int extra_fd = -1) {
    const int64_t end = mono_ns() + int64_t{timeout_ms} * 1'000'000;
    if (extra_fd >= 0 && extra_fd != extra_added_) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = extra_fd;
      epoll_ctl(epfd_, EPOLL_CTL_ADD, extra_fd, &ev);
      extra_added_ = extra_fd;
    }
    for (;;) {
      if (int r = drain(seq); r != 0) return r;
      int64_t left_ms = (end - mono_ns()) / 1'000'000;
      if (left_ms < 0) return 0;
      if (mode == Mode::kSpin) continue;
      if (mode == Mode::kSread) {
        fi_cq_data_entry e;
        ssize_t n =
            fi_cq_sread(cq_, &e, 1, nullptr, static_cast<int>(std::max<int64_t>(left_ms, 1)));
        if (n == 1) {
          if (int r = take(e, seq)) return r;
          continue;
        }
        // -FI_EINTR: a POSIX signal (net_tap's SIGIO) interrupted the wait.
        if (n == -FI_EAGAIN || n == -FI_ETIMEDOUT || n == -FI_EINTR) continue;
        return n == -FI_EAVAIL ? readerr() : static_cast<int>(n);
      }
      fid* f = &cq_->fid;
      int t = fi_trywait(fabric_, &f, 1);
      if (t == -FI_EAGAIN) continue;
      if (t != FI_SUCCESS) return t;
      epoll_event evs[2];
      int n = epoll_wait(epfd_, evs, 2, static_cast<int>(std::max<int64_t>(left_ms, 1)));
      for (int i = 0; i < n; ++i)
        if (evs[i].data.fd == extra_fd && extra_fd >= 0) return 2;
    }
  }

  void close() {
    if (epfd_ >= 0) ::close(epfd_), epfd_ = -1;
    if (ep_) fi_close(&ep_->fid), ep_ = nullptr;
    if (av_) fi_close(&av_->fid), av_ = nullptr;
    if (cq_) fi_close(&cq_->fid), cq_ = nullptr;
    if (domain_) fi_close(&domain_->fid), domain_ = nullptr;
    if (fabric_) fi_close(&fabric_->fid), fabric_ = nullptr;
  }

  fid_cq* cq() const { return cq_; }

 private:
  static std::string err(int r) { return std::to_string(r) + " " + fi_strerror(-r); }
  int readerr() {
    fi_cq_err_entry e{};
    fi_cq_readerr(cq_, &e, 0);
    return -static_cast<int>(e.err ? e.err : FI_EOTHER);
  }
  // 1 with a receive, 0 for a send completion.
  int take(const fi_cq_data_entry& e, uint64_t* seq) {
    if (!(e.flags & FI_RECV)) return 0;
    if (seq) std::memcpy(seq, rx_, sizeof(*seq));
    return 1;
  }
  // Reads what is there: 1 when a receive came (its seq), 0 when none, < 0 on error.
  int drain(uint64_t* seq) {
    fi_cq_data_entry e[8];
    for (;;) {
      ssize_t n = fi_cq_read(cq_, e, 8);
      if (n == -FI_EAGAIN) return 0;
      if (n == -FI_EAVAIL) return readerr();
      if (n < 0) return static_cast<int>(n);
      int got = 0;
      for (ssize_t i = 0; i < n; ++i) got |= take(e[i], seq);
      if (got) return 1;
    }
  }

  InfoPtr info_;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_av* av_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_ep* ep_ = nullptr;
  int cq_fd_ = -1;
  int epfd_ = -1;
  int extra_added_ = -1;
  fi_addr_t peer_ = FI_ADDR_NOTAVAIL;
  alignas(64) char rx_[2048] = {};
  alignas(64) char tx_[2048] = {};
};

}  // namespace dpfab::test
