// SPDX-License-Identifier: BSD-3-Clause
//
// Loss of the peer, FI_EP_MSG (fi_dpdk(7), "Connection management"), through the libfabric core
// over one net_memif link between this process and a peer (this binary re-executed with
// --msg-peer, the memif server): the peer is SIGKILLed while connected and idle, and this side
// gets FI_SHUTDOWN on its EQ, its outstanding receive completes with FI_EHOSTUNREACH and later
// sends fail, within the documented bound (FI_DPDK_RDM_PEER_TIMEOUT_MS=1000 here: lost after 1 s
// of silence; keepalives every 250 ms), while it only waits in fi_eq_sread. With FI_DPDK_SHM=on
// the two are same-host peers: the same events come at once, without the timeout.
//   MsgPeerLoss.KilledClient: this process listens, the peer connects, the peer dies.
//   MsgPeerLoss.KilledServer: the peer listens, this process connects, the peer dies.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "msg_helpers.h"
#include "process.h"

using namespace dpfab::test;
using Clock = std::chrono::steady_clock;

namespace {

constexpr double kBoundS = 1.0 + 0.25 + 0.75;  // peer timeout + keepalive interval + slack

// FI_DPDK_SHM=on (meson's integration-shm-msg-peer-loss-*): the two processes are same-host peers
// and talk through shared memory, whose link the kernel ends when the peer dies.
bool same_host() {
  const char* s = std::getenv("FI_DPDK_SHM");
  return s && std::strcmp(s, "on") == 0;
}

// ---- the peer (a process of its own) ----
// server: listens, writes its passive endpoint's name, accepts one connection; client: reads the
// name and connects. Either then writes 'C' and keeps its port progressed (it answers keepalives)
// until it is killed.
int msg_peer_main(const std::string& role, int to_test, int from_test) {
  MsgSide side;
  if (side.open() != 0) return 2;
  Listener l;
  Conn c;
  if (role == "server") {
    if (l.open(side) != 0) return 3;
    if (write(to_test, l.addr, sizeof(l.addr)) != sizeof(l.addr)) return 4;
    CmEvent e = read_cm(side.eq, 20000);
    if (e.event != FI_CONNREQ || !e.info) return 5;
    const int r = c.open(side, e.info);
    fi_freeinfo(e.info);
    if (r != 0 || fi_accept(c.ep, nullptr, 0) != 0) return 6;
  } else {
    uint8_t addr[32];
    if (!read_all(from_test, addr, sizeof(addr))) return 4;
    if (c.open(side, side.info) != 0 || fi_connect(c.ep, addr, nullptr, 0) != 0) return 6;
  }
  if (CmEvent e = read_cm(side.eq, 20000); e.event != FI_CONNECTED) {
    std::fprintf(stderr, "msg peer (%s): no FI_CONNECTED: rc %d event %u err %d\n", role.c_str(),
                 e.rc, e.event, e.err);
    return 7;
  }
  if (write(to_test, "C", 1) != 1) return 8;
  for (;;) read_cm(side.eq, 100);  // progress (keepalives) until killed
}

class MsgPeerLoss : public ::testing::Test {
 protected:
  void SetUp() override {
    sock_ = "/tmp/msg-peer-loss-" + std::to_string(getpid()) + ".sock";
    unlink(sock_.c_str());
  }
  void TearDown() override {
    if (peer_ > 0) {
      kill(peer_, SIGKILL);
      waitpid(peer_, nullptr, 0);
    }
    unlink(sock_.c_str());
  }
  // Starts the peer (the memif server), before this process starts EAL (the memif client).
  void spawn(const char* role) {
    ASSERT_EQ(pipe(to_peer_), 0);
    ASSERT_EQ(pipe(from_peer_), 0);
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    ASSERT_GT(n, 0);
    self[n] = 0;
    peer_ = fork();
    ASSERT_GE(peer_, 0);
    if (peer_ == 0) {
      setenv("FI_DPDK_PORTS", ("net_memif0,role=server,socket-abstract=no,socket=" + sock_).c_str(),
             1);
      setenv("FI_DPDK_IPV4", "10.68.0.1/24", 1);
      const std::string out = std::to_string(from_peer_[1]), in = std::to_string(to_peer_[0]);
      execl(self, self, "--msg-peer", role, out.c_str(), in.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    // Our copies of the peer's ends: a peer that exits early is then an end of file here, not a
    // read that waits for ever.
    close(from_peer_[1]);
    close(to_peer_[0]);
    for (int i = 0; i < 100 && access(sock_.c_str(), F_OK) != 0; ++i) usleep(50'000);
    setenv("FI_DPDK_PORTS", ("net_memif0,role=client,socket-abstract=no,socket=" + sock_).c_str(),
           1);
    setenv("FI_DPDK_IPV4", "10.68.0.2/24", 1);
  }
  // The peer is connected: kill it and time our FI_SHUTDOWN; the receive posted before fails.
  void kill_peer_and_expect_shutdown(MsgSide& side, Conn& c) {
    char got;
    if (!read_all(from_peer_[0], &got, 1)) {
      int st = 0;
      waitpid(peer_, &st, 0);
      peer_ = -1;
      FAIL() << "the peer ended before it was connected: exit status "
             << (WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    char buf[64];
    ASSERT_EQ(fi_recv(c.ep, buf, sizeof(buf), nullptr, 0, buf), 0);
    // A round of keepalives first: the connection is up and idle.
    EXPECT_EQ(read_cm(side.eq, 600).rc, -FI_EAGAIN);
    ASSERT_EQ(kill(peer_, SIGKILL), 0);
    const auto t0 = Clock::now();
    CmEvent e = read_cm(side.eq, static_cast<int>(kBoundS * 1000) + 3000);
    const double took = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_EQ(e.event, FI_SHUTDOWN);
    EXPECT_EQ(e.fid, &c.ep->fid);
    if (same_host()) {
      // The kernel closed the peer's same-host link: no silence to wait out (fi_dpdk(7),
      // "Same-host peers": the bound is our next progress).
      EXPECT_LT(took, 0.5);
    } else {
      EXPECT_LE(took, kBoundS);
      EXPECT_GE(took, 0.5);  // the timeout, not a live peer taken for a dead one
    }
    std::printf("FI_SHUTDOWN %.3f s after the peer was killed\n", took);
    fi_cq_tagged_entry comp{};
    fi_cq_err_entry err{};
    ASSERT_EQ(c.wait(&comp, 1000, &err), -FI_EAVAIL);
    EXPECT_EQ(err.err, FI_EHOSTUNREACH);
    EXPECT_EQ(err.op_context, buf);
    EXPECT_EQ(fi_send(c.ep, buf, 1, nullptr, 0, nullptr), -FI_ENOTCONN);
  }

  std::string sock_;
  pid_t peer_ = -1;
  int to_peer_[2] = {-1, -1}, from_peer_[2] = {-1, -1};
};

TEST_F(MsgPeerLoss, KilledClient) {
  spawn("client");
  MsgSide side;
  ASSERT_EQ(side.open(), 0);
  Listener l;
  ASSERT_EQ(l.open(side), 0);
  ASSERT_EQ(write(to_peer_[1], l.addr, sizeof(l.addr)), static_cast<ssize_t>(sizeof(l.addr)));
  CmEvent e = read_cm(side.eq, 20000);
  ASSERT_EQ(e.event, FI_CONNREQ);
  Conn c;
  ASSERT_EQ(c.open(side, e.info), 0);
  fi_freeinfo(e.info);
  ASSERT_EQ(fi_accept(c.ep, nullptr, 0), 0);
  ASSERT_EQ(read_cm(side.eq, 5000).event, FI_CONNECTED);
  kill_peer_and_expect_shutdown(side, c);
}

TEST_F(MsgPeerLoss, KilledServer) {
  spawn("server");
  uint8_t addr[32];
  ASSERT_TRUE(read_all(from_peer_[0], addr, sizeof(addr)));
  MsgSide side;
  ASSERT_EQ(side.open(), 0);
  Conn c;
  ASSERT_EQ(c.open(side, side.info), 0);
  ASSERT_EQ(fi_connect(c.ep, addr, nullptr, 0), 0);
  ASSERT_EQ(read_cm(side.eq, 20000).event, FI_CONNECTED);
  kill_peer_and_expect_shutdown(side, c);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::strcmp(argv[1], "--msg-peer") == 0)
    return msg_peer_main(argv[2], std::atoi(argv[3]), std::atoi(argv[4]));
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
