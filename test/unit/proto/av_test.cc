// SPDX-License-Identifier: BSD-3-Clause
//
// proto::AddressVector without EAL or libfabric core: storage, lookups racing with inserts and
// removes, the reverse (FI_SOURCE) map, removal, table index order, address resolution through a
// fake Resolver, and asynchronous completions on an event::Eq. Tests are named after the fi_av(3)
// sentence (or the rule of lib/proto/av.h) they check. Every wait is bounded.
#include "proto/av.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <rdma/fi_errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace dpfab::proto {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using wire::Address;

// An address whose every field is derived from `i`, so that a reader can tell a torn entry.
Address addr_of(uint32_t i, bool with_mac = true) {
  Address a;
  if (with_mac) {
    a.mac[0] = 0x02;
    a.mac[1] = 0x64;
    a.mac[2] = static_cast<uint8_t>(i >> 24);
    a.mac[3] = static_cast<uint8_t>(i >> 16);
    a.mac[4] = static_cast<uint8_t>(i >> 8);
    a.mac[5] = static_cast<uint8_t>(i);
  }
  a.ipv4_be = htonl(0x0a000000u + i + 1);
  a.udp_port_be = htons(static_cast<uint16_t>(1000 + i % 50000));
  a.ep_id_be = htons(static_cast<uint16_t>(i * 7));
  return a;
}

// Whether `a` is exactly addr_of(i) (MAC included).
bool is_addr_of(const Address& a, uint32_t i) {
  Address want = addr_of(i);
  return std::memcmp(&a, &want, sizeof(a)) == 0;
}

rte_ether_addr mac_for_ip(uint32_t ipv4_be) {
  rte_ether_addr m{};
  m.addr_bytes[0] = 0x02;
  m.addr_bytes[1] = 0xaa;
  std::memcpy(&m.addr_bytes[2], &ipv4_be, 4);
  return m;
}

bool mac_equals(const Address& a, const rte_ether_addr& m) {
  return std::memcmp(a.mac, m.addr_bytes, 6) == 0;
}

// A resolver whose answers follow a plan per IPv4, counted in poll() calls.
class FakeResolver final : public Resolver {
 public:
  struct Plan {
    int resolve_at = -1;  ///< polls after which the MAC is known (0: known at once; -1: never)
    int fail_at = -1;     ///< polls after which resolution has failed (-1: never)
  };
  void plan(uint32_t ipv4_be, Plan p) {
    std::lock_guard lock(mu_);
    plans_[ipv4_be] = p;
  }
  void set_default(Plan p) {
    std::lock_guard lock(mu_);
    default_ = p;
  }
  std::optional<rte_ether_addr> resolve(uint32_t ipv4_be) noexcept override {
    std::lock_guard lock(mu_);
    ++resolves_[ipv4_be];
    Plan p = plan_of(ipv4_be);
    if (p.resolve_at >= 0 && polls_ >= p.resolve_at) return mac_for_ip(ipv4_be);
    return std::nullopt;
  }
  void poll() noexcept override {
    std::lock_guard lock(mu_);
    ++polls_;
  }
  bool failed(uint32_t ipv4_be) noexcept override {
    std::lock_guard lock(mu_);
    Plan p = plan_of(ipv4_be);
    return p.fail_at >= 0 && polls_ >= p.fail_at;
  }
  int polls() {
    std::lock_guard lock(mu_);
    return polls_;
  }
  int resolves(uint32_t ipv4_be) {
    std::lock_guard lock(mu_);
    return resolves_[ipv4_be];
  }

 private:
  Plan plan_of(uint32_t ip) const {
    auto it = plans_.find(ip);
    return it == plans_.end() ? default_ : it->second;
  }
  std::mutex mu_;
  std::map<uint32_t, Plan> plans_;
  std::map<uint32_t, int> resolves_;
  Plan default_;
  int polls_ = 0;
};

const fid_t kAvFid = reinterpret_cast<fid_t>(0x5a5a);

AddressVector::Options options(AvType type, bool async = false, Resolver* r = nullptr,
                               int64_t timeout_ms = 3000) {
  AddressVector::Options o;
  o.type = type;
  o.async = async;
  o.resolver = r;
  o.resolve_timeout_ms = timeout_ms;
  o.fid = kAvFid;
  return o;
}

std::unique_ptr<event::Eq> make_eq(size_t size = 64) {
  event::Eq::Options o;
  o.size = size;
  return std::make_unique<event::Eq>(nullptr, o);
}

// Reads the next non-error EQ entry; fails the test when it is not an FI_AV_COMPLETE.
fi_eq_entry read_complete(event::Eq& eq) {
  fi_eq_entry e{};
  uint32_t event = 0;
  EXPECT_EQ(eq.read(&event, &e, sizeof(e), 0), static_cast<ssize_t>(sizeof(e)));
  EXPECT_EQ(event, static_cast<uint32_t>(FI_AV_COMPLETE));
  EXPECT_EQ(e.fid, kAvFid);
  return e;
}

fi_eq_err_entry read_error(event::Eq& eq) {
  fi_eq_entry probe{};
  uint32_t event = 0;
  EXPECT_EQ(eq.read(&event, &probe, sizeof(probe), 0), -FI_EAVAIL);
  fi_eq_err_entry err{};
  EXPECT_EQ(eq.readerr(&err, 0), static_cast<ssize_t>(sizeof(err)));
  EXPECT_EQ(err.fid, kAvFid);
  return err;
}

bool eq_empty(event::Eq& eq) {
  fi_eq_entry e{};
  uint32_t event = 0;
  return eq.read(&event, &e, sizeof(e), FI_PEEK) == -FI_EAGAIN;
}

// ---- storage and lookups -----------------------------------------------------------------------

TEST(AvTable, FirstAddressIsIndexZeroAndIndicesAccumulateAcrossCalls) {
  AddressVector av(options(AvType::kTable));
  std::vector<Address> a = {addr_of(0), addr_of(1), addr_of(2)};
  fi_addr_t out[3] = {};
  ASSERT_EQ(av.insert(a.data(), 3, out, 0, nullptr), 3);
  EXPECT_EQ(out[0], 0u);
  EXPECT_EQ(out[1], 1u);
  EXPECT_EQ(out[2], 2u);
  Address b[2] = {addr_of(3), addr_of(4)};
  ASSERT_EQ(av.insert(b, 2, out, 0, nullptr), 2);
  EXPECT_EQ(out[0], 3u);
  EXPECT_EQ(out[1], 4u);
  for (uint32_t i = 0; i < 5; ++i) {
    const AvEntry* e = av.lookup(i);
    ASSERT_NE(e, nullptr) << i;
    EXPECT_TRUE(is_addr_of(e->addr, i)) << i;
  }
  EXPECT_EQ(av.size(), 5u);
  EXPECT_EQ(av.next_index(), 5u);
}

TEST(AvTable, FiAddrMayBeNullBecauseInsertionsOccurAtPredeterminedIndex) {
  AddressVector av(options(AvType::kTable));
  Address a[2] = {addr_of(10), addr_of(11)};
  ASSERT_EQ(av.insert(a, 2, nullptr, 0, nullptr), 2);
  ASSERT_NE(av.lookup(1), nullptr);
  EXPECT_TRUE(is_addr_of(av.lookup(1)->addr, 11));
}

TEST(AvMap, ReturnedFiAddrsAreUniqueAndMapToTheirAddress) {
  AddressVector av(options(AvType::kMap));
  std::vector<Address> a;
  for (uint32_t i = 0; i < 100; ++i) a.push_back(addr_of(i));
  std::vector<fi_addr_t> out(100, FI_ADDR_NOTAVAIL);
  ASSERT_EQ(av.insert(a.data(), a.size(), out.data(), 0, nullptr), 100);
  std::set<fi_addr_t> seen(out.begin(), out.end());
  EXPECT_EQ(seen.size(), 100u);
  for (uint32_t i = 0; i < 100; ++i) {
    ASSERT_NE(out[i], FI_ADDR_NOTAVAIL);
    ASSERT_NE(av.lookup(out[i]), nullptr);
    EXPECT_TRUE(is_addr_of(av.lookup(out[i])->addr, i));
  }
}

