// SPDX-License-Identifier: BSD-3-Clause
#include "wire/arp.h"

#include <iterator>

namespace dpfab::wire {

namespace {

constexpr const char* kVerdictNames[] = {"request",       "reply",         "truncated",
                                         "hardware-type", "protocol-type", "address-length",
                                         "opcode",        "sender"};
static_assert(std::size(kVerdictNames) == static_cast<size_t>(ArpVerdict::kCount));

constexpr const char* kActionNames[] = {"replied",    "updated",    "created",  "not-learnt",
                                        "table-full", "not-for-us", "conflict", "no-room"};
static_assert(std::size(kActionNames) == static_cast<size_t>(ArpAction::kCount));

constexpr uint16_t kHwEthernet = 1;
constexpr rte_ether_addr kBroadcast{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
constexpr rte_ether_addr kZeroMac{};

bool same_mac(const rte_ether_addr& a, const rte_ether_addr& b) noexcept {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

// 224.0.0.0/4 (multicast) and above (class E, 255.255.255.255): never a host's address.
bool multicast_or_broadcast_ip(uint32_t ip_be) noexcept {
  return (reinterpret_cast<const uint8_t*>(&ip_be)[0] & 0xf0) >= 0xe0;
}

size_t build(std::span<uint8_t> frame, const rte_ether_addr& eth_dst, uint16_t op,
             const rte_ether_addr& sha, uint32_t spa_be, const rte_ether_addr& tha,
             uint32_t tpa_be) noexcept {
  if (frame.size() < kMinFrameLen) return 0;
  uint8_t* p = frame.data();
  std::memcpy(p, &eth_dst, RTE_ETHER_ADDR_LEN);
  std::memcpy(p + 6, &sha, RTE_ETHER_ADDR_LEN);
  store_be16(p + 12, kEtherTypeArp);
  uint8_t* a = p + kEthHdrLen;
  store_be16(a, kHwEthernet);
  store_be16(a + 2, kEtherTypeIpv4);
  a[4] = RTE_ETHER_ADDR_LEN;
  a[5] = 4;
  store_be16(a + 6, op);
  std::memcpy(a + 8, &sha, RTE_ETHER_ADDR_LEN);
  std::memcpy(a + 14, &spa_be, 4);
  std::memcpy(a + 18, &tha, RTE_ETHER_ADDR_LEN);
  std::memcpy(a + 24, &tpa_be, 4);
  std::memset(p + kArpFrameLen, 0, kMinFrameLen - kArpFrameLen);
  return kMinFrameLen;
}

}  // namespace

const char* arp_verdict_name(ArpVerdict v) noexcept {
  auto i = static_cast<size_t>(v);
  return i < std::size(kVerdictNames) ? kVerdictNames[i] : "?";
}

const char* arp_action_name(ArpAction a) noexcept {
  auto i = static_cast<size_t>(a);
  return i < std::size(kActionNames) ? kActionNames[i] : "?";
}

ArpVerdict parse_arp(std::span<const uint8_t> arp, ArpMessage* out) noexcept {
  if (arp.size() < kArpLen) return ArpVerdict::kTruncated;
  const uint8_t* a = arp.data();
  if (load_be16(a) != kHwEthernet) return ArpVerdict::kHardwareType;
  if (load_be16(a + 2) != kEtherTypeIpv4) return ArpVerdict::kProtocolType;
  if (a[4] != RTE_ETHER_ADDR_LEN || a[5] != 4) return ArpVerdict::kAddressLength;
  const uint16_t op = load_be16(a + 6);
  if (op != kArpOpRequest && op != kArpOpReply) return ArpVerdict::kOpcode;
  ArpMessage m;
  m.op = op;
  std::memcpy(&m.sha, a + 8, RTE_ETHER_ADDR_LEN);
  m.spa_be = load_raw32(a + 14);
  std::memcpy(&m.tha, a + 18, RTE_ETHER_ADDR_LEN);
  m.tpa_be = load_raw32(a + 24);
  if (rte_is_multicast_ether_addr(&m.sha) || same_mac(m.sha, kZeroMac) ||
      multicast_or_broadcast_ip(m.spa_be))
    return ArpVerdict::kSender;
  *out = m;
  return op == kArpOpRequest ? ArpVerdict::kRequest : ArpVerdict::kReply;
}

size_t build_arp_request(std::span<uint8_t> frame, const Local& local,
                         uint32_t target_ip_be) noexcept {
  return build(frame, kBroadcast, kArpOpRequest, local.mac, local.ip_be, kZeroMac, target_ip_be);
}

size_t build_gratuitous_arp(std::span<uint8_t> frame, const Local& local) noexcept {
  return build(frame, kBroadcast, kArpOpRequest, local.mac, local.ip_be, kZeroMac, local.ip_be);
}

size_t build_arp_reply(std::span<uint8_t> frame, const Local& local,
                       const ArpMessage& request) noexcept {
  return build(frame, request.sha, kArpOpReply, local.mac, local.ip_be, request.sha,
               request.spa_be);
}

ArpResult handle_arp_st(std::span<const uint8_t> arp, const Local& local, NeighbourTable& table,
                        uint64_t now_ns, std::span<uint8_t> reply, ArpStats& stats) noexcept {
  ArpMessage m;
  ArpResult r;
  r.verdict = parse_arp(arp, &m);
  stats.verdicts.bump(r.verdict);
  if (r.verdict != ArpVerdict::kRequest && r.verdict != ArpVerdict::kReply) return r;

  if (local.ip_be != 0 && m.spa_be == local.ip_be) {
    // Our own announcement looped back (same MAC) or another host claiming our address.
    if (!same_mac(m.sha, local.mac)) stats.actions.bump(ArpAction::kConflict);
    return r;
  }
  const bool for_us = local.ip_be != 0 && m.tpa_be == local.ip_be;
  if (m.spa_be == 0) {
    stats.actions.bump(ArpAction::kNotLearnt);  // an RFC 5227 probe: nothing to learn
  } else {
    switch (table.learn_st(m.spa_be, m.sha, now_ns, for_us)) {
      case NeighbourTable::Learnt::kUpdated:
        stats.actions.bump(ArpAction::kUpdated);
        break;
      case NeighbourTable::Learnt::kCreated:
        stats.actions.bump(ArpAction::kCreated);
        break;
      case NeighbourTable::Learnt::kIgnored:
        stats.actions.bump(ArpAction::kNotLearnt);
        break;
      case NeighbourTable::Learnt::kFull:
        stats.actions.bump(ArpAction::kTableFull);
        break;
    }
  }
  if (r.verdict != ArpVerdict::kRequest) return r;
  if (!for_us) {
    stats.actions.bump(ArpAction::kNotForUs);
    return r;
  }
  r.reply_len = build_arp_reply(reply, local, m);
  stats.actions.bump(r.reply_len != 0 ? ArpAction::kReplied : ArpAction::kNoRoom);
  return r;
}

}  // namespace dpfab::wire
