// SPDX-License-Identifier: BSD-3-Clause
//
// The frame decoder: the one place that turns received bytes into a dpfab frame. It validates
// every layer (format.h) and either fills a Frame or names the reason it rejected the bytes;
// nothing malformed is ever delivered, and every verdict is counted in DecodeStats.
//
// Checks, in order (the first failing one is the verdict):
//   Ethernet  >= 14 bytes; ethertype IPv4 continues, ARP is reported as kArp, a VLAN tag
//             (0x8100/0x88a8) and everything else is rejected.
//   IPv4      >= 20 bytes; version 4; IHL >= 5 (options are skipped); IHL*4 bytes present;
//             header checksum valid, unless the NIC verified it (RxChecksum); total length
//             within the frame (Ethernet padding after it is ignored) and >= IHL*4 + 8 + 20;
//             not a fragment (MF set or offset != 0: we never send fragments); protocol UDP.
//   addresses source MAC not a group address, source IPv4 neither multicast nor broadcast;
//             destination IPv4 multicast (224.0.0.0/4) exactly when the destination MAC is a
//             group address, and then that MAC is the group's (01:00:5e + low 23 bits, see
//             multicast.h): a group frame with a unicast MAC, a unicast datagram in a
//             multicast or broadcast frame (RFC 1122 3.3.6) and a group MAC of another group
//             are rejected.
//   UDP       length == IPv4 total length - IHL*4; checksum valid when non-zero, unless the NIC
//             verified it (a zero checksum means "none" in IPv4 and is accepted).
//   dpfab     version == kVersion, checked before anything else of the header is read: a frame
//             of wire version 1 (format.h: version byte 1, a known type, and its payload_len at
//             offset 8 == UDP length - 8 - 32) is kOldVersion, any other version kHeaderVersion;
//             type_accepted(type); no flag outside kKnownFlags; payload_len == UDP length - 8 - 20.
// What the decoder does not check: whether a unicast destination MAC/IP or any destination port is
// ours (the caller demultiplexes on them; a multicast frame's group is a member check there too),
// TTL, DSCP/ECN, the DF bit, the IPv4 identification.
//
// Cost: no allocation, no exception, no lock; one pass over the headers plus the software
// checksums (the UDP one reads the whole payload) when the NIC did not verify them.
//
// Threading: decode_* are reentrant. A DecodeStats is written by the one thread that decodes with
// it (the progress thread of a port) and read by any thread (counters.h).
#pragma once

#include <cstdint>
#include <span>

#include "wire/counters.h"
#include "wire/format.h"

struct rte_mbuf;

namespace dpfab::wire {

/// What the decoder made of a frame: kData or kArp, else the reason it was rejected.
enum class Verdict : uint8_t {
  kData,  ///< a valid dpfab frame; every Frame field is set
  kArp,   ///< ethertype ARP; Frame macs and payload/payload_len (the ARP bytes) set: see arp.h
  // Rejects. kFirstReject is the first of them.
  kEthTruncated,     ///< shorter than an Ethernet header
  kVlan,             ///< 802.1Q or 802.1ad tagged: dpfab configures no VLANs
  kEtherType,        ///< neither IPv4 nor ARP
  kIpTruncated,      ///< shorter than the IPv4 header (20 bytes, or IHL*4 with options)
  kIpVersion,        ///< IPv4 version field != 4
  kIpHeaderLength,   ///< IHL < 5
  kIpChecksum,       ///< IPv4 header checksum wrong (or the NIC said so)
  kIpTotalLength,    ///< total length beyond the frame, or too short for UDP + dpfab headers
  kIpFragment,       ///< MF set or fragment offset != 0
  kIpProtocol,       ///< not UDP
  kUdpLength,        ///< UDP length != IPv4 total length - IHL*4
  kUdpChecksum,      ///< UDP checksum non-zero and wrong (or the NIC said so)
  kHeaderVersion,    ///< dpfab version != kVersion, and not a frame of wire version 1
  kOldVersion,       ///< a frame of wire version 1 (format.h): the peer runs an older dpfab
  kHeaderType,       ///< dpfab type not accepted (type_accepted: 0, 2-6 or above 8)
  kHeaderFlags,      ///< dpfab flag bits outside kKnownFlags
  kPayloadLength,    ///< dpfab payload_len != UDP length - 8 - 20
  kSegmentedHeader,  ///< mbuf: the headers do not all lie in the first segment
  kIpSource,         ///< source MAC a group address, or source IPv4 multicast or broadcast
  kIpDestination,    ///< destination IPv4 and MAC disagree: multicast IPv4 without its group MAC,
                     ///< or a group (multicast/broadcast) MAC with a non-multicast IPv4
  kCount
};
inline constexpr Verdict kFirstReject = Verdict::kEthTruncated;

/// "data", "arp", "eth-truncated", ...; "?" for values out of range.
const char* verdict_name(Verdict v) noexcept;

/// Per-verdict counters (Counters<Verdict>): get(v) for one, rejected() for every reject.
class DecodeStats : public Counters<Verdict> {
 public:
  uint64_t rejected() const noexcept { return sum_from(kFirstReject); }
};

/// What the NIC says about a checksum (from the mbuf's RTE_MBUF_F_RX_*_CKSUM_* bits).
enum class RxChecksum : uint8_t {
  kUnknown,  ///< not checked: the decoder verifies in software
  kGood,     ///< verified good (GOOD, or NONE: "data integrity verified", see rte_mbuf_core.h)
  kBad,      ///< verified bad: rejected without looking
};

struct RxChecksums {
  RxChecksum ip = RxChecksum::kUnknown;
  RxChecksum l4 = RxChecksum::kUnknown;