TEST(AvLookup, NullForAddressesThatAreNotValid) {
  AddressVector av(options(AvType::kTable));
  EXPECT_EQ(av.lookup(0), nullptr);
  EXPECT_EQ(av.lookup(FI_ADDR_NOTAVAIL), nullptr);
  EXPECT_EQ(av.lookup(AddressVector::kMaxEntries), nullptr);
  Address a = addr_of(1);
  ASSERT_EQ(av.insert(&a, 1, nullptr, 0, nullptr), 1);
  EXPECT_NE(av.lookup(0), nullptr);
  EXPECT_EQ(av.lookup(1), nullptr);  // reserved chunk, never inserted
  EXPECT_EQ(av.lookup(5000), nullptr);
}

TEST(AvInsert, InsertionsSpanChunks) {
  AddressVector av(options(AvType::kTable));
  const uint32_t n = 3 * AddressVector::kChunkEntries + 17;
  std::vector<Address> a;
  for (uint32_t i = 0; i < n; ++i) a.push_back(addr_of(i));
  ASSERT_EQ(av.insert(a.data(), n, nullptr, 0, nullptr), static_cast<int>(n));
  for (uint32_t i = 0; i < n; ++i) {
    ASSERT_NE(av.lookup(i), nullptr) << i;
    ASSERT_TRUE(is_addr_of(av.lookup(i)->addr, i)) << i;
    ASSERT_EQ(av.reverse(a[i].ipv4_be, a[i].udp_port_be, a[i].ep_id_be), i);
  }
}

// "Insertion calls for an AV opened for synchronous operation will return the number of addresses
// that were successfully inserted." "the fi_addr buffer associated with a failed or aborted
// insertion will be set to FI_ADDR_NOTAVAIL."
TEST(AvInsert, SyncReturnsNumberInsertedAndFailedAddressIsNotavail) {
  for (AvType type : {AvType::kMap, AvType::kTable}) {
    AddressVector av(options(type));
    Address a[3] = {addr_of(1), addr_of(2), addr_of(3)};
    a[1].version = 7;  // invalid
    fi_addr_t out[3] = {7, 7, 7};
    EXPECT_EQ(av.insert(a, 3, out, 0, nullptr), 2);
    EXPECT_NE(out[0], FI_ADDR_NOTAVAIL);
    EXPECT_EQ(out[1], FI_ADDR_NOTAVAIL);
    EXPECT_NE(out[2], FI_ADDR_NOTAVAIL);
    EXPECT_TRUE(is_addr_of(av.lookup(out[2])->addr, 3));
  }
}

// A failed address keeps its index in a table (its entry is a hole), so the next addresses keep
// their predetermined indices.
TEST(AvTable, FailedAddressLeavesAHoleAtItsIndex) {
  AddressVector av(options(AvType::kTable));
  Address a[3] = {addr_of(1), addr_of(2), addr_of(3)};
  a[1].version = 0;
  ASSERT_EQ(av.insert(a, 3, nullptr, 0, nullptr), 2);
  EXPECT_NE(av.lookup(0), nullptr);
  EXPECT_EQ(av.lookup(1), nullptr);
  ASSERT_NE(av.lookup(2), nullptr);
  EXPECT_TRUE(is_addr_of(av.lookup(2)->addr, 3));
  size_t len = sizeof(Address);
  Address got;
  EXPECT_EQ(av.lookup_address(1, &got, &len), -FI_EINVAL);  // "use ... fi_av_lookup to learn"
}

TEST(AvInsert, AddressWithoutIpv4IsInvalid) {
  AddressVector av(options(AvType::kTable));
  Address a = addr_of(1);
  a.ipv4_be = 0;
  fi_addr_t out = 0;
  int err = -1;
  EXPECT_EQ(av.insert(&a, 1, &out, FI_SYNC_ERR, &err), 0);
  EXPECT_EQ(out, FI_ADDR_NOTAVAIL);
  EXPECT_EQ(err, FI_EINVAL);
}

// FI_SYNC_ERR: "the context parameter of insertion calls references an array of integers ...
// Successful insertions will be updated to 0. Failures will contain a fabric errno code."
TEST(AvInsert, SyncErrWritesZeroOrErrnoPerAddress) {
  AddressVector av(options(AvType::kTable));
  Address a[2] = {addr_of(1), addr_of(2)};
  a[1].version = 9;
  int errs[2] = {-1, 0};
  ASSERT_EQ(av.insert(a, 2, nullptr, FI_SYNC_ERR, errs), 1);
  EXPECT_EQ(errs[0], 0);
  EXPECT_EQ(errs[1], FI_EINVAL);
}

TEST(AvInsert, FlagsAndArgumentsAreChecked) {
  AddressVector av(options(AvType::kTable));
  Address a = addr_of(1);
  EXPECT_EQ(av.insert(&a, 1, nullptr, FI_SYNC_ERR, nullptr), -FI_EINVAL);
  EXPECT_EQ(av.insert(&a, 1, nullptr, FI_AV_USER_ID, nullptr), -FI_EINVAL);  // IDs need an array
  EXPECT_EQ(av.insert(&a, 1, nullptr, FI_SEND, nullptr), -FI_EBADFLAGS);
  EXPECT_EQ(av.insert(nullptr, 1, nullptr, 0, nullptr), -FI_EINVAL);
  EXPECT_EQ(av.insert(nullptr, 0, nullptr, 0, nullptr), 0);
  // FI_MORE is a hint: "Providers are free to ignore FI_MORE."
  EXPECT_EQ(av.insert(&a, 1, nullptr, FI_MORE, nullptr), 1);
  EXPECT_EQ(av.next_index(), 1u);  // rejected calls reserved nothing
}

// ---- removal -----------------------------------------------------------------------------------

// "The removed address ... is invalid until it is returned again by a new fi_av_insert."
TEST(AvRemove, RemovedAddressIsInvalid) {
  AddressVector av(options(AvType::kMap));
  Address a[2] = {addr_of(1), addr_of(2)};
  fi_addr_t out[2];
  ASSERT_EQ(av.insert(a, 2, out, 0, nullptr), 2);
  const AvEntry* before = av.lookup(out[0]);
  ASSERT_NE(before, nullptr);
  ASSERT_EQ(av.remove(&out[0], 1, 0), 0);
  EXPECT_EQ(av.lookup(out[0]), nullptr);
  EXPECT_NE(av.lookup(out[1]), nullptr);
  EXPECT_EQ(av.reverse(a[0].ipv4_be, a[0].udp_port_be, a[0].ep_id_be), FI_ADDR_NOTAVAIL);
  size_t len = sizeof(Address);
  Address got;
  EXPECT_EQ(av.lookup_address(out[0], &got, &len), -FI_EINVAL);
  // An operation that still holds the old entry reads the old address, unchanged.
  EXPECT_TRUE(is_addr_of(before->addr, 1));
  EXPECT_EQ(av.size(), 1u);
}

// "providers are required to support the removal, followed by the re-insertion of an address."
TEST(AvRemove, RemovedAddressCanBeInsertedAgain) {
  AddressVector av(options(AvType::kTable));
  Address a = addr_of(5);
  fi_addr_t first, second;
  ASSERT_EQ(av.insert(&a, 1, &first, 0, nullptr), 1);
  ASSERT_EQ(av.remove(&first, 1, 0), 0);
  ASSERT_EQ(av.insert(&a, 1, &second, 0, nullptr), 1);
  EXPECT_NE(first, second);  // indices are not reused
  EXPECT_EQ(av.lookup(first), nullptr);
  ASSERT_NE(av.lookup(second), nullptr);
  EXPECT_EQ(av.reverse(a.ipv4_be, a.udp_port_be, a.ep_id_be), second);
}

