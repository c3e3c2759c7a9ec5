// SPDX-License-Identifier: BSD-3-Clause
//
// The dpfab frame format. Every frame dpfab sends is an ordinary UDP datagram, so that it crosses
// veth pairs, bridges and routers and tcpdump/tshark can capture it:
//
//   offset  size  what
//        0    14  Ethernet II: destination MAC, source MAC, ethertype 0x0800 (no VLAN tag)
//       14    20  IPv4: version 4, IHL 5 (we send no options; we accept them), DF set, TTL 64,
//                 protocol 17, header checksum
//       34     8  UDP: source port, destination port, length, checksum (RFC 768)
//       42    20  the dpfab header (below)
//       62     n  payload, n = dpfab payload_len = UDP length - 8 - 20
//
// A UDP port names a dpfab port's listener; the endpoint id in the dpfab header names the endpoint
// behind it (wire::Address is {MAC, IPv4, UDP port, endpoint id}).
//
// The dpfab header (wire version 2): 20 bytes, every multi-byte field in network byte order
// (big-endian).
//
//   offset  size  field        meaning
//        0     1  version      kVersion (2). A receiver rejects any other value: a new layout
//                              gets a new version. Version 1 (below) is recognised and refused
//                              under a verdict of its own (Verdict::kOldVersion).
//        1     1  type         what the frame carries (Type). Unknown types are rejected.
//        2     2  flags        Flag bits; bits a receiver does not know are rejected, so a flag
//                              that changes the meaning of a frame cannot be silently ignored.
//        4     2  src_ep       endpoint id of the sender, within its UDP port
//        6     2  dst_ep       endpoint id of the receiver, within the destination UDP port
//        8     4  payload_len  bytes of payload after the header; always UDP length - 8 - 20
//       12     8  cq_data      remote CQ data (fi_senddata); meaningful when kHasCqData is set,
//                              0 otherwise
//
// Ordering: bytes 0-11 are those of version 1 at the same offsets (captures read the same, and a
// receiver tells a version-1 frame by its payload_len at offset 8); cq_data follows them. With
// the 42 bytes in front, all 62 header bytes of a frame lie in its first 64-byte cache line when
// the frame starts on one (an mbuf's data does: RTE_PKTMBUF_HEADROOM, 128, into a cache-aligned
// buffer), so the fast path's prepared headers (HeaderTemplate, encoder.h) are one line to copy
// and the decoder reads one line before the payload; in version 1, msg_id straddled the first
// two lines and cq_data lay in the second. The multi-byte fields are not naturally aligned in
// the frame (payload_len at frame offset 50, cq_data at 54): every access is a memcpy load or
// store, and an unaligned access within a cache line costs nothing extra on x86-64 or arm64, so
// reordering for natural alignment (payload_len at 2, cq_data at 6) would buy nothing and would
// move the fields that version 1 shares.
//
// Header is the host-byte-order view of these 20 bytes; write_header()/read_header() convert.
//
// Version history:
//   1  32 bytes: the 20 above with cq_data at offset 24, after three 32-bit fields seq (12), ack
//      (16) and msg_id (20) that were reserved for a reliability layer and always sent 0 (the
//      RDM header, rdm.h, carries reliability instead). Types 2-6 (ack, nack, connreq,
//      connresp, disconnect) were reserved for it and never sent. Frame overhead 74 bytes, 1440
//      bytes of payload per frame at MTU 1500.
//   2  20 bytes: seq, ack and msg_id dropped, the reserved types removed (their numbers stay
//      unused, so that 1, 7 and 8 read the same in captures of either version). Frame overhead
//      62 bytes, 1452 bytes of payload per frame at MTU 1500.
// Versions do not interoperate. A frame of version 1 (version byte 1, a known type, and the
// version-1 payload_len at offset 8 agreeing with the UDP length) is refused as
// Verdict::kOldVersion, counted per port (telemetry port<N>_rx_old_version) and logged once per
// port: it is never parsed as version 2. Any other version byte is Verdict::kHeaderVersion. A
// version-1 receiver counts our frames as its "header-version" (or, below 12 bytes of payload,
// "ip-total-length") rejects.
#pragma once

#include <rte_ether.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace dpfab::wire {

inline constexpr size_t kEthHdrLen = 14;   ///< Ethernet II, untagged
inline constexpr size_t kIpv4HdrLen = 20;  ///< IPv4 without options (what we send)
inline constexpr size_t kUdpHdrLen = 8;
inline constexpr size_t kHeaderLen = 20;  ///< the dpfab header
/// Bytes in front of the payload of a frame we send: 14 + 20 + 8 + 20 = 62.
inline constexpr size_t kOverhead = kEthHdrLen + kIpv4HdrLen + kUdpHdrLen + kHeaderLen;
/// The part of kOverhead that counts against the (L3) MTU: 20 + 8 + 20 = 48.
inline constexpr size_t kL3Overhead = kOverhead - kEthHdrLen;

// Offsets of the headers in a frame we send (no IPv4 options).
inline constexpr size_t kIpv4Offset = kEthHdrLen;
inline constexpr size_t kUdpOffset = kIpv4Offset + kIpv4HdrLen;
inline constexpr size_t kHeaderOffset = kUdpOffset + kUdpHdrLen;
inline constexpr size_t kPayloadOffset = kHeaderOffset + kHeaderLen;

/// The largest IPv4 datagram (total length is 16 bits).
inline constexpr size_t kMaxIpv4TotalLen = 65535;
/// The largest payload any frame can carry, whatever the MTU.
inline constexpr size_t kMaxPayload = kMaxIpv4TotalLen - kL3Overhead;

