// SPDX-License-Identifier: BSD-3-Clause
//
// The neighbour table: the incomplete -> reachable/failed state machine driven by tick_st (no
// time passes), refresh and expiry, capacity and tombstone reuse, the request_resolve mailbox
// from other threads, and lock-free readers that never see a torn or mismatched entry while the
// writer rewrites it.
#include "wire/neighbour.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

using namespace dpfab::wire;

namespace {

constexpr uint64_t kMs = 1'000'000;
const uint32_t kIp = htonl(0x0a000002);
const rte_ether_addr kMac{{0x02, 0x11, 0x22, 0x33, 0x44, 0x55}};
const rte_ether_addr kMac2{{0x02, 0x66, 0x77, 0x88, 0x99, 0xaa}};

uint32_t ip(uint32_t host) { return htonl(host); }

std::vector<uint32_t> tick(NeighbourTable& t, uint64_t now, size_t room = 16) {
  std::vector<uint32_t> out(room);
  out.resize(t.tick_st(now, out));
  return out;
}

bool same(const rte_ether_addr& a, const rte_ether_addr& b) { return std::memcmp(&a, &b, 6) == 0; }

}  // namespace

TEST(Neighbour, DefaultsAreThreeRequests200MsApart) {
  NeighbourTable t;
  EXPECT_EQ(t.config().max_requests, 3u);
  EXPECT_EQ(t.config().retry_ns, 200 * kMs);
  EXPECT_EQ(t.capacity(), 256u);
  EXPECT_EQ(t.next_due_st(), UINT64_MAX);
  EXPECT_FALSE(t.lookup(kIp));
  EXPECT_FALSE(t.lookup(0));
}

TEST(Neighbour, UnansweredResolutionSendsThreeRequests200MsApartThenFails) {
  NeighbourTable t;
  ASSERT_EQ(t.resolve_st(kIp, 1000), 0);
  auto n = t.lookup(kIp);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->state, NeighState::kIncomplete);
  EXPECT_EQ(n->updated_ns, 1000u);
  EXPECT_EQ(t.size(), 1u);

  EXPECT_EQ(tick(t, 1000), std::vector<uint32_t>{kIp});  // first request now
  EXPECT_TRUE(tick(t, 1000).empty());
  EXPECT_TRUE(tick(t, 1000 + 200 * kMs - 1).empty());
  EXPECT_EQ(tick(t, 1000 + 200 * kMs), std::vector<uint32_t>{kIp});
  EXPECT_EQ(tick(t, 1000 + 400 * kMs), std::vector<uint32_t>{kIp});
  EXPECT_EQ(t.lookup(kIp)->state, NeighState::kIncomplete);
  EXPECT_TRUE(tick(t, 1000 + 600 * kMs).empty());  // three sent, none answered
  n = t.lookup(kIp);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->state, NeighState::kFailed);
  EXPECT_EQ(n->updated_ns, 1000 + 600 * kMs);
  EXPECT_EQ(t.request_resolve(kIp), -EHOSTUNREACH);

  // Held for failed_hold_ns, then forgotten; a new request starts over.
  EXPECT_TRUE(tick(t, 1000 + 600 * kMs + t.config().failed_hold_ns - 1).empty());
  EXPECT_TRUE(t.lookup(kIp));
  EXPECT_TRUE(tick(t, 1000 + 600 * kMs + t.config().failed_hold_ns).empty());
  EXPECT_FALSE(t.lookup(kIp));
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.next_due_st(), UINT64_MAX);
  ASSERT_EQ(t.request_resolve(kIp), 0);
  const uint64_t later = 10'000 * kMs;
  EXPECT_EQ(tick(t, later), std::vector<uint32_t>{kIp});
  EXPECT_EQ(t.lookup(kIp)->state, NeighState::kIncomplete);
}

TEST(Neighbour, RetriesAndTimesAreConfigurable) {
  NeighbourConfig cfg;
  cfg.max_requests = 1;
  cfg.retry_ns = 10;
  cfg.failed_hold_ns = 5;
  NeighbourTable t(cfg);
  ASSERT_EQ(t.resolve_st(kIp, 0), 0);
  EXPECT_EQ(tick(t, 0).size(), 1u);
  EXPECT_TRUE(tick(t, 10).empty());
  EXPECT_EQ(t.lookup(kIp)->state, NeighState::kFailed);
  tick(t, 15);
  EXPECT_FALSE(t.lookup(kIp));
  cfg.max_requests = 0;  // clamped to 1
  EXPECT_EQ(NeighbourTable(cfg).config().max_requests, 1u);
}

