// SPDX-License-Identifier: BSD-3-Clause
//
// The RDM header: what a reliable (FI_EP_RDM) frame carries after the dpfab header. A frame of
// dpfab type Type::kRdm (format.h) has this payload:
//
//   dpfab payload = RDM header (32 bytes common part [+ 32 bytes body]) + data
//
// The dpfab header of an RDM frame carries no RDM state: its flags and cq_data are 0 (decode_rdm
// rejects anything else), so that the RDM layout is versioned on its own (rdm_version) and can
// change without a new dpfab version.
//
// Versions. 1: eager messages of at most 16 KiB. 2 (2026-11-28): up to 64 KiB over a port
// (fi_dpdk(7)); the layout did not change, but a version-1 receiver takes a longer eager message
// for a protocol error and drops it after acknowledging its packets, which its sender reports as
// sent. The two refuse each other's packets instead (RdmVerdict::kVersion, counted as "version"
// rejects): peers must run the same dpfab wire versions, as format.h says of the dpfab header.
//
// Common part, 32 bytes, every multi-byte field big-endian:
//
//   offset  size  field        meaning
//        0     1  rdm_version  kRdmVersion (2); any other value is rejected
//        1     1  kind         RdmKind; unknown kinds are rejected
//        2     2  flags        RdmFlag bits; bits not allowed for the kind are rejected
//        4     4  epoch        the sender's session (endpoint instance) id, never 0
//        8     4  seq          sequence number in the sender's reliable stream to this receiver;
//                              0 for kAck (acks are not sequenced)
//       12     4  ack          cumulative ack: every seq < ack of the receiver's stream arrived
//       16     8  sack         selective ack: bit i set = seq ack + 1 + i arrived (out of order)
//       24     2  window       receive window: the sender of this frame accepts seqs < ack + window
//       26     2  reserved     0
//       28     4  msg_id       the sender's message id (kEager, kRts, kRdvData); for kCts the
//                              message id of the *receiver of the CTS* being granted; for kAck
//                              the epoch of the stream it acknowledges (the receiver's own, as
//                              the sender knows it; 0 when unknown), so that an ack left over
//                              from a closed endpoint is not taken by its successor
//
// Body, 32 bytes, present for every kind but kAck:
//
//       32     8  offset       kEager/kRdvData: byte offset of this segment's data in the message;
//                              kRts with kRdmRef: the address of the message in the sender's
//                              memory; 0 for other kRts and kCts
//       40     8  length       kEager/kRdvData/kRts: the message's total length; kCts: the bytes
//                              granted (<= the RTS length; 0 = discarded, send nothing)
//       48     8  tag          kEager/kRts with kRdmTagged: the tag; 0 otherwise
//       56     8  cq_data      kEager/kRts with kRdmCqData: remote CQ data; 0 otherwise
//       64     n  data         kEager/kRdvData only: message bytes [offset, offset + n), n > 0
//                              unless the message is empty; offset + n <= length
//
// RMA extension, 24 bytes after the body, for kWrite, kReadReq, kAtomic and kRmaResp only:
//
//       64     8  key          kWrite/kReadReq/kAtomic: the target region's key; kRmaResp: 0
//       72     8  addr         kWrite: the target address of this segment's first byte;
//                              kReadReq/kAtomic: of the operation's first byte; kRmaResp: 0
//       80     1  atomic_op    kAtomic: the fi_op (<= FI_MSWAP); 0 otherwise
//       81     1  datatype     kAtomic: the fi_datatype (<= FI_UINT128); 0 otherwise
//       82     2  reserved     0
//       84     4  status       kRmaResp: 0, or the positive FI_E* code the operation failed with;
//                              0 otherwise
//       88     n  data         kWrite: bytes [offset, offset + n) of the write (as kEager);
//                              kAtomic: the operands (then the compare values), offset 0,
//                              n = length; kRmaResp: the fetched values (may be empty), offset 0,
//                              n = length
//
// RMA kinds (msg_id, body and extension):
//   kWrite     a segment of an RMA write: msg_id the writer's operation, offset/length as kEager,
//              cq_data with kRdmCqData (fi_writedata); the last segment carries kRdmRespReq when
//              the writer wants a kRmaResp once the write is placed (errors are answered anyway)
//   kReadReq   an RMA read of `length` bytes at key/addr: msg_id the reader's operation; no data
//   kReadResp  a segment of the answer to a kReadReq: msg_id the *reader's* operation (as kCts),
//              offset/length as kRdvData (length = the read's length), no extension
//   kAtomic    an atomic operation on length / size(datatype) elements at key/addr: msg_id the
//              initiator's operation; kRdmFetch (fetching: the old values come back) or
//              kRdmCompare (compare-and-swap family: data = operands then compare values), not
//              both
//   kRmaResp   the target's answer to an operation: msg_id the *initiator's* operation, status,
//              and for fetching atomics the old values
//
// Kinds: an eager message goes as kEager segments (the first one, offset 0, carries the matching
// information and is what the receiver matches); a large message goes as kRts (no data), the
// receiver answers kCts when a receive matches, and the sender then sends kRdvData segments of
// the granted bytes. kAck is an unsequenced acknowledgement (the ack fields ride on every other
// kind too); with kRdmRnr it says "seq `ack` arrived but there was no buffer for it: retry later";
// with kRdmAckReq it asks for an ack at once (a liveness probe of a peer we wait on).
// A kRts with kRdmRef (same-host peers only: the endpoint refuses it from a port) names where the
// whole message lies in the sender's memory: the receiver copies it from there itself when a
// receive matches and answers with a zero grant (kCts, length 0), which completes the send.
//
// Threading: the functions are reentrant; an RdmDecodeStats is written by one thread (counters.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/counters.h"
#include "wire/format.h"