TEST(AvRemove, InvalidFiAddrOrFlagsRemoveNothing) {
  AddressVector av(options(AvType::kTable));
  Address a[2] = {addr_of(1), addr_of(2)};
  ASSERT_EQ(av.insert(a, 2, nullptr, 0, nullptr), 2);
  fi_addr_t bad[2] = {0, 9};
  EXPECT_EQ(av.remove(bad, 2, 0), -FI_EINVAL);
  EXPECT_NE(av.lookup(0), nullptr);  // all or nothing
  fi_addr_t one = 1;
  EXPECT_EQ(av.remove(&one, 1, FI_MORE), -FI_EINVAL);  // "Flags ... must be 0"
  EXPECT_EQ(av.remove(nullptr, 1, 0), -FI_EINVAL);
  fi_addr_t notavail = FI_ADDR_NOTAVAIL;
  EXPECT_EQ(av.remove(&notavail, 1, 0), -FI_EINVAL);
  ASSERT_EQ(av.remove(&one, 1, 0), 0);
  EXPECT_EQ(av.remove(&one, 1, 0), -FI_EINVAL);  // removed already
  EXPECT_EQ(av.size(), 1u);
}

// ---- reverse lookup ----------------------------------------------------------------------------

TEST(AvReverse, FindsByIpPortAndEndpointId) {
  AddressVector av(options(AvType::kMap));
  Address a[3] = {addr_of(1), addr_of(2), addr_of(3)};
  fi_addr_t out[3];
  ASSERT_EQ(av.insert(a, 3, out, 0, nullptr), 3);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(av.reverse(a[i].ipv4_be, a[i].udp_port_be, a[i].ep_id_be), out[i]);
  // Any field different: not found.
  EXPECT_EQ(av.reverse(a[0].ipv4_be, a[0].udp_port_be, htons(999)), FI_ADDR_NOTAVAIL);
  EXPECT_EQ(av.reverse(a[0].ipv4_be, htons(1), a[0].ep_id_be), FI_ADDR_NOTAVAIL);
  EXPECT_EQ(av.reverse(a[1].ipv4_be, a[0].udp_port_be, a[0].ep_id_be), FI_ADDR_NOTAVAIL);
  EXPECT_EQ(av.reverse(0, a[0].udp_port_be, a[0].ep_id_be), FI_ADDR_NOTAVAIL);
}

// ---- user IDs (FI_AV_USER_ID) -------------------------------------------------------------------

// fi_av(3): with the FI_AV_USER_ID flag the fi_addr array carries, on input, the IDs completions
// report in place of the fi_addr; on output the fi_addrs. Addresses inserted without it keep
// reporting their fi_addr.
TEST(AvUserId, InsertFlagTakesTheIdsFromTheFiAddrArray) {
  AddressVector av(options(AvType::kTable));
  Address plain = addr_of(1);
  fi_addr_t p = 99;
  ASSERT_EQ(av.insert(&plain, 1, &p, 0, nullptr), 1);
  EXPECT_EQ(av.completion_addr(p), p);  // no user IDs yet
  Address a[2] = {addr_of(2), addr_of(3)};
  fi_addr_t io[2] = {0xabc0, 0xabc1};
  ASSERT_EQ(av.insert(a, 2, io, FI_AV_USER_ID, nullptr), 2);
  EXPECT_EQ(io[0], 1u);
  EXPECT_EQ(io[1], 2u);
  EXPECT_EQ(av.completion_addr(av.reverse(a[0].ipv4_be, a[0].udp_port_be, a[0].ep_id_be)), 0xabc0u);
  EXPECT_EQ(av.completion_addr(io[1]), 0xabc1u);
  EXPECT_EQ(av.completion_addr(p), p);  // inserted without an ID
  EXPECT_EQ(av.completion_addr(FI_ADDR_NOTAVAIL), FI_ADDR_NOTAVAIL);
  // fi_av_set_user_id changes an ID.
  EXPECT_EQ(av.set_user_id(io[0], 7, 0), FI_SUCCESS);
  EXPECT_EQ(av.completion_addr(io[0]), 7u);
  EXPECT_EQ(av.set_user_id(io[0], 7, FI_MORE), -FI_EINVAL);
  EXPECT_EQ(av.set_user_id(42, 7, 0), -FI_EINVAL);  // not an address of the AV
}

// An AV opened with FI_AV_USER_ID (API 1.20): completions report FI_ADDR_NOTAVAIL until
// fi_av_set_user_id, and the per-insertion flag is invalid.
TEST(AvUserId, AvOpenedForUserIdsReportsNotavailUntilSet) {
  auto opts = options(AvType::kTable);
  opts.user_ids = true;
  AddressVector av(opts);
  Address a[2] = {addr_of(1), addr_of(2)};
  fi_addr_t out[2];
  ASSERT_EQ(av.insert(a, 2, out, 0, nullptr), 2);
  EXPECT_EQ(av.completion_addr(out[0]), FI_ADDR_NOTAVAIL);
  ASSERT_EQ(av.set_user_id(out[1], 0x1234, 0), FI_SUCCESS);
  EXPECT_EQ(av.completion_addr(out[1]), 0x1234u);
  EXPECT_EQ(av.completion_addr(out[0]), FI_ADDR_NOTAVAIL);
  fi_addr_t id = 5;
  Address b = addr_of(3);
  EXPECT_EQ(av.insert(&b, 1, &id, FI_AV_USER_ID, nullptr), -FI_EINVAL);
  // IDs of addresses in another chunk.
  std::vector<Address> many;
  for (size_t i = 0; i < AddressVector::kChunkEntries + 2; ++i)
    many.push_back(addr_of(static_cast<uint32_t>(10 + i)));
  std::vector<fi_addr_t> idx(many.size());
  ASSERT_EQ(av.insert(many.data(), many.size(), idx.data(), 0, nullptr),
            static_cast<int>(many.size()));
  ASSERT_EQ(av.set_user_id(idx.back(), 77, 0), FI_SUCCESS);
  EXPECT_EQ(av.completion_addr(idx.back()), 77u);
  EXPECT_EQ(av.completion_addr(idx.front()), FI_ADDR_NOTAVAIL);
}

TEST(AvReverse, ManyEntriesGrowTheTable) {
  AddressVector av(options(AvType::kTable));
  const uint32_t n = 5000;
  std::vector<Address> a;
  for (uint32_t i = 0; i < n; ++i) a.push_back(addr_of(i));
  for (uint32_t i = 0; i < n; i += 100) ASSERT_EQ(av.insert(&a[i], 100, nullptr, 0, nullptr), 100);
  for (uint32_t i = 0; i < n; ++i)
    ASSERT_EQ(av.reverse(a[i].ipv4_be, a[i].udp_port_be, a[i].ep_id_be), i) << i;
}

// Tombstones: a long insert/remove churn with few live entries keeps every live entry findable
// and every removed one gone.
TEST(AvReverse, InsertRemoveChurnKeepsLookupsExact) {
  AddressVector av(options(AvType::kMap));
  std::mt19937 rng(42);
  std::map<uint32_t, fi_addr_t> live;  // address id -> fi_addr
  for (int step = 0; step < 50000; ++step) {
    uint32_t id = rng() % 300;
    if (auto it = live.find(id); it != live.end()) {
      ASSERT_EQ(av.remove(&it->second, 1, 0), 0);
      live.erase(it);
    } else {
      Address a = addr_of(id);
      fi_addr_t f;
      ASSERT_EQ(av.insert(&a, 1, &f, 0, nullptr), 1);
      live[id] = f;
    }
    if (step % 997 == 0) {
      for (uint32_t i = 0; i < 300; ++i) {
        Address a = addr_of(i);
        auto it = live.find(i);
        ASSERT_EQ(av.reverse(a.ipv4_be, a.udp_port_be, a.ep_id_be),
                  it == live.end() ? FI_ADDR_NOTAVAIL : it->second)
            << "step " << step << " id " << i;
      }
    }
  }
  EXPECT_EQ(av.size(), live.size());
}

