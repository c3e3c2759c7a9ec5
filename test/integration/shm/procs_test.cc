// SPDX-License-Identifier: BSD-3-Clause
//
// Several processes of one host on the same-host path (fi_dpdk(7), "Same-host peers"), each an
// shm-peer (shm_peer.cc) on the default configuration (a memif link for the first two, the
// placeholder domain "shm" for the others), all-to-all RDM rounds:
//   - KillAndRestartNeighbours: 4 processes; in turn each one's neighbour is killed (SIGKILL)
//     while the others send to it: their operations to it end with an error within the bound
//     (never a hang), the rest is delivered; the neighbour restarts, its new name is inserted and
//     everyone talks again. Nothing is left in /dev/shm.
//   - SixtyFourProcesses: 64 processes each talking to every other: the links' memory per pair of
//     processes and the fds per process are measured and bounded; nothing left in /dev/shm after.
// DPFAB_SHM_PEER names the shm-peer binary (meson sets it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "procs_test.h"

using namespace dpfab::test::shm;

namespace {

std::string peer_exe() {
  const char* e = std::getenv("DPFAB_SHM_PEER");
  return e ? e : "";
}

// Starts n peers, inserts every name into every other.
bool start_all(std::vector<std::unique_ptr<PeerProc>>& ps, size_t n,
               const std::vector<std::string>& env, std::string* err) {
  // All at once (each starts EAL: seconds on a loaded machine), in batches of 16.
  for (size_t b = 0; b < n; b += 16) {
    for (size_t i = b; i < std::min(n, b + 16); ++i) {
      ps.push_back(std::make_unique<PeerProc>());
      if (!ps.back()->spawn(peer_exe(), static_cast<unsigned>(i), env)) {
        *err = "peer " + std::to_string(i) + ": cannot start";
        return false;
      }
    }
    for (size_t i = b; i < std::min(n, b + 16); ++i)
      if (!ps[i]->ready(180s)) {
        *err = "peer " + std::to_string(i) + ": " + ps[i]->error();
        return false;
      }
  }
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j)
      if (i != j) ps[i]->send("peer " + std::to_string(j) + " " + ps[j]->name());
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j + 1 < n; ++j)
      if (std::string l = ps[i]->line(); l.rfind("ok peer", 0) != 0) {
        *err = "peer " + std::to_string(i) + " inserting: '" + l + "'";
        return false;
      }
  return true;
}

// Runs round r on every live peer; returns their "done" lines (index -> line).
std::vector<std::string> run_round(std::vector<std::unique_ptr<PeerProc>>& ps, unsigned r,
                                   size_t size, const std::vector<bool>& live) {
  for (size_t i = 0; i < ps.size(); ++i)
    if (live[i]) ps[i]->send("round " + std::to_string(r) + " " + std::to_string(size));
  std::vector<std::string> out(ps.size());
  for (size_t i = 0; i < ps.size(); ++i)
    if (live[i]) out[i] = ps[i]->line(120s);
  return out;
}

const std::vector<std::string> kShmOn = {"FI_DPDK_SHM=on"};

}  // namespace

