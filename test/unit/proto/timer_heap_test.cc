// SPDX-License-Identifier: BSD-3-Clause
//
// TimerHeap against a reference (a sorted multiset of the owners' keys): timers set, moved both
// ways and removed in a random order keep the earliest right and every owner's index pointing
// at its entry; take_due hands out the due timers, earliest first, and nothing else.
#include "proto/timer_heap.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

namespace {

struct Owner {
  uint32_t at = dpfab::proto::kTimerNone;
  uint64_t key = UINT64_MAX;  // the reference: what it was last set to
};
uint32_t& owner_at(Owner& o) noexcept { return o.at; }
using TimerHeap = dpfab::proto::TimerHeap<Owner, owner_at>;

uint64_t reference_earliest(const std::vector<Owner>& owners) {
  uint64_t e = UINT64_MAX;
  for (const Owner& o : owners) e = std::min(e, o.key);
  return e;
}

TEST(TimerHeap, FollowsEveryMoveAndTakesTheDueTimersInOrder) {
  constexpr size_t kOwners = 300;
  std::vector<Owner> owners(kOwners);
  TimerHeap h;
  h.reserve(kOwners);
  std::mt19937_64 rng(12345);
  for (int step = 0; step < 20000; ++step) {
    Owner& o = owners[rng() % kOwners];
    // A fifth of the moves take the timer out; keys collide often (a small range).
    const uint64_t key = rng() % 5 == 0 ? UINT64_MAX : 1000 + rng() % 5000;
    h.set(&o, key);
    o.key = key;
    ASSERT_EQ(o.at == TimerHeap::kNone, key == UINT64_MAX);
    ASSERT_EQ(h.earliest(), reference_earliest(owners)) << "step " << step;
    if (step % 1000 == 999) {
      // Take what is due at a point in the middle: earliest first, exactly the due ones.
      const uint64_t now = 1000 + rng() % 5000;
      std::multiset<uint64_t> due;
      for (const Owner& x : owners)
        if (x.key <= now) due.insert(x.key);
      uint64_t last = 0;
      size_t taken = 0;
      while (Owner* p = h.take_due(now)) {
        Owner& t = *p;
        ASSERT_LE(t.key, now);
        ASSERT_GE(t.key, last);
        ASSERT_EQ(t.at, TimerHeap::kNone);  // out of the heap
        last = t.key;
        t.key = UINT64_MAX;
        ++taken;
      }
      ASSERT_EQ(taken, due.size());
      ASSERT_GT(h.earliest(), now);
      ASSERT_EQ(h.earliest(), reference_earliest(owners));
    }
  }
  // Every owner still in the heap is where its index says: moving each to the front finds it.
  for (Owner& o : owners) {
    if (o.at == TimerHeap::kNone) continue;
    h.set(&o, 1);
    ASSERT_EQ(h.earliest(), 1u);
    ASSERT_EQ(h.take_due(1), &o);
    o.key = UINT64_MAX;
  }
  EXPECT_EQ(h.size(), 0u);
  EXPECT_EQ(h.earliest(), UINT64_MAX);
  EXPECT_EQ(h.take_due(UINT64_MAX - 1), nullptr);
}

TEST(TimerHeap, ClearLeavesEveryOwnerOutside) {
  std::vector<Owner> owners(10);
  TimerHeap h;
  h.reserve(owners.size());
  for (size_t i = 0; i < owners.size(); ++i) h.set(&owners[i], 100 - i);
  EXPECT_EQ(h.earliest(), 91u);
  h.clear();
  for (const Owner& o : owners) EXPECT_EQ(o.at, TimerHeap::kNone);
  EXPECT_EQ(h.earliest(), UINT64_MAX);
  h.set(&owners[3], 7);  // usable again
  EXPECT_EQ(h.take_due(7), &owners[3]);
}

}  // namespace
