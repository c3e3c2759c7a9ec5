// SPDX-License-Identifier: BSD-3-Clause
#include "shm/ring.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

using namespace dpfab::shm;

namespace {

constexpr uint64_t kSize = 4096;

struct Area {
  std::vector<uint8_t> mem = std::vector<uint8_t>(kRingControlBytes + kSize + 64);
  void* p() { return mem.data(); }
  RingControl* ctl() { return reinterpret_cast<RingControl*>(mem.data()); }
  uint8_t* data() { return mem.data() + kRingControlBytes; }
};

bool put(RingWriter& w, RecordKind k, const std::string& s) {
  RecordHeader* h = w.reserve(s.size());
  if (!h) return false;
  *h = RecordHeader{static_cast<uint32_t>(s.size()), k, 0, 1, 2, 3, 4, 0};
  std::memcpy(reinterpret_cast<uint8_t*>(h) + kRecordHeaderBytes, s.data(), s.size());
  w.commit();
  return true;
}

std::string get(RingReader& r, RingReader::Status* st = nullptr) {
  RecordHeader h{};
  const uint8_t* p = nullptr;
  auto s = r.next(&h, &p);
  if (st) *st = s;
  if (s != RingReader::Status::kRecord) return "<none>";
  return std::string(reinterpret_cast<const char*>(p), h.len);
}

}  // namespace

TEST(ShmRing, RecordsComeOutInOrderWithTheirHeaders) {
  Area a;
  RingWriter w(a.p(), kSize);
  RingReader r(a.p(), kSize);
  EXPECT_FALSE(r.maybe_ready());
  ASSERT_TRUE(put(w, RecordKind::kRdm, "hello"));
  ASSERT_TRUE(put(w, RecordKind::kFrame, ""));
  EXPECT_TRUE(r.maybe_ready());
  RecordHeader h{};
  const uint8_t* p = nullptr;
  ASSERT_EQ(r.next(&h, &p), RingReader::Status::kRecord);
  EXPECT_EQ(h.kind, RecordKind::kRdm);
  EXPECT_EQ(h.src_ep, 1);
  EXPECT_EQ(h.dst_ep, 4);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(p), h.len), "hello");
  EXPECT_EQ(get(r), "");
  RingReader::Status st;
  get(r, &st);
  EXPECT_EQ(st, RingReader::Status::kEmpty);
  r.release();
  EXPECT_EQ(a.ctl()->tail.load(), a.ctl()->head.load());
}

TEST(ShmRing, FullRingRefusesUntilTheConsumerReleases) {
  Area a;
  RingWriter w(a.p(), kSize);
  RingReader r(a.p(), kSize);
  const std::string rec(200, 'x');  // 256 bytes a record: 16 fit
  int n = 0;
  while (put(w, RecordKind::kRdm, rec)) ++n;
  EXPECT_EQ(n, 16);
  EXPECT_EQ(get(r), rec);
  EXPECT_FALSE(put(w, RecordKind::kRdm, rec)) << "not released yet";
  r.release();
  EXPECT_TRUE(put(w, RecordKind::kRdm, rec));
}

TEST(ShmRing, RecordsNeverWrapAPadFillsTheEnd) {
  Area a;
  RingWriter w(a.p(), kSize);
  RingReader r(a.p(), kSize);
  // Walk the ring several times with sizes that do not divide it.
  for (int i = 0; i < 200; ++i) {
    const std::string rec(static_cast<size_t>(i * 37 % 900), static_cast<char>('a' + i % 26));
    ASSERT_TRUE(put(w, RecordKind::kFrame, rec)) << i;
    ASSERT_EQ(get(r), rec) << i;
    r.release();
  }
  EXPECT_LE(w.max_payload(), kSize / 4);
}

