// SPDX-License-Identifier: BSD-3-Clause
//
// Fault injection without EAL: the decisions (rates honoured, reproducible, off at 0) and a
// burst's faults over fake frames (what is lost, held back, copied, corrupted, and that nothing
// is lost or kept for ever that should not be).
#include "progress/faults.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <set>
#include <vector>

using dpfab::config::FaultConfig;
using dpfab::progress::FaultDice;
using dpfab::progress::Faulter;
using dpfab::progress::FaultStats;

namespace {

constexpr int kDraws = 100'000;

FaultConfig rates(double loss, double reorder, double dup, double corrupt, uint64_t seed = 1) {
  FaultConfig f;
  f.loss = loss;
  f.reorder = reorder;
  f.dup = dup;
  f.corrupt = corrupt;
  f.seed = seed;
  return f;
}

// Within 5 standard deviations of a binomial(kDraws, p) mean (false alarm: ~6e-7 per check).
void expect_rate(int hits, double p, const char* what) {
  const double mean = kDraws * p, sd = std::sqrt(kDraws * p * (1 - p));
  EXPECT_NEAR(hits, mean, 5 * sd + 1) << what << " at p = " << p;
}

// ---- FaultDice -------------------------------------------------------------------------

TEST(FaultDice, EachRateIsHonouredWithinStatisticalTolerance) {
  for (double p : {0.001, 0.01, 0.1, 0.5, 0.9}) {
    FaultDice dice(rates(p, p, p, p), 0);
    int drop = 0, corrupt = 0, dup = 0, hold = 0, kept = 0;
    for (int i = 0; i < kDraws; ++i) {
      auto d = dice.decide(100);
      drop += d.drop;
      if (d.drop) continue;
      ++kept;
      corrupt += d.corrupt;
      dup += d.dup;
      hold += d.hold;
    }
    expect_rate(drop, p, "loss");
    // The other faults apply to the frames not lost: p of those.
    const double q = static_cast<double>(kept) / kDraws;
    EXPECT_NEAR(corrupt, kept * p, 5 * std::sqrt(kDraws * q * p * (1 - p)) + 1) << "corrupt " << p;
    EXPECT_NEAR(dup, kept * p, 5 * std::sqrt(kDraws * q * p * (1 - p)) + 1) << "dup " << p;
    EXPECT_NEAR(hold, kept * p, 5 * std::sqrt(kDraws * q * p * (1 - p)) + 1) << "reorder " << p;
  }
}

TEST(FaultDice, RatesAreIndependentOfEachOther) {
  FaultDice dice(rates(0, 0.25, 0, 0.75), 0);
  int hold = 0, corrupt = 0;
  for (int i = 0; i < kDraws; ++i) {
    auto d = dice.decide(64);
    EXPECT_FALSE(d.drop || d.dup);
    hold += d.hold;
    corrupt += d.corrupt;
  }
  expect_rate(hold, 0.25, "reorder");
  expect_rate(corrupt, 0.75, "corrupt");
}

TEST(FaultDice, ZeroRatesNeverFaultAndOneAlwaysDoes) {
  FaultDice none(rates(0, 0, 0, 0), 0);
  FaultDice all(rates(0, 1, 1, 1), 0);
  FaultDice lose(rates(1, 1, 1, 1), 0);
  for (int i = 0; i < kDraws; ++i) {
    auto d = none.decide(1500);
    EXPECT_FALSE(d.drop || d.corrupt || d.dup || d.hold);
    d = all.decide(1500);
    EXPECT_TRUE(!d.drop && d.corrupt && d.dup && d.hold);
    d = lose.decide(1500);
    EXPECT_TRUE(d.drop && !d.corrupt && !d.dup && !d.hold);  // a lost frame has no other fate
  }
}

TEST(FaultDice, TheSameSeedGivesTheSameSequenceAndOthersDiffer) {
  const FaultConfig f = rates(0.1, 0.1, 0.1, 0.1, 42);
  FaultDice a(f, 0), b(f, 0), other_stream(f, 1), other_seed(rates(0.1, 0.1, 0.1, 0.1, 43), 0);
  int same_stream = 0, same_seed = 0;
  for (int i = 0; i < 1000; ++i) {
    uint64_t x = a.next();
    EXPECT_EQ(x, b.next());
    same_stream += x == other_stream.next();
    same_seed += x == other_seed.next();
  }
  EXPECT_EQ(same_stream, 0);
  EXPECT_EQ(same_seed, 0);
  // Decisions too, whatever they are.
  FaultDice c(f, 7), d(f, 7);
  for (int i = 0; i < 1000; ++i) {
    auto x = c.decide(1000), y = d.decide(1000);
    EXPECT_EQ(x.drop, y.drop);
    EXPECT_EQ(x.corrupt, y.corrupt);
    EXPECT_EQ(x.dup, y.dup);
    EXPECT_EQ(x.hold, y.hold);
    EXPECT_EQ(x.byte, y.byte);
    EXPECT_EQ(x.bit, y.bit);
  }
}

TEST(FaultDice, CorruptionPicksEveryByteAndBitOfTheSpanUniformly) {
  constexpr uint32_t kSpan = 50;
  FaultDice dice(rates(0, 0, 0, 1), 3);
  std::vector<int> bytes(kSpan), bits(8);
  for (int i = 0; i < kDraws; ++i) {
    auto d = dice.decide(kSpan);
    ASSERT_LT(d.byte, kSpan);
    ASSERT_LT(d.bit, 8);
    ++bytes[d.byte];
    ++bits[d.bit];
  }
  for (uint32_t b = 0; b < kSpan; ++b) EXPECT_NEAR(bytes[b], kDraws / kSpan, 300) << b;
  for (int b = 0; b < 8; ++b) EXPECT_NEAR(bits[b], kDraws / 8, 700) << b;
  // No span: nothing to corrupt.
  EXPECT_FALSE(dice.decide(0).corrupt);
}

// ---- Faulter over fake frames ----------------------------------------------------------

struct FakeFrame {
  int seq = 0;
  bool faultable = true;
  bool copy = false;
  std::vector<uint8_t> bytes = std::vector<uint8_t>(100, 0);
};

// Owns every frame made; counts frees, refuses copies on demand.
struct FakeOps {
  std::vector<std::unique_ptr<FakeFrame>> all;
  std::set<FakeFrame*> freed;
  bool copies_fail = false;

