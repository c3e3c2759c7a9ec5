// SPDX-License-Identifier: BSD-3-Clause
//
// Multicast below libfabric: EAL with one net_ring port (a loopback), the port's engine, DGRAM
// endpoints joined to groups. Checks what the libfabric-level test cannot see: the port's MAC
// filter counted across joins, one mbuf reference per member (frames held back by several members
// all come back to the mempool), and the counters of group frames nobody joined and of malformed
// group frames.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mempool.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "progress/engine.h"
#include "proto/dgram.h"
#include "ring_engine.h"
#include "wire/multicast.h"

using namespace dpfab;
using test::progress_until;

namespace {

// Manual progress only, whatever FI_DPDK_LCORES says: the tests count what each step does.
progress::PortEngine* engine() { return test::ring_engine(test::RingProgress::kManual); }

// Polls for a while (frames in flight on the ring are handled).
void settle() {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  while (std::chrono::steady_clock::now() < until) engine()->progress();
}

uint32_t ipv4(const char* s) {
  in_addr a{};
  inet_pton(AF_INET, s, &a);
  return a.s_addr;
}

struct Member {
  std::unique_ptr<event::Cq> cq;
  std::unique_ptr<proto::DgramEndpoint> ep;
  uint16_t port = 0;
  Member() {
    cq = test::make_data_cq();
    ep = std::move(proto::DgramEndpoint::create(engine(), {}).value());
    port = engine()->bind_ephemeral(ep.get());
    ep->set_address(port, 0);
    ep->bind_cq(cq.get(), true, true, false);
  }
  ~Member() {
    engine()->unbind(port);
    engine()->with_rx_owner([&] { ep->clear_backlog_locked(); });
  }
};

proto::Destination group_dest(uint32_t group, uint16_t port_be) {
  proto::Destination d;
  d.mac = wire::multicast_mac(group);
  d.ipv4_be = group;
  d.udp_port_be = port_be;
  return d;
}

port::Port* the_port() { return engine()->port(); }

}  // namespace

TEST(McastLib, ThePortFilterCountsJoinsPerMacAcrossEndpoints) {
  Member a, b;
  const uint32_t g = ipv4("239.1.2.3"), same_mac = ipv4("239.129.2.3");
  const rte_ether_addr mac = wire::multicast_mac(g);
  const uint16_t p = htons(7000);
  ASSERT_EQ(the_port()->multicast_refs(mac), 0u);
  EXPECT_EQ(the_port()->mc_filter(), port::McFilter::kNone);
  ASSERT_EQ(engine()->join_group(g, p, a.ep.get()), 0);
  ASSERT_EQ(engine()->join_group(g, p, b.ep.get()), 0);
  ASSERT_EQ(engine()->join_group(same_mac, p, a.ep.get()), 0);
  EXPECT_EQ(engine()->join_group(g, p, a.ep.get()), -FI_EALREADY);
  EXPECT_EQ(the_port()->multicast_refs(mac), 3u) << "two groups share the MAC: one entry, 3 refs";
  EXPECT_NE(the_port()->mc_filter(), port::McFilter::kNone);
  engine()->leave_group(g, p, a.ep.get());
  EXPECT_EQ(the_port()->multicast_refs(mac), 2u);
  engine()->leave_group(g, p, a.ep.get());  // not a member any more: nothing changes
  EXPECT_EQ(the_port()->multicast_refs(mac), 2u);
  engine()->leave_group(g, p, b.ep.get());
  engine()->leave_group(same_mac, p, a.ep.get());
  EXPECT_EQ(the_port()->multicast_refs(mac), 0u);
  EXPECT_EQ(the_port()->mc_filter(), port::McFilter::kNone) << "the last leave clears the filter";
  EXPECT_EQ(engine()->join_group(ipv4("10.0.0.1"), p, a.ep.get()), -FI_EINVAL);
}

