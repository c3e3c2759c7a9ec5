// SPDX-License-Identifier: BSD-3-Clause
//
// What 65,536 peers cost an RDM endpoint, measured through the real libfabric core (issue 12:
// per-peer state <= 256 B until a peer sends, an AV of 65,536 peers <= 32 MiB). An FI_EP_RDM
// endpoint on a net_null port (FI_DPDK_PORTS = net_null0: frames go nowhere, nothing answers) with
// an AV bound, enabled; 65,536 distinct addresses inserted (our own name from fi_getname with
// another IPv4 each); then a first message to a few of them.
//
// Measured with the heap's bytes in use (test_util.h heap_bytes: mallinfo2 uordblks + hblkhd, all
// arenas) rather than RSS: the AV and the endpoint's per-peer state are plain new/malloc memory,
// which mallinfo2 counts to the byte, while RSS moves by whole pages, includes whatever another
// thread (EAL's interrupt thread, the port's poll) touches meanwhile, and keeps freed memory. RSS
// growth is printed beside it as a cross-check. Between the two readings of a measurement nothing
// runs but the calls measured (gtest assertions come after).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "fixture.h"
#include "test_util.h"

using namespace dpfab::test;

namespace {

constexpr size_t kPeers = 65536;
constexpr size_t kBudgetTotal = size_t{32} << 20;  // the AV and the endpoint, for kPeers
constexpr size_t kBudgetPerPeer = 256;             // a peer that has not sent or been sent to
constexpr size_t kSentTo = 8;

// Resident set size in bytes (/proc/self/statm), for the cross-check.
long rss_bytes() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  std::fclose(f);
  return resident * sysconf(_SC_PAGESIZE);
}

// An enabled RDM endpoint (tagged CQ of 1,024 entries) and an empty table AV with no count hint:
// the AV grows as addresses come (the worst case). name_ is the endpoint's address.
class RdmAvMemory : public EndpointTest {
 protected:
  InfoPtr hints() const override { return dpdk_hints(FI_EP_RDM, FI_MSG | FI_TAGGED); }
  EpOptions ep_options() const override {
    EpOptions o;
    o.cq_format = FI_CQ_FORMAT_TAGGED;
    o.cq_size = 1024;
    return o;
  }
  bool inserts_self() const override { return false; }
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(EndpointTest::SetUp());
    ASSERT_EQ(e_.addr_len, sizeof(name_));
    std::memcpy(&name_, e_.addr, sizeof(name_));
  }

  Address name_{};
};

TEST_F(RdmAvMemory, PeersCostTheirAvEntryUntilTheyAreSentTo) {
  // Peer i: our name with IPv4 10.128.0.0 + i and a MAC of its own (no ARP on a null port).
  std::vector<Address> peers(kPeers, name_);
  for (uint32_t i = 0; i < kPeers; ++i) {
    peers[i].ipv4_be = htonl(0x0a800000u + i);
    peers[i].mac[0] = 0x02;
    std::memcpy(&peers[i].mac[2], &peers[i].ipv4_be, 4);
  }
  std::vector<fi_addr_t> fi_addrs(kPeers, FI_ADDR_NOTAVAIL);
  static const char kMsg[16] = "first message";

  const size_t heap0 = heap_bytes();
  const long rss0 = rss_bytes();
  // As an application would: in calls of 1,024 addresses.
  size_t inserted = 0;
  for (size_t i = 0; i < kPeers; i += 1024)
    inserted += static_cast<size_t>(
        std::max(0, fi_av_insert(av_, &peers[i], 1024, &fi_addrs[i], 0, nullptr)));
  const size_t heap1 = heap_bytes();
  const long rss1 = rss_bytes();

  // The first message to a few peers spread over the AV (fi_inject: no completion to wait for;
  // the frames go out of the null port and are never acknowledged).
  int sent = 0;
  for (size_t k = 0; k < kSentTo; ++k)
    sent += fi_inject(e_.ep, kMsg, sizeof(kMsg), fi_addrs[k * 8191]) == 0;
  const size_t heap2 = heap_bytes();
  const long rss2 = rss_bytes();

  ASSERT_EQ(inserted, kPeers);
  for (size_t i = 0; i < kPeers; ++i) ASSERT_EQ(fi_addrs[i], i);
  ASSERT_EQ(sent, static_cast<int>(kSentTo));

  const size_t total = heap1 - heap0;
  const double per_peer = double(total) / kPeers;
  const double per_sent = double(heap2 - heap1) / kSentTo;
  std::printf(
      "%zu peers in the AV of an enabled RDM endpoint: %zu bytes of heap (%.1f per peer), RSS "
      "+%ld; the first send to %zu of them: +%zu bytes (%.0f per peer sent to), RSS +%ld\n",
      kPeers, total, per_peer, rss1 - rss0, kSentTo, heap2 - heap1, per_sent, rss2 - rss1);
  EXPECT_LE(total, kBudgetTotal);
  EXPECT_LE(per_peer, double(kBudgetPerPeer));
  // RSS counts pages touched (the entries are written): the same order, within the budget.
  EXPECT_LE(rss1 - rss0, static_cast<long>(kBudgetTotal));
  // Only the peers sent to have per-peer protocol state: a few KiB each (the send window), nothing
  // for the other 65,528.
  EXPECT_GT(per_sent, 1024.0);
  EXPECT_LT(per_sent, 16384.0);  // anything per AV peer would be 65,536 x something over 8
}

}  // namespace