TEST(Neighbour, AnAnswerMakesTheEntryReachableAndStopsTheRequests) {
  NeighbourTable t;
  ASSERT_EQ(t.resolve_st(kIp, 0), 0);
  EXPECT_EQ(tick(t, 0).size(), 1u);
  EXPECT_EQ(t.learn_st(kIp, kMac, 50 * kMs, false), NeighbourTable::Learnt::kUpdated);
  auto n = t.lookup(kIp);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->state, NeighState::kReachable);
  EXPECT_TRUE(same(n->mac, kMac));
  EXPECT_EQ(n->updated_ns, 50 * kMs);
  EXPECT_TRUE(tick(t, 250 * kMs).empty());
  EXPECT_TRUE(tick(t, 10'000 * kMs).empty());
  EXPECT_EQ(t.next_due_st(), 50 * kMs + t.config().reachable_ns);
}

TEST(Neighbour, AReachableEntryIsRefreshedAfterReachableTimeAndStaysUsable) {
  NeighbourTable t;
  ASSERT_EQ(t.learn_st(kIp, kMac, 0, true), NeighbourTable::Learnt::kCreated);
  const uint64_t r = t.config().reachable_ns;
  EXPECT_TRUE(tick(t, r - 1).empty());
  EXPECT_EQ(tick(t, r), std::vector<uint32_t>{kIp});  // refresh request
  auto n = t.lookup(kIp);
  EXPECT_EQ(n->state, NeighState::kReachable);  // still usable while refreshing
  EXPECT_TRUE(same(n->mac, kMac));
  // Answered with a new MAC: updated, and the refresh cycle starts over.
  EXPECT_EQ(t.learn_st(kIp, kMac2, r + 1, false), NeighbourTable::Learnt::kUpdated);
  EXPECT_TRUE(same(t.lookup(kIp)->mac, kMac2));
  EXPECT_TRUE(tick(t, r + 1 + 200 * kMs).empty());
  // Unanswered refresh: three requests, then failed.
  const uint64_t r2 = r + 1 + r;
  EXPECT_EQ(tick(t, r2).size(), 1u);
  EXPECT_EQ(tick(t, r2 + 200 * kMs).size(), 1u);
  EXPECT_EQ(tick(t, r2 + 400 * kMs).size(), 1u);
  EXPECT_EQ(t.lookup(kIp)->state, NeighState::kReachable);
  EXPECT_TRUE(tick(t, r2 + 600 * kMs).empty());
  n = t.lookup(kIp);
  EXPECT_EQ(n->state, NeighState::kFailed);
  EXPECT_TRUE(same(n->mac, rte_ether_addr{}));
}

TEST(Neighbour, AFailedEntryBecomesReachableWhenItsOwnerSpeaks) {
  NeighbourConfig cfg;
  cfg.max_requests = 1;
  NeighbourTable t(cfg);
  ASSERT_EQ(t.resolve_st(kIp, 0), 0);
  tick(t, 0);
  tick(t, cfg.retry_ns);
  ASSERT_EQ(t.lookup(kIp)->state, NeighState::kFailed);
  EXPECT_EQ(t.learn_st(kIp, kMac, cfg.retry_ns + 1, false), NeighbourTable::Learnt::kUpdated);
  EXPECT_EQ(t.lookup(kIp)->state, NeighState::kReachable);
}

TEST(Neighbour, LearnCreatesOnlyWhenAsked) {
  NeighbourTable t;
  EXPECT_EQ(t.learn_st(kIp, kMac, 0, false), NeighbourTable::Learnt::kIgnored);
  EXPECT_FALSE(t.lookup(kIp));
  EXPECT_EQ(t.learn_st(0, kMac, 0, true), NeighbourTable::Learnt::kIgnored);
  EXPECT_EQ(t.learn_st(kIp, kMac, 0, true), NeighbourTable::Learnt::kCreated);
  EXPECT_EQ(t.learn_st(kIp, kMac, 1, true), NeighbourTable::Learnt::kUpdated);
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.resolve_st(kIp, 2), 0);  // exists: nothing happens
  EXPECT_EQ(t.lookup(kIp)->state, NeighState::kReachable);
  EXPECT_EQ(t.resolve_st(0, 2), -EINVAL);
}