// NOTES: duplicates are undefined; ours: the latest insertion is found, and removing the older one
// leaves the latest findable.
TEST(AvReverse, DuplicateInsertionFindsTheLatest) {
  AddressVector av(options(AvType::kTable));
  Address a = addr_of(3);
  fi_addr_t f1, f2;
  ASSERT_EQ(av.insert(&a, 1, &f1, 0, nullptr), 1);
  ASSERT_EQ(av.insert(&a, 1, &f2, 0, nullptr), 1);
  EXPECT_EQ(av.reverse(a.ipv4_be, a.udp_port_be, a.ep_id_be), f2);
  ASSERT_EQ(av.remove(&f1, 1, 0), 0);
  EXPECT_EQ(av.reverse(a.ipv4_be, a.udp_port_be, a.ep_id_be), f2);
}

// ---- concurrency: the data path reads while the control path writes ----------------------------

// Entries become visible only once complete: a reader on another thread never sees a torn or
// half-written entry, in lookup() or reverse(), while inserts (crossing chunks) and removes run.
TEST(AvConcurrency, LookupsDuringInsertsNeverSeeAPartialEntry) {
  AddressVector av(options(AvType::kTable));
  constexpr uint32_t kN = 6 * AddressVector::kChunkEntries;
  std::atomic<bool> done{false};
  std::atomic<uint64_t> bad{0}, seen{0};
  auto reader = [&](uint32_t seed) {
    std::mt19937 rng(seed);
    while (!done.load(std::memory_order_acquire)) {
      uint32_t i = rng() % kN;
      if (const AvEntry* e = av.lookup(i)) {
        seen.fetch_add(1, std::memory_order_relaxed);
        if (!is_addr_of(e->addr, i)) bad.fetch_add(1, std::memory_order_relaxed);
      }
      Address a = addr_of(i);
      fi_addr_t r = av.reverse(a.ipv4_be, a.udp_port_be, a.ep_id_be);
      if (r != FI_ADDR_NOTAVAIL && r != i) bad.fetch_add(1, std::memory_order_relaxed);
    }
  };
  std::thread r1(reader, 1), r2(reader, 2);
  std::vector<Address> batch;
  for (uint32_t i = 0; i < kN;) {
    uint32_t n = std::min<uint32_t>(7, kN - i);
    batch.clear();
    for (uint32_t k = 0; k < n; ++k) batch.push_back(addr_of(i + k));
    fi_addr_t out[7];
    // EXPECT, not ASSERT: the readers must be joined whatever happens.
    EXPECT_EQ(av.insert(batch.data(), n, out, 0, nullptr), static_cast<int>(n));
    EXPECT_EQ(out[0], i);
    if (i % 3 == 0) {
      EXPECT_EQ(av.remove(&out[1], 1, 0), 0);
    }
    i += n;
  }
  std::this_thread::sleep_for(20ms);
  done.store(true, std::memory_order_release);
  r1.join();
  r2.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GT(seen.load(), 0u);
}

// ---- fi_av_lookup / fi_av_straddr
// ----------------------------------------------------------------

// "If the actual address is larger than what can fit into the buffer, it will be truncated. On
// output, addrlen is set to the size of the buffer needed to store the address"
TEST(AvLookupAddress, CopiesTruncatesAndReportsTheNeededSize) {
  AddressVector av(options(AvType::kTable));
  Address a = addr_of(9);
  ASSERT_EQ(av.insert(&a, 1, nullptr, 0, nullptr), 1);
  Address got;
  size_t len = sizeof(got);
  ASSERT_EQ(av.lookup_address(0, &got, &len), 0);
  // No host part (the same-host path off): the 16-byte form, version 1 (wire/address.h).
  EXPECT_EQ(len, wire::kShortAddressLen);
  EXPECT_EQ(got.version, wire::kAddressVersionShort);
  EXPECT_EQ(std::memcmp(reinterpret_cast<const uint8_t*>(&got) + 1,
                        reinterpret_cast<const uint8_t*>(&a) + 1, wire::kShortAddressLen - 1),
            0);

  uint8_t small[6] = {0xee, 0xee, 0xee, 0xee, 0xee, 0xee};
  len = 4;
  ASSERT_EQ(av.lookup_address(0, small, &len), 0);
  EXPECT_EQ(len, wire::kShortAddressLen);
  EXPECT_EQ(small[0], wire::kAddressVersionShort);
  EXPECT_EQ(std::memcmp(small + 1, reinterpret_cast<const uint8_t*>(&a) + 1, 3), 0);
  EXPECT_EQ(small[4], 0xee);  // nothing past the buffer size

  len = 0;
  ASSERT_EQ(av.lookup_address(0, nullptr, &len), 0);
  EXPECT_EQ(len, wire::kShortAddressLen);
  EXPECT_EQ(av.lookup_address(0, &got, nullptr), -FI_EINVAL);
  len = sizeof(got);
  EXPECT_EQ(av.lookup_address(7, &got, &len), -FI_EINVAL);
}

