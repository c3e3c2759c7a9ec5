// SPDX-License-Identifier: BSD-3-Clause
//
// MrTable (lib/proto/mr_table.h): keys, addressing, access checks, FI_MR_ENDPOINT, counters, and
// close against accesses in flight.
#include "proto/mr_table.h"

#include <gtest/gtest.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <atomic>
#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <vector>

namespace {

using dpfab::proto::MrTable;

constexpr uint64_t kRw = FI_REMOTE_READ | FI_REMOTE_WRITE;

uint32_t add(MrTable& t, void* buf, size_t len, uint64_t access, uint64_t key = 0) {
  iovec iov{buf, len};
  MrTable::Spec s;
  s.iov = &iov;
  s.count = 1;
  s.access = access;
  s.requested_key = key;
  auto r = t.add(s);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? r.value() : MrTable::kNoSlot;
}

uint64_t va(const void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST(MrTable, ProviderKeyOpensItsRegionWithVirtualAddresses) {
  MrTable t({});
  std::vector<uint8_t> buf(100, 7);
  const uint32_t s = add(t, buf.data(), buf.size(), kRw);
  const uint64_t key = t.key(s);
  MrTable::Ref ref;
  ASSERT_EQ(t.acquire(key, va(buf.data()) + 10, 20, FI_REMOTE_WRITE, 0, &ref), 0);
  const char msg[] = "hello";
  ref.copy_in(0, msg, 5);
  EXPECT_EQ(std::memcmp(buf.data() + 10, "hello", 5), 0);
  EXPECT_EQ(ref.contiguous(0, 20), buf.data() + 10);
  ref.release();
  // The whole region, and an empty access at its end.
  EXPECT_EQ(t.acquire(key, va(buf.data()), 100, kRw, 0, &ref), 0);
  EXPECT_EQ(t.acquire(key, va(buf.data()) + 100, 0, kRw, 0, &ref), 0);
}

TEST(MrTable, OutOfBoundsAndMissingRightsAreRefused) {
  MrTable t({});
  std::vector<uint8_t> buf(100);
  const uint64_t key = t.key(add(t, buf.data(), buf.size(), FI_REMOTE_READ));
  MrTable::Ref ref;
  EXPECT_EQ(t.acquire(key, va(buf.data()) - 1, 1, FI_REMOTE_READ, 0, &ref), -FI_EACCES);
  EXPECT_EQ(t.acquire(key, va(buf.data()) + 99, 2, FI_REMOTE_READ, 0, &ref), -FI_EACCES);
  EXPECT_EQ(t.acquire(key, va(buf.data()) + 101, 0, FI_REMOTE_READ, 0, &ref), -FI_EACCES);
  EXPECT_EQ(t.acquire(key, va(buf.data()), UINT64_MAX, FI_REMOTE_READ, 0, &ref), -FI_EACCES);
  EXPECT_EQ(t.acquire(key, UINT64_MAX, 2, FI_REMOTE_READ, 0, &ref), -FI_EACCES);
  EXPECT_EQ(t.acquire(key, va(buf.data()), 1, FI_REMOTE_WRITE, 0, &ref), -FI_EACCES);
  EXPECT_FALSE(ref.held());
  EXPECT_EQ(t.acquire(key, va(buf.data()), 1, FI_REMOTE_READ, 0, &ref), 0);
}

TEST(MrTable, WrongKeysAreRejected) {
  MrTable t({});
  std::vector<uint8_t> buf(64);
  const uint64_t key = t.key(add(t, buf.data(), buf.size(), kRw));
  MrTable::Ref ref;
  EXPECT_EQ(t.acquire(key ^ (1ull << 40), va(buf.data()), 1, kRw, 0, &ref), -FI_EKEYREJECTED);
  EXPECT_EQ(t.acquire(key ^ (1ull << 25), va(buf.data()), 1, kRw, 0, &ref), -FI_EKEYREJECTED);
  EXPECT_EQ(t.acquire(key + 1, va(buf.data()), 1, kRw, 0, &ref), -FI_EKEYREJECTED);
  EXPECT_EQ(t.acquire(0, va(buf.data()), 1, kRw, 0, &ref), -FI_EKEYREJECTED);
  EXPECT_EQ(t.acquire(UINT64_MAX, va(buf.data()), 1, kRw, 0, &ref), -FI_EKEYREJECTED);
}

TEST(MrTable, KeysAreDistinctAndLookRandom) {
  MrTable t({});
  std::vector<uint8_t> buf(8);
  std::set<uint64_t> keys, high;
  std::vector<uint32_t> slots;
  for (int i = 0; i < 2000; ++i) {
    slots.push_back(add(t, buf.data(), buf.size(), kRw));
    keys.insert(t.key(slots.back()));
    high.insert(t.key(slots.back()) >> 32);
  }
  EXPECT_EQ(keys.size(), 2000u);
  EXPECT_GT(high.size(), 1990u);  // 32 random bits each: collisions are rare
  EXPECT_EQ(t.size(), 2000u);
}

TEST(MrTable, AClosedRegionsKeyNeverOpensALaterOne) {
  MrTable t({});
  std::vector<uint8_t> buf(8);
  std::vector<uint64_t> dead;
  // Enough churn that slots are reused (kReuseAfter freed slots wait before one is).
  for (int round = 0; round < 3000; ++round) {
    const uint32_t s = add(t, buf.data(), buf.size(), kRw);
    dead.push_back(t.key(s));
    t.remove(s, nullptr, nullptr);
  }
  const uint32_t live = add(t, buf.data(), buf.size(), kRw);
  MrTable::Ref ref;
  for (uint64_t k : dead)
    ASSERT_EQ(t.acquire(k, va(buf.data()), 1, kRw, 0, &ref), -FI_EKEYREJECTED);
  EXPECT_EQ(t.acquire(t.key(live), va(buf.data()), 1, kRw, 0, &ref), 0);
  // Slots were reused: the same index came back with another generation.
  std::set<uint64_t> indices;
  for (uint64_t k : dead) indices.insert(k & ((1u << MrTable::kIndexBits) - 1));
  EXPECT_LT(indices.size(), dead.size());
}

TEST(MrTable, ASlotIsRetiredBeforeItsGenerationWraps) {
  MrTable t({});
  std::vector<uint8_t> buf(8);
  // kReuseAfter freed slots parked: each registration then takes the oldest freed slot, so the
  // same kReuseAfter slots go round. Run them through more than every generation.
  std::vector<uint32_t> parked;
  for (uint32_t i = 0; i < MrTable::kReuseAfter; ++i) parked.push_back(add(t, buf.data(), 8, kRw));
  std::map<uint32_t, uint64_t> first_key;
  for (uint32_t s : parked) {
    first_key[s] = t.key(s);
    t.remove(s, nullptr, nullptr);
  }
  std::vector<uint32_t> uses(1u << MrTable::kIndexBits);
  const uint32_t rounds = MrTable::kReuseAfter * ((1u << MrTable::kGenBits) + 8);
  for (uint32_t i = 0; i < rounds; ++i) {
    const uint32_t s = add(t, buf.data(), 8, kRw);
    ASSERT_NE(s, MrTable::kNoSlot);
    ++uses[s];
    t.remove(s, nullptr, nullptr);
  }
  // Each parked slot served every generation once more (gen 2..4095), then was retired and fresh
  // slots took over.
  for (uint32_t s : parked) EXPECT_EQ(uses[s], (1u << MrTable::kGenBits) - 2) << s;
  MrTable::Ref ref;
  for (auto [s, k] : first_key)
    EXPECT_EQ(t.acquire(k, va(buf.data()), 1, kRw, 0, &ref), -FI_EKEYREJECTED);
}

TEST(MrTable, OffsetAddressingAndVectoredRegions) {
  MrTable::Config c;
  c.virt_addr = false;
  MrTable t(c);
  std::vector<uint8_t> a(10, 0), b(20, 0);
  iovec iov[2] = {{a.data(), a.size()}, {b.data(), b.size()}};
  MrTable::Spec s;
  s.iov = iov;
  s.count = 2;
  s.access = kRw;
  auto slot = t.add(s);
  ASSERT_TRUE(slot.ok());
  MrTable::Ref ref;
  // Offsets 8..13 cross from the first iov into the second.
  ASSERT_EQ(t.acquire(t.key(*slot), 8, 6, FI_REMOTE_WRITE, 0, &ref), 0);
  EXPECT_EQ(ref.contiguous(0, 6), nullptr);
  EXPECT_EQ(ref.contiguous(2, 4), b.data());
  ref.copy_in(0, "abcdef", 6);
  EXPECT_EQ(a[8], 'a');
  EXPECT_EQ(a[9], 'b');
  EXPECT_EQ(std::memcmp(b.data(), "cdef", 4), 0);
  char out[6];
  ref.copy_out(0, out, 6);
  EXPECT_EQ(std::memcmp(out, "abcdef", 6), 0);
  EXPECT_EQ(t.acquire(t.key(*slot), 25, 6, FI_REMOTE_WRITE, 0, &ref), -FI_EACCES);
  EXPECT_EQ(t.acquire(t.key(*slot), 24, 6, FI_REMOTE_WRITE, 0, &ref), 0);
}

TEST(MrTable, RequestedKeysAreUniqueAndLookedUp) {
  MrTable::Config c;
  c.prov_key = false;
  MrTable t(c);
  std::vector<uint8_t> buf(16);
  const uint32_t s1 = add(t, buf.data(), 16, kRw, 42);
  EXPECT_EQ(t.key(s1), 42u);
  iovec iov{buf.data(), 16};
  MrTable::Spec dup;
  dup.iov = &iov;
  dup.count = 1;
  dup.requested_key = 42;
  EXPECT_EQ(t.add(dup).code(), -FI_ENOKEY);
  // Many keys, some sharing hash chains: each finds its own region.
  std::vector<std::vector<uint8_t>> bufs(3000, std::vector<uint8_t>(4));
  std::vector<uint32_t> slots;
  for (size_t i = 0; i < bufs.size(); ++i)
    slots.push_back(add(t, bufs[i].data(), 4, kRw, 1000 + i));
  MrTable::Ref ref;
  for (size_t i = 0; i < bufs.size(); i += 7) {
    ASSERT_EQ(t.acquire(1000 + i, va(bufs[i].data()), 4, kRw, 0, &ref), 0);
    ASSERT_EQ(t.acquire(1000 + i, va(bufs[(i + 1) % bufs.size()].data()) + 64, 4, kRw, 0, &ref),
              -FI_EACCES);
  }
  for (size_t i = 0; i < bufs.size(); i += 2) t.remove(slots[i], nullptr, nullptr);
  for (size_t i = 0; i < bufs.size(); ++i)
    ASSERT_EQ(t.acquire(1000 + i, va(bufs[i].data()), 4, kRw, 0, &ref),
              i % 2 ? 0 : -FI_EKEYREJECTED);
  EXPECT_EQ(t.acquire(999999, va(buf.data()), 1, kRw, 0, &ref), -FI_EKEYREJECTED);
  // A closed key may be registered again, and then names the new region.
  t.remove(s1, nullptr, nullptr);
  std::vector<uint8_t> other(8);
  add(t, other.data(), 8, FI_REMOTE_READ, 42);
  EXPECT_EQ(t.acquire(42, va(buf.data()), 1, FI_REMOTE_READ, 0, &ref), -FI_EACCES);
  EXPECT_EQ(t.acquire(42, va(other.data()), 1, FI_REMOTE_READ, 0, &ref), 0);
}

TEST(MrTable, EndpointRegionsWaitForBindAndEnable) {
  MrTable::Config c;
  c.endpoint = true;
  MrTable t(c);
  std::vector<uint8_t> buf(8);
  const uint32_t s = add(t, buf.data(), 8, kRw);
  const uint64_t key = t.key(s);
  MrTable::Ref ref;
  EXPECT_EQ(t.acquire(key, va(buf.data()), 1, kRw, 5, &ref), -FI_EKEYREJECTED);  // disabled
  EXPECT_EQ(t.enable(s), -FI_EOPBADSTATE);                                       // no endpoint
  EXPECT_EQ(t.bind_endpoint(s, 0), -FI_EINVAL);
  EXPECT_EQ(t.bind_endpoint(s, 5), 0);
  EXPECT_EQ(t.bind_endpoint(s, 6), -FI_EINVAL);  // one endpoint
  EXPECT_EQ(t.enable(s), 0);
  EXPECT_EQ(t.bind_endpoint(s, 5), -FI_EINVAL);  // after enable
  EXPECT_EQ(t.acquire(key, va(buf.data()), 1, kRw, 5, &ref), 0);
  EXPECT_EQ(t.acquire(key, va(buf.data()), 1, kRw, 6, &ref), -FI_EKEYREJECTED);  // other ep
}

TEST(MrTable, CountersAreBoundOnceAndReturnedAtClose) {
  MrTable t({});
  std::vector<uint8_t> buf(8);
  const uint32_t s = add(t, buf.data(), 8, kRw);
  int w = 0, r = 0;
  EXPECT_EQ(t.bind_counter(s, &w, FI_REMOTE_WRITE), 0);
  EXPECT_EQ(t.bind_counter(s, &w, FI_REMOTE_WRITE), -FI_EINVAL);
  EXPECT_EQ(t.bind_counter(s, &r, FI_SEND), -FI_EINVAL);
  EXPECT_EQ(t.bind_counter(s, &r, FI_REMOTE_READ), 0);
  MrTable::Ref ref;
  ASSERT_EQ(t.acquire(t.key(s), va(buf.data()), 1, kRw, 0, &ref), 0);
  EXPECT_EQ(ref.counter(true), &w);
  EXPECT_EQ(ref.counter(false), &r);
  ref.release();
  void *cw, *cr;
  t.remove(s, &cw, &cr);
  EXPECT_EQ(cw, &w);
  EXPECT_EQ(cr, &r);
}

TEST(MrTable, BadRegistrationsAreRefused) {
  MrTable t({});
  std::vector<uint8_t> buf(8);
  MrTable::Spec s;
  EXPECT_EQ(t.add(s).code(), -FI_EINVAL);
  iovec iov[5] = {
      {buf.data(), 1}, {buf.data(), 1}, {buf.data(), 1}, {buf.data(), 1}, {buf.data(), 1}};
  s.iov = iov;
  s.count = 5;
  EXPECT_EQ(t.add(s).code(), -FI_EINVAL);
  iovec empty{buf.data(), 0};
  s.iov = &empty;
  s.count = 1;
  EXPECT_EQ(t.add(s).code(), -FI_EINVAL);
  iovec null{nullptr, 8};
  s.iov = &null;
  EXPECT_EQ(t.add(s).code(), -FI_EINVAL);
  EXPECT_EQ(t.size(), 0u);
}

// remove() returns only once no access holds the region, and no access starts after it began.
TEST(MrTable, CloseWaitsForAccessesInFlight) {
  MrTable t({});
  std::vector<uint8_t> buf(4096);
  const uint32_t s = add(t, buf.data(), buf.size(), kRw);
  const uint64_t key = t.key(s);
  std::atomic<bool> closed{false};
  std::atomic<uint64_t> after{0}, ok{0};
  std::thread reader([&] {
    for (int i = 0; i < 200000; ++i) {
      MrTable::Ref ref;
      const bool was_closed = closed.load(std::memory_order_acquire);
      if (t.acquire(key, va(buf.data()), buf.size(), FI_REMOTE_WRITE, 0, &ref) == 0) {
        ref.copy_in(0, buf.data(), 64);
        ++ok;
        if (was_closed) ++after;  // an access that started after remove() returned
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  t.remove(s, nullptr, nullptr);
  closed.store(true, std::memory_order_release);
  reader.join();
  EXPECT_EQ(after.load(), 0u);
  EXPECT_GT(ok.load(), 0u);
}

}  // namespace
