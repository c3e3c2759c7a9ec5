// SPDX-License-Identifier: BSD-3-Clause
//
// Page faults on the first messages over memif. The memif shared region (rings and packet
// buffers, ~4 MiB with the PMD's defaults) is a memfd that both processes map; its pages are
// touched for the first time by the first messages, one minor fault (~6 us) per 4 KiB page and
// process: stock fi_pingpong paid about 1,000 of them. The provider faults the region in when
// the link comes up, so the first N messages of a memif pair must cost far fewer than N faults.
//
// Two processes (fork, one memif link with explicit roles), FI_EP_DGRAM through the libfabric
// core: after a handshake, the client does N ping-pongs; each side counts its minor faults
// (getrusage ru_minflt, the whole process) over them.
#include <gtest/gtest.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "fixture.h"
#include "process.h"

using namespace dpfab::test;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint32_t kMessages = 500;  // ping-pongs measured
constexpr uint32_t kBye = 0xffffffffu;
constexpr size_t kPosted = 32;

long minor_faults() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

struct Result {
  int64_t status = 0;  // 0 = ok, else the failed step
  int64_t faults = 0;
};

// One side of the link: a DGRAM endpoint (EpNode, fixture.h) with kPosted receives posted.
class Side {
 public:
  int open() {
    if (int r = node_.open(FI_EP_DGRAM, FI_MSG, FI_CQ_FORMAT_DATA)) return r;
    for (size_t i = 0; i < kPosted; ++i)
      if (fi_recv(node_.ep, bufs_[i], sizeof(bufs_[i]), nullptr, FI_ADDR_UNSPEC, bufs_[i]) != 0)
        return 11;
    return 0;
  }

  // Exchanges names over the pipes and inserts the peer.
  int meet(int out_fd, int in_fd) {
    return exchange_names(node_.ep, node_.av, out_fd, in_fd, &peer_);
  }

  // Sends `seq`, retrying -FI_EAGAIN (a link coming up) until `deadline`.
  bool send(uint32_t seq, Clock::time_point deadline) {
    for (;;) {
      ssize_t r = fi_send(node_.ep, &seq, sizeof(seq), nullptr, peer_, nullptr);
      if (r == 0) return true;
      if (r != -FI_EAGAIN || Clock::now() > deadline) return false;
      uint32_t ignored;
      (void)poll(&ignored);
    }
  }

  // One fi_cq_read; true with the sequence number of a received datagram (its receive reposted).
  bool poll(uint32_t* seq) {
    fi_cq_data_entry e{};
    if (fi_cq_read(node_.cq, &e, 1) != 1 || !(e.flags & FI_RECV)) return false;
    auto* buf = static_cast<char*>(e.op_context);
    std::memcpy(seq, buf, sizeof(*seq));
    (void)fi_recv(node_.ep, buf, 64, nullptr, FI_ADDR_UNSPEC, buf);
    return true;
  }

  // Waits for a datagram carrying `want` (others are skipped) until `deadline`.
  bool wait_for(uint32_t want, Clock::time_point deadline) {
    uint32_t seq;
    while (Clock::now() < deadline)
      if (poll(&seq) && seq == want) return true;
    return false;
  }

 private:
  EpNode node_;
  fi_addr_t peer_ = FI_ADDR_NOTAVAIL;
  char bufs_[kPosted][64] = {};
};

// The server answers every datagram with its sequence number until the client's bye, counting
// its faults from the answer to the handshake to the bye.
Result serve(int out_fd, int in_fd) {
  Result res;
  Side s;
  if ((res.status = s.open()) != 0 || (res.status = s.meet(out_fd, in_fd)) != 0) return res;
  const auto end = Clock::now() + std::chrono::seconds(30);
  if (!s.wait_for(0, end)) return {30, 0};
  if (!s.send(0, end)) return {31, 0};
  const long before = minor_faults();
  uint32_t seq = 0;
  for (;;) {
    if (Clock::now() > end) return {32, 0};
    if (!s.poll(&seq) || seq == 0) continue;  // nothing, or a repeated handshake
    if (seq == kBye) break;
    if (!s.send(seq, end)) return {33, 0};
  }
  res.faults = minor_faults() - before;
  return res;
}