TEST(AvStraddr, PrintsTheAddressAndTheNeededLength) {
  Address a;
  const uint8_t mac[6] = {0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
  std::memcpy(a.mac, mac, 6);
  a.ipv4_be = htonl(0x0a000001);
  a.udp_port_be = htons(9228);
  a.ep_id_be = htons(3);
  const std::string want = "fi_dpdk://aa:bb:cc:dd:ee:ff/10.0.0.1:9228/3";
  char buf[128];
  size_t len = sizeof(buf);
  EXPECT_EQ(AddressVector::straddr(&a, buf, &len), buf);
  EXPECT_EQ(std::string(buf), want);
  EXPECT_EQ(len, want.size() + 1);

  // "If the provided buffer is too small, the results will be truncated."
  char small[11];
  len = sizeof(small);
  EXPECT_EQ(AddressVector::straddr(&a, small, &len), small);
  EXPECT_EQ(std::string(small), want.substr(0, 10));
  EXPECT_EQ(len, want.size() + 1);

  len = 0;
  EXPECT_EQ(AddressVector::straddr(&a, nullptr, &len), nullptr);  // returns buf (null)
  EXPECT_EQ(len, want.size() + 1);

  a.version = 9;  // unknown (2 would read as a sockaddr_in: AF_INET)
  len = sizeof(buf);
  EXPECT_EQ(AddressVector::straddr(&a, buf, &len), nullptr);
  EXPECT_EQ(AddressVector::straddr(nullptr, buf, &len), nullptr);
}

// ---- address resolution (synchronous) ----------------------------------------------------------

TEST(AvResolve, MacKnownNowIsFilledIn) {
  FakeResolver r;
  r.set_default({0, -1});
  AddressVector av(options(AvType::kTable, false, &r));
  Address a = addr_of(1, /*with_mac=*/false);
  fi_addr_t out;
  ASSERT_EQ(av.insert(&a, 1, &out, 0, nullptr), 1);
  ASSERT_NE(av.lookup(out), nullptr);
  EXPECT_TRUE(mac_equals(av.lookup(out)->addr, mac_for_ip(a.ipv4_be)));
  EXPECT_EQ(r.polls(), 0);
}

TEST(AvResolve, MacResolvedAfterPollsIsWaitedFor) {
  FakeResolver r;
  r.set_default({5, -1});
  AddressVector av(options(AvType::kTable, false, &r));
  Address a[2] = {addr_of(1, false), addr_of(2, false)};
  fi_addr_t out[2];
  ASSERT_EQ(av.insert(a, 2, out, 0, nullptr), 2);
  EXPECT_GE(r.polls(), 5);
  EXPECT_LT(r.polls(), 50);
  for (int i = 0; i < 2; ++i) {
    ASSERT_NE(av.lookup(out[i]), nullptr);
    EXPECT_TRUE(mac_equals(av.lookup(out[i])->addr, mac_for_ip(a[i].ipv4_be)));
    EXPECT_EQ(av.reverse(a[i].ipv4_be, a[i].udp_port_be, a[i].ep_id_be), out[i]);
  }
}

TEST(AvResolve, ResolutionThatFailsGivesEhostunreach) {
  FakeResolver r;
  r.set_default({0, -1});
  Address a[2] = {addr_of(1, false), addr_of(2, false)};
  r.plan(a[1].ipv4_be, {-1, 3});
  AddressVector av(options(AvType::kTable, false, &r));
  fi_addr_t out[2];
  int errs[2] = {-1, -1};
  ASSERT_EQ(av.insert(a, 2, out, FI_SYNC_ERR, errs), 1);
  EXPECT_EQ(errs[0], 0);
  EXPECT_EQ(errs[1], FI_EHOSTUNREACH);
  EXPECT_EQ(out[1], FI_ADDR_NOTAVAIL);
  EXPECT_EQ(r.polls(), 3);
  EXPECT_EQ(av.lookup(1), nullptr);
}

TEST(AvResolve, WaitIsBoundedWhenTheResolverNeverAnswers) {
  FakeResolver r;  // never resolves, never fails
  AddressVector av(options(AvType::kTable, false, &r, /*timeout_ms=*/150));
  Address a = addr_of(1, false);
  fi_addr_t out = 0;
  const auto t0 = Clock::now();
  EXPECT_EQ(av.insert(&a, 1, &out, 0, nullptr), 0);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_GE(ms, 140);
  EXPECT_LT(ms, 2000);
  EXPECT_EQ(out, FI_ADDR_NOTAVAIL);
  EXPECT_GT(r.polls(), 0);
}

TEST(AvResolve, WithoutResolverAnAddressWithoutMacFails) {
  AddressVector av(options(AvType::kTable));
  Address a = addr_of(1, false);
  int err = 0;
  EXPECT_EQ(av.insert(&a, 1, nullptr, FI_SYNC_ERR, &err), 0);
  EXPECT_EQ(err, FI_EHOSTUNREACH);
}

// ---- fi_av_insertsvc / fi_av_insertsym ---------------------------------------------------------

TEST(AvInsertSvc, NodeAndServiceGiveIpv4PortAndEndpointZero) {
  FakeResolver r;
  r.set_default({0, -1});
  AddressVector av(options(AvType::kTable, false, &r));
  fi_addr_t out;
  ASSERT_EQ(av.insert_svc("10.1.2.3", "9228", &out, 0, nullptr), 1);
  const AvEntry* e = av.lookup(out);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->addr.ipv4_be, htonl(0x0a010203));
  EXPECT_EQ(e->addr.udp_port_be, htons(9228));
  EXPECT_EQ(e->addr.ep_id_be, 0);
  EXPECT_EQ(e->addr.version, wire::kAddressVersion);
  EXPECT_TRUE(mac_equals(e->addr, mac_for_ip(htonl(0x0a010203))));
  // A host name.
  ASSERT_EQ(av.insert_svc("localhost", "1", &out, 0, nullptr), 1);
  EXPECT_EQ(av.lookup(out)->addr.ipv4_be, htonl(0x7f000001));
}

TEST(AvInsertSvc, FiAddrStrNodeWithNullService) {
  AddressVector av(options(AvType::kTable));
  fi_addr_t out;
  ASSERT_EQ(av.insert_svc("fi_dpdk://02:00:00:00:00:01/10.0.0.7:77/5", nullptr, &out, 0, nullptr),
            1);
  const AvEntry* e = av.lookup(out);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->addr.mac[5], 1);
  EXPECT_EQ(e->addr.ipv4_be, htonl(0x0a000007));
  EXPECT_EQ(e->addr.udp_port_be, htons(77));
  EXPECT_EQ(e->addr.ep_id_be, htons(5));
}

TEST(AvInsertSvc, BadArgumentsAreRejected) {
  AddressVector av(options(AvType::kTable));
  EXPECT_EQ(av.insert_svc(nullptr, "1", nullptr, 0, nullptr), -FI_EINVAL);
  EXPECT_EQ(av.insert_svc("10.0.0.1", nullptr, nullptr, 0, nullptr), -FI_EINVAL);
  EXPECT_EQ(av.insert_svc("10.0.0.1", "http", nullptr, 0, nullptr), -FI_EINVAL);
  EXPECT_EQ(av.insert_svc("10.0.0.1", "70000", nullptr, 0, nullptr), -FI_EINVAL);
  EXPECT_EQ(av.next_index(), 0u);
}

TEST(AvInsertSvc, UnknownHostNameFailsThatAddress) {
  AddressVector av(options(AvType::kTable));
  fi_addr_t out = 0;
  int err = 0;
  EXPECT_EQ(av.insert_svc("no-such-host.invalid", "1", &out, FI_SYNC_ERR, &err), 0);
  EXPECT_EQ(out, FI_ADDR_NOTAVAIL);
  EXPECT_EQ(err, FI_EADDRNOTAVAIL);
}

// "if node = "10.1.1.1", nodecnt = 2, service = "5000", and svccnt = 2, the following addresses
// will be inserted into the AV in the order shown: 10.1.1.1:5000, 10.1.1.1:5001, 10.1.1.2:5000,
// 10.1.1.2:5001."
TEST(AvInsertSym, InsertsNodesTimesServicesInTheDocumentedOrder) {
  FakeResolver r;
  r.set_default({0, -1});
  AddressVector av(options(AvType::kTable, false, &r));
  fi_addr_t out[4];
  ASSERT_EQ(av.insert_sym("10.1.1.1", 2, "5000", 2, out, 0, nullptr), 4);
  const uint32_t ips[4] = {0x0a010101, 0x0a010101, 0x0a010102, 0x0a010102};
  const uint16_t ports[4] = {5000, 5001, 5000, 5001};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(out[i], static_cast<fi_addr_t>(i));
    const AvEntry* e = av.lookup(out[i]);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->addr.ipv4_be, htonl(ips[i]));
    EXPECT_EQ(e->addr.udp_port_be, htons(ports[i]));
  }
}

TEST(AvInsertSym, HostNameNeedsANumericSuffixAndRangesMustFit) {
  AddressVector av(options(AvType::kTable));
  EXPECT_EQ(av.insert_sym("localhost", 2, "1", 1, nullptr, 0, nullptr), -FI_EINVAL);
  EXPECT_EQ(av.insert_sym("10.0.0.1", 1, "65535", 2, nullptr, 0, nullptr), -FI_EINVAL);
  EXPECT_EQ(av.insert_sym("255.255.255.255", 2, "1", 1, nullptr, 0, nullptr), -FI_EINVAL);
  EXPECT_EQ(av.insert_sym(nullptr, 1, "1", 1, nullptr, 0, nullptr), -FI_EINVAL);
  EXPECT_EQ(av.insert_sym("10.0.0.1", 0, "1", 1, nullptr, 0, nullptr), 0);
  // A numbered host name counts up keeping its width; these names do not resolve here.
  int errs[2] = {-1, -1};
  EXPECT_EQ(av.insert_sym("dpfab-no-such-host-08.invalid9", 2, "1", 1, nullptr, FI_SYNC_ERR, errs),
            0);
  EXPECT_EQ(errs[0], FI_EADDRNOTAVAIL);
  EXPECT_EQ(errs[1], FI_EADDRNOTAVAIL);
}

