// SPDX-License-Identifier: BSD-3-Clause
//
// ARP for IPv4 over Ethernet (RFC 826), so that a port answers for its address and learns its
// peers' MACs on a plain IP network. Only Ethernet (hardware type 1, 6-byte addresses) and IPv4
// (protocol type 0x0800, 4-byte addresses) with opcodes request (1) and reply (2) are accepted;
// everything else is rejected and counted.
//
// The frame decoder (decoder.h) reports ethertype ARP as Verdict::kArp with the ARP bytes in
// Frame::payload; handle_arp_st() parses them, updates the port's neighbour table and builds the
// reply, if one is due, into a buffer the caller then sends.
//
// Learning follows RFC 826's merge rule: a message from an address that has an entry updates it
// (whatever its state); a new entry is created only when the message is addressed to us (our
// address is its target), so unsolicited traffic cannot fill the table. A message whose sender
// claims our own address is never learnt (counted as a conflict). An ARP probe (sender address
// 0.0.0.0, RFC 5227) is answered but not learnt.
//
// Threading: parse_arp and build_* are reentrant. handle_arp_st runs on the progress thread that
// owns the port (the neighbour table's writer); its ArpStats are read by any thread (counters.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/counters.h"
#include "wire/format.h"
#include "wire/neighbour.h"

namespace dpfab::wire {

inline constexpr size_t kArpLen = 28;                         ///< an Ethernet/IPv4 ARP message
inline constexpr size_t kArpFrameLen = kEthHdrLen + kArpLen;  ///< 42
inline constexpr size_t kMinFrameLen = 60;  ///< Ethernet minimum without FCS: builds pad to it
inline constexpr uint16_t kArpOpRequest = 1;
inline constexpr uint16_t kArpOpReply = 2;

/// An ARP message, addresses in network byte order.
struct ArpMessage {
  uint16_t op = 0;       ///< kArpOpRequest or kArpOpReply
  rte_ether_addr sha{};  ///< sender hardware address
  uint32_t spa_be = 0;   ///< sender protocol address
  rte_ether_addr tha{};  ///< target hardware address (zero in requests)
  uint32_t tpa_be = 0;   ///< target protocol address
};

/// What parse_arp made of a message: kRequest or kReply, else why it was rejected.
enum class ArpVerdict : uint8_t {
  kRequest,
  kReply,
  // Rejects. kFirstArpReject is the first of them.
  kTruncated,      ///< fewer than 28 bytes
  kHardwareType,   ///< hardware type != 1 (Ethernet)
  kProtocolType,   ///< protocol type != 0x0800 (IPv4)
  kAddressLength,  ///< hardware length != 6 or protocol length != 4
  kOpcode,         ///< neither request nor reply
  kSender,         ///< sender MAC zero or multicast/broadcast, or sender IPv4 multicast/broadcast
  kCount
};
inline constexpr ArpVerdict kFirstArpReject = ArpVerdict::kTruncated;
const char* arp_verdict_name(ArpVerdict v) noexcept;

/// What handle_arp_st did with a valid message (several may apply to one message).
enum class ArpAction : uint8_t {
  kReplied,    ///< a reply to a request for our address was built
  kUpdated,    ///< an existing neighbour entry was confirmed/updated
  kCreated,    ///< a neighbour entry was created (the message was addressed to us)
  kNotLearnt,  ///< the sender had no entry and the message was not for us (or was a probe)
  kTableFull,  ///< an entry should have been created but the table is full
  kNotForUs,   ///< a request for another address: no reply
  kConflict,   ///< the sender claims our address with another MAC: ignored
  kNoRoom,     ///< a reply was due but the reply buffer is shorter than kMinFrameLen
  kCount
};
const char* arp_action_name(ArpAction a) noexcept;

struct ArpStats {
  Counters<ArpVerdict> verdicts;
  Counters<ArpAction> actions;
  uint64_t rejected() const noexcept { return verdicts.sum_from(kFirstArpReject); }
};

/// The port's own addresses (network byte order). ip_be 0: the port has no address yet (it then
/// answers nothing and learns nothing addressed to it).
struct Local {
  rte_ether_addr mac{};
  uint32_t ip_be = 0;
};

/// Parses the ARP message at the start of `arp` (bytes after it, e.g. Ethernet padding, are
/// ignored). `*out` is set for kRequest and kReply only.
ArpVerdict parse_arp(std::span<const uint8_t> arp, ArpMessage* out) noexcept;

/// Builds, at the start of `frame`, a broadcast request "who has target_ip_be? tell local",
/// padded to kMinFrameLen.
/// @return the frame length (kMinFrameLen), or 0 when frame.size() < kMinFrameLen.
size_t build_arp_request(std::span<uint8_t> frame, const Local& local,
                         uint32_t target_ip_be) noexcept;

/// Builds a gratuitous ARP (an RFC 5227 announcement: a broadcast request whose sender and target
/// addresses are both local.ip_be), padded to kMinFrameLen.
/// @return the frame length (kMinFrameLen), or 0 when frame.size() < kMinFrameLen.
size_t build_gratuitous_arp(std::span<uint8_t> frame, const Local& local) noexcept;

/// Builds the reply to `request` from `local`, unicast to the requester, padded to kMinFrameLen.
/// Does not check that the request is for local.ip_be (handle_arp_st does).
/// @return the frame length (kMinFrameLen), or 0 when frame.size() < kMinFrameLen.
size_t build_arp_reply(std::span<uint8_t> frame, const Local& local,
                       const ArpMessage& request) noexcept;

struct ArpResult {
  ArpVerdict verdict = ArpVerdict::kTruncated;
  size_t reply_len = 0;  ///< > 0: a reply of this many bytes is in the reply buffer: send it
};

/// Handles one received ARP message (`arp`: Frame::payload of a Verdict::kArp frame): parses it,
/// updates `table` (see the learning rule above) and, for a request whose target is local.ip_be,
/// builds the reply into `reply`. Counts the verdict and the actions in `stats`. Never allocates.
/// Caller: the progress thread that owns `table`.
ArpResult handle_arp_st(std::span<const uint8_t> arp, const Local& local, NeighbourTable& table,
                        uint64_t now_ns, std::span<uint8_t> reply, ArpStats& stats) noexcept;

}  // namespace dpfab::wire
