// SPDX-License-Identifier: BSD-3-Clause
//
// What peers cost, measured on the heap (test_util.h heap_bytes: mallinfo2), without EAL: an
// AddressVector of 65,536 addresses, and the RDM core's per-peer state before and after the first
// send (issue 12: per-peer state <= 256 B until a peer sends, an AV of 65,536 peers <= 32 MiB).
// The endpoint around the core (rdm_endpoint.h) gives a peer to the core only on its first
// traffic, so an address that is only in the AV costs its AV entry alone; the integration test
// integration-rdm-av-memory measures the two together through libfabric.
//
// Nothing between two heap_bytes() calls may allocate but the code measured: gtest assertions
// come after the second one.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <span>
#include <vector>

#include "proto/av.h"
#include "proto/rdm_core.h"
#include "test_util.h"

namespace dpfab::proto {
namespace {

using test::heap_bytes;

constexpr size_t kPeers = 65536;
constexpr size_t kBudgetPerPeer = 256;          // bytes of a peer that has not sent yet
constexpr size_t kBudgetAv = size_t{32} << 20;  // an AV of kPeers addresses

// Address i: a MAC, a distinct IPv4, one UDP port and endpoint id (what fi_getname gives).
wire::Address addr_of(uint32_t i) {
  wire::Address a;
  a.mac[0] = 0x02;
  a.mac[5] = static_cast<uint8_t>(i);
  a.ipv4_be = htonl(0x0a000000u + i + 1);
  a.udp_port_be = htons(9228);
  a.ep_id_be = htons(1);
  return a;
}

// A port that takes every frame (into nowhere) and a CQ that drops completions.
struct NullSink final : rdm::CoreSink {
  bool transmit(fi_addr_t, const wire::RdmHeader&, std::span<const uint8_t>) noexcept override {
    return true;
  }
  void complete(const rdm::Completion&) noexcept override {}
};

TEST(PeerMemory, AnAvOf65536AddressesIsFarBelow32MiB) {
  for (size_t hint : {size_t{0}, kPeers}) {  // no count hint (growth), and the exact count
    std::vector<wire::Address> addrs(kPeers);
    for (uint32_t i = 0; i < kPeers; ++i) addrs[i] = addr_of(i);
    AddressVector::Options o;
    o.type = AvType::kTable;
    o.count = hint;
    const size_t before_open = heap_bytes();
    auto av = std::make_unique<AddressVector>(o);
    const size_t before = heap_bytes();
    const int n = av->insert(addrs.data(), kPeers, nullptr, 0, nullptr);
    const size_t after = heap_bytes();

    ASSERT_EQ(n, static_cast<int>(kPeers));
    ASSERT_EQ(av->size(), kPeers);
    const size_t total = after - before_open;
    const size_t grown = after - before;
    std::printf(
        "AV, count hint %zu: %zu bytes at open, %zu after %zu inserts: %.1f bytes/address\n", hint,
        before - before_open, total, kPeers, double(total) / kPeers);
    EXPECT_LE(total, kBudgetAv);
    // The AV's share of a peer's budget: entry (36 bytes: a 32-byte address with its host part
    // and the state) and reverse (FI_SOURCE) map, its retired tables included. Measured 66 to 72
    // (50 to 54 with 16-byte addresses, 84 with 16-byte reverse slots).
    EXPECT_LE(grown / kPeers, 80u) << "hint " << hint;
  }
}

TEST(PeerMemory, CorePeerStateIsSmallUntilTheFirstSend) {
  NullSink sink;
  rdm::CoreConfig cfg;
  auto r = rdm::RdmCore::create(cfg, &sink);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<rdm::RdmCore> core = std::move(r.value());

  const size_t before = heap_bytes();
  int failed = 0;
  for (fi_addr_t a = 0; a < kPeers; ++a) failed += core->add_peer(a) != 0;
  const size_t cold = heap_bytes();

  // The first send to a few of them: their window state (RdmPeer's hot part) is made.
  constexpr fi_addr_t kSentTo = 8;
  static const char kMsg[16] = "hello";
  int send_failed = 0;
  for (fi_addr_t a = 0; a < kSentTo; ++a) {
    rdm::SendOp op;
    op.dest = a * 4099;  // spread over the peers
    op.buf = kMsg;
    op.len = sizeof(kMsg);
    send_failed += core->send(op, 1000) != 0;
  }
  const size_t hot = heap_bytes();

  ASSERT_EQ(failed, 0);
  ASSERT_EQ(send_failed, 0);
  const double per_cold = double(cold - before) / kPeers;
  const double per_hot = double(hot - cold) / kSentTo;
  std::printf(
      "RDM core: %.1f bytes per peer before its first send, %.0f more after it (%zu peers,"
      " %llu sent to)\n",
      per_cold, per_hot, kPeers, static_cast<unsigned long long>(kSentTo));
  EXPECT_LE(per_cold, double(kBudgetPerPeer));
  // Only the peers sent to got their window: a few KiB each (the allocator's size class
  // included: ThreadSanitizer's rounds the window up to 8 KiB), nothing per peer of the AV (that
  // would be 65,536 x something spread over 8 peers: far above the bound).
  EXPECT_GT(per_hot, 1024.0);
  EXPECT_LT(per_hot, 16384.0);
}

}  // namespace
}  // namespace dpfab::proto
