// SPDX-License-Identifier: BSD-3-Clause
//
// Loss of the peer, FI_EP_RDM (fi_dpdk(7), Endpoint types), through the libfabric core over one
// net_memif link between this process (memif client) and a peer (memif server with a fixed MAC,
// this binary re-executed with --rdm-peer; the same IPv4 and UDP port every time: a peer started
// again has the same address):
//
// RdmPeerLoss.KilledPeer (FI_DPDK_RDM_PEER_TIMEOUT_MS=1000, FI_DPDK_RDM_MAX_RETRIES=3):
//   1. round trips work, data intact;
//   2. work toward the peer is outstanding: rendezvous sends it has receives for (data flowing),
//      rendezvous sends it has none for (waiting for its grant), eager sends, a receive bound to
//      a 4 MiB message it is sending us, and receives nothing matches; the peer is SIGKILLed
//      once the eager sends are acked (the rendezvous data is flowing), and more sends follow;
//   3. every send completes, successfully (done before the kill) or with FI_EHOSTUNREACH, within
//      the documented bound max(timeout, (retries + 1) x 200 ms) + 200 ms (+ slack); the bound
//      receive completes (or fails with FI_EHOSTUNREACH); the others stay posted and fi_cancel
//      completes them with FI_ECANCELED; a later send fails at once;
//   4. a new peer process at the same address: its first packet is recognised as a restart, new
//      sends and receives work with data intact, and open fds and mbufs in use are back to what
//      they were before the kill.
// RdmPeerLoss.QuickRestart (the default 10 s timeout): the peer is killed and a new one starts
// at once while sends are outstanding: they fail at the new instance's first packet, long before
// the timeout, and the new instance is reachable.
// Every wait is bounded.
#include <dirent.h>
#include <gtest/gtest.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "fixture.h"
#include "process.h"

using namespace dpfab::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kAddrLen = 16;
constexpr size_t kEchoMax = 64 * 1024;    // the peer echoes untagged messages up to this size
constexpr size_t kBig = 4 * 1024 * 1024;  // rendezvous messages
constexpr uint64_t kTagBig = 1;           // the peer keeps receives posted for these
constexpr uint64_t kTagNoRecv = 2;        // the peer never receives these
constexpr uint64_t kTagSmall = 3;         // nor these (they wait in its unexpected queue)
constexpr uint64_t kTagFromPeer = 4;      // the peer's 4 MiB message to us
constexpr uint64_t kTagNever = 5;         // nobody sends this
constexpr char kSendBig[] = "SEND-BIG";   // asks the peer for its 4 MiB message
constexpr char kHello[] = "HELLO";        // a peer's first message
constexpr const char* kPeerMac = "02:66:00:00:00:01";

uint8_t pattern(size_t i, uint32_t seed) { return static_cast<uint8_t>((i * 131 + seed) >> 3); }
void fill(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i) p[i] = pattern(i, seed);
}
bool check(const uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != pattern(i, seed)) return false;
  return true;
}

// One RDM endpoint (FI_MSG | FI_TAGGED) with its CQ and AV, through libfabric (fixture.h).
struct RdmNode : EpNode {
  int open() { return EpNode::open(FI_EP_RDM, FI_MSG | FI_TAGGED, FI_CQ_FORMAT_TAGGED); }
};

// ---- the peer (a process of its own) ----
// Sends kHello first (its first packet tells the test's endpoint that this is a new instance),
// echoes every untagged message (kSendBig instead: sends a 4 MiB kTagFromPeer message), keeps
// receives for kTagBig posted, and never receives kTagSmall or kTagNoRecv.