  FakeFrame* make(int seq, bool faultable = true) {
    all.push_back(std::make_unique<FakeFrame>());
    all.back()->seq = seq;
    all.back()->faultable = faultable;
    return all.back().get();
  }
  uint32_t span(FakeFrame* f, uint32_t* first) {
    *first = 10;
    return f->faultable ? 90 : 0;
  }
  bool flip(FakeFrame*& f, uint32_t offset, uint8_t bit) {
    EXPECT_GE(offset, 10u);
    EXPECT_LT(offset, 100u);
    f->bytes[offset] ^= static_cast<uint8_t>(1u << bit);
    return true;
  }
  FakeFrame* copy(FakeFrame* f) {
    if (copies_fail) return nullptr;
    FakeFrame* c = make(f->seq, f->faultable);
    c->bytes = f->bytes;
    c->copy = true;
    return c;
  }
  void free(FakeFrame* f) { EXPECT_TRUE(freed.insert(f).second) << "freed twice"; }
};

using FakeFaulter = Faulter<FakeFrame*>;
constexpr uint16_t kCap = 32;

// Runs bursts of `sizes[i]` new frames (numbered on), then idle calls until nothing is held;
// returns the frames handled, in order.
std::vector<FakeFrame*> run(FakeFaulter& f, FakeOps& ops, const std::vector<uint16_t>& sizes,
                            int* seq) {
  std::vector<FakeFrame*> handled;
  FakeFrame* burst[kCap];
  auto call = [&](uint16_t n) {
    for (uint16_t i = 0; i < n; ++i) burst[i] = ops.make((*seq)++);
    uint16_t out = f.apply_burst_st(burst, n, kCap, ops);
    EXPECT_LE(out, kCap);
    EXPECT_LE(f.held(), FakeFaulter::kHeldCap);
    handled.insert(handled.end(), burst, burst + out);
  };
  for (uint16_t n : sizes) call(n);
  for (int i = 0; i < 10 && f.held(); ++i) call(0);
  EXPECT_EQ(f.held(), 0) << "idle calls release everything";
  return handled;
}

TEST(Faulter, ZeroRatesPassEveryFrameInOrderUntouched) {
  FaultStats st;
  FakeFaulter f(rates(0, 0, 0, 0), 0, &st);
  FakeOps ops;
  int seq = 0;
  auto out = run(f, ops, {1, 32, 5, 0, 17}, &seq);
  ASSERT_EQ(out.size(), 55u);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i]->seq, static_cast<int>(i));
    EXPECT_FALSE(out[i]->copy);
    EXPECT_EQ(std::count(out[i]->bytes.begin(), out[i]->bytes.end(), 0), 100);
  }
  EXPECT_TRUE(ops.freed.empty());
  EXPECT_EQ(st.dropped + st.reordered + st.duplicated + st.corrupted, 0u);
}

