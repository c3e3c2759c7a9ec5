// SPDX-License-Identifier: BSD-3-Clause
//
// Soak of the native FI_EP_RDM under injected faults, through the libfabric core: two processes
// (fork) joined by one net_memif link, each with the port layer's fault injection on what it
// receives (FI_DPDK_FAULT_*: by default 10 % loss, 10 % reordering, 10 % duplication and 0.1 %
// corruption), so that data, acks and rendezvous grants are faulted in both directions.
//
// The client sends DPFAB_SOAK_MESSAGES messages (default 100,000) of
// mixed sizes up to 4 MiB: mostly small and medium (eager), some large (rendezvous), every
// 1000th exactly 4 MiB. Each message's bytes are a function of its index. The server posts
// FI_MSG receives in order and checks that the k-th receive got message k, whole and intact:
// a lost message, a duplicate or a reordering would put another message (another length, other
// bytes) there, or leave a receive waiting until the bound.
// After the last message the server answers once, so the client's sends have all completed
// without error before either side closes. Both print their throughput.
//
//   DPFAB_SOAK_MESSAGES=100000 DPFAB_SOAK_FAULTS=0.1 build/test/integration/rdm/stress-rdm-soak
//
// DPFAB_SOAK_FAULTS sets loss, reordering and duplication (corruption is a hundredth of it);
// 0 measures the same workload on a clean link.
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fixture.h"
#include "process.h"

using namespace dpfab::test;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kMaxSize = size_t{4} << 20;
constexpr size_t kSlots = 16;  // sends in flight / receives posted
constexpr auto kBound = std::chrono::seconds(600);

uint64_t env_u64(const char* name, uint64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : dflt;
}