int rdm_peer_main(int to_test, int from_test) {
  RdmNode n;
  if (n.open() != 0) return 2;
  fi_addr_t test = FI_ADDR_NOTAVAIL;
  if (int r = greet_test(n.addr, n.av, to_test, from_test, &test)) return r;

  auto progress = [&] { fi_cq_read(n.cq, nullptr, 0); };
  auto send_retry = [&](auto&& post) {
    const auto until = Clock::now() + 10s;
    ssize_t r;
    while ((r = post()) == -FI_EAGAIN && Clock::now() < until) progress();
    return r;
  };
  static char hello[sizeof(kHello)];
  std::memcpy(hello, kHello, sizeof(kHello));
  if (send_retry([&] { return fi_send(n.ep, hello, sizeof(hello), nullptr, test, hello); }))
    return 6;

  struct Echo {
    uint8_t buf[kEchoMax];
    int sending = 0;  // the echo (or the big message) of this slot is in flight
  };
  static Echo echo[8];
  static uint8_t big_rx[4][kBig];
  static uint8_t big_tx[kBig];
  fill(big_tx, kBig, 77);
  for (auto& e : echo)
    if (fi_recv(n.ep, e.buf, kEchoMax, nullptr, FI_ADDR_UNSPEC, &e)) return 7;
  for (auto& b : big_rx)
    if (fi_trecv(n.ep, b, kBig, nullptr, FI_ADDR_UNSPEC, kTagBig, 0, b)) return 8;

  const auto until = Clock::now() + 120s;  // killed long before
  while (Clock::now() < until) {
    fi_cq_tagged_entry c[16];
    ssize_t got = fi_cq_read(n.cq, c, 16);
    if (got == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      fi_cq_readerr(n.cq, &err, 0);
      continue;
    }
    for (ssize_t i = 0; i < got; ++i) {
      void* ctx = c[i].op_context;
      if (c[i].flags & FI_SEND) {
        for (auto& e : echo)  // the slot's echo left: receive into it again
          if (ctx == &e && fi_recv(n.ep, e.buf, kEchoMax, nullptr, FI_ADDR_UNSPEC, &e)) return 9;
        continue;
      }
      if (c[i].flags & FI_TAGGED) {  // a kTagBig message: receive the next one
        if (fi_trecv(n.ep, ctx, kBig, nullptr, FI_ADDR_UNSPEC, kTagBig, 0, ctx)) return 10;
        continue;
      }
      auto* e = static_cast<Echo*>(ctx);
      if (c[i].len == sizeof(kSendBig) && std::memcmp(e->buf, kSendBig, sizeof(kSendBig)) == 0) {
        if (send_retry(
                [&] { return fi_tsend(n.ep, big_tx, kBig, nullptr, test, kTagFromPeer, e); }))
          return 11;
      } else if (send_retry([&] { return fi_send(n.ep, e->buf, c[i].len, nullptr, test, e); })) {
        return 12;
      }
    }
  }
  return 0;
}

// ---- the test side ----

// Open file descriptors of this process: what each is (readlink of /proc/self/fd/N), sorted.
std::vector<std::string> open_fds() {
  std::vector<std::string> fds;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      char target[512] = {};
      const std::string path = std::string("/proc/self/fd/") + e->d_name;
      if (readlink(path.c_str(), target, sizeof(target) - 1) < 0) continue;  // the DIR's own fd
      fds.push_back(std::string(e->d_name) + " " + target);
    }
    closedir(d);
  }
  std::sort(fds.begin(), fds.end());
  return fds;
}
std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

// A number from a telemetry JSON answer ("key":123), or -1.
long long json_number(const std::string& json, const std::string& key) {
  const auto at = json.find("\"" + key + "\":");
  if (at == std::string::npos) return -1;
  return std::atoll(json.c_str() + at + key.size() + 3);
}

// One completion (or error completion) as the test saw it.
struct Done {
  bool error = false;
  int err = 0;
  uint64_t flags = 0;
  size_t len = 0;
  Clock::time_point at;
};

class RdmPeerLoss : public ::testing::Test {
 protected:
  void SetUp() override {
    sock_ = "/tmp/dpfab-rdm-peer-loss-" + std::to_string(getpid()) + ".sock";
    unlink(sock_.c_str());
    peer_spec_ = "net_memif0,role=server,socket-abstract=no,mac=" + std::string(kPeerMac) +
                 ",socket=" + sock_;
    setenv("FI_DPDK_PORTS", ("net_memif0,role=client,socket-abstract=no,socket=" + sock_).c_str(),
           1);
    setenv("FI_DPDK_IPV4", "10.67.0.2/24", 1);
    tel_ = "/var/run/dpdk/dpfab-" + std::to_string(getpid()) + "/dpdk_telemetry.v2";
  }
  void TearDown() override {
    if (peer_ > 0) {
      kill(peer_, SIGKILL);
      waitpid(peer_, nullptr, 0);
    }
    unlink(sock_.c_str());
  }