// ---- asynchronous insertion (FI_EVENT) ---------------------------------------------------------

// "If an AV is opened with FI_EVENT, any insertions attempted before an EQ is bound to the AV
// will fail with -FI_ENOEQ."
TEST(AvAsync, InsertBeforeBindFailsWithEnoeq) {
  AddressVector av(options(AvType::kTable, true));
  Address a = addr_of(1);
  EXPECT_EQ(av.insert(&a, 1, nullptr, 0, nullptr), -FI_ENOEQ);
  EXPECT_EQ(av.insert_svc("10.0.0.1", "1", nullptr, 0, nullptr), -FI_ENOEQ);
}

TEST(AvAsync, BindNeedsFiEventAndHappensOnce) {
  auto eq = make_eq();
  AddressVector sync_av(options(AvType::kTable, false));
  EXPECT_EQ(sync_av.bind_eq(eq.get()), -FI_EINVAL);
  AddressVector av(options(AvType::kTable, true));
  EXPECT_EQ(av.bind_eq(nullptr), -FI_EINVAL);
  EXPECT_EQ(av.bind_eq(eq.get()), 0);
  EXPECT_EQ(av.bind_eq(eq.get()), -FI_EINVAL);
}

// "There will always be one non-error completion event for each insert operation ... the data
// field in the final completion entry will report the number of addresses successfully inserted."
TEST(AvAsync, GoodVectorCompletesWithCountAndContext) {
  auto eq = make_eq();
  AddressVector av(options(AvType::kMap, true));
  ASSERT_EQ(av.bind_eq(eq.get()), 0);
  Address a[3] = {addr_of(1), addr_of(2), addr_of(3)};
  fi_addr_t out[3] = {FI_ADDR_NOTAVAIL, FI_ADDR_NOTAVAIL, FI_ADDR_NOTAVAIL};
  int ctx;
  ASSERT_EQ(av.insert(a, 3, out, 0, &ctx), 0);  // "return 0 if the operation was ... initiated"
  fi_eq_entry e = read_complete(*eq);
  EXPECT_EQ(e.context, &ctx);
  EXPECT_EQ(e.data, 3u);
  for (fi_addr_t f : out) EXPECT_NE(f, FI_ADDR_NOTAVAIL);
  EXPECT_TRUE(eq_empty(*eq));
}

TEST(AvAsync, ZeroAddressesStillComplete) {
  auto eq = make_eq();
  AddressVector av(options(AvType::kTable, true));
  ASSERT_EQ(av.bind_eq(eq.get()), 0);
  int ctx;
  ASSERT_EQ(av.insert(nullptr, 0, nullptr, 0, &ctx), 0);
  fi_eq_entry e = read_complete(*eq);
  EXPECT_EQ(e.context, &ctx);
  EXPECT_EQ(e.data, 0u);
}

// "There will be one EQ error entry generated for each failed address insertion, followed by one
// non-error event"; "the data field will contain the index of the failed address".
TEST(AvAsync, ErrorEntryPerFailedAddressPrecedesTheCompletion) {
  auto eq = make_eq();
  AddressVector av(options(AvType::kTable, true));
  ASSERT_EQ(av.bind_eq(eq.get()), 0);
  Address a[3] = {addr_of(1), addr_of(2), addr_of(3)};
  a[1].version = 0;
  a[2].ipv4_be = 0;
  fi_addr_t out[3] = {};
  int ctx;
  ASSERT_EQ(av.insert(a, 3, out, 0, &ctx), 0);
  fi_eq_err_entry e1 = read_error(*eq);
  EXPECT_EQ(e1.context, &ctx);
  EXPECT_EQ(e1.data, 1u);
  EXPECT_EQ(e1.err, FI_EINVAL);
  fi_eq_err_entry e2 = read_error(*eq);
  EXPECT_EQ(e2.data, 2u);
  EXPECT_GT(e2.err, 0);
  fi_eq_entry c = read_complete(*eq);
  EXPECT_EQ(c.context, &ctx);
  EXPECT_EQ(c.data, 1u);
  EXPECT_NE(out[0], FI_ADDR_NOTAVAIL);
  EXPECT_EQ(out[1], FI_ADDR_NOTAVAIL);
  EXPECT_EQ(out[2], FI_ADDR_NOTAVAIL);
}

// An address that needs resolution completes from progress_pending(), after the resolver learns it.
TEST(AvAsync, PendingResolutionCompletesFromProgress) {
  auto eq = make_eq();
  FakeResolver r;
  r.set_default({2, -1});
  AddressVector av(options(AvType::kTable, true, &r));
  ASSERT_EQ(av.bind_eq(eq.get()), 0);
  Address a[2] = {addr_of(1), addr_of(2, false)};
  fi_addr_t out[2] = {FI_ADDR_NOTAVAIL, FI_ADDR_NOTAVAIL};
  int ctx;
  ASSERT_EQ(av.insert(a, 2, out, 0, &ctx), 0);
  EXPECT_TRUE(av.has_pending());
  EXPECT_TRUE(eq_empty(*eq));
  EXPECT_EQ(av.lookup(1), nullptr);
  EXPECT_EQ(av.progress_pending(), 0u);
  r.poll();
  EXPECT_EQ(av.progress_pending(), 0u);
  r.poll();
  EXPECT_EQ(av.progress_pending(), 1u);
  EXPECT_FALSE(av.has_pending());
  fi_eq_entry c = read_complete(*eq);
  EXPECT_EQ(c.context, &ctx);
  EXPECT_EQ(c.data, 2u);
  EXPECT_EQ(out[0], 0u);
  EXPECT_EQ(out[1], 1u);
  ASSERT_NE(av.lookup(1), nullptr);
  EXPECT_TRUE(mac_equals(av.lookup(1)->addr, mac_for_ip(a[1].ipv4_be)));
}

TEST(AvAsync, FailedResolutionGivesAnErrorEntryThenTheCompletion) {
  auto eq = make_eq();
  FakeResolver r;
  r.set_default({-1, 1});
  AddressVector av(options(AvType::kTable, true, &r));
  ASSERT_EQ(av.bind_eq(eq.get()), 0);
  fi_addr_t out = 0;
  int ctx;
  ASSERT_EQ(av.insert_svc("10.9.9.9", "9228", &out, 0, &ctx), 0);
  EXPECT_EQ(av.progress_pending(), 0u);
  r.poll();
  EXPECT_EQ(av.progress_pending(), 1u);
  fi_eq_err_entry e = read_error(*eq);
  EXPECT_EQ(e.context, &ctx);
  EXPECT_EQ(e.data, 0u);
  EXPECT_EQ(e.err, FI_EHOSTUNREACH);
  fi_eq_entry c = read_complete(*eq);
  EXPECT_EQ(c.data, 0u);
  EXPECT_EQ(out, FI_ADDR_NOTAVAIL);
}

TEST(AvAsync, PendingResolutionIsBoundedByTheTimeout) {
  auto eq = make_eq();
  FakeResolver r;  // never answers
  AddressVector av(options(AvType::kTable, true, &r, /*timeout_ms=*/50));
  ASSERT_EQ(av.bind_eq(eq.get()), 0);
  int ctx;
  ASSERT_EQ(av.insert_svc("10.9.9.9", "1", nullptr, 0, &ctx), 0);
  EXPECT_EQ(av.progress_pending(), 0u);
  const auto until = Clock::now() + 2s;
  while (av.has_pending() && Clock::now() < until) {
    std::this_thread::sleep_for(5ms);
    av.progress_pending();
  }
  EXPECT_FALSE(av.has_pending());
  EXPECT_EQ(read_error(*eq).err, FI_EHOSTUNREACH);
  EXPECT_EQ(read_complete(*eq).data, 0u);
}