TEST(ShmProcs, KillAndRestartNeighbours) {
  ASSERT_FALSE(peer_exe().empty()) << "DPFAB_SHM_PEER";
  constexpr size_t kN = 4;
  const auto residue_before = dev_shm_residue();
  std::vector<std::unique_ptr<PeerProc>> ps;
  std::string err;
  ASSERT_TRUE(start_all(ps, kN, kShmOn, &err)) << err;
  std::vector<bool> live(kN, true);
  unsigned r = 0;
  for (auto& l : run_round(ps, r++, 64, live)) {
    EXPECT_EQ(field(l, "recv"), std::to_string(kN - 1)) << l;
    EXPECT_EQ(field(l, "err"), "0") << l;
  }
  for (size_t killer = 0; killer < kN; ++killer) {
    const size_t victim = (killer + 1) % kN;
    SCOPED_TRACE("process " + std::to_string(killer) + " kills " + std::to_string(victim));
    // The others start a round of 64 KiB messages (rendezvous: each send waits for the
    // receiver's grant); the victim, idle, grants nothing, and dies with them under way.
    for (size_t i = 0; i < kN; ++i)
      if (i != victim) ps[i]->send("round " + std::to_string(r) + " 65536");
    usleep(20'000);
    ps[victim]->kill_now();
    live[victim] = false;
    for (size_t i = 0; i < kN; ++i) {
      if (!live[i]) continue;
      const std::string l = ps[i]->line(90s);
      ASSERT_EQ(l.rfind("done", 0), 0u) << "process " << i << ": '" << l << "'";
      std::printf("process %zu, its neighbour %zu killed: %s\n", i, victim, l.c_str());
      // The send to the victim ends with FI_EHOSTUNREACH (113) as soon as its link's end is
      // seen, not at a timeout (the round's own bound is 60 s); the others' messages arrive.
      EXPECT_EQ(field(l, "errs"), std::to_string(victim) + ":113") << l;
      EXPECT_EQ(field(l, "recv"), std::to_string(kN - 2)) << l;
      EXPECT_TRUE(field(l, "missing").empty()) << l;
      EXPECT_EQ(l.find("corrupt"), std::string::npos) << l;
      EXPECT_LT(std::stoi(field(l, "ms")), 5'000) << l;
    }
    ++r;
    // Survivors still talk to each other.
    for (size_t i = 0; i < kN; ++i)
      if (i != victim) ps[i]->send("drop " + std::to_string(victim));
    for (size_t i = 0; i < kN; ++i)
      if (i != victim) {
        EXPECT_EQ(ps[i]->line().rfind("ok drop", 0), 0u);
      }
    for (auto& l : run_round(ps, r++, 1024, live))
      if (!l.empty()) {
        EXPECT_EQ(field(l, "err"), "0") << l;
      }
    // The victim comes back (a new instance: a new name) and everyone talks again.
    ps[victim] = std::make_unique<PeerProc>();
    ASSERT_TRUE(ps[victim]->start(peer_exe(), static_cast<unsigned>(victim), kShmOn))
        << ps[victim]->error();
    live[victim] = true;
    for (size_t i = 0; i < kN; ++i) {
      if (i == victim) continue;
      ps[i]->send("peer " + std::to_string(victim) + " " + ps[victim]->name());
      ps[victim]->send("peer " + std::to_string(i) + " " + ps[i]->name());
    }
    for (size_t i = 0; i < kN; ++i)
      for (size_t k = 0; k < (i == victim ? kN - 1 : 1); ++k)
        EXPECT_EQ(ps[i]->line().rfind("ok peer", 0), 0u);
    for (auto& l : run_round(ps, r++, 64, live)) {
      EXPECT_EQ(field(l, "recv"), std::to_string(kN - 1)) << l;
      EXPECT_EQ(field(l, "err"), "0") << l;
    }
  }
  for (auto& p : ps) EXPECT_EQ(p->quit(), 0);
  EXPECT_EQ(dev_shm_residue(), residue_before) << "nothing of ours left in /dev/shm";
}

TEST(ShmProcs, SixtyFourProcesses) {
  ASSERT_FALSE(peer_exe().empty()) << "DPFAB_SHM_PEER";
  const size_t n = std::getenv("DPFAB_SHM_PROCS") ? std::atoi(std::getenv("DPFAB_SHM_PROCS")) : 64;
  const auto residue_before = dev_shm_residue();
  std::vector<std::unique_ptr<PeerProc>> ps;
  std::string err;
  ASSERT_TRUE(start_all(ps, n, kShmOn, &err)) << err;
  std::vector<bool> live(n, true);
  for (unsigned r = 0; r < 3; ++r) {
    const auto lines = run_round(ps, r, r == 1 ? 4096 : 64, live);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(field(lines[i], "recv"), std::to_string(n - 1)) << i << ": " << lines[i];
      EXPECT_EQ(field(lines[i], "err"), "0") << i << ": " << lines[i];
    }
  }
  // Resources, every link made (each process talked to every other).
  size_t max_fds = 0, links = 0, bytes = 0, pss = 0;
  for (auto& p : ps) {
    max_fds = std::max(max_fds, fd_count(p->pid()));
    const LinkMemory m = link_memory(p->pid());
    links += m.mappings;
    bytes += m.bytes;
    pss += m.pss;
  }
  const size_t pairs = n * (n - 1) / 2;
  std::printf(
      "%zu processes: %zu link mappings (%zu pairs), %.1f KiB mapped and %.1f KiB resident "
      "(Pss) per pair, at most %zu fds per process\n",
      n, links, pairs, double(bytes) / 2 / pairs / 1024, double(pss) / pairs / 1024, max_fds);
  EXPECT_EQ(links, 2 * pairs) << "one segment per pair, mapped by both";
  // A pair: two rings of shm_ring_kb (128 KiB) and their control pages, and a header page.
  EXPECT_LE(bytes / 2 / pairs, 4096u + 2 * (4096 + (128u << 10)));
  EXPECT_LE(pss / pairs, 4096u + 2 * (4096 + (128u << 10)));
  // Two per peer (the link's socket, the peer's eventfd) plus the process's own (EAL, the
  // node, the wakeup thread, the CQ, stdio...).
  EXPECT_LE(max_fds, 2 * (n - 1) + 64);
  for (auto& p : ps) EXPECT_EQ(p->quit(60s), 0);
  EXPECT_EQ(dev_shm_residue(), residue_before) << "nothing of ours left in /dev/shm";
}
