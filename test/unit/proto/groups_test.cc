// SPDX-License-Identifier: BSD-3-Clause
//
// proto::GroupTable: multicast memberships of a port, and delivery to each member of a group and
// UDP port (fi_cm(3) fi_join: every endpoint that joined gets the group's messages).
#include "proto/groups.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <rdma/fi_errno.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

namespace {

using dpfab::proto::GroupTable;
using dpfab::proto::Receiver;

struct NullReceiver final : Receiver {
  bool deliver(const dpfab::wire::Frame&, rte_mbuf*) noexcept override { return false; }
};

uint32_t ip(const char* s) {
  in_addr a{};
  inet_pton(AF_INET, s, &a);
  return a.s_addr;
}

std::set<Receiver*> members(const GroupTable& t, uint32_t g, uint16_t port) {
  std::set<Receiver*> out;
  size_t n = t.for_each_member(g, port, [&](Receiver* r) { out.insert(r); });
  EXPECT_EQ(n, out.size());
  return out;
}

TEST(GroupTable, EveryMemberOfAGroupAndPortIsVisitedOnce) {
  auto t = std::make_unique<GroupTable>();
  NullReceiver a, b, c;
  const uint32_t g = ip("239.1.2.3");
  ASSERT_EQ(t->add(g, htons(9228), &a), 0);
  ASSERT_EQ(t->add(g, htons(9228), &b), 0);
  ASSERT_EQ(t->add(g, htons(9229), &c), 0);                // same group, other port
  ASSERT_EQ(t->add(ip("239.1.2.4"), htons(9228), &c), 0);  // other group, same port
  EXPECT_EQ(members(*t, g, htons(9228)), (std::set<Receiver*>{&a, &b}));
  EXPECT_EQ(members(*t, g, htons(9229)), (std::set<Receiver*>{&c}));
  EXPECT_TRUE(members(*t, ip("239.1.2.5"), htons(9228)).empty());
  EXPECT_EQ(t->members_of(g), 3u);
  EXPECT_EQ(t->size(), 4u);
}

TEST(GroupTable, JoiningTwiceIsEalreadyAndLeavingStopsDelivery) {
  auto t = std::make_unique<GroupTable>();
  NullReceiver a, b;
  const uint32_t g = ip("239.1.2.3");
  ASSERT_EQ(t->add(g, htons(1), &a), 0);
  EXPECT_EQ(t->add(g, htons(1), &a), -FI_EALREADY);
  ASSERT_EQ(t->add(g, htons(1), &b), 0);
  EXPECT_EQ(t->remove(g, htons(1), &a), 0);
  EXPECT_EQ(t->remove(g, htons(1), &a), -FI_ENOENT);
  EXPECT_EQ(members(*t, g, htons(1)), (std::set<Receiver*>{&b}));
  EXPECT_EQ(t->members_of(g), 1u);
  // The freed slot is reused.
  ASSERT_EQ(t->add(g, htons(1), &a), 0);
  EXPECT_EQ(members(*t, g, htons(1)), (std::set<Receiver*>{&a, &b}));
  EXPECT_EQ(t->add(g, htons(1), nullptr), -FI_EINVAL);
}

TEST(GroupTable, FullAtKMaxMembers) {
  auto t = std::make_unique<GroupTable>();
  std::vector<NullReceiver> rs(GroupTable::kMaxMembers + 1);
  for (size_t i = 0; i < GroupTable::kMaxMembers; ++i)
    ASSERT_EQ(t->add(ip("239.0.0.1"), htons(1), &rs[i]), 0) << i;
  EXPECT_EQ(t->add(ip("239.0.0.1"), htons(1), &rs.back()), -FI_ENOSPC);
  ASSERT_EQ(t->remove(ip("239.0.0.1"), htons(1), &rs[7]), 0);
  EXPECT_EQ(t->add(ip("239.0.0.1"), htons(1), &rs.back()), 0);
}

// A reader racing with joins and leaves of other groups sees only members of its own group.
TEST(GroupTable, AReaderNeverSeesAMemberOfAnotherGroupWhileSlotsAreReused) {
  auto t = std::make_unique<GroupTable>();
  NullReceiver mine, theirs;
  const uint32_t g = ip("239.1.1.1"), other = ip("239.2.2.2");
  ASSERT_EQ(t->add(g, htons(5), &mine), 0);
  std::atomic<bool> stop{false};
  std::atomic<size_t> wrong{0}, seen{0};
  std::thread reader([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      t->for_each_member(g, htons(5), [&](Receiver* r) {
        if (r != &mine) wrong.fetch_add(1);
        seen.fetch_add(1);
      });
    }
  });
  // At least 20000 rounds, and on until the reader has looked 1000 times (it may start late on
  // a busy machine), within 10 s.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int i = 0; i < 20000 || (seen.load() < 1000 && std::chrono::steady_clock::now() < until);
       ++i) {
    ASSERT_EQ(t->add(other, htons(5), &theirs), 0);
    ASSERT_EQ(t->remove(other, htons(5), &theirs), 0);
  }
  stop = true;
  reader.join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(seen.load(), 0u);
}

}  // namespace
