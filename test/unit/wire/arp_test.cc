// SPDX-License-Identifier: BSD-3-Clause
//
// ARP (RFC 826, Ethernet/IPv4 only): parsing against hand-crafted frames (checked with tcpdump),
// every reject, request/reply/gratuitous builds, and handle_arp_st's learning and reply rules.
#include "wire/arp.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "wire/decoder.h"

using namespace dpfab::wire;

namespace {

// "Request who-has 10.0.0.2 tell 10.0.0.1" from 02:00:00:00:00:01, and "Reply 10.0.0.2 is-at
// 02:00:00:00:00:02", both padded to 60 bytes; crafted by a script and decoded by tcpdump -e -vv
// as exactly that.
const std::vector<uint8_t> kRequest = {
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01,  //
    0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0x00,  //
    0x00, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,  //
    0x00, 0x00, 0x0a, 0x00, 0x00, 0x02, 0,    0,    0,    0,    0,    0,     //
    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,     //
};
const std::vector<uint8_t> kReply = {
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02,  //
    0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02, 0x02, 0x00,  //
    0x00, 0x00, 0x00, 0x02, 0x0a, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00,  //
    0x00, 0x01, 0x0a, 0x00, 0x00, 0x01, 0,    0,    0,    0,    0,    0,     //
    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,     //
};

const rte_ether_addr kMac1{{0x02, 0, 0, 0, 0, 0x01}};
const rte_ether_addr kMac2{{0x02, 0, 0, 0, 0, 0x02}};
const rte_ether_addr kMac3{{0x02, 0, 0, 0, 0, 0x03}};
const uint32_t kIp1 = htonl(0x0a000001);
const uint32_t kIp2 = htonl(0x0a000002);
const uint32_t kIp3 = htonl(0x0a000003);

bool same(const rte_ether_addr& a, const rte_ether_addr& b) { return std::memcmp(&a, &b, 6) == 0; }

std::span<const uint8_t> body(const std::vector<uint8_t>& f) {
  return std::span<const uint8_t>(f).subspan(kEthHdrLen);
}

Local local(const rte_ether_addr& mac, uint32_t ip) {
  Local l;
  l.mac = mac;
  l.ip_be = ip;
  return l;
}

}  // namespace

TEST(Arp, ParsesAHandCraftedRequestAndReply) {
  ArpMessage m;
  ASSERT_EQ(parse_arp(body(kRequest), &m), ArpVerdict::kRequest);
  EXPECT_EQ(m.op, kArpOpRequest);
  EXPECT_TRUE(same(m.sha, kMac1));
  EXPECT_EQ(m.spa_be, kIp1);
  EXPECT_TRUE(same(m.tha, rte_ether_addr{}));
  EXPECT_EQ(m.tpa_be, kIp2);
  ASSERT_EQ(parse_arp(body(kReply), &m), ArpVerdict::kReply);
  EXPECT_EQ(m.op, kArpOpReply);
  EXPECT_TRUE(same(m.sha, kMac2));
  EXPECT_EQ(m.spa_be, kIp2);
  EXPECT_TRUE(same(m.tha, kMac1));
  EXPECT_EQ(m.tpa_be, kIp1);
}

TEST(Arp, TheDecoderReportsArpFramesWithTheArpBytes) {
  DecodeStats stats;
  Frame fr;
  ASSERT_EQ(decode_frame(kRequest, &fr, stats), Verdict::kArp);
  EXPECT_EQ(fr.payload, kRequest.data() + kEthHdrLen);
  EXPECT_EQ(fr.payload_len, kRequest.size() - kEthHdrLen);
  EXPECT_TRUE(same(fr.src_mac, kMac1));
  EXPECT_EQ(stats.get(Verdict::kArp), 1u);
}

TEST(Arp, BuildsTheRequestByteForByte) {
  std::vector<uint8_t> f(kMinFrameLen, 0xee);
  ASSERT_EQ(build_arp_request(f, local(kMac1, kIp1), kIp2), kMinFrameLen);
  EXPECT_EQ(f, kRequest);
}