TEST(McastLib, FramesHeldByEveryMemberAllReturnToTheMempool) {
  rte_mempool* pool = engine()->pool();
  // Free in the pool after a poll step that receives nothing: the frames a poll step handled go
  // back to the pool (or lose the engine's reference) when the next one starts.
  const auto free_mbufs = [&] {
    engine()->progress();
    return rte_mempool_avail_count(pool);
  };
  settle();
  const unsigned avail_before = free_mbufs();
  const uint32_t g = ipv4("239.4.4.4");
  const uint16_t p = htons(7100);
  constexpr int kFrames = 8;
  {
    Member sender, m1, m2, m3;
    for (Member* m : {&m1, &m2, &m3}) ASSERT_EQ(engine()->join_group(g, p, m->ep.get()), 0);
    // No receive posted: each member holds every frame back (its own mbuf reference).
    for (int i = 0; i < kFrames; ++i) {
      char payload[24];
      std::snprintf(payload, sizeof(payload), "frame %d", i);
      iovec iov{payload, std::strlen(payload) + 1};
      ASSERT_EQ(sender.ep->send(&iov, 1, group_dest(g, p), nullptr, 0, false, 0, false), 0);
    }
    ASSERT_TRUE(progress_until([&] {
      return m1.ep->stats().rx_held == kFrames && m2.ep->stats().rx_held == kFrames &&
             m3.ep->stats().rx_held == kFrames;
    }));
    // One mbuf per frame, shared by the three members (net_ring hands the sent mbuf back).
    EXPECT_EQ(avail_before - free_mbufs(), static_cast<unsigned>(kFrames))
        << "the held frames are still out of the pool";
    // m1 takes every frame now, in order; m2 and m3 still hold theirs.
    std::vector<std::vector<char>> bufs(kFrames, std::vector<char>(32));
    for (int i = 0; i < kFrames; ++i) {
      iovec iov{bufs[i].data(), bufs[i].size()};
      ASSERT_EQ(m1.ep->post_recv(&iov, 1, &bufs[i], 0), 0);
    }
    int got = 0;
    ASSERT_TRUE(progress_until([&] {
      fi_cq_data_entry e;
      while (m1.cq->read(&e, 1, nullptr) == 1) {
        char want[24];
        std::snprintf(want, sizeof(want), "frame %d", got);
        EXPECT_STREQ(static_cast<const char*>(e.buf), want);
        ++got;
      }
      return got == kFrames;
    }));
    EXPECT_GE(engine()->group_stats().delivered.load(), 3u * kFrames);
    EXPECT_EQ(avail_before - free_mbufs(), static_cast<unsigned>(kFrames))
        << "m2 and m3 still hold every frame";
    for (Member* m : {&m1, &m2, &m3}) engine()->leave_group(g, p, m->ep.get());
  }  // the members free what they still hold
  settle();
  EXPECT_EQ(free_mbufs(), avail_before) << "no mbuf leaked, none freed twice";
}

TEST(McastLib, GroupFramesNobodyJoinedAreCountedAndFreed) {
  Member sender, other;
  const uint32_t joined = ipv4("239.5.5.5"), not_joined = ipv4("239.5.5.6");
  const uint16_t p = htons(7200);
  ASSERT_EQ(engine()->join_group(joined, p, other.ep.get()), 0);
  const uint64_t before = engine()->group_stats().no_member.load();
  char buf[4] = {};
  iovec iov{buf, sizeof(buf)};
  ASSERT_EQ(sender.ep->send(&iov, 1, group_dest(not_joined, p), nullptr, 0, false, 0, false), 0);
  ASSERT_EQ(sender.ep->send(&iov, 1, group_dest(joined, htons(7201)), nullptr, 0, false, 0, false),
            0);
  EXPECT_TRUE(
      progress_until([&] { return engine()->group_stats().no_member.load() == before + 2; }));
  EXPECT_EQ(other.ep->stats().rx_frames.load(), 0u);
  engine()->leave_group(joined, p, other.ep.get());
}

TEST(McastLib, AGroupFrameWithAUnicastMacIsRejectedAndCounted) {
  Member sender, member;
  const uint32_t g = ipv4("239.6.6.6");
  const uint16_t p = htons(7300);
  ASSERT_EQ(engine()->join_group(g, p, member.ep.get()), 0);
  const uint64_t before = engine()->decode_stats().get(wire::Verdict::kIpDestination);
  proto::Destination d = group_dest(g, p);
  d.mac = engine()->mac();  // unicast: ours
  char buf[4] = {};
  iovec iov{buf, sizeof(buf)};
  ASSERT_EQ(sender.ep->send(&iov, 1, d, nullptr, 0, false, 0, false), 0);
  EXPECT_TRUE(progress_until(
      [&] { return engine()->decode_stats().get(wire::Verdict::kIpDestination) == before + 1; }));
  EXPECT_EQ(member.ep->stats().rx_frames.load(), 0u);
  engine()->leave_group(g, p, member.ep.get());
}

// Unicast: only frames for the port's own IPv4 and MAC reach an endpoint; frames for another host
// on the same segment (flooded by a bridge, seen by af_packet) are counted and dropped.
TEST(EngineLib, UnicastFramesForAnotherHostAreCountedAndNotDelivered) {
  Member sender, receiver;
  char buf[4] = {};
  iovec iov{buf, sizeof(buf)};
  proto::Destination d;
  d.mac = engine()->mac();
  d.ipv4_be = engine()->ipv4_be();
  d.udp_port_be = receiver.port;
  const uint64_t before = engine()->stats().not_ours.load();
  proto::Destination other_ip = d;
  other_ip.ipv4_be = ipv4("192.0.2.77");
  proto::Destination other_mac = d;
  other_mac.mac.addr_bytes[5] ^= 0x55;
  ASSERT_EQ(sender.ep->send(&iov, 1, other_ip, nullptr, 0, false, 0, false), 0);
  ASSERT_EQ(sender.ep->send(&iov, 1, other_mac, nullptr, 0, false, 0, false), 0);
  EXPECT_TRUE(progress_until([&] { return engine()->stats().not_ours.load() == before + 2; }));
  settle();
  EXPECT_EQ(receiver.ep->stats().rx_frames.load(), 0u);
  // The same datagram for us is delivered (held in the endpoint's backlog: no receive posted).
  ASSERT_EQ(sender.ep->send(&iov, 1, d, nullptr, 0, false, 0, false), 0);
  EXPECT_TRUE(progress_until([&] { return receiver.ep->stats().rx_frames.load() == 1; }));
  EXPECT_EQ(engine()->stats().not_ours.load(), before + 2);
}