// The client repeats the handshake until answered (the link comes up meanwhile), then does
// kMessages ping-pongs, counting its faults over them.
Result ping(int out_fd, int in_fd) {
  Result res;
  Side s;
  if ((res.status = s.open()) != 0 || (res.status = s.meet(out_fd, in_fd)) != 0) return res;
  const auto end = Clock::now() + std::chrono::seconds(30);
  bool answered = false;
  while (!answered && Clock::now() < end) {
    if (!s.send(0, end)) return {40, 0};
    answered = s.wait_for(0, Clock::now() + std::chrono::milliseconds(50));
  }
  if (!answered) return {41, 0};
  const long before = minor_faults();
  for (uint32_t i = 1; i <= kMessages; ++i) {
    if (!s.send(i, end)) return {42, 0};
    if (!s.wait_for(i, std::min(end, Clock::now() + std::chrono::seconds(2)))) return {43, i};
  }
  res.faults = minor_faults() - before;
  for (int i = 0; i < 3; ++i) (void)s.send(kBye, end);
  // Let the bye leave before the link goes away.
  uint32_t ignored;
  for (auto t = Clock::now() + std::chrono::milliseconds(100); Clock::now() < t;) s.poll(&ignored);
  return res;
}

pid_t spawn(const std::string& ports, bool server, int out_fd, int in_fd, int result_fd) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  setenv("FI_DPDK_PORTS", ports.c_str(), 1);
  Result r = server ? serve(out_fd, in_fd) : ping(out_fd, in_fd);
  ssize_t w = write(result_fd, &r, sizeof(r));
  _exit(w == sizeof(r) ? 0 : 1);
}

}  // namespace

TEST(MemifFaults, TheFirstMessagesOfAMemifPairCostFarFewerFaultsThanMessages) {
  const std::string sock = "/tmp/dpfab-it-faults-" + std::to_string(getpid()) + ".sock";
  const std::string base = "net_memif0,socket-abstract=no,socket=" + sock + ",role=";
  int c2s[2], s2c[2], sres[2], cres[2];
  ASSERT_EQ(pipe(c2s), 0);
  ASSERT_EQ(pipe(s2c), 0);
  ASSERT_EQ(pipe(sres), 0);
  ASSERT_EQ(pipe(cres), 0);
  pid_t server = spawn(base + "server", true, s2c[1], c2s[0], sres[1]);
  ASSERT_GE(server, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the server listens first
  pid_t client = spawn(base + "client", false, c2s[1], s2c[0], cres[1]);
  ASSERT_GE(client, 0);
  Result rs, rc;
  EXPECT_EQ(read(cres[0], &rc, sizeof(rc)), static_cast<ssize_t>(sizeof(rc)));
  EXPECT_EQ(read(sres[0], &rs, sizeof(rs)), static_cast<ssize_t>(sizeof(rs)));
  EXPECT_TRUE(reap_child(client, std::chrono::seconds(30)));
  EXPECT_TRUE(reap_child(server, std::chrono::seconds(30)));
  for (int fd : {c2s[0], c2s[1], s2c[0], s2c[1], sres[0], sres[1], cres[0], cres[1]}) close(fd);
  unlink(sock.c_str());
  ASSERT_EQ(rc.status, 0) << "client failed at that step";
  ASSERT_EQ(rs.status, 0) << "server failed at that step";
  std::printf("minor faults over %u ping-pongs: client %lld, server %lld\n", kMessages,
              static_cast<long long>(rc.faults), static_cast<long long>(rs.faults));
  EXPECT_LT(rc.faults, kMessages / 10) << "client";
  EXPECT_LT(rs.faults, kMessages / 10) << "server";
}