TEST(Arp, BuildsTheReplyToARequestByteForByte) {
  ArpMessage req;
  ASSERT_EQ(parse_arp(body(kRequest), &req), ArpVerdict::kRequest);
  std::vector<uint8_t> f(100, 0xee);
  ASSERT_EQ(build_arp_reply(f, local(kMac2, kIp2), req), kMinFrameLen);
  f.resize(kMinFrameLen);
  EXPECT_EQ(f, kReply);
}

TEST(Arp, GratuitousArpIsABroadcastRequestForOurOwnAddress) {
  std::vector<uint8_t> f(kMinFrameLen);
  ASSERT_EQ(build_gratuitous_arp(f, local(kMac1, kIp1)), kMinFrameLen);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(f[i], 0xff);
  ArpMessage m;
  ASSERT_EQ(parse_arp(body(f), &m), ArpVerdict::kRequest);
  EXPECT_EQ(m.spa_be, kIp1);
  EXPECT_EQ(m.tpa_be, kIp1);
  EXPECT_TRUE(same(m.sha, kMac1));
  EXPECT_TRUE(same(m.tha, rte_ether_addr{}));
}

TEST(Arp, BuildsNothingIntoABufferShorterThanTheEthernetMinimum) {
  std::vector<uint8_t> f(kMinFrameLen - 1);
  ArpMessage req;
  ASSERT_EQ(parse_arp(body(kRequest), &req), ArpVerdict::kRequest);
  EXPECT_EQ(build_arp_request(f, local(kMac1, kIp1), kIp2), 0u);
  EXPECT_EQ(build_gratuitous_arp(f, local(kMac1, kIp1)), 0u);
  EXPECT_EQ(build_arp_reply(f, local(kMac1, kIp1), req), 0u);
}

TEST(Arp, RejectsATruncatedMessageAtEveryLength) {
  ArpMessage m;
  for (size_t n = 0; n < kArpLen; ++n)
    EXPECT_EQ(parse_arp(body(kRequest).first(n), &m), ArpVerdict::kTruncated) << n;
  EXPECT_EQ(parse_arp(body(kRequest).first(kArpLen), &m), ArpVerdict::kRequest);
}

TEST(Arp, RejectsOtherHardwareAndProtocolTypesLengthsAndOpcodes) {
  struct Case {
    size_t off;
    std::vector<uint8_t> bytes;
    ArpVerdict want;
  } cases[] = {
      {0, {0x00, 0x06}, ArpVerdict::kHardwareType},  // IEEE 802
      {0, {0x00, 0x00}, ArpVerdict::kHardwareType},
      {2, {0x86, 0xdd}, ArpVerdict::kProtocolType},  // IPv6
      {2, {0x08, 0x06}, ArpVerdict::kProtocolType},
      {4, {8}, ArpVerdict::kAddressLength},
      {5, {16}, ArpVerdict::kAddressLength},
      {6, {0x00, 0x00}, ArpVerdict::kOpcode},
      {6, {0x00, 0x03}, ArpVerdict::kOpcode},  // RARP request
      {6, {0x00, 0x04}, ArpVerdict::kOpcode},  // RARP reply
      {6, {0x01, 0x01}, ArpVerdict::kOpcode},
      {8, {0x01}, ArpVerdict::kSender},  // multicast sender MAC
      {8, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, ArpVerdict::kSender},
      {8, {0, 0, 0, 0, 0, 0}, ArpVerdict::kSender},
      {14, {224, 0, 0, 1}, ArpVerdict::kSender},
      {14, {255, 255, 255, 255}, ArpVerdict::kSender},
  };
  for (const auto& c : cases) {
    auto f = kRequest;
    std::copy(c.bytes.begin(), c.bytes.end(),
              f.begin() + static_cast<ptrdiff_t>(kEthHdrLen + c.off));
    ArpMessage m;
    EXPECT_EQ(parse_arp(body(f), &m), c.want) << "offset " << c.off;
  }
}