  /// From an mbuf's ol_flags.
  static RxChecksums from_ol_flags(uint64_t ol_flags) noexcept;
};

/// A decoded frame. Addresses and ports in network byte order (as wire::Address), the dpfab
/// header in host byte order. Valid only for the verdicts named; unspecified on a reject.
struct Frame {
  rte_ether_addr dst_mac{};  ///< kData, kArp, kOldVersion
  rte_ether_addr src_mac{};  ///< kData, kArp, kOldVersion
  // kData and kOldVersion (so that the old peer can be named):
  uint32_t src_ip_be = 0;
  uint32_t dst_ip_be = 0;
  uint16_t src_port_be = 0;
  uint16_t dst_port_be = 0;
  uint16_t ip_id = 0;  ///< kData; host byte order
  Header header;       ///< kData; payload_len == this->payload_len
  /// kData: payload offset from the start of the frame (kPayloadOffset plus IPv4 options).
  uint32_t payload_offset = 0;
  /// kData: payload bytes. kArp: bytes from the ARP header to the end of the (first segment of
  /// the) frame, Ethernet padding included.
  uint32_t payload_len = 0;
  /// kData: the payload, payload_len bytes, when it is contiguous (always for decode_frame; for
  /// decode_mbuf only when it lies in the first segment, else nullptr: use payload_offset with
  /// the mbuf chain). kArp: the ARP header.
  const uint8_t* payload = nullptr;
  /// The sender's host part (wire::Address host_be, node_be, nonce_be) when the frame came through
  /// the same-host path (shm/node.h), else 0: the decoders never set them.
  uint64_t src_host_be = 0;
  uint32_t src_node_be = 0;
  uint32_t src_nonce_be = 0;
  /// The same-host link the frame came through (an shm::Conn), else null.
  const void* src_link = nullptr;
  /// An RDM packet whose data stayed in the sender's memory (shm kRdmIndirect): the payload is
  /// the RDM header followed by an shm::RdmIndirect (where the data is there, and its length).
  bool indirect = false;
};

/// Decodes the frame in `bytes` (Ethernet header first, no FCS). `nic` says which checksums the
/// NIC verified (default: none, both are verified in software).
/// @return the verdict, counted in `stats`; `*out` is set as Frame documents.
Verdict decode_frame(std::span<const uint8_t> bytes, Frame* out, DecodeStats& stats,
                     RxChecksums nic = {}) noexcept;

/// Decodes the frame in `m` (pkt_len bytes, one segment or a chain), taking the NIC's checksum
/// verdicts from m->ol_flags. The headers (through the dpfab header) must lie in the first
/// segment (kSegmentedHeader otherwise); the payload may span segments.
/// @return the verdict, counted in `stats`; `*out` is set as Frame documents.
Verdict decode_mbuf(const rte_mbuf* m, Frame* out, DecodeStats& stats) noexcept;

}  // namespace dpfab::wire