// "Index values accumulate across successive insert calls in the order the calls are made, not
// necessarily in the order the insertions complete." "Note that the order of delivery of insert
// completions may not match the order in which the calls to fi_av_insert were made."
TEST(AvAsync, TableIndicesFollowCallOrderNotCompletionOrder) {
  auto eq = make_eq();
  FakeResolver r;
  r.set_default({1, -1});
  AddressVector av(options(AvType::kTable, true, &r));
  ASSERT_EQ(av.bind_eq(eq.get()), 0);
  Address slow = addr_of(1, false), fast = addr_of(2);
  fi_addr_t out_slow = 7, out_fast = 7;
  int ctx_slow, ctx_fast;
  ASSERT_EQ(av.insert(&slow, 1, &out_slow, FI_MORE, &ctx_slow), 0);
  ASSERT_EQ(av.insert(&fast, 1, &out_fast, 0, &ctx_fast), 0);
  EXPECT_EQ(read_complete(*eq).context, &ctx_fast);  // completes first
  EXPECT_EQ(out_fast, 1u);
  r.poll();
  EXPECT_EQ(av.progress_pending(), 1u);
  EXPECT_EQ(read_complete(*eq).context, &ctx_slow);
  EXPECT_EQ(out_slow, 0u);
}

// "Providers are allowed to abort insertion operations in the case of an error. Addresses that are
// not inserted because they were aborted will fail with an error code of FI_ECANCELED."
TEST(AvAsync, ClosingWithPendingInsertionsCancelsThem) {
  auto eq = make_eq();
  FakeResolver r;  // never answers
  int ctx;
  fi_addr_t out[2] = {0, 0};
  {
    AddressVector av(options(AvType::kTable, true, &r));
    ASSERT_EQ(av.bind_eq(eq.get()), 0);
    Address a[2] = {addr_of(1), addr_of(2, false)};
    ASSERT_EQ(av.insert(a, 2, out, 0, &ctx), 0);
  }
  fi_eq_err_entry e = read_error(*eq);
  EXPECT_EQ(e.err, FI_ECANCELED);
  EXPECT_EQ(e.data, 1u);
  fi_eq_entry c = read_complete(*eq);
  EXPECT_EQ(c.context, &ctx);
  EXPECT_EQ(c.data, 1u);
  EXPECT_EQ(out[0], 0u);
  EXPECT_EQ(out[1], FI_ADDR_NOTAVAIL);
}

// FI_SYNC_ERR "applies to synchronous insertions only": with FI_EVENT the errors go to the EQ and
// the context stays the application's.
TEST(AvAsync, SyncErrIsIgnored) {
  auto eq = make_eq();
  AddressVector av(options(AvType::kTable, true));
  ASSERT_EQ(av.bind_eq(eq.get()), 0);
  Address a = addr_of(1);
  a.version = 0;
  int ctx = 12345;
  ASSERT_EQ(av.insert(&a, 1, nullptr, FI_SYNC_ERR, &ctx), 0);
  EXPECT_EQ(ctx, 12345);
  EXPECT_EQ(read_error(*eq).context, &ctx);
  EXPECT_EQ(read_complete(*eq).data, 0u);
}

// ---- StaticResolver ----------------------------------------------------------------------------

TEST(StaticResolver, KnowsItsAddressesAndFailsOthersAfterTheBound) {
  StaticResolver r(/*fail_after_ms=*/60);
  rte_ether_addr mac = mac_for_ip(htonl(0x0a000001));
  r.add(htonl(0x0a000001), mac);
  auto m = r.resolve(htonl(0x0a000001));
  ASSERT_TRUE(m);
  EXPECT_EQ(std::memcmp(m->addr_bytes, mac.addr_bytes, 6), 0);
  EXPECT_FALSE(r.failed(htonl(0x0a000001)));

  const uint32_t other = htonl(0x0a000002);
  EXPECT_FALSE(r.failed(other));  // not asked yet
  EXPECT_FALSE(r.resolve(other));
  EXPECT_FALSE(r.failed(other));
  std::this_thread::sleep_for(80ms);
  EXPECT_TRUE(r.failed(other));
  EXPECT_FALSE(r.resolve(other));
  EXPECT_TRUE(r.failed(other));  // remembered for a while
  std::this_thread::sleep_for(60ms);
  EXPECT_FALSE(r.resolve(other));  // then asking again starts over
  EXPECT_FALSE(r.failed(other));
}

TEST(StaticResolver, SyncInsertToAnUnknownHostFailsWithinTheResolverBound) {
  StaticResolver r(/*fail_after_ms=*/100);
  AddressVector av(options(AvType::kTable, false, &r, /*timeout_ms=*/3000));
  int err = 0;
  const auto t0 = Clock::now();
  EXPECT_EQ(av.insert_svc("10.200.0.1", "9228", nullptr, FI_SYNC_ERR, &err), 0);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_EQ(err, FI_EHOSTUNREACH);
  EXPECT_GE(ms, 90);
  EXPECT_LT(ms, 2000);
}

// ---- multicast groups
// ----------------------------------------------------------------------------

Address group_addr(const char* ip, uint16_t port) {
  Address a;
  in_addr in{};
  inet_pton(AF_INET, ip, &in);
  a.ipv4_be = in.s_addr;
  a.udp_port_be = htons(port);
  return a;
}

TEST(AvMulticast, AGroupAddressWithoutMacGetsTheGroupMacWithoutResolution) {
  FakeResolver r;  // never resolves anything: a group must not need it
  AddressVector av(options(AvType::kTable, false, &r, 200));
  Address g = group_addr("239.1.2.3", 9228);
  fi_addr_t out = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(av.insert(&g, 1, &out, 0, nullptr), 1);
  const AvEntry* e = av.lookup(out);
  ASSERT_NE(e, nullptr);
  const uint8_t want[6] = {0x01, 0x00, 0x5e, 0x01, 0x02, 0x03};
  EXPECT_EQ(0, std::memcmp(e->addr.mac, want, 6));
  EXPECT_EQ(r.resolves(g.ipv4_be), 0);
}

TEST(AvMulticast, AGroupAddressWithAnotherMacIsInvalid) {
  AddressVector av(options(AvType::kTable));
  Address g = group_addr("239.1.2.3", 9228);
  g.mac[0] = 0x02;  // a unicast MAC for a group
  fi_addr_t out = 0;
  int err = -1;
  EXPECT_EQ(av.insert(&g, 1, &out, FI_SYNC_ERR, &err), 0);
  EXPECT_EQ(out, FI_ADDR_NOTAVAIL);
  EXPECT_EQ(err, FI_EINVAL);
  // The group's own MAC is fine.
  const uint8_t mac[6] = {0x01, 0x00, 0x5e, 0x01, 0x02, 0x03};
  std::memcpy(g.mac, mac, 6);
  EXPECT_EQ(av.insert(&g, 1, &out, 0, nullptr), 1);
}

TEST(AvMulticast, InsertsvcOfAGroupNeedsNoResolver) {
  AddressVector av(options(AvType::kMap));  // no resolver at all
  fi_addr_t out = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(av.insert_svc("224.0.0.251", "5353", &out, 0, nullptr), 1);
  const AvEntry* e = av.lookup(out);
  ASSERT_NE(e, nullptr);
  const uint8_t want[6] = {0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb};
  EXPECT_EQ(0, std::memcmp(e->addr.mac, want, 6));
  EXPECT_EQ(e->addr.udp_port_be, htons(5353));
}

// ---- named (shared) AVs: av_shared.h -----------------------------------------------------------

std::string shared_name(const char* what) {
  return std::string("dpfab-unit-") + what + "-" + std::to_string(getpid());
}