TEST(Arp, EveryVerdictAndActionHasADistinctName) {
  std::set<std::string> v, a;
  for (size_t i = 0; i < static_cast<size_t>(ArpVerdict::kCount); ++i)
    v.insert(arp_verdict_name(static_cast<ArpVerdict>(i)));
  for (size_t i = 0; i < static_cast<size_t>(ArpAction::kCount); ++i)
    a.insert(arp_action_name(static_cast<ArpAction>(i)));
  EXPECT_EQ(v.size(), static_cast<size_t>(ArpVerdict::kCount));
  EXPECT_EQ(a.size(), static_cast<size_t>(ArpAction::kCount));
  EXPECT_EQ(v.count("?"), 0u);
  EXPECT_EQ(a.count("?"), 0u);
}

// ---- handle_arp_st ----

class ArpHandling : public ::testing::Test {
 protected:
  NeighbourTable table{NeighbourConfig{}};
  ArpStats stats;
  std::vector<uint8_t> reply = std::vector<uint8_t>(128);
  Local us = local(kMac2, kIp2);

  ArpResult handle(const std::vector<uint8_t>& frame, uint64_t now = 1000) {
    return handle_arp_st(body(frame), us, table, now, reply, stats);
  }
};

TEST_F(ArpHandling, RepliesToARequestForOurAddressAndLearnsTheRequester) {
  auto r = handle(kRequest);
  EXPECT_EQ(r.verdict, ArpVerdict::kRequest);
  ASSERT_EQ(r.reply_len, kMinFrameLen);
  EXPECT_EQ(std::vector<uint8_t>(reply.begin(), reply.begin() + kMinFrameLen), kReply);
  auto n = table.lookup(kIp1);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->state, NeighState::kReachable);
  EXPECT_TRUE(same(n->mac, kMac1));
  EXPECT_EQ(n->updated_ns, 1000u);
  EXPECT_EQ(stats.actions.get(ArpAction::kReplied), 1u);
  EXPECT_EQ(stats.actions.get(ArpAction::kCreated), 1u);
  EXPECT_EQ(stats.verdicts.get(ArpVerdict::kRequest), 1u);
}

TEST_F(ArpHandling, DoesNotReplyToOrLearnFromARequestForAnotherAddress) {
  us = local(kMac3, kIp3);
  auto r = handle(kRequest);  // who-has 10.0.0.2: not us
  EXPECT_EQ(r.reply_len, 0u);
  EXPECT_FALSE(table.lookup(kIp1));
  EXPECT_EQ(stats.actions.get(ArpAction::kNotForUs), 1u);
  EXPECT_EQ(stats.actions.get(ArpAction::kNotLearnt), 1u);
  EXPECT_EQ(stats.actions.get(ArpAction::kReplied), 0u);
}

TEST_F(ArpHandling, AReplyCompletesOurResolution) {
  us = local(kMac1, kIp1);
  ASSERT_EQ(table.resolve_st(kIp2, 0), 0);
  ASSERT_EQ(table.lookup(kIp2)->state, NeighState::kIncomplete);
  auto r = handle(kReply, 5000);
  EXPECT_EQ(r.verdict, ArpVerdict::kReply);
  EXPECT_EQ(r.reply_len, 0u);
  auto n = table.lookup(kIp2);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->state, NeighState::kReachable);
  EXPECT_TRUE(same(n->mac, kMac2));
  EXPECT_EQ(n->updated_ns, 5000u);
  EXPECT_EQ(stats.actions.get(ArpAction::kUpdated), 1u);
}

TEST_F(ArpHandling, AReplyAddressedToUsCreatesAnEntryButAnUnrelatedOneDoesNot) {
  us = local(kMac1, kIp1);
  handle(kReply);  // 10.0.0.2 is-at ..., target 10.0.0.1 = us: RFC 826 adds it
  EXPECT_TRUE(table.lookup(kIp2));
  NeighbourTable other{NeighbourConfig{}};
  ArpStats s2;
  handle_arp_st(body(kReply), local(kMac3, kIp3), other, 1, reply, s2);
  EXPECT_FALSE(other.lookup(kIp2));
  EXPECT_EQ(s2.actions.get(ArpAction::kNotLearnt), 1u);
}

