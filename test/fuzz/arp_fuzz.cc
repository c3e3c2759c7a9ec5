// SPDX-License-Identifier: BSD-3-Clause
//
// Fuzz target: ARP handling and the neighbour table (lib/wire/arp.h, neighbour.h), as the
// progress thread drives them: received frames go through the decoder, ARP ones through
// handle_arp_st (parse, learn, reply build); application threads' request_resolve and the timer
// tick_st are interleaved. The input is a sequence of records:
//
//   byte 0: bits 0-1 the operation, bits 2-7 how far the clock advances first (x 7 ms)
//     op 0  frame:    byte len, then len bytes of Ethernet frame (decode_frame -> handle_arp_st)
//     op 1  resolve:  4 bytes IPv4 -> request_resolve (from "an application thread")
//     op 2  tick:     tick_st; every address it returns gets an ARP request built
//     op 3  learn:    4 bytes IPv4, 6 bytes MAC, 1 byte create flag -> learn_st
//   A record cut short by the end of the input ends the run.
//
// We are 02:00:00:00:00:02 / 10.0.0.2; the table has 8 slots, 3 requests 200 ms apart, 1 s
// reachable time and 500 ms failed hold, so short inputs reach every state.
// Properties checked (a violation traps, which libFuzzer reports as a crash): a reply is built
// only for a valid request for our address and parses back as our reply to the requester; what
// was learnt is what lookup returns; our own address is never learnt from the wire; a tick
// returns only addresses under resolution; the table never exceeds its capacity.
#include <arpa/inet.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "wire/arp.h"
#include "wire/decoder.h"
#include "wire/neighbour.h"

using namespace dpfab::wire;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

bool same_mac(const rte_ether_addr& a, const rte_ether_addr& b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

constexpr uint64_t kMs = 1'000'000;

NeighbourConfig table_config() {
  NeighbourConfig c;
  c.capacity = 8;
  c.max_requests = 3;
  c.retry_ns = 200 * kMs;
  c.reachable_ns = 1000 * kMs;
  c.failed_hold_ns = 500 * kMs;
  return c;
}

Local our_address() {
  Local l;
  l.mac = rte_ether_addr{{0x02, 0, 0, 0, 0, 0x02}};
  l.ip_be = htonl(0x0a000002);
  return l;
}

uint32_t load_ip(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Runs the records; returns the name of the last frame's verdict ("none" without frames): the
// ARP verdict for ARP frames, "decoder-<verdict>" for the others.
std::string run(const uint8_t* data, size_t size) {
  NeighbourTable table(table_config());
  const Local us = our_address();
  ArpStats stats;
  DecodeStats dstats;
  uint8_t reply[kMinFrameLen];
  uint32_t due[4];
  uint64_t now = 0;
  std::string last = "none";
  size_t i = 0;
  while (i < size) {
    const uint8_t op = data[i] & 3;
    now += (data[i] >> 2) * 7 * kMs;
    ++i;
    if (op == 0) {
      if (i >= size) break;
      const size_t len = data[i++];
      if (size - i < len) break;
      Frame f;
      const Verdict v = decode_frame({data + i, len}, &f, dstats);
      i += len;
      if (v != Verdict::kArp) {
        last = std::string("decoder-") + verdict_name(v);
        continue;
      }
      const uint64_t replied = stats.actions.get(ArpAction::kReplied);
      const uint64_t learnt =
          stats.actions.get(ArpAction::kUpdated) + stats.actions.get(ArpAction::kCreated);
      ArpMessage m{};
      const ArpVerdict pv = parse_arp({f.payload, f.payload_len}, &m);
      const ArpResult r = handle_arp_st({f.payload, f.payload_len}, us, table, now, reply, stats);
      check(r.verdict == pv);
      last = arp_verdict_name(r.verdict);
      if (r.reply_len != 0) {
        check(r.reply_len == kMinFrameLen && pv == ArpVerdict::kRequest && m.tpa_be == us.ip_be);
        check(stats.actions.get(ArpAction::kReplied) == replied + 1);
        ArpMessage rm;
        check(parse_arp(std::span<const uint8_t>(reply + kEthHdrLen, kArpLen), &rm) ==
              ArpVerdict::kReply);
        check(same_mac(rm.sha, us.mac) && rm.spa_be == us.ip_be && same_mac(rm.tha, m.sha) &&
              rm.tpa_be == m.spa_be && std::memcmp(reply, &m.sha, 6) == 0);
      }
      if (stats.actions.get(ArpAction::kUpdated) + stats.actions.get(ArpAction::kCreated) !=
          learnt) {
        auto n = table.lookup(m.spa_be);
        check(n && n->state == NeighState::kReachable && same_mac(n->mac, m.sha) &&
              n->updated_ns == now && m.spa_be != us.ip_be);
      }
    } else if (op == 1) {
      if (size - i < 4) break;
      const int rc = table.request_resolve(load_ip(data + i));
      check(rc == 0 || rc == -EINVAL || rc == -EHOSTUNREACH || rc == -EAGAIN);
      i += 4;
    } else if (op == 2) {
      const size_t n = table.tick_st(now, due);
      check(n <= std::size(due));
      for (size_t k = 0; k < n; ++k) {
        auto e = table.lookup(due[k]);
        check(e && (e->state == NeighState::kIncomplete || e->state == NeighState::kReachable));
        uint8_t req[kMinFrameLen];
        check(build_arp_request(req, us, due[k]) == kMinFrameLen);
        ArpMessage rm;
        check(parse_arp(std::span<const uint8_t>(req + kEthHdrLen, kArpLen), &rm) ==
              ArpVerdict::kRequest);
        check(rm.tpa_be == due[k] && rm.spa_be == us.ip_be);
      }
    } else {
      if (size - i < 11) break;
      rte_ether_addr mac;
      std::memcpy(&mac, data + i + 4, 6);
      const uint32_t ip = load_ip(data + i);
      const auto l = table.learn_st(ip, mac, now, data[i + 10] & 1);
      if (l == NeighbourTable::Learnt::kUpdated || l == NeighbourTable::Learnt::kCreated) {
        auto e = table.lookup(ip);
        check(e && e->state == NeighState::kReachable && same_mac(e->mac, mac));
      }
      i += 11;
    }
    check(table.size() <= table.capacity());
  }
  return last;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  run(data, size);
  return 0;
}

/// For corpus_runner.cc: the verdict name the seed files are named after.
extern "C" const char* dpfab_fuzz_verdict(const uint8_t* data, size_t size) {
  static std::string last;
  last = run(data, size);
  return last.c_str();
}
