// SPDX-License-Identifier: BSD-3-Clause
//
// A DGRAM endpoint through the real libfabric core for tests and measurements that put two
// processes to sleep and wake them with traffic (wakeup_test.cc, test/perf/wake_latency.cc, and
// the tests whose children exchange datagrams): open (fixture.h's Domain and Endpoint, a CQ with
// an fd wait object), exchange names out of band, send, and wait for a receive by busy polling,
// fi_cq_sread, or FI_GETWAIT fd + fi_trywait + epoll. The line protocol between a parent and its
// children and the per-process CPU figures are in process.h.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "fixture.h"
#include "process.h"

namespace dpfab::test {

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
    if (d_.open(FI_EP_DGRAM, FI_MSG) != 0 || d_.open_av(&av_) != 0) return d_.failed;
    EpOptions o;
    o.cq_size = 1024;
    o.cq_wait = FI_WAIT_FD;
    o.av = av_;
    if (e_.open(d_, o) != 0) return e_.failed;
    if (int r = fi_control(&e_.cq->fid, FI_GETWAIT, &cq_fd_); r) return step_error("FI_GETWAIT", r);
    epfd_ = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = cq_fd_;
    epoll_ctl(epfd_, EPOLL_CTL_ADD, cq_fd_, &ev);
    return "";
  }

  /// Our endpoint name, hex-encoded.
  std::string name() const {
    std::string hex;
    char b[3];
    for (size_t i = 0; i < e_.addr_len; ++i)
      std::snprintf(b, sizeof(b), "%02x", e_.addr[i]), hex += b;
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
      ssize_t r = fi_recv(e_.ep, rx_, sizeof(rx_), nullptr, FI_ADDR_UNSPEC, rx_);
      if (r != -FI_EAGAIN) return static_cast<int>(r);
      drain(0);
    }
    return -FI_EAGAIN;
  }

  /// Sends `len` bytes carrying `seq` in the first 8.
  int send(uint64_t seq, size_t len = 64) {
    std::memcpy(tx_, &seq, sizeof(seq));
    for (int i = 0; i < 100000; ++i) {
      ssize_t r = fi_send(e_.ep, tx_, std::max(len, sizeof(seq)), nullptr, peer_, tx_);
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
            fi_cq_sread(e_.cq, &e, 1, nullptr, static_cast<int>(std::max<int64_t>(left_ms, 1)));
        if (n == 1) {
          if (int r = take(e, seq)) return r;
          continue;
        }
        // -FI_EINTR: a POSIX signal (net_tap's SIGIO) interrupted the wait.
        if (n == -FI_EAGAIN || n == -FI_ETIMEDOUT || n == -FI_EINTR) continue;
        return n == -FI_EAVAIL ? readerr() : static_cast<int>(n);
      }
      fid* f = &e_.cq->fid;
      int t = fi_trywait(d_.fabric, &f, 1);
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
    e_.close();
    close_fid(&av_);
    d_.close();
  }

  fid_cq* cq() const { return e_.cq; }

 private:
  int readerr() {
    fi_cq_err_entry e{};
    fi_cq_readerr(e_.cq, &e, 0);
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
      ssize_t n = fi_cq_read(e_.cq, e, 8);
      if (n == -FI_EAGAIN) return 0;
      if (n == -FI_EAVAIL) return readerr();
      if (n < 0) return static_cast<int>(n);
      int got = 0;
      for (ssize_t i = 0; i < n; ++i) got |= take(e[i], seq);
      if (got) return 1;
    }
  }

  Domain d_;
  fid_av* av_ = nullptr;
  Endpoint e_;
  int cq_fd_ = -1;
  int epfd_ = -1;
  int extra_added_ = -1;
  fi_addr_t peer_ = FI_ADDR_NOTAVAIL;
  alignas(64) char rx_[2048] = {};
  alignas(64) char tx_[2048] = {};
};

}  // namespace dpfab::test