uint64_t mix(uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The size of message i: 60 % under 1 KiB, 30 % up to 16 KiB, 9.5 % up to 256 KiB, 0.5 % up to
// 4 MiB, and every 1000th exactly 4 MiB.
size_t size_of(uint64_t i) {
  if (i % 1000 == 999) return kMaxSize;
  const uint64_t r = mix(i * 0x9e3779b97f4a7c15ull + 1);
  const uint64_t pick = r % 1000, v = r >> 20;
  if (pick < 600) return v % 1024;
  if (pick < 900) return 1024 + v % (15 * 1024);
  if (pick < 995) return 16384 + v % (240 * 1024);
  return (256 << 10) + v % (kMaxSize - (256 << 10));
}

// Message i's bytes: 8-byte words of a function of (i, word index); a short tail takes the low
// bytes of the next word.
void fill(uint64_t i, uint8_t* p, size_t len) {
  const uint64_t base = mix(i + 1);
  size_t w = 0;
  for (; (w + 1) * 8 <= len; ++w) {
    const uint64_t x = base ^ (w * 0x9e3779b97f4a7c15ull);
    std::memcpy(p + w * 8, &x, 8);
  }
  const uint64_t x = base ^ (w * 0x9e3779b97f4a7c15ull);
  std::memcpy(p + w * 8, &x, len - w * 8);
}

bool intact(uint64_t i, const uint8_t* p, size_t len, std::vector<uint8_t>& scratch) {
  scratch.resize(len);
  fill(i, scratch.data(), len);
  return std::memcmp(p, scratch.data(), len) == 0;
}

struct Result {
  int64_t status = 0;   // 0 = ok, else the failed step
  uint64_t detail = 0;  // the message at which it failed
  uint64_t err = 0;     // the error entry's err, when it was one
  uint64_t bytes = 0;
  double seconds = 0;
};

// One RDM endpoint (EpNode, fixture.h) and its peer.
class Side {
 public:
  int open() {
    if (int r = node_.open(FI_EP_RDM, FI_MSG, FI_CQ_FORMAT_DATA)) return r;
    return node_.info->ep_attr->max_msg_size < kMaxSize ? 3 : 0;
  }

  int meet(int out_fd, int in_fd) {
    return exchange_names(node_.ep, node_.av, out_fd, in_fd, &peer_);
  }

  fid_ep* ep() { return node_.ep; }
  fid_cq* cq() { return node_.cq; }
  fi_addr_t peer() const { return peer_; }

 private:
  EpNode node_;
  fi_addr_t peer_ = FI_ADDR_NOTAVAIL;
};

// One CQ entry, or a failure status: 0 nothing, 1 an entry in *e, < 0 an error entry.
int next(fid_cq* cq, fi_cq_data_entry* e, uint64_t* err) {
  ssize_t n = fi_cq_read(cq, e, 1);
  if (n == 1) return 1;
  if (n == -FI_EAGAIN) return 0;
  fi_cq_err_entry ee{};
  if (n == -FI_EAVAIL && fi_cq_readerr(cq, &ee, 0) == 1) *err = ee.err;
  return -1;
}

// The server: kSlots receives posted in order, each checked and reposted; then one answer.
Result serve(int out_fd, int in_fd, uint64_t messages) {
  Result res;
  uint64_t err = 0;
  Side s;
  if ((res.status = s.open()) != 0 || (res.status = s.meet(out_fd, in_fd)) != 0) return res;
  std::vector<std::vector<uint8_t>> bufs(kSlots, std::vector<uint8_t>(kMaxSize));
  std::vector<uint64_t> slot_msg(kSlots);
  uint64_t posted = 0, received = 0;
  auto post = [&](size_t slot) {
    slot_msg[slot] = posted++;
    return fi_recv(s.ep(), bufs[slot].data(), kMaxSize, nullptr, FI_ADDR_UNSPEC,
                   reinterpret_cast<void*>(slot)) == 0;
  };
  for (size_t k = 0; k < kSlots; ++k)
    if (!post(k)) return {30, k};
  std::vector<uint8_t> scratch;
  const auto end = Clock::now() + kBound;
  Clock::time_point t0{};
  while (received < messages) {
    if (Clock::now() > end) return {31, received};
    fi_cq_data_entry e{};
    const int r = next(s.cq(), &e, &err);
    if (r == 0) continue;
    if (r < 0) return {32, received, err};
    if (!(e.flags & FI_RECV)) continue;
    // Receives match in the order they were posted; they may complete out of it (a rendezvous
    // completes after eager messages sent behind it).
    const size_t slot = reinterpret_cast<size_t>(e.op_context);
    if (slot >= kSlots) return {33, received};
    const uint64_t i = slot_msg[slot];
    if (received == 0) t0 = Clock::now();
    if (e.len != size_of(i)) return {34, i};
    if (!intact(i, bufs[slot].data(), e.len, scratch)) return {35, i};
    res.bytes += e.len;
    ++received;
    if (posted < messages && !post(slot)) return {36, received};
  }
  res.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  // The answer: everything arrived. Then wait for its completion (its ack).
  uint64_t done = messages;
  for (;;) {
    ssize_t rc = fi_send(s.ep(), &done, sizeof(done), nullptr, s.peer(), &done);
    if (rc == 0) break;
    if (rc != -FI_EAGAIN || Clock::now() > end) return {37, 0};
    fi_cq_data_entry e{};
    if (next(s.cq(), &e, &err) < 0) return {38, 0, err};
  }
  for (bool sent = false; !sent;) {
    if (Clock::now() > end) return {39, 0};
    fi_cq_data_entry e{};
    const int r = next(s.cq(), &e, &err);
    if (r < 0) return {40, 0, err};
    sent = r == 1 && e.op_context == &done;
  }
  // Acks may still be lost either way: keep answering retransmissions until the client says its
  // sends all completed (a byte on the pipe).
  for (;;) {
    if (Clock::now() > end) return {41, 0};
    pollfd p{in_fd, POLLIN, 0};
    if (::poll(&p, 1, 0) == 1) break;
    fi_cq_data_entry e{};
    (void)next(s.cq(), &e, &err);
  }
  return res;
}

// The client: messages sent in order, at most kSlots in flight, each from a buffer of its own.
Result send_all(int out_fd, int in_fd, uint64_t messages) {
  Result res;
  uint64_t err = 0;
  Side s;
  if ((res.status = s.open()) != 0 || (res.status = s.meet(out_fd, in_fd)) != 0) return res;
  uint64_t answer = 0;
  if (fi_recv(s.ep(), &answer, sizeof(answer), nullptr, FI_ADDR_UNSPEC, &answer) != 0)
    return {50, 0};
  std::vector<std::vector<uint8_t>> bufs(kSlots, std::vector<uint8_t>(kMaxSize));
  std::vector<size_t> free_slots;
  for (size_t k = 0; k < kSlots; ++k) free_slots.push_back(kSlots - 1 - k);
  uint64_t sent = 0, completed = 0;
  bool answered = false;
  const auto end = Clock::now() + kBound;
  const auto t0 = Clock::now();
  auto reap = [&]() -> int64_t {
    fi_cq_data_entry e{};
    const int r = next(s.cq(), &e, &err);
    if (r < 0) return 51;
    if (r == 0) return 0;
    if (e.flags & FI_RECV) {
      if (e.op_context != &answer || answer != messages) return 52;
      answered = true;
    } else {
      free_slots.push_back(reinterpret_cast<size_t>(e.op_context));
      ++completed;
    }
    return 0;
  };
  while (sent < messages) {
    if (Clock::now() > end) return {53, sent};
    if (free_slots.empty()) {
      if (int64_t r = reap()) return {r, sent, err};
      continue;
    }
    const size_t slot = free_slots.back();
    const size_t len = size_of(sent);
    fill(sent, bufs[slot].data(), len);
    ssize_t rc;
    while ((rc = fi_send(s.ep(), bufs[slot].data(), len, nullptr, s.peer(),
                         reinterpret_cast<void*>(slot))) == -FI_EAGAIN) {
      if (Clock::now() > end) return {54, sent};
      if (int64_t r = reap()) return {r, sent, err};
    }
    if (rc != 0) return {55, sent};
    free_slots.pop_back();
    res.bytes += len;
    ++sent;
  }
  while (completed < messages || !answered) {
    if (Clock::now() > end) return {56, completed};
    if (int64_t r = reap()) return {r, completed, err};
  }
  res.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const char done = 1;
  if (write(out_fd, &done, 1) != 1) return {57, 0};
  // Let the ack of the answer leave before the endpoint closes.
  for (auto t = Clock::now() + std::chrono::milliseconds(100); Clock::now() < t;) (void)reap();
  return res;
}

pid_t spawn(const std::string& ports, bool server, uint64_t messages, const std::string& faults,
            int out_fd, int in_fd, int result_fd) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  setenv("FI_DPDK_PORTS", ports.c_str(), 1);
  const double rate = std::strtod(faults.c_str(), nullptr);
  const std::string corrupt = std::to_string(rate / 100);
  setenv("FI_DPDK_FAULT_LOSS", faults.c_str(), 1);
  setenv("FI_DPDK_FAULT_REORDER", faults.c_str(), 1);
  setenv("FI_DPDK_FAULT_DUP", faults.c_str(), 1);
  setenv("FI_DPDK_FAULT_CORRUPT", corrupt.c_str(), 1);
  setenv("FI_DPDK_FAULT_SEED", server ? "7" : "8", 1);
  Result r = server ? serve(out_fd, in_fd, messages) : send_all(out_fd, in_fd, messages);
  ssize_t w = write(result_fd, &r, sizeof(r));
  _exit(w == sizeof(r) ? 0 : 1);
}

}  // namespace