// A writer AV and a reader AV on one table: the reader's fi_addr values are the writer's.
struct SharedPair {
  explicit SharedPair(const char* what, size_t capacity = 8) {
    auto w = SharedAvTable::create(shared_name(what), capacity);
    EXPECT_TRUE(w.ok());
    writer = std::make_unique<AddressVector>(options(AvType::kMap), std::move(w.value()));
    auto r = SharedAvTable::open(shared_name(what));
    EXPECT_TRUE(r.ok());
    reader = std::make_unique<AddressVector>(options(AvType::kMap), std::move(r.value()));
  }
  std::unique_ptr<AddressVector> writer, reader;
};

TEST(AvShared, ReaderFindsTheWritersAddressesAtTheirFiAddrs) {
  SharedPair p("find");
  Address addrs[3] = {addr_of(1), addr_of(2), addr_of(3)};
  addrs[1].ipv4_be = 0;  // fails: leaves index 1 unused
  fi_addr_t fa[3];
  ASSERT_EQ(p.writer->insert(addrs, 3, fa, 0, nullptr), 2);
  const fi_addr_t* map = p.reader->shared()->map();
  EXPECT_EQ(map[0], fa[0]);
  EXPECT_EQ(map[1], FI_ADDR_NOTAVAIL);
  EXPECT_EQ(map[2], fa[2]);
  ASSERT_NE(p.reader->lookup(fa[0]), nullptr);
  EXPECT_TRUE(is_addr_of(p.reader->lookup(fa[0])->addr, 1));
  EXPECT_EQ(p.reader->lookup(1), nullptr);
  EXPECT_TRUE(is_addr_of(p.reader->lookup(fa[2])->addr, 3));
  EXPECT_EQ(p.reader->size(), 2u);
  EXPECT_EQ(p.reader->next_index(), 3u);
  const Address& a3 = addrs[2];
  EXPECT_EQ(p.reader->reverse(a3.ipv4_be, a3.udp_port_be, a3.ep_id_be), fa[2]);
}

TEST(AvShared, ReaderSeesInsertionsAndRemovalsMadeAfterItOpened) {
  SharedPair p("later");
  const Address a = addr_of(7);
  EXPECT_EQ(p.reader->reverse(a.ipv4_be, a.udp_port_be, a.ep_id_be), FI_ADDR_NOTAVAIL);
  fi_addr_t fa;
  ASSERT_EQ(p.writer->insert(&a, 1, &fa, 0, nullptr), 1);
  ASSERT_NE(p.reader->lookup(fa), nullptr);
  EXPECT_EQ(p.reader->reverse(a.ipv4_be, a.udp_port_be, a.ep_id_be), fa);
  ASSERT_EQ(p.writer->remove(&fa, 1, 0), FI_SUCCESS);
  EXPECT_EQ(p.reader->lookup(fa), nullptr);
  EXPECT_EQ(p.reader->reverse(a.ipv4_be, a.udp_port_be, a.ep_id_be), FI_ADDR_NOTAVAIL);
}

// A reader's reverse map holds indices into the shared table (it has no slots of its own): it
// must grow (rehash) and re-learn the table after removals from those entries, without touching
// local storage that a reader does not have.
TEST(AvShared, ReaderReverseMapGrowsAndSurvivesRemovals) {
  constexpr uint32_t kN = 300;  // several doublings of the reverse map (64 slots at first)
  SharedPair p("grow", kN);
  std::vector<Address> addrs;
  for (uint32_t i = 0; i < kN; ++i) addrs.push_back(addr_of(1000 + i));
  std::vector<fi_addr_t> fa(kN);
  ASSERT_EQ(p.writer->insert(addrs.data(), kN / 2, fa.data(), 0, nullptr),
            static_cast<int>(kN / 2));
  const Address& first = addrs[0];
  EXPECT_EQ(p.reader->reverse(first.ipv4_be, first.udp_port_be, first.ep_id_be), fa[0]);
  // Some go, more come: the reader's next sync rescans a table with holes and grows its map.
  ASSERT_EQ(p.writer->remove(fa.data(), 20, 0), FI_SUCCESS);
  ASSERT_EQ(p.writer->insert(addrs.data() + kN / 2, kN / 2, fa.data() + kN / 2, 0, nullptr),
            static_cast<int>(kN / 2));
  const Address& last = addrs[kN - 1];
  EXPECT_EQ(p.reader->reverse(last.ipv4_be, last.udp_port_be, last.ep_id_be), fa[kN - 1]);
  for (uint32_t i = 0; i < kN; ++i) {
    const Address& a = addrs[i];
    EXPECT_EQ(p.reader->reverse(a.ipv4_be, a.udp_port_be, a.ep_id_be),
              i < 20 ? FI_ADDR_NOTAVAIL : fa[i])
        << i;
  }
}

TEST(AvShared, ReaderCannotInsertOrRemove) {
  SharedPair p("ro");
  const Address a = addr_of(1);
  fi_addr_t fa;
  ASSERT_EQ(p.writer->insert(&a, 1, &fa, 0, nullptr), 1);
  EXPECT_EQ(p.reader->insert(&a, 1, nullptr, 0, nullptr), -FI_EOPNOTSUPP);
  EXPECT_EQ(p.reader->insert_svc("10.0.0.1", "9228", nullptr, 0, nullptr), -FI_EOPNOTSUPP);
  EXPECT_EQ(p.reader->remove(&fa, 1, 0), -FI_EOPNOTSUPP);
  EXPECT_NE(p.reader->lookup(fa), nullptr);
}

TEST(AvShared, CapacityIsTheLimitOfInsertions) {
  SharedPair p("cap", 2);
  Address addrs[3] = {addr_of(1), addr_of(2), addr_of(3)};
  fi_addr_t fa[3];
  int errs[3] = {};
  EXPECT_EQ(p.writer->insert(addrs, 3, fa, FI_SYNC_ERR, errs), 0);
  EXPECT_EQ(errs[0], FI_ENOSPC);
  EXPECT_EQ(p.writer->insert(addrs, 2, fa, 0, nullptr), 2);
  EXPECT_EQ(p.writer->insert(&addrs[2], 1, fa, 0, nullptr), 0);
}

TEST(AvShared, OpeningANameNoOneCreatedFailsWithEnoent) {
  auto r = SharedAvTable::open(shared_name("absent"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), -FI_ENOENT);
  EXPECT_EQ(SharedAvTable::create("", 1).code(), -FI_EINVAL);
  EXPECT_EQ(SharedAvTable::create("x", SharedAvTable::kMaxCapacity + 1).code(), -FI_EINVAL);
}

TEST(AvShared, TheWriterRemovesTheNameWhenItCloses) {
  const std::string name = shared_name("close");
  {
    auto w = SharedAvTable::create(name, 4);
    ASSERT_TRUE(w.ok());
    auto r = SharedAvTable::open(name);
    ASSERT_TRUE(r.ok());
  }
  EXPECT_EQ(SharedAvTable::open(name).code(), -FI_ENOENT);
}

// Another process (a forked child) maps the table and reads what this one inserts.
TEST(AvShared, AnotherProcessReadsTheTable) {
  const std::string name = shared_name("fork");
  auto w = SharedAvTable::create(name, 8);
  ASSERT_TRUE(w.ok());
  AddressVector writer(options(AvType::kTable), std::move(w.value()));
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto r = SharedAvTable::open(name);
    char c;
    if (!r.ok() || read(go[0], &c, 1) != 1) _exit(1);
    const AvEntry* e = r.value()->lookup(r.value()->map()[0]);
    _exit(e && is_addr_of(e->addr, 5) ? 0 : 2);
  }
  const Address a = addr_of(5);
  EXPECT_EQ(writer.insert(&a, 1, nullptr, 0, nullptr), 1);
  char c = 1;
  ASSERT_EQ(write(go[1], &c, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  close(go[0]);
  close(go[1]);
}

}  // namespace

}  // namespace dpfab::proto