namespace dpfab::wire {

inline constexpr uint8_t kRdmVersion = 2;
inline constexpr size_t kRdmCommonLen = 32;
inline constexpr size_t kRdmBodyLen = 32;
inline constexpr size_t kRdmHeaderLen = kRdmCommonLen + kRdmBodyLen;    ///< with body
inline constexpr size_t kRdmRmaLen = 24;                                ///< the RMA extension
inline constexpr size_t kRdmRmaHeaderLen = kRdmHeaderLen + kRdmRmaLen;  ///< with it
/// Largest message length the wire accepts (2^40 bytes); endpoints advertise less.
inline constexpr uint64_t kRdmMaxLength = uint64_t{1} << 40;

enum class RdmKind : uint8_t {
  kEager = 1,     ///< a segment of an eager message
  kAck = 2,       ///< acknowledgement only (not sequenced)
  kRts = 3,       ///< rendezvous request-to-send: matching information, no data
  kCts = 4,       ///< rendezvous clear-to-send: the receiver grants `length` bytes of `msg_id`
  kRdvData = 5,   ///< a segment of a granted rendezvous message
  kWrite = 6,     ///< a segment of an RMA write (RMA extension)
  kReadReq = 7,   ///< an RMA read request (RMA extension, no data)
  kReadResp = 8,  ///< a segment of the data answering a kReadReq
  kAtomic = 9,    ///< an atomic operation (RMA extension, operands)
  kRmaResp = 10,  ///< the target's answer: status, fetched values (RMA extension)
};
inline constexpr uint8_t kRdmKindMax = 10;
/// The largest fi_op and fi_datatype values kAtomic may carry (FI_MSWAP, FI_UINT128).
inline constexpr uint8_t kRdmAtomicOpMax = 18;
inline constexpr uint8_t kRdmDatatypeMax = 15;

enum RdmFlag : uint16_t {
  kRdmCqData = 1u << 0,  ///< cq_data is meaningful (kEager, kRts)
  kRdmTagged = 1u << 1,  ///< tagged message (fi_tsend): match on tag (kEager, kRts)
  kRdmRnr = 1u << 2,     ///< kAck: seq `ack` was refused for lack of a buffer; back off
  /// Answer with an ack at once. kAck: a liveness probe; kEager/kRdvData: the last packet of a
  /// message whose sender waits for the ack to complete it.
  kRdmAckReq = 1u << 3,
  kRdmRespReq = 1u << 4,  ///< kWrite (last segment): answer with kRmaResp once placed
  kRdmFetch = 1u << 5,    ///< kAtomic: a fetching atomic (the old values come back)
  kRdmCompare = 1u << 6,  ///< kAtomic: a compare atomic (data holds the compare values too)
  /// kRts: `offset` is the message's address in the sender's memory, which the receiver reads
  /// itself (a same-host peer, process_vm_readv); it answers with a zero grant once it has.
  kRdmRef = 1u << 7,
};

/// Flags each kind may carry.
constexpr uint16_t rdm_allowed_flags(RdmKind k) noexcept {
  switch (k) {
    case RdmKind::kEager:
      return kRdmCqData | kRdmTagged | kRdmAckReq;
    case RdmKind::kRts:
      return kRdmCqData | kRdmTagged | kRdmRef;
    case RdmKind::kRdvData:
      return kRdmAckReq;
    case RdmKind::kAck:
      return kRdmRnr | kRdmAckReq;
    case RdmKind::kWrite:
      return kRdmCqData | kRdmAckReq | kRdmRespReq;
    case RdmKind::kReadResp:
      return kRdmAckReq;
    case RdmKind::kAtomic:
      return kRdmFetch | kRdmCompare;
    default:
      return 0;
  }
}
constexpr bool rdm_has_body(RdmKind k) noexcept { return k != RdmKind::kAck; }
constexpr bool rdm_has_data(RdmKind k) noexcept {
  return k == RdmKind::kEager || k == RdmKind::kRdvData || k == RdmKind::kWrite ||
         k == RdmKind::kReadResp || k == RdmKind::kAtomic || k == RdmKind::kRmaResp;
}
/// Whether a kind carries the RMA extension.
constexpr bool rdm_has_rma(RdmKind k) noexcept {
  return k == RdmKind::kWrite || k == RdmKind::kReadReq || k == RdmKind::kAtomic ||
         k == RdmKind::kRmaResp;
}
/// Header bytes of a kind: 32 for kAck, 88 with the RMA extension, 64 otherwise.
constexpr size_t rdm_header_len(RdmKind k) noexcept {
  return !rdm_has_body(k) ? kRdmCommonLen : rdm_has_rma(k) ? kRdmRmaHeaderLen : kRdmHeaderLen;
}

/// The RDM header in host byte order (see the table above).
struct RdmHeader {
  uint8_t version = kRdmVersion;
  RdmKind kind = RdmKind::kAck;
  uint16_t flags = 0;
  uint32_t epoch = 0;
  uint32_t seq = 0;
  uint32_t ack = 0;
  uint64_t sack = 0;
  uint16_t window = 0;
  uint16_t reserved = 0;
  uint32_t msg_id = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t tag = 0;
  uint64_t cq_data = 0;
  // The RMA extension (rdm_has_rma kinds; 0 otherwise).
  uint64_t rkey = 0;
  uint64_t raddr = 0;
  uint8_t atomic_op = 0;
  uint8_t datatype = 0;
  uint16_t rma_reserved = 0;
  uint32_t status = 0;