TEST(Neighbour, ATickEmitsNoMoreRequestsThanThereIsRoomForAndKeepsTheRestDue) {
  NeighbourTable t;
  for (uint32_t i = 1; i <= 10; ++i) ASSERT_EQ(t.resolve_st(ip(0x0a000000 + i), 0), 0);
  auto a = tick(t, 0, 4);
  auto b = tick(t, 0, 4);
  auto c = tick(t, 0, 4);
  auto d = tick(t, 0, 4);
  EXPECT_EQ(a.size(), 4u);
  EXPECT_EQ(b.size(), 4u);
  EXPECT_EQ(c.size(), 2u);
  EXPECT_TRUE(d.empty());
  std::vector<uint32_t> all;
  for (auto* v : {&a, &b, &c}) all.insert(all.end(), v->begin(), v->end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::unique(all.begin(), all.end()), all.end());  // each address once
}

TEST(Neighbour, AFullTableRefusesNewEntriesUntilFailedOnesAreForgotten) {
  NeighbourConfig cfg;
  cfg.capacity = 8;
  cfg.max_requests = 1;
  NeighbourTable t(cfg);
  EXPECT_EQ(t.capacity(), 8u);
  for (uint32_t i = 0; i < 8; ++i) ASSERT_EQ(t.resolve_st(ip(0x0a000100 + i), 0), 0);
  EXPECT_EQ(t.size(), 8u);
  EXPECT_EQ(t.resolve_st(ip(0x0a000200), 0), -ENOSPC);
  EXPECT_EQ(t.learn_st(ip(0x0a000200), kMac, 0, true), NeighbourTable::Learnt::kFull);
  // Keep one reachable; let the other seven fail and be forgotten.
  ASSERT_EQ(t.learn_st(ip(0x0a000103), kMac, 1, false), NeighbourTable::Learnt::kUpdated);
  tick(t, 0, 16);
  tick(t, cfg.retry_ns, 16);
  EXPECT_EQ(t.size(), 8u);
  tick(t, cfg.retry_ns + cfg.failed_hold_ns, 16);
  EXPECT_EQ(t.size(), 1u);
  // Tombstones are reused, and the survivor is still found past them.
  for (uint32_t i = 0; i < 7; ++i) ASSERT_EQ(t.resolve_st(ip(0x0a000300 + i), 5), 0) << i;
  EXPECT_EQ(t.size(), 8u);
  auto n = t.lookup(ip(0x0a000103));
  ASSERT_TRUE(n);
  EXPECT_TRUE(same(n->mac, kMac));
  for (uint32_t i = 0; i < 7; ++i) EXPECT_TRUE(t.lookup(ip(0x0a000300 + i))) << i;
  for (uint32_t i = 0; i < 8; ++i) {
    if (i == 3) continue;
    EXPECT_FALSE(t.lookup(ip(0x0a000100 + i))) << i;
  }
}

TEST(Neighbour, LookupsSurviveCollisionsAndChurn) {
  NeighbourConfig cfg;
  cfg.capacity = 128;
  cfg.max_requests = 1;
  cfg.retry_ns = 1;
  cfg.failed_hold_ns = 1;
  NeighbourTable t(cfg);
  uint64_t now = 0;
  std::vector<uint32_t> live;
  for (int round = 0; round < 50; ++round) {
    // Add 60 addresses, half reachable and half resolving (which fail and are forgotten); every
    // other round let the reachable ones fail away too. The table peaks at 90 of 128 slots.
    for (uint32_t i = 0; i < 60; ++i) {
      uint32_t a = ip(0x0a000000 + round * 1000 + i);
      if (i % 2 == 0) {
        ASSERT_EQ(t.learn_st(a, kMac, now, true), NeighbourTable::Learnt::kCreated);
        live.push_back(a);
      } else {
        ASSERT_EQ(t.resolve_st(a, now), 0);
      }
    }
    tick(t, ++now, 128);  // the resolving half sends its one request
    tick(t, ++now, 128);  // ... and fails
    tick(t, ++now, 128);  // ... and is forgotten
    for (uint32_t a : live) ASSERT_TRUE(t.lookup(a)) << round;
    // Forget the reachable ones too, by letting them fail: learn nothing, jump past reachable.
    if (round % 2 == 1) {
      now += cfg.reachable_ns;
      for (int k = 0; k < 4; ++k) tick(t, ++now, 128);
      for (uint32_t a : live) ASSERT_FALSE(t.lookup(a)) << round;
      live.clear();
    }
    ASSERT_EQ(t.size(), live.size());
  }
}