TEST(ShmRing, CorruptHeadOrRecordIsReportedAndSticks) {
  {
    Area a;
    RingWriter w(a.p(), kSize);
    RingReader r(a.p(), kSize);
    ASSERT_TRUE(put(w, RecordKind::kRdm, "ok"));
    a.ctl()->head.store(kSize * 4);  // a head far beyond the tail
    RingReader::Status st;
    get(r, &st);
    EXPECT_EQ(st, RingReader::Status::kCorrupt);
    EXPECT_TRUE(r.corrupt());
    a.ctl()->head.store(64);
    get(r, &st);
    EXPECT_EQ(st, RingReader::Status::kCorrupt) << "a broken ring is never read again";
  }
  const auto broken = [](void (*spoil)(RecordHeader*)) {
    Area a;
    RingWriter w(a.p(), kSize);
    RingReader r(a.p(), kSize);
    EXPECT_TRUE(put(w, RecordKind::kRdm, "payload"));
    spoil(reinterpret_cast<RecordHeader*>(a.data()));
    RingReader::Status st;
    get(r, &st);
    return st;
  };
  EXPECT_EQ(broken([](RecordHeader* h) { h->len = 1 << 20; }), RingReader::Status::kCorrupt);
  EXPECT_EQ(broken([](RecordHeader* h) { h->len = 100; }), RingReader::Status::kCorrupt)
      << "longer than what the head covers";
  EXPECT_EQ(broken([](RecordHeader* h) { h->kind = static_cast<RecordKind>(0); }),
            RingReader::Status::kCorrupt);
  EXPECT_EQ(broken([](RecordHeader* h) { h->kind = static_cast<RecordKind>(9); }),
            RingReader::Status::kCorrupt);
  EXPECT_EQ(broken([](RecordHeader* h) { h->flags = 1; }), RingReader::Status::kCorrupt);
  EXPECT_EQ(broken([](RecordHeader* h) { h->kind = RecordKind::kPad; }),
            RingReader::Status::kCorrupt)
      << "a pad must end the data area";
}

TEST(ShmRing, MisalignedHeadIsCorrupt) {
  Area a;
  RingReader r(a.p(), kSize);
  a.ctl()->head.store(17);
  RingReader::Status st;
  get(r, &st);
  EXPECT_EQ(st, RingReader::Status::kCorrupt);
}

TEST(ShmRing, ProducerAndConsumerThreadsAgreeOnEveryByte) {
  Area a;
  constexpr int kRecords = 20000;
  std::thread producer([&] {
    RingWriter w(a.p(), kSize);
    for (int i = 0; i < kRecords;) {
      const uint32_t len = static_cast<uint32_t>(8 + (i * 7919) % 500);
      RecordHeader* h = w.reserve(len);
      if (!h) continue;
      *h = RecordHeader{len, RecordKind::kRdm, 0, 0, 0, 0, 0, 0};
      auto* p = reinterpret_cast<uint8_t*>(h) + kRecordHeaderBytes;
      std::memcpy(p, &i, sizeof(i));
      for (uint32_t b = sizeof(i); b < len; ++b) p[b] = static_cast<uint8_t>(i + b);
      w.commit();
      ++i;
    }
  });
  RingReader r(a.p(), kSize);
  int expect = 0, bad = 0;
  while (expect < kRecords) {
    RecordHeader h{};
    const uint8_t* p = nullptr;
    auto st = r.next(&h, &p);
    ASSERT_NE(st, RingReader::Status::kCorrupt);
    if (st == RingReader::Status::kEmpty) {
      r.release();
      continue;
    }
    int i;
    std::memcpy(&i, p, sizeof(i));
    if (i != expect || h.len != 8 + static_cast<uint32_t>((i * 7919) % 500)) ++bad;
    for (uint32_t b = sizeof(i); b < h.len; ++b)
      if (p[b] != static_cast<uint8_t>(i + b)) ++bad;
    ++expect;
    if (expect % 8 == 0) r.release();
  }
  r.release();
  producer.join();
  EXPECT_EQ(bad, 0);
}
