// SPDX-License-Identifier: BSD-3-Clause
//
// The CM header: what a connection-management (FI_EP_MSG) frame carries after the dpfab header. A
// frame of dpfab type Type::kCm (format.h) has this payload:
//
//   dpfab payload = CM header (16 bytes) + connection data (data_len bytes)
//
// As for RDM frames (rdm.h), the dpfab header of a CM frame carries no state of its own: its flags
// and cq_data are 0 (decode_cm rejects anything else), so that the CM layout is versioned on its
// own (cm_version). The dpfab header's type is Type::kCm; the CM kinds (CmKind) are numbered on
// their own, in the CM header.
//
// 16 bytes, every multi-byte field big-endian:
//
//   offset  size  field       meaning
//        0     1  cm_version  kCmVersion (1); any other value is rejected
//        1     1  kind        CmKind; unknown kinds are rejected
//        2     2  flags       CmFlag bits; bits not allowed for the kind are rejected
//        4     4  src_id      the sender's connection id (random, never 0); 0 in kReject, whose
//                             sender (a passive endpoint, or a port with no listener) has none
//        8     4  dst_id      the receiver's connection id; 0 in kConnReq (the passive endpoint
//                             has none), never 0 otherwise
//       12     2  data_len    bytes of connection data after the header: exactly the rest of the
//                             payload; only kConnReq, kAccept and kReject carry data; at most
//                             kCmMaxData
//       14     2  reserved    0
//       16     n  data        the application's connection data (fi_connect, fi_accept, fi_reject)
//
// A connection is named by its two ends' ids. Each end's id is also the epoch of the reliable
// stream it sends (the RDM header's epoch), so data frames of an earlier connection, of a peer
// that crashed and came back, or replayed, carry an id the receiving end does not expect and are
// dropped (proto/msg_endpoint.h).
//
// Kinds (proto/msg_cm.h has the state machine):
//   kConnReq     connector -> passive endpoint: please connect; src_id = the connector's id
//   kAccept      accepting endpoint -> connector: accepted (from the accepting endpoint's own
//                address, which the connector talks to from then on)
//   kReject      passive endpoint -> connector: refused (with kCmNoListener: no passive endpoint
//                is bound to the UDP port the request went to; sent by the port itself)
//   kEstablished connector -> accepting endpoint: the accept arrived; the connection is up
//   kShutdown    either end: the sender disconnected (fi_shutdown, fi_close)
//   kShutdownAck the answer to kShutdown (the sender stops repeating it)
//   kKeepalive   either end, while connected and idle: still here
//
// Threading: the functions are reentrant; a CmDecodeStats is written by one thread (counters.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/counters.h"
#include "wire/format.h"

namespace dpfab::wire {

inline constexpr uint8_t kCmVersion = 1;
inline constexpr size_t kCmHeaderLen = 16;
/// The most connection data a CM frame carries (FI_OPT_CM_DATA_SIZE). 16 + 256 bytes fit the
/// payload of the smallest MTU dpfab runs at (576: 528 bytes).
inline constexpr size_t kCmMaxData = 256;

enum class CmKind : uint8_t {
  kConnReq = 1,
  kAccept = 2,
  kReject = 3,
  kEstablished = 4,
  kShutdown = 5,
  kShutdownAck = 6,
  kKeepalive = 7,
};
inline constexpr uint8_t kCmKindMax = 7;

enum CmFlag : uint16_t {
  /// kReject: no passive endpoint listens on the UDP port the request went to (the port answered).
  kCmNoListener = 1u << 0,
};

/// Flags each kind may carry.
constexpr uint16_t cm_allowed_flags(CmKind k) noexcept {
  return k == CmKind::kReject ? kCmNoListener : 0;
}
/// Whether a kind may carry connection data.
constexpr bool cm_has_data(CmKind k) noexcept {
  return k == CmKind::kConnReq || k == CmKind::kAccept || k == CmKind::kReject;
}

/// "connreq", "accept", ...; "?" out of range.
const char* cm_kind_name(CmKind k) noexcept;

/// The CM header in host byte order (see the table above).
struct CmHeader {
  uint8_t version = kCmVersion;
  CmKind kind = CmKind::kKeepalive;
  uint16_t flags = 0;
  uint32_t src_id = 0;
  uint32_t dst_id = 0;
  uint16_t data_len = 0;
  uint16_t reserved = 0;

  friend bool operator==(const CmHeader&, const CmHeader&) = default;
};

/// What decode_cm made of a payload: kOk, or why it was rejected.
enum class CmVerdict : uint8_t {
  kOk,
  kOuterHeader,  ///< the dpfab header is not kCm, or has flags or cq_data set
  kTruncated,    ///< shorter than the CM header
  kVersion,      ///< cm_version != kCmVersion
  kKind,         ///< unknown kind
  kFlags,        ///< a flag the kind may not carry
  kIds,          ///< src_id 0 (but in kReject) or set in kReject; dst_id set in kConnReq or 0
                 ///< elsewhere
  kReserved,     ///< reserved field not 0
  kDataLength,   ///< data_len is not the rest of the payload, above kCmMaxData, or data on a
                 ///< kind that carries none
  kCount
};
inline constexpr CmVerdict kCmFirstReject = CmVerdict::kOuterHeader;

/// "ok", "outer-header", ...; "?" out of range.
const char* cm_verdict_name(CmVerdict v) noexcept;

class CmDecodeStats : public Counters<CmVerdict> {
 public:
  uint64_t rejected() const noexcept { return sum_from(kCmFirstReject); }
};

/// Checks `h` as decode_cm would with `data_len` bytes of data after it, without counting.
CmVerdict cm_validate(const CmHeader& h, size_t data_len) noexcept;

/// Decodes the CM header at the start of `payload` (the dpfab payload of a frame whose dpfab
/// header is `outer`). On kOk `*out` is the header and `*data` the connection data after it.
/// @return the verdict, counted in `stats`. `*out`/`*data` are unspecified on a reject.
CmVerdict decode_cm(const Header& outer, std::span<const uint8_t> payload, CmHeader* out,
                    std::span<const uint8_t>* data, CmDecodeStats& stats) noexcept;

/// Writes `h` (kCmHeaderLen bytes) at the start of `out`, for h.data_len bytes of data that the
/// caller puts after it.
/// @return kCmHeaderLen; -EINVAL if `h` would not pass cm_validate (we never send what we would
///         reject); -ENOSPC if `out` is too short. Nothing is written on error.
[[nodiscard]] int encode_cm(std::span<uint8_t> out, const CmHeader& h) noexcept;

/// The dpfab header of a CM frame to `dst_ep` from `src_ep` with `payload_len` bytes of dpfab
/// payload (CM header + data).
constexpr Header cm_outer_header(uint16_t src_ep, uint16_t dst_ep, uint32_t payload_len) noexcept {
  Header h;
  h.type = Type::kCm;
  h.src_ep = src_ep;
  h.dst_ep = dst_ep;
  h.payload_len = payload_len;
  return h;
}

}  // namespace dpfab::wire