TEST(RdmSoak, EveryMessageOnceInOrderIntactUnderFaults) {
  const uint64_t messages = env_u64("DPFAB_SOAK_MESSAGES", 100000);
  const char* f = std::getenv("DPFAB_SOAK_FAULTS");
  const std::string faults = f && *f ? f : "0.1";
  const std::string sock = "/tmp/dpfab-it-soak-" + std::to_string(getpid()) + ".sock";
  const std::string base = "net_memif0,socket-abstract=no,socket=" + sock + ",role=";
  int c2s[2], s2c[2], sres[2], cres[2];
  ASSERT_EQ(pipe(c2s), 0);
  ASSERT_EQ(pipe(s2c), 0);
  ASSERT_EQ(pipe(sres), 0);
  ASSERT_EQ(pipe(cres), 0);
  pid_t server = spawn(base + "server", true, messages, faults, s2c[1], c2s[0], sres[1]);
  ASSERT_GE(server, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the server listens first
  pid_t client = spawn(base + "client", false, messages, faults, c2s[1], s2c[0], cres[1]);
  ASSERT_GE(client, 0);
  // Each side writes its result before it exits; a side that hangs is killed at the bound.
  const bool client_ok = reap_child(client, kBound + std::chrono::seconds(30));
  const bool server_ok = reap_child(server, std::chrono::seconds(30));
  Result rs{-1}, rc{-1};
  for (int fd : {c2s[1], s2c[1], sres[1], cres[1]}) close(fd);
  if (read(cres[0], &rc, sizeof(rc)) != static_cast<ssize_t>(sizeof(rc))) rc.status = -1;
  if (read(sres[0], &rs, sizeof(rs)) != static_cast<ssize_t>(sizeof(rs))) rs.status = -1;
  for (int fd : {c2s[0], s2c[0], sres[0], cres[0]}) close(fd);
  unlink(sock.c_str());
  EXPECT_TRUE(client_ok);
  EXPECT_TRUE(server_ok);
  EXPECT_EQ(rs.status, 0) << "server first";
  ASSERT_EQ(rc.status, 0) << "client failed at that step, message " << rc.detail << ", error entry "
                          << fi_strerror(static_cast<int>(rc.err));
  ASSERT_EQ(rs.status, 0) << "server failed at that step, message " << rs.detail << ", error entry "
                          << fi_strerror(static_cast<int>(rs.err))
                          << " (34: wrong length, 35: wrong bytes)";
  EXPECT_EQ(rs.bytes, rc.bytes);
  const double mb = static_cast<double>(rs.bytes) / 1e6;
  std::printf(
      "soak: %lu messages, %.1f MB, faults %s (corruption %g): %.2f s, %.1f MB/s, "
      "%.0f messages/s\n",
      static_cast<unsigned long>(messages), mb, faults.c_str(),
      std::strtod(faults.c_str(), nullptr) / 100, rs.seconds, mb / rs.seconds,
      static_cast<double>(messages) / rs.seconds);
}