/// The largest payload of one frame on a port with this MTU (the L3 MTU, as rte_eth_dev_get_mtu
/// reports it: 1500 for standard Ethernet, so 1452). 0 when the MTU cannot hold the headers.
constexpr size_t max_payload(uint32_t mtu) noexcept {
  if (mtu <= kL3Overhead) return 0;
  size_t p = mtu - kL3Overhead;
  return p < kMaxPayload ? p : kMaxPayload;
}

inline constexpr uint8_t kVersion = 2;
/// Offset of payload_len in the dpfab header (the same in versions 1 and 2).
inline constexpr size_t kPayloadLenOffset = 8;

/// Wire version 1, the previous layout (see the history above): recognised only to refuse it.
namespace v1 {
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kHeaderLen = 32;  ///< cq_data at 24, after seq, ack, msg_id
}  // namespace v1
inline constexpr uint8_t kIpTtl = 64;
inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint16_t kEtherTypeVlan = 0x8100;  ///< 802.1Q
inline constexpr uint16_t kEtherTypeQinQ = 0x88a8;  ///< 802.1ad
inline constexpr uint8_t kIpProtoUdp = 17;

/// What a frame carries (header byte 1). 0 is never valid, and neither are 2-6: version 1
/// reserved them (ack, nack, connreq, connresp, disconnect) for a reliability and connection
/// layer that became the RDM and CM headers instead; nothing ever sent them. A new type takes the
/// next free number (9), so that 1, 7 and 8 keep their meaning in captures of either version.
enum class Type : uint8_t {
  kData = 1,  ///< FI_EP_DGRAM: the payload is the whole message
  /// FI_EP_RDM: the payload starts with the versioned RDM header (wire/rdm.h), which carries the
  /// reliability state; this header's flags and cq_data are 0 (wire::decode_rdm checks them).
  /// DGRAM endpoints drop frames of any type but kData.
  kRdm = 7,
  /// FI_EP_MSG connection management: the payload starts with the versioned CM header
  /// (wire/cm.h); this header's flags and cq_data are 0 (wire::decode_cm checks them). A
  /// connected endpoint's data goes as kRdm frames.
  kCm = 8,
};

/// Whether a receiver accepts frames of this type: kData, kRdm and kCm; any other value is
/// unknown.
constexpr bool type_accepted(uint8_t t) noexcept {
  return t == static_cast<uint8_t>(Type::kData) || t == static_cast<uint8_t>(Type::kRdm) ||
         t == static_cast<uint8_t>(Type::kCm);
}

/// Header flag bits (header bytes 2-3).
enum Flag : uint16_t {
  kHasCqData = 1u << 0,  ///< cq_data carries remote CQ data for the receiver's completion
};
/// Every flag a receiver understands; frames with any other bit set are rejected.
inline constexpr uint16_t kKnownFlags = kHasCqData;

/// The dpfab header in host byte order. Field meanings: see the table at the top of this file.
struct Header {
  uint8_t version = kVersion;
  Type type = Type::kData;
  uint16_t flags = 0;
  uint16_t src_ep = 0;
  uint16_t dst_ep = 0;
  uint32_t payload_len = 0;
  uint64_t cq_data = 0;

  friend bool operator==(const Header&, const Header&) = default;
};

/// Where a frame goes and where it comes from: the Ethernet, IPv4 and UDP addresses. Addresses
/// and ports are in network byte order, as in wire::Address.
struct Route {
  rte_ether_addr src_mac{};
  rte_ether_addr dst_mac{};
  uint32_t src_ip_be = 0;
  uint32_t dst_ip_be = 0;
  uint16_t src_port_be = 0;
  uint16_t dst_port_be = 0;
};

// Unaligned big-endian loads and stores (frames are at any alignment).
inline uint16_t load_be16(const uint8_t* p) noexcept {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return __builtin_bswap16(v);
}
inline uint32_t load_be32(const uint8_t* p) noexcept {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return __builtin_bswap32(v);
}
inline uint64_t load_be64(const uint8_t* p) noexcept {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return __builtin_bswap64(v);
}
inline void store_be16(uint8_t* p, uint16_t v) noexcept {
  v = __builtin_bswap16(v);
  std::memcpy(p, &v, sizeof(v));
}
inline void store_be32(uint8_t* p, uint32_t v) noexcept {
  v = __builtin_bswap32(v);
  std::memcpy(p, &v, sizeof(v));
}
inline void store_be64(uint8_t* p, uint64_t v) noexcept {
  v = __builtin_bswap64(v);
  std::memcpy(p, &v, sizeof(v));
}
/// Network-order fields copied as they are (addresses and ports kept in network order).
inline uint16_t load_raw16(const uint8_t* p) noexcept {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline uint32_t load_raw32(const uint8_t* p) noexcept {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

/// Writes the 20 header bytes at `p`, exactly as given (no validation).
inline void write_header(uint8_t* p, const Header& h) noexcept {
  p[0] = h.version;
  p[1] = static_cast<uint8_t>(h.type);
  store_be16(p + 2, h.flags);
  store_be16(p + 4, h.src_ep);
  store_be16(p + 6, h.dst_ep);
  store_be32(p + kPayloadLenOffset, h.payload_len);
  store_be64(p + 12, h.cq_data);
}

/// Reads the 20 header bytes at `p` (no validation: the decoder validates, and checks the
/// version before it reads anything else).
inline Header read_header(const uint8_t* p) noexcept {
  Header h;
  h.version = p[0];
  h.type = static_cast<Type>(p[1]);
  h.flags = load_be16(p + 2);
  h.src_ep = load_be16(p + 4);
  h.dst_ep = load_be16(p + 6);
  h.payload_len = load_be32(p + kPayloadLenOffset);
  h.cq_data = load_be64(p + 12);
  return h;
}

}  // namespace dpfab::wire
