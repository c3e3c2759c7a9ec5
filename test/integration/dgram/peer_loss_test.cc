// SPDX-License-Identifier: BSD-3-Clause
//
// Loss of the peer, DGRAM over one net_memif link between this process (memif client) and an echo
// peer (memif server, this binary re-executed with --peer):
//   1. round trips work;
//   2. the peer is killed (SIGKILL): sends to it still complete (a datagram to nobody is lost,
//      not an error and not a hang), a receive times out within its bound, the CQ stays usable;
//   3. a new peer process takes the server's place on the same socket: after the application
//      inserts its address, round trips work again (the memif link comes back by itself).
// Every wait is bounded. Meanwhile the memif client's restarts fail (no server): the provider must
// not call DPDK's bursts on the stopped port (DPDK's stand-in says "not ready port" on stderr).
//
// PeerLossServing turns the roles round (this process is the memif server, the peer its client):
// when the client dies, the server loses its memif kick connection too and must stay idle. (EAL
// and its ports are per process: meson runs each fixture in a process of its own.)
#include <gtest/gtest.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "fixture.h"
#include "process.h"

using namespace dpfab::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kAddrLen = 16;

// Sends this process's stderr (and its children's) to a file while it lives; text() stops that,
// copies what was written back to the real stderr and returns it.
class StderrCapture {
 public:
  StderrCapture() {
    char path[] = "/tmp/dpfab-peer-loss-stderr-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return;
    path_ = path;
    std::fflush(stderr);
    saved_ = dup(2);
    dup2(fd, 2);
    close(fd);
  }
  ~StderrCapture() { text(); }
  std::string text() {
    if (saved_ < 0) return text_;
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    saved_ = -1;
    std::stringstream ss;
    ss << std::ifstream(path_).rdbuf();
    text_ = ss.str();
    unlink(path_.c_str());
    std::fputs(text_.c_str(), stderr);
    return text_;
  }

 private:
  std::string path_, text_;
  int saved_ = -1;
};

// One DGRAM endpoint with its CQ and AV, through libfabric (fixture.h).
using Node = EpNode;

// ---- the peer (a process of its own): echoes every datagram back to the test ----

int peer_main(int to_test, int from_test) {
  Node n;
  if (n.open() != 0) return 2;
  fi_addr_t test = FI_ADDR_NOTAVAIL;
  if (int r = greet_test(n.addr, n.av, to_test, from_test, &test)) return r;
  static char buf[64][256];
  for (auto& b : buf)
    if (fi_recv(n.ep, b, sizeof(b), nullptr, FI_ADDR_UNSPEC, b)) return 6;
  const auto until = Clock::now() + 120s;  // killed long before
  while (Clock::now() < until) {
    fi_cq_msg_entry e[16];
    ssize_t got = fi_cq_read(n.cq, e, 16);
    if (got == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      fi_cq_readerr(n.cq, &err, 0);
      continue;
    }
    for (ssize_t i = 0; i < got; ++i) {
      if (!(e[i].flags & FI_RECV)) continue;
      char* b = static_cast<char*>(e[i].op_context);
      while (fi_inject(n.ep, b, e[i].len, test) == -FI_EAGAIN) fi_cq_read(n.cq, nullptr, 0);
      if (fi_recv(n.ep, b, 256, nullptr, FI_ADDR_UNSPEC, b)) return 7;
    }
  }
  return 0;
}

// ---- the test side ----