TEST(Faulter, LostFramesAreFreedAndCounted) {
  FaultStats st;
  FakeFaulter f(rates(0.5, 0, 0, 0), 0, &st);
  FakeOps ops;
  int seq = 0;
  auto out = run(f, ops, std::vector<uint16_t>(1000, 20), &seq);
  EXPECT_EQ(out.size() + ops.freed.size(), 20'000u);
  EXPECT_EQ(st.dropped.load(), ops.freed.size());
  EXPECT_NEAR(static_cast<double>(st.dropped), 10'000, 5 * std::sqrt(20'000 * 0.25));
  for (FakeFrame* fr : out) EXPECT_FALSE(ops.freed.count(fr));
  EXPECT_TRUE(std::is_sorted(out.begin(), out.end(),
                             [](FakeFrame* a, FakeFrame* b) { return a->seq < b->seq; }));
}

TEST(Faulter, EveryFrameIsDuplicatedAtRateOneWhenBurstsLeaveRoom) {
  FaultStats st;
  FakeFaulter f(rates(0, 0, 1, 0), 0, &st);
  FakeOps ops;
  int seq = 0;
  auto out = run(f, ops, std::vector<uint16_t>(100, 16), &seq);
  ASSERT_EQ(out.size(), 3200u);
  EXPECT_EQ(st.duplicated.load(), 1600u);
  for (size_t i = 0; i < out.size(); i += 2) {  // each original, then its copy
    EXPECT_EQ(out[i]->seq, static_cast<int>(i / 2));
    EXPECT_FALSE(out[i]->copy);
    EXPECT_EQ(out[i + 1]->seq, static_cast<int>(i / 2));
    EXPECT_TRUE(out[i + 1]->copy);
  }
}

TEST(Faulter, CopiesOfFullBurstsSpillToTheNextCallAndStayBounded) {
  FaultStats st;
  FakeFaulter f(rates(0, 0, 1, 0), 0, &st);
  FakeOps ops;
  int seq = 0;
  // Sustained full bursts: twice what fits. Copies are made while the spill stays bounded.
  auto out = run(f, ops, std::vector<uint16_t>(200, kCap), &seq);
  EXPECT_EQ(out.size(), 200u * kCap + st.duplicated);
  EXPECT_GT(st.duplicated.load(), 0u);
  std::set<int> originals;
  for (FakeFrame* fr : out)
    if (!fr->copy) {
      EXPECT_TRUE(originals.insert(fr->seq).second);
    }
  EXPECT_EQ(originals.size(), 200u * kCap);  // nothing lost, nothing twice but copies
}

TEST(Faulter, AFailedCopyIsNotCounted) {
  FaultStats st;
  FakeFaulter f(rates(0, 0, 1, 0), 0, &st);
  FakeOps ops;
  ops.copies_fail = true;
  int seq = 0;
  auto out = run(f, ops, {4, 4}, &seq);
  EXPECT_EQ(out.size(), 8u);
  EXPECT_EQ(st.duplicated.load(), 0u);
}

TEST(Faulter, HeldFramesComeOutAfterLaterFramesAndNoneIsLost) {
  FaultStats st;
  FakeFaulter f(rates(0, 0.3, 0, 0), 0, &st);
  FakeOps ops;
  int seq = 0;
  std::vector<uint16_t> sizes;
  for (int i = 0; i < 2000; ++i) sizes.push_back(static_cast<uint16_t>(i % 7));  // idle calls too
  auto out = run(f, ops, sizes, &seq);
  ASSERT_EQ(out.size(), static_cast<size_t>(seq));
  std::set<int> seen;
  for (FakeFrame* fr : out) EXPECT_TRUE(seen.insert(fr->seq).second);
  EXPECT_EQ(seen.size(), static_cast<size_t>(seq));
  int inversions = 0;
  for (size_t i = 1; i < out.size(); ++i) inversions += out[i]->seq < out[i - 1]->seq;
  EXPECT_GT(inversions, 0);
  EXPECT_GT(st.reordered.load(), 0u);
  EXPECT_TRUE(ops.freed.empty());
}