  friend bool operator==(const RdmHeader&, const RdmHeader&) = default;
};

/// What decode_rdm made of a payload: kOk, or why it was rejected.
enum class RdmVerdict : uint8_t {
  kOk,
  kOuterHeader,  ///< the dpfab header is not kRdm, or has flags or cq_data set
  kTruncated,    ///< shorter than the kind's header
  kVersion,      ///< rdm_version != kRdmVersion
  kKind,         ///< unknown kind
  kFlags,        ///< a flag the kind may not carry
  kEpoch,        ///< epoch 0
  kReserved,     ///< reserved field not 0
  kAckFields,    ///< kAck with seq set
  kDataLength,   ///< data after a kind that carries none, or an empty segment of a non-empty
                 ///< message
  kLength,       ///< length > kRdmMaxLength
  kRange,        ///< segment beyond the message (offset + n > length), kRts/kCts/kReadReq offset
                 ///< != 0, or kAtomic/kRmaResp data that is not the whole (offset 0, n = length)
  kTagField,     ///< tag set without kRdmTagged
  kCqDataField,  ///< cq_data set without kRdmCqData
  kRmaFields,    ///< RMA extension: an atomic op/datatype out of range or on another kind,
                 ///< kRdmFetch with kRdmCompare, status on another kind than kRmaResp, or a key
                 ///< or address on kRmaResp
  kCount
};
inline constexpr RdmVerdict kRdmFirstReject = RdmVerdict::kOuterHeader;

/// "ok", "outer-header", ...; "?" out of range.
const char* rdm_verdict_name(RdmVerdict v) noexcept;

class RdmDecodeStats : public Counters<RdmVerdict> {
 public:
  uint64_t rejected() const noexcept { return sum_from(kRdmFirstReject); }
};

/// Checks `h` as decode_rdm would with `data_len` bytes of data after it, without counting.
RdmVerdict rdm_validate(const RdmHeader& h, size_t data_len) noexcept;

/// Decodes the RDM header at the start of `payload` (the dpfab payload of a frame whose dpfab
/// header is `outer`). On kOk `*out` is the header and `*data` the bytes after it.
/// @return the verdict, counted in `stats`. `*out`/`*data` are unspecified on a reject.
RdmVerdict decode_rdm(const Header& outer, std::span<const uint8_t> payload, RdmHeader* out,
                      std::span<const uint8_t>* data, RdmDecodeStats& stats) noexcept;

/// Decodes an RDM header whose data travels apart from it (a same-host packet whose data stays in
/// the sender's memory, shm/ring.h kRdmIndirect): `header` holds exactly the header, and it is
/// checked as decode_rdm checks it with `data_len` bytes of data after it.
/// @return the verdict, counted in `stats` (kTruncated also for bytes after the header).
RdmVerdict decode_rdm_detached(std::span<const uint8_t> header, uint64_t data_len, RdmHeader* out,
                               RdmDecodeStats& stats) noexcept;

/// Writes `h` (rdm_header_len(h.kind) bytes) at the start of `out`, for `data_len` bytes of data
/// that the caller puts after it.
/// @return the bytes written; -EINVAL if `h` with `data_len` would not pass rdm_validate (we
///         never send what we would reject); -ENOSPC if `out` is too short. Nothing is written
///         on error.
[[nodiscard]] int encode_rdm(std::span<uint8_t> out, const RdmHeader& h, size_t data_len) noexcept;

/// encode_rdm without its checks, for the data path: writes `h` at `out`, which has room for
/// rdm_header_len(h.kind) bytes, and returns that length (the RMA extension's fields of other kinds
/// are not written). Only for headers that pass rdm_validate
/// with the data sent after them: the RDM core's own (every header it builds goes through
/// encode_rdm, checks included, in the simulated-link unit tests, test/unit/proto/rdm_sim.h).
inline size_t write_rdm_header(uint8_t* out, const RdmHeader& h) noexcept {
  uint8_t* p = out;
  p[0] = h.version;
  p[1] = static_cast<uint8_t>(h.kind);
  store_be16(p + 2, h.flags);
  store_be32(p + 4, h.epoch);
  store_be32(p + 8, h.seq);
  store_be32(p + 12, h.ack);
  store_be64(p + 16, h.sack);
  store_be16(p + 24, h.window);
  store_be16(p + 26, h.reserved);
  store_be32(p + 28, h.msg_id);
  if (!rdm_has_body(h.kind)) return kRdmCommonLen;
  store_be64(p + 32, h.offset);
  store_be64(p + 40, h.length);
  store_be64(p + 48, h.tag);
  store_be64(p + 56, h.cq_data);
  if (!rdm_has_rma(h.kind)) return kRdmHeaderLen;
  store_be64(p + 64, h.rkey);
  store_be64(p + 72, h.raddr);
  p[80] = h.atomic_op;
  p[81] = h.datatype;
  store_be16(p + 82, h.rma_reserved);
  store_be32(p + 84, h.status);
  return kRdmRmaHeaderLen;
}

/// The dpfab header of an RDM frame to `dst_ep` from `src_ep` with `payload_len` bytes of dpfab
/// payload (RDM header + data).
constexpr Header rdm_outer_header(uint16_t src_ep, uint16_t dst_ep, uint32_t payload_len) noexcept {
  Header h;
  h.type = Type::kRdm;
  h.src_ep = src_ep;
  h.dst_ep = dst_ep;
  h.payload_len = payload_len;
  return h;
}

/// Sequence-number order with wrap-around (RFC 1982 style on 32 bits): a < b.
constexpr bool seq_lt(uint32_t a, uint32_t b) noexcept { return static_cast<int32_t>(a - b) < 0; }
constexpr bool seq_le(uint32_t a, uint32_t b) noexcept { return static_cast<int32_t>(a - b) <= 0; }

}  // namespace dpfab::wire