class PeerLoss : public ::testing::Test {
 protected:
  // Starts a peer (this binary with --peer, the memif server) and exchanges addresses; opens our
  // endpoint first time round. Returns the peer's fi_addr (FI_ADDR_NOTAVAIL on failure).
  fi_addr_t start_peer(pid_t* pid) {
    int to_test[2], from_test[2];
    EXPECT_EQ(pipe(to_test), 0);
    EXPECT_EQ(pipe(from_test), 0);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[n > 0 ? n : 0] = '\0';
    const std::string out = std::to_string(to_test[1]), in = std::to_string(from_test[0]);
    if (serve_ && !node_.ep) {
      EXPECT_EQ(node_.open(), 0);  // the memif server, before its client
    }
    *pid = fork();
    if (*pid == 0) {
      setenv("FI_DPDK_PORTS", peer_spec_.c_str(), 1);
      setenv("FI_DPDK_IPV4", "10.66.0.1/24", 1);
      execl(self, self, "--peer", out.c_str(), in.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(to_test[1]);
    close(from_test[0]);
    if (!node_.ep) {
      // This process is the memif client: its port starts once the peer's socket exists.
      const auto until = Clock::now() + 30s;
      while (access(sock_.c_str(), F_OK) != 0 && Clock::now() < until)
        std::this_thread::sleep_for(20ms);
      EXPECT_EQ(node_.open(), 0);
    }
    uint8_t peer_addr[kAddrLen];
    fi_addr_t fa = FI_ADDR_NOTAVAIL;
    if (read_all(to_test[0], peer_addr, kAddrLen)) {
      EXPECT_EQ(write(from_test[1], node_.addr, kAddrLen), static_cast<ssize_t>(kAddrLen));
      EXPECT_EQ(fi_av_insert(node_.av, peer_addr, 1, &fa, 0, nullptr), 1);
    } else {
      ADD_FAILURE() << "the peer did not start";
    }
    close(to_test[0]);
    close(from_test[1]);
    return fa;
  }

  void SetUp() override {
    const std::string sock = "/tmp/dpfab-peer-loss-" + std::to_string(getpid()) + ".sock";
    unlink(sock.c_str());
    const std::string server = "net_memif0,role=server,socket-abstract=no,socket=" + sock;
    const std::string client = "net_memif0,role=client,socket-abstract=no,socket=" + sock;
    peer_spec_ = serve_ ? client : server;
    setenv("FI_DPDK_PORTS", (serve_ ? server : client).c_str(), 1);
    setenv("FI_DPDK_IPV4", "10.66.0.2/24", 1);
    sock_ = sock;
  }
  void TearDown() override {
    for (pid_t p : {peer_a_, peer_b_})
      if (p > 0) {
        kill(p, SIGKILL);
        waitpid(p, nullptr, 0);
      }
    unlink(sock_.c_str());
  }

  // One round trip: sends `seq` and waits (bounded) for its echo, resending every 100 ms (a
  // datagram sent while the link is down is lost). Returns true when the echo came.
  bool round_trip(fi_addr_t peer, uint32_t seq, std::chrono::milliseconds limit) {
    uint32_t rx = 0;
    if (fi_recv(node_.ep, &rx, sizeof(rx), nullptr, FI_ADDR_UNSPEC, &rx) != 0) return false;
    const auto until = Clock::now() + limit;
    auto next_send = Clock::now();
    bool got = false;
    while (!got && Clock::now() < until) {
      if (Clock::now() >= next_send) {
        ssize_t s = fi_inject(node_.ep, &seq, sizeof(seq), peer);
        if (s != 0 && s != -FI_EAGAIN) return false;
        next_send = Clock::now() + 100ms;
      }
      fi_cq_msg_entry e{};
      ssize_t r = fi_cq_read(node_.cq, &e, 1);
      if (r == 1 && e.op_context == &rx) got = rx == seq;
      if (r == 1 && e.op_context == &rx && !got) {  // a late echo of an earlier resend
        if (fi_recv(node_.ep, &rx, sizeof(rx), nullptr, FI_ADDR_UNSPEC, &rx) != 0) return false;
      }
    }
    if (!got) {  // take the receive back
      fi_cancel(&node_.ep->fid, &rx);
      fi_cq_err_entry err{};
      const auto drain = Clock::now() + 1s;
      while (Clock::now() < drain && fi_cq_readerr(node_.cq, &err, 0) != 1) {
        fi_cq_msg_entry e{};
        fi_cq_read(node_.cq, &e, 1);
      }
    }
    return got;
  }

  Node node_;
  bool serve_ = false;  // this process is the memif server (the peer its client)
  std::string peer_spec_, sock_;
  pid_t peer_a_ = -1, peer_b_ = -1;
};

class PeerLossServing : public PeerLoss {
 protected:
  void SetUp() override {
    serve_ = true;
    PeerLoss::SetUp();
  }
};

// CPU seconds of this process (all threads).
double process_cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

TEST_F(PeerLoss, SendsToADeadPeerCompleteAndANewPeerIsReachedAgain) {
  StderrCapture log;
  const fi_addr_t peer_a_addr = start_peer(&peer_a_);
  ASSERT_NE(peer_a_addr, FI_ADDR_NOTAVAIL);

  // 1. Round trips work.
  for (uint32_t i = 1; i <= 100; ++i) ASSERT_TRUE(round_trip(peer_a_addr, i, 5s)) << i;

  // 2. The peer dies.
  ASSERT_EQ(kill(peer_a_, SIGKILL), 0);
  ASSERT_EQ(waitpid(peer_a_, nullptr, 0), peer_a_);
  peer_a_ = -1;
  std::this_thread::sleep_for(200ms);
  constexpr int kSends = 1000;
  static uint32_t payload[kSends];
  int posted = 0, completed = 0, errors = 0;
  const auto until = Clock::now() + 10s;
  while ((posted < kSends || completed + errors < kSends) && Clock::now() < until) {
    if (posted < kSends) {
      ssize_t s = fi_send(node_.ep, &payload[posted], sizeof(uint32_t), nullptr, peer_a_addr,
                          &payload[posted]);
      if (s == 0)
        ++posted;
      else
        ASSERT_EQ(s, -FI_EAGAIN) << "a send to a dead peer fails with " << fi_strerror(-s);
    }
    fi_cq_msg_entry e[64];
    ssize_t r = fi_cq_read(node_.cq, e, 64);
    if (r > 0) completed += static_cast<int>(r);
    if (r == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      ASSERT_EQ(fi_cq_readerr(node_.cq, &err, 0), 1);
      ++errors;
    }
  }
  EXPECT_EQ(posted, kSends) << "sends to a dead peer stalled";
  EXPECT_EQ(completed + errors, kSends) << "send completions missing after 10 s";
  EXPECT_EQ(errors, 0) << "a datagram to a dead peer is lost, not an error";
  // A receive waits out its bound and returns; nothing arrives from nowhere.
  uint32_t rx = 0;
  ASSERT_EQ(fi_recv(node_.ep, &rx, sizeof(rx), nullptr, FI_ADDR_UNSPEC, &rx), 0);
  fi_cq_msg_entry e{};
  const auto t0 = Clock::now();
  EXPECT_EQ(fi_cq_sread(node_.cq, &e, 1, nullptr, 300), -FI_EAGAIN);
  EXPECT_LT(Clock::now() - t0, 2s);
  ASSERT_EQ(fi_cancel(&node_.ep->fid, &rx), 0);
  fi_cq_err_entry err{};
  const auto drain = Clock::now() + 2s;
  ssize_t got = 0;
  while (Clock::now() < drain && (got = fi_cq_readerr(node_.cq, &err, 0)) != 1)
    fi_cq_read(node_.cq, &e, 1);
  ASSERT_EQ(got, 1);
  EXPECT_EQ(err.err, FI_ECANCELED);

  // 3. A new peer on the same socket: the link comes back and round trips work again.
  const fi_addr_t b = start_peer(&peer_b_);
  ASSERT_NE(b, FI_ADDR_NOTAVAIL);
  ASSERT_TRUE(round_trip(b, 1001, 20s)) << "no echo from the new peer within 20 s";
  for (uint32_t i = 1002; i <= 1100; ++i) ASSERT_TRUE(round_trip(b, i, 5s)) << i;
  EXPECT_EQ(log.text().find("not ready port"), std::string::npos)
      << "a burst was called on the stopped port";
}

TEST_F(PeerLossServing, AServerWhoseClientDiedStaysIdle) {
  const fi_addr_t a = start_peer(&peer_a_);
  ASSERT_NE(a, FI_ADDR_NOTAVAIL);
  for (uint32_t i = 1; i <= 100; ++i) ASSERT_TRUE(round_trip(a, i, 5s)) << i;
  // Both ends are dpfab: the kick channel comes up (the client connects to our listener).
  const std::string tel = "/var/run/dpdk/dpfab-" + std::to_string(getpid()) + "/dpdk_telemetry.v2";
  std::string stats;
  for (auto until = Clock::now() + 5s; Clock::now() < until; std::this_thread::sleep_for(20ms)) {
    stats = telemetry_query(tel, "/dpfab/stats");
    if (stats.find("\"port0_memif_kick\":\"in use\"") != std::string::npos) break;
  }
  EXPECT_NE(stats.find("\"port0_memif_kick\":\"in use\""), std::string::npos) << stats;

  // The client dies: the memif link and the kick connection end. Nobody here waits on anything,
  // so the process must be idle: no thread spinning on the lost connection.
  ASSERT_EQ(kill(peer_a_, SIGKILL), 0);
  ASSERT_EQ(waitpid(peer_a_, nullptr, 0), peer_a_);
  peer_a_ = -1;
  std::this_thread::sleep_for(500ms);
  const double cpu0 = process_cpu_s();
  std::this_thread::sleep_for(1s);
  const double used = process_cpu_s() - cpu0;
  EXPECT_LT(used, 0.05) << "the server burnt " << used << " s of CPU in 1 s after its client died";
  stats = telemetry_query(tel, "/dpfab/stats");
  EXPECT_NE(stats.find("\"port0_memif_kick\":\"no dpfab peer yet\""), std::string::npos) << stats;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--peer") == 0)
    return peer_main(std::atoi(argv[2]), std::atoi(argv[3]));
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