TEST(Neighbour, RequestResolveFromOtherThreadsIsDrainedByTheNextTick) {
  NeighbourTable t;
  std::vector<std::thread> apps;
  for (uint32_t th = 0; th < 4; ++th)
    apps.emplace_back([&t, th] {
      for (uint32_t i = 0; i < 10; ++i)
        EXPECT_EQ(t.request_resolve(ip(0x0a010000 + th * 100 + i)), 0);
      EXPECT_EQ(t.request_resolve(ip(0x0a010000 + th * 100)), 0);  // already queued
    });
  for (auto& a : apps) a.join();
  EXPECT_EQ(t.size(), 0u);  // nothing happens until the writer ticks
  auto req = tick(t, 0, 64);
  EXPECT_EQ(req.size(), 40u);
  EXPECT_EQ(t.size(), 40u);
  EXPECT_EQ(t.lookup(ip(0x0a010000 + 305))->state, NeighState::kIncomplete);
  EXPECT_EQ(t.request_resolve(ip(0x0a010000 + 305)), 0);  // in progress: nothing queued
  EXPECT_TRUE(tick(t, 1, 64).empty());
  EXPECT_EQ(t.request_resolve(0), -EINVAL);
}

TEST(Neighbour, AFullMailboxSaysTryAgain) {
  NeighbourTable t;
  for (uint32_t i = 0; i < NeighbourTable::kMailboxSize; ++i)
    ASSERT_EQ(t.request_resolve(ip(0x0a020000 + i)), 0);
  EXPECT_EQ(t.request_resolve(ip(0x0a030000)), -EAGAIN);
  std::vector<uint32_t> out(NeighbourTable::kMailboxSize);
  EXPECT_EQ(t.tick_st(0, out), NeighbourTable::kMailboxSize);
  EXPECT_EQ(t.request_resolve(ip(0x0a030000)), 0);
}

// A reader must never see a torn MAC, nor a MAC paired with another address or time. The writer
// rewrites a few colliding entries as fast as it can (MAC bytes 1-5 and the time all carry the
// same counter, byte 0 names the address) and churns a neighbour through create/fail/forget so
// that slots next to them change owner; readers check every view they get.
TEST(Neighbour, ConcurrentReadersNeverSeeATornOrMismatchedEntry) {
  NeighbourConfig cfg;
  cfg.capacity = 8;  // few slots: the addresses share probe paths
  cfg.max_requests = 1;
  cfg.retry_ns = 1;
  cfg.failed_hold_ns = 1;
  cfg.reachable_ns = UINT64_MAX / 4;
  NeighbourTable t(cfg);
  constexpr int kKeys = 4;
  uint32_t keys[kKeys];
  for (int k = 0; k < kKeys; ++k) {
    keys[k] = ip(0x0a000010 + k);
    ASSERT_EQ(t.learn_st(keys[k], rte_ether_addr{{uint8_t(k), 0, 0, 0, 0, 0}}, 0, true),
              NeighbourTable::Learnt::kCreated);
  }
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> checked{0}, bad{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r)
    readers.emplace_back([&] {
      uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        for (int k = 0; k < kKeys; ++k) {
          auto e = t.lookup(keys[k]);
          if (!e || e->ip_be != keys[k] || e->state != NeighState::kReachable) {
            bad.fetch_add(1);
            continue;
          }
          const uint8_t c = static_cast<uint8_t>(e->updated_ns);
          bool ok = e->mac.addr_bytes[0] == k;
          for (int b = 1; b < 6; ++b) ok = ok && e->mac.addr_bytes[b] == c;
          if (!ok) bad.fetch_add(1);
          ++n;
        }
      }
      checked.fetch_add(n);
    });
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  uint64_t i = 0;
  const uint32_t churn = ip(0x0a0000ff);
  std::vector<uint32_t> out(8);
  while (std::chrono::steady_clock::now() < until || i < 100000) {
    ++i;
    const int k = static_cast<int>(i % kKeys);
    const uint8_t c = static_cast<uint8_t>(i);
    t.learn_st(keys[k], rte_ether_addr{{uint8_t(k), c, c, c, c, c}}, i, false);
    // Churn: create, fail, forget (each step a tick), so neighbouring slots change owner.
    if (i % 3 == 0) (void)t.resolve_st(churn, i);
    t.tick_st(i, out);
  }
  stop.store(true);
  for (auto& r : readers) r.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GT(checked.load(), 1000u);
}