TEST_F(ArpHandling, AGratuitousArpUpdatesAKnownNeighbour) {
  us = local(kMac3, kIp3);
  ASSERT_EQ(table.learn_st(kIp1, kMac2, 10, true), NeighbourTable::Learnt::kCreated);
  std::vector<uint8_t> g(kMinFrameLen);
  ASSERT_EQ(build_gratuitous_arp(g, local(kMac1, kIp1)), kMinFrameLen);
  auto r = handle(g, 20);
  EXPECT_EQ(r.reply_len, 0u);  // a request for 10.0.0.1, not for us
  auto n = table.lookup(kIp1);
  ASSERT_TRUE(n);
  EXPECT_TRUE(same(n->mac, kMac1));
  EXPECT_EQ(n->updated_ns, 20u);
}

TEST_F(ArpHandling, NeverLearnsAnotherMacForOurOwnAddress) {
  us = local(kMac3, kIp1);  // we are 10.0.0.1; the request claims 10.0.0.1 from kMac1
  auto r = handle(kRequest);
  EXPECT_EQ(r.reply_len, 0u);
  EXPECT_FALSE(table.lookup(kIp1));
  EXPECT_EQ(stats.actions.get(ArpAction::kConflict), 1u);
  // Our own gratuitous ARP coming back is no conflict.
  std::vector<uint8_t> g(kMinFrameLen);
  ASSERT_EQ(build_gratuitous_arp(g, us), kMinFrameLen);
  handle(g);
  EXPECT_EQ(stats.actions.get(ArpAction::kConflict), 1u);
}

TEST_F(ArpHandling, AnswersAProbeWithoutLearningAnything) {
  auto probe = kRequest;
  std::fill(probe.begin() + 28, probe.begin() + 32, 0);  // sender IP 0.0.0.0 (RFC 5227)
  auto r = handle(probe);
  ASSERT_EQ(r.reply_len, kMinFrameLen);
  ArpMessage m;
  ASSERT_EQ(parse_arp(std::span<const uint8_t>(reply).subspan(kEthHdrLen, kArpLen), &m),
            ArpVerdict::kReply);
  EXPECT_EQ(m.tpa_be, 0u);
  EXPECT_TRUE(same(m.tha, kMac1));
  EXPECT_EQ(table.size(), 0u);
}

TEST_F(ArpHandling, APortWithoutAnAddressAnswersNothing) {
  us = local(kMac2, 0);
  EXPECT_EQ(handle(kRequest).reply_len, 0u);
  EXPECT_EQ(table.size(), 0u);
}

TEST_F(ArpHandling, CountsRejectsAndAReplyBufferTooSmall) {
  auto bad = kRequest;
  bad[kEthHdrLen + 1] = 6;
  EXPECT_EQ(handle(bad).verdict, ArpVerdict::kHardwareType);
  reply.resize(10);
  EXPECT_EQ(handle(kRequest).reply_len, 0u);
  EXPECT_EQ(stats.actions.get(ArpAction::kNoRoom), 1u);
  EXPECT_EQ(stats.rejected(), 1u);
  EXPECT_EQ(stats.verdicts.get(ArpVerdict::kHardwareType), 1u);
}

TEST_F(ArpHandling, AFullTableIsCounted) {
  NeighbourConfig cfg;
  cfg.capacity = 8;
  NeighbourTable small(cfg);
  for (uint32_t i = 0; i < 8; ++i) ASSERT_EQ(small.resolve_st(htonl(0x0b000001 + i), 0), 0);
  handle_arp_st(body(kRequest), us, small, 1, reply, stats);
  EXPECT_EQ(stats.actions.get(ArpAction::kTableFull), 1u);
  EXPECT_EQ(stats.actions.get(ArpAction::kReplied), 1u);  // still answered
}