  // Starts a peer (the memif server) and exchanges addresses; opens our endpoint first time
  // round and inserts the peer's address (later peers must have the same one: it stays).
  bool start_peer() {
    int to_test[2], from_test[2];
    if (pipe(to_test) != 0 || pipe(from_test) != 0) return false;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[n > 0 ? n : 0] = '\0';
    const std::string out = std::to_string(to_test[1]), in = std::to_string(from_test[0]);
    peer_ = fork();
    if (peer_ == 0) {
      setenv("FI_DPDK_PORTS", peer_spec_.c_str(), 1);
      setenv("FI_DPDK_IPV4", "10.67.0.1/24", 1);
      execl(self, self, "--rdm-peer", out.c_str(), in.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(to_test[1]);
    close(from_test[0]);
    bool ok = true;
    if (!node_.ep) {
      // This process is the memif client: its port starts once the peer's socket exists.
      const auto until = Clock::now() + 30s;
      while (access(sock_.c_str(), F_OK) != 0 && Clock::now() < until)
        std::this_thread::sleep_for(20ms);
      EXPECT_EQ(node_.open(), 0);
      ok = node_.ep != nullptr;
    }
    uint8_t peer_addr[kAddrLen];
    if (ok && read_all(to_test[0], peer_addr, kAddrLen)) {
      EXPECT_EQ(write(from_test[1], node_.addr, kAddrLen), static_cast<ssize_t>(kAddrLen));
      if (peer_addr_ == FI_ADDR_NOTAVAIL) {
        std::memcpy(first_addr_, peer_addr, kAddrLen);
        EXPECT_EQ(fi_av_insert(node_.av, peer_addr, 1, &peer_addr_, 0, nullptr), 1);
      } else {
        EXPECT_EQ(std::memcmp(peer_addr, first_addr_, kAddrLen), 0)
            << "a new peer process did not get the same address";
      }
    } else {
      ADD_FAILURE() << "the peer did not start";
      ok = false;
    }
    close(to_test[0]);
    close(from_test[1]);
    return ok;
  }

  void kill_peer() {
    ASSERT_EQ(kill(peer_, SIGKILL), 0);
    ASSERT_EQ(waitpid(peer_, nullptr, 0), peer_);
    peer_ = -1;
  }

  // Reads the CQ once (entries and at most one error) into done_ by context.
  void poll_cq() {
    fi_cq_tagged_entry c[32];
    ssize_t r = fi_cq_read(node_.cq, c, 32);
    for (ssize_t i = 0; i < r; ++i)
      done_[c[i].op_context] = {false, 0, c[i].flags, c[i].len, Clock::now()};
    if (r == -FI_EAVAIL) {
      fi_cq_err_entry e{};
      if (fi_cq_readerr(node_.cq, &e, 0) == 1)
        done_[e.op_context] = {true, e.err, e.flags, e.len, Clock::now()};
    }
  }
  // Polls until every context in `ctxs` completed or `limit` passed. True when all did.
  bool wait_for(const std::vector<void*>& ctxs, std::chrono::milliseconds limit) {
    const auto until = Clock::now() + limit;
    for (;;) {
      bool all = true;
      for (void* c : ctxs) all &= done_.count(c) != 0;
      if (all) return true;
      if (Clock::now() >= until) return false;
      poll_cq();
    }
  }
  // Posts a send, retrying -FI_EAGAIN (bounded). The call's return value.
  template <typename F>
  ssize_t post(F&& f) {
    const auto until = Clock::now() + 5s;
    ssize_t r;
    while ((r = f()) == -FI_EAGAIN && Clock::now() < until) poll_cq();
    return r;
  }

  // Waits for the peer's kHello (its first message), in an untagged receive.
  bool hello() {
    static char buf[kEchoMax];
    done_.erase(buf);
    EXPECT_EQ(fi_recv(node_.ep, buf, sizeof(buf), nullptr, FI_ADDR_UNSPEC, buf), 0);
    if (!wait_for({buf}, 30s)) return false;
    return !done_[buf].error && std::strcmp(buf, kHello) == 0;
  }

  // One echo round trip of `len` bytes (<= kEchoMax), data checked.
  bool round_trip(size_t len, uint32_t seed) {
    static uint8_t tx[kEchoMax], rx[kEchoMax];
    fill(tx, len, seed);
    std::memset(rx, 0, len);
    done_.erase(tx);
    done_.erase(rx);
    if (fi_recv(node_.ep, rx, sizeof(rx), nullptr, FI_ADDR_UNSPEC, rx) != 0) return false;
    if (post([&] { return fi_send(node_.ep, tx, len, nullptr, peer_addr_, tx); }) != 0)
      return false;
    if (!wait_for({tx, rx}, 10s)) return false;
    return !done_[tx].error && !done_[rx].error && done_[rx].len == len && check(rx, len, seed);
  }

  // A 4 MiB message each way through the rendezvous, data checked.
  bool big_both_ways(uint32_t seed) {
    static uint8_t tx[kBig], rx[kBig];
    static char cmd[sizeof(kSendBig)];
    std::memcpy(cmd, kSendBig, sizeof(kSendBig));
    fill(tx, kBig, seed);
    std::memset(rx, 0, kBig);
    for (void* c : {static_cast<void*>(tx), static_cast<void*>(rx), static_cast<void*>(cmd)})
      done_.erase(c);
    if (fi_trecv(node_.ep, rx, kBig, nullptr, FI_ADDR_UNSPEC, kTagFromPeer, 0, rx) != 0)
      return false;
    if (post([&] { return fi_tsend(node_.ep, tx, kBig, nullptr, peer_addr_, kTagBig, tx); }))
      return false;
    if (post([&] { return fi_send(node_.ep, cmd, sizeof(cmd), nullptr, peer_addr_, cmd); }))
      return false;
    if (!wait_for({tx, rx, cmd}, 20s)) return false;
    return !done_[tx].error && !done_[rx].error && !done_[cmd].error && done_[rx].len == kBig &&
           check(rx, kBig, 77);
  }

  // Mbufs of our port's pool in use (telemetry /dpfab/stats), or -1.
  long long mbufs_in_use() {
    return json_number(telemetry_query(tel_, "/dpfab/stats"), "port0_mbufs_in_use");
  }

  // Outstanding work toward the peer (step 2 of the file comment); returns the send contexts.
  struct Outstanding {
    std::vector<void*> sends;      // all of them
    std::vector<void*> must_fail;  // sends that cannot succeed
    void* bound_rx = nullptr;      // the receive of the peer's 4 MiB message
    std::vector<void*> unmatched;  // receives nothing will match
    void* kill_after = nullptr;    // the last eager send: once it is acked, the rest is flowing
  };
  Outstanding start_outstanding() {
    Outstanding o;
    // small: above FI_DPDK_RDM_COPY_MAX (4096), so they complete when acknowledged (a copied
    // send completes at once, and its peer's death can no longer be reported).
    static uint8_t big[4][kBig], norecv[2][2 * 1024 * 1024], small[16][8192];
    static uint8_t from_peer[kBig], never[4096], untagged[kEchoMax];
    static char cmd[sizeof(kSendBig)];
    std::memcpy(cmd, kSendBig, sizeof(kSendBig));
    EXPECT_EQ(
        fi_trecv(node_.ep, from_peer, kBig, nullptr, FI_ADDR_UNSPEC, kTagFromPeer, 0, from_peer),
        0);
    o.bound_rx = from_peer;
    EXPECT_EQ(
        fi_trecv(node_.ep, never, sizeof(never), nullptr, FI_ADDR_UNSPEC, kTagNever, 0, never), 0);
    EXPECT_EQ(fi_recv(node_.ep, untagged, sizeof(untagged), nullptr, peer_addr_, untagged), 0);
    o.unmatched = {never, untagged};
    EXPECT_EQ(post([&] { return fi_send(node_.ep, cmd, sizeof(cmd), nullptr, peer_addr_, cmd); }),
              0);
    o.sends.push_back(cmd);
    for (auto& b : big) {
      fill(b, kBig, 5);
      EXPECT_EQ(post([&] { return fi_tsend(node_.ep, b, kBig, nullptr, peer_addr_, kTagBig, b); }),
                0);
      o.sends.push_back(b);
    }
    for (auto& b : norecv) {
      EXPECT_EQ(post([&] {
                  return fi_tsend(node_.ep, b, sizeof(b), nullptr, peer_addr_, kTagNoRecv, b);
                }),
                0);
      o.sends.push_back(b);
      o.must_fail.push_back(b);
    }
    for (auto& b : small) {
      EXPECT_EQ(
          post([&] { return fi_tsend(node_.ep, b, sizeof(b), nullptr, peer_addr_, kTagSmall, b); }),
          0);
      o.sends.push_back(b);
    }
    o.kill_after = o.sends.back();
    return o;
  }
  // Sends posted after the peer died: they cannot succeed.
  void more_sends(Outstanding& o) {
    static uint8_t small[8][8192], rdv[1024 * 1024];  // small: above the copy limit (above)
    for (auto& b : small) {
      ssize_t r =
          post([&] { return fi_tsend(node_.ep, b, sizeof(b), nullptr, peer_addr_, kTagSmall, b); });
      EXPECT_EQ(r, 0) << fi_strerror(static_cast<int>(-r));
      o.sends.push_back(b);
      o.must_fail.push_back(b);
    }
    ssize_t r = post(
        [&] { return fi_tsend(node_.ep, rdv, sizeof(rdv), nullptr, peer_addr_, kTagBig, rdv); });
    EXPECT_EQ(r, 0) << fi_strerror(static_cast<int>(-r));
    o.sends.push_back(rdv);
    o.must_fail.push_back(rdv);
  }
  // Checks how the outstanding work ended (step 3); returns the time of the last error.
  Clock::time_point check_outstanding(const Outstanding& o, Clock::time_point killed) {
    Clock::time_point last = killed;
    int ok = 0, failed = 0;
    for (void* c : o.sends) {
      const Done& d = done_[c];
      if (d.error) {
        EXPECT_EQ(d.err, FI_EHOSTUNREACH) << fi_strerror(d.err);
        EXPECT_TRUE(d.flags & FI_SEND);
        ++failed;
        last = std::max(last, d.at);
      } else {
        ++ok;  // acknowledged before the kill (perhaps read from the CQ after it)
      }
    }
    for (void* c : o.must_fail) EXPECT_TRUE(done_[c].error) << "a send to a dead peer succeeded";
    int big_failed = 0;
    for (size_t i = 1; i <= 4; ++i) big_failed += done_[o.sends[i]].error;
    wait_for({o.bound_rx}, 1s);  // its completion, if any, was written after the sends'
    if (done_.count(o.bound_rx)) {
      const Done& d = done_[o.bound_rx];
      if (d.error) {
        EXPECT_EQ(d.err, FI_EHOSTUNREACH) << fi_strerror(d.err);
        last = std::max(last, d.at);
      } else {
        EXPECT_EQ(d.len, kBig);
        EXPECT_TRUE(check(static_cast<const uint8_t*>(o.bound_rx), kBig, 77));
      }
      std::printf("the receive of the peer's 4 MiB message: %s\n",
                  d.error ? "FI_EHOSTUNREACH" : "completed before the kill");
    } else {  // its RTS never came: still posted
      EXPECT_EQ(fi_cancel(&node_.ep->fid, o.bound_rx), 0);
    }
    std::printf(
        "sends: %d completed before the kill, %d failed with FI_EHOSTUNREACH (of the "
        "4 MiB ones to receives: %d failed)\n",
        ok, failed, big_failed);
    EXPECT_GE(failed, static_cast<int>(o.must_fail.size()));
    return last;
  }
  // Receives nothing matched are still posted: fi_cancel completes them with FI_ECANCELED.
  void cancel_unmatched(const Outstanding& o) {
    for (void* c : o.unmatched) {
      EXPECT_EQ(done_.count(c), 0u) << "a receive nothing matched completed";
      EXPECT_EQ(fi_cancel(&node_.ep->fid, c), 0);
    }
    ASSERT_TRUE(wait_for(o.unmatched, 2s));
    for (void* c : o.unmatched) {
      EXPECT_TRUE(done_[c].error);
      EXPECT_EQ(done_[c].err, FI_ECANCELED);
    }
  }

  RdmNode node_;
  std::string peer_spec_, sock_, tel_;
  pid_t peer_ = -1;
  fi_addr_t peer_addr_ = FI_ADDR_NOTAVAIL;
  uint8_t first_addr_[kAddrLen] = {};
  std::map<void*, Done> done_;
};

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

TEST_F(RdmPeerLoss, KilledPeer) {
  // meson sets these; the bound the man page gives for them.
  const char* t = std::getenv("FI_DPDK_RDM_PEER_TIMEOUT_MS");
  const char* r = std::getenv("FI_DPDK_RDM_MAX_RETRIES");
  ASSERT_TRUE(t && r) << "run with FI_DPDK_RDM_PEER_TIMEOUT_MS and FI_DPDK_RDM_MAX_RETRIES";
  const auto bound =
      std::chrono::milliseconds(std::max<long>(std::atol(t), (std::atol(r) + 1) * 200) + 200);

  ASSERT_TRUE(start_peer());
  ASSERT_TRUE(hello());
  // 1. Round trips, data intact.
  for (uint32_t i = 0; i < 40; ++i) ASSERT_TRUE(round_trip(size_t{1} << (i % 17), i)) << i;
  ASSERT_TRUE(big_both_ways(1));
  const auto fds = open_fds();
  const long long mbufs = mbufs_in_use();
  ASSERT_GE(mbufs, 0) << "no port0_mbufs_in_use in /dpfab/stats";

  // 2. Outstanding work; the peer dies mid-transfer.
  Outstanding o = start_outstanding();
  ASSERT_TRUE(wait_for({o.kill_after}, 10s)) << "the eager sends did not complete";
  const auto killed = Clock::now();
  kill_peer();
  more_sends(o);

  // 3. Every send completes within the bound; receives behave as documented.
  ASSERT_TRUE(wait_for(o.sends, bound + 5s)) << "sends still outstanding long after the bound";
  const auto last = check_outstanding(o, killed);
  std::printf("kill -> last error completion: %.0f ms (bound %lld ms + slack)\n", ms(last - killed),
              static_cast<long long>(bound.count()));
  EXPECT_LT(last - killed, bound + 1s);
  cancel_unmatched(o);
  static char late[64];
  EXPECT_EQ(fi_send(node_.ep, late, sizeof(late), nullptr, peer_addr_, late), -FI_EHOSTUNREACH);

  // 4. A new peer at the same address is reachable; nothing leaked.
  ASSERT_TRUE(start_peer());
  ASSERT_TRUE(hello()) << "no first message from the new peer";
  for (uint32_t i = 0; i < 40; ++i) ASSERT_TRUE(round_trip(size_t{1} << (i % 17), 100 + i)) << i;
  ASSERT_TRUE(big_both_ways(2));
  // The memif link and its kick channel (a socket and an eventfd) come back in their own time:
  // fewer fds for a while is not a leak, more is.
  auto fds_after = open_fds();
  for (auto u = Clock::now() + 3s; fds_after.size() != fds.size() && Clock::now() < u;
       fds_after = open_fds())
    poll_cq();
  EXPECT_LE(fds_after.size(), fds.size()) << "open file descriptors before:\n"
                                          << join(fds) << "after:\n"
                                          << join(fds_after);
  std::printf("open fds: %zu before the kill, %zu after\n", fds.size(), fds_after.size());
  long long now = mbufs_in_use();
  for (auto u = Clock::now() + 2s; now != mbufs && Clock::now() < u; now = mbufs_in_use())
    poll_cq();
  EXPECT_EQ(now, mbufs) << "mbufs in use";
  std::printf("mbufs in use: %lld before the kill, %lld after\n", mbufs, now);
}

TEST_F(RdmPeerLoss, QuickRestart) {
  ASSERT_TRUE(start_peer());
  ASSERT_TRUE(hello());
  for (uint32_t i = 0; i < 20; ++i) ASSERT_TRUE(round_trip(size_t{1} << (i % 17), i)) << i;
  ASSERT_TRUE(big_both_ways(1));

  Outstanding o = start_outstanding();
  ASSERT_TRUE(wait_for({o.kill_after}, 10s)) << "the eager sends did not complete";
  const auto killed = Clock::now();
  kill_peer();
  more_sends(o);
  // The receives nothing matched are still posted (cancelled now: the new instance's first
  // message would match the untagged one).
  cancel_unmatched(o);
  // A new instance at once, well within the 10 s timeout: its first packet fails what the old
  // one left outstanding.
  ASSERT_TRUE(start_peer());
  ASSERT_TRUE(hello()) << "no first message from the new peer";
  const auto greeted = Clock::now();
  ASSERT_TRUE(wait_for(o.sends, 2s)) << "sends outstanding after the new instance spoke";
  const auto last = check_outstanding(o, killed);
  std::printf("kill -> new instance's first message: %.0f ms, -> last error completion: %.0f ms\n",
              ms(greeted - killed), ms(last - killed));
  EXPECT_LT(last - killed, 8s) << "the errors came from the timeout, not from the restart";
  for (uint32_t i = 0; i < 20; ++i) ASSERT_TRUE(round_trip(size_t{1} << (i % 17), 100 + i)) << i;
  ASSERT_TRUE(big_both_ways(2));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--rdm-peer") == 0)
    return rdm_peer_main(std::atoi(argv[2]), std::atoi(argv[3]));
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