TEST(Faulter, AHeldFrameFollowsTheFirstFrameOfTheNextBurstOrAnIdleCall) {
  FaultStats st;
  FakeFaulter f(rates(0, 1, 0, 0), 0, &st);  // hold whatever it can
  FakeOps ops;
  FakeFrame* burst[kCap];
  burst[0] = ops.make(0);
  EXPECT_EQ(f.apply_burst_st(burst, 1, kCap, ops), 0);  // held
  EXPECT_EQ(f.held(), 1);
  burst[0] = ops.make(1);
  burst[1] = ops.make(2);
  // 1 and 2 are held too (rate 1); 0 comes out: it was held by the previous call.
  ASSERT_EQ(f.apply_burst_st(burst, 2, kCap, ops), 1);
  EXPECT_EQ(burst[0]->seq, 0);
  EXPECT_EQ(f.held(), 2);
  // An idle call releases what is held.
  ASSERT_EQ(f.apply_burst_st(burst, 0, kCap, ops), 2);
  EXPECT_EQ(burst[0]->seq, 1);
  EXPECT_EQ(burst[1]->seq, 2);
  EXPECT_EQ(f.held(), 0);
  // At most kMaxReorder frames are held; the others pass.
  for (uint16_t i = 0; i < 20; ++i) burst[i] = ops.make(10 + i);
  EXPECT_EQ(f.apply_burst_st(burst, 20, kCap, ops), 20 - FakeFaulter::kMaxReorder);
  EXPECT_EQ(f.held(), FakeFaulter::kMaxReorder);
  f.free_held(ops);
  EXPECT_EQ(ops.freed.size(), FakeFaulter::kMaxReorder);
  EXPECT_EQ(f.held(), 0);
}

TEST(Faulter, HeldFramesGoAfterTheFirstFrameOut) {
  FaultStats st;
  FakeFaulter f(rates(0, 0.5, 0, 0), 5, &st);
  FakeOps ops;
  int seq = 0;
  // Whenever a call starts with held frames and gets new ones, one new frame precedes them.
  FakeFrame* burst[kCap];
  for (int round = 0; round < 500; ++round) {
    const uint16_t late = f.held();
    const int first_new = seq;
    for (uint16_t i = 0; i < 4; ++i) burst[i] = ops.make(seq++);
    uint16_t out = f.apply_burst_st(burst, 4, kCap, ops);
    if (late && out > late) {
      EXPECT_GE(burst[0]->seq, first_new) << "round " << round;
    }
  }
}

TEST(Faulter, CorruptionFlipsOneBitInsideTheSpanOnly) {
  FaultStats st;
  FakeFaulter f(rates(0, 0, 0, 1), 0, &st);
  FakeOps ops;
  int seq = 0;
  auto out = run(f, ops, std::vector<uint16_t>(100, 10), &seq);
  ASSERT_EQ(out.size(), 1000u);
  EXPECT_EQ(st.corrupted.load(), 1000u);
  for (FakeFrame* fr : out) {
    int bits = 0;
    for (size_t i = 0; i < fr->bytes.size(); ++i) {
      bits += __builtin_popcount(fr->bytes[i]);
      if (i < 10) {
        EXPECT_EQ(fr->bytes[i], 0) << "outside the span";
      }
    }
    EXPECT_EQ(bits, 1);
  }
}

TEST(Faulter, FramesThatAreNotFaultablePassUntouchedAndDrawNothing) {
  FaultStats st;
  FakeFaulter f(rates(1, 1, 1, 1), 0, &st);
  FakeOps ops;
  FakeFrame* burst[kCap];
  for (uint16_t i = 0; i < 10; ++i) burst[i] = ops.make(i, /*faultable=*/false);
  ASSERT_EQ(f.apply_burst_st(burst, 10, kCap, ops), 10);
  for (uint16_t i = 0; i < 10; ++i) EXPECT_EQ(burst[i]->seq, i);
  EXPECT_EQ(st.dropped + st.reordered + st.duplicated + st.corrupted, 0u);
  // The generator does not move for them: with and without them before, the same faults follow.
  FaultStats st2;
  FakeFaulter g(rates(0.5, 0.5, 0.5, 0.5), 9, &st2), h(rates(0.5, 0.5, 0.5, 0.5), 9, &st2);
  FakeOps ops2;
  for (uint16_t i = 0; i < 5; ++i) burst[i] = ops2.make(i, false);
  (void)g.apply_burst_st(burst, 5, kCap, ops2);
  std::vector<int> after_g, after_h;
  for (int r = 0; r < 50; ++r) {
    burst[0] = ops2.make(100 + r);
    uint16_t n = g.apply_burst_st(burst, 1, kCap, ops2);
    for (uint16_t i = 0; i < n; ++i) after_g.push_back(burst[i]->seq * 2 + burst[i]->copy);
    burst[0] = ops2.make(100 + r);
    n = h.apply_burst_st(burst, 1, kCap, ops2);
    for (uint16_t i = 0; i < n; ++i) after_h.push_back(burst[i]->seq * 2 + burst[i]->copy);
  }
  EXPECT_EQ(after_g, after_h);
  g.free_held(ops2);
  h.free_held(ops2);
}

}  // namespace
