// SPDX-License-Identifier: BSD-3-Clause
#include "wire/rdm.h"

#include <cerrno>
#include <iterator>

namespace dpfab::wire {

namespace {

constexpr const char* kRdmVerdictNames[] = {
    "ok",     "outer-header", "truncated", "version",       "kind",
    "flags",  "epoch",        "reserved",  "ack-fields",    "data-length",
    "length", "range",        "tag-field", "cq-data-field", "rma-fields",
};
static_assert(std::size(kRdmVerdictNames) == static_cast<size_t>(RdmVerdict::kCount));

bool kind_known(uint8_t k) noexcept { return k >= 1 && k <= kRdmKindMax; }

}  // namespace

const char* rdm_verdict_name(RdmVerdict v) noexcept {
  auto i = static_cast<size_t>(v);
  return i < std::size(kRdmVerdictNames) ? kRdmVerdictNames[i] : "?";
}

namespace {

// rdm_validate's checks. kDecoded: `h` is what decode_rdm just read off the wire, which checked the
// version and the kind already and set the RMA extension's fields to 0 where the kind has none:
// those checks are left out (the receive path runs this on every frame).
template <bool kDecoded>
inline RdmVerdict validate(const RdmHeader& h, size_t data_len) noexcept {
  if (!kDecoded) {
    if (h.version != kRdmVersion) return RdmVerdict::kVersion;
    if (!kind_known(static_cast<uint8_t>(h.kind))) return RdmVerdict::kKind;
  }
  if ((h.flags & ~rdm_allowed_flags(h.kind)) != 0) return RdmVerdict::kFlags;
  if (h.epoch == 0) return RdmVerdict::kEpoch;
  if (h.reserved != 0) return RdmVerdict::kReserved;
  if (!rdm_has_body(h.kind)) {
    if (h.seq != 0) return RdmVerdict::kAckFields;
    if (data_len != 0) return RdmVerdict::kDataLength;
    return RdmVerdict::kOk;
  }
  if (h.length > kRdmMaxLength) return RdmVerdict::kLength;
  if (rdm_has_data(h.kind)) {
    // Both are <= 2^40 here, so offset + data_len cannot wrap.
    if (h.offset > h.length || data_len > h.length - h.offset) return RdmVerdict::kRange;
    if (data_len == 0 && h.length != 0) return RdmVerdict::kDataLength;
  } else {
    if (data_len != 0) return RdmVerdict::kDataLength;
    // kRts with kRdmRef: offset is an address in the sender's memory, any value but 0.
    if (h.flags & kRdmRef ? h.offset == 0 : h.offset != 0) return RdmVerdict::kRange;
  }
  if (h.tag != 0 && !(h.flags & kRdmTagged)) return RdmVerdict::kTagField;
  if (h.cq_data != 0 && !(h.flags & kRdmCqData)) return RdmVerdict::kCqDataField;
  if (!rdm_has_rma(h.kind)) {
    // The extension's fields are not on the wire: a header built with them set is not sendable.
    if (!kDecoded && (h.rkey || h.raddr || h.atomic_op || h.datatype || h.rma_reserved || h.status))
      return RdmVerdict::kRmaFields;
    return RdmVerdict::kOk;
  }
  if (h.rma_reserved != 0) return RdmVerdict::kReserved;
  // kAtomic and kRmaResp data is the whole payload of the operation: one packet.
  if ((h.kind == RdmKind::kAtomic || h.kind == RdmKind::kRmaResp) &&
      (h.offset != 0 || data_len != h.length))
    return RdmVerdict::kRange;
  if (h.kind == RdmKind::kAtomic) {
    if (data_len == 0) return RdmVerdict::kDataLength;  // no element
    if (h.atomic_op > kRdmAtomicOpMax || h.datatype > kRdmDatatypeMax ||
        (h.flags & kRdmFetch && h.flags & kRdmCompare))
      return RdmVerdict::kRmaFields;
  } else if (h.atomic_op || h.datatype) {
    return RdmVerdict::kRmaFields;
  }
  if (h.kind == RdmKind::kRmaResp ? h.rkey || h.raddr || h.status > 0xffff : h.status != 0)
    return RdmVerdict::kRmaFields;
  return RdmVerdict::kOk;
}

}  // namespace

RdmVerdict rdm_validate(const RdmHeader& h, size_t data_len) noexcept {
  return validate<false>(h, data_len);
}

RdmVerdict decode_rdm(const Header& outer, std::span<const uint8_t> payload, RdmHeader* out,
                      std::span<const uint8_t>* data, RdmDecodeStats& stats) noexcept {
  auto verdict = [&]() noexcept -> RdmVerdict {
    if (outer.type != Type::kRdm || outer.flags != 0 || outer.cq_data != 0)
      return RdmVerdict::kOuterHeader;
    if (payload.size() < kRdmCommonLen) return RdmVerdict::kTruncated;
    const uint8_t* p = payload.data();
    RdmHeader& h = *out;
    h.version = p[0];
    if (h.version != kRdmVersion) return RdmVerdict::kVersion;
    if (!kind_known(p[1])) return RdmVerdict::kKind;
    h.kind = static_cast<RdmKind>(p[1]);
    const size_t hlen = rdm_header_len(h.kind);
    if (payload.size() < hlen) return RdmVerdict::kTruncated;
    h.flags = load_be16(p + 2);
    h.epoch = load_be32(p + 4);
    h.seq = load_be32(p + 8);
    h.ack = load_be32(p + 12);
    h.sack = load_be64(p + 16);
    h.window = load_be16(p + 24);
    h.reserved = load_be16(p + 26);
    h.msg_id = load_be32(p + 28);
    if (rdm_has_body(h.kind)) {
      h.offset = load_be64(p + 32);
      h.length = load_be64(p + 40);
      h.tag = load_be64(p + 48);
      h.cq_data = load_be64(p + 56);
    } else {
      h.offset = h.length = h.tag = h.cq_data = 0;
    }
    if (rdm_has_rma(h.kind)) {
      h.rkey = load_be64(p + 64);
      h.raddr = load_be64(p + 72);
      h.atomic_op = p[80];
      h.datatype = p[81];
      h.rma_reserved = load_be16(p + 82);
      h.status = load_be32(p + 84);
    } else {
      h.rkey = h.raddr = 0;
      h.atomic_op = h.datatype = 0;
      h.rma_reserved = 0;
      h.status = 0;
    }
    *data = payload.subspan(hlen);
    return validate<true>(h, data->size());
  }();
  stats.bump(verdict);
  return verdict;
}

RdmVerdict decode_rdm_detached(std::span<const uint8_t> header, uint64_t data_len, RdmHeader* out,
                               RdmDecodeStats& stats) noexcept {
  // decode_rdm of the header alone (its own data length check says kDataLength for a segment
  // without data), then the checks again with the data length that travels apart.
  RdmDecodeStats scratch;
  std::span<const uint8_t> none;
  RdmVerdict v = decode_rdm(rdm_outer_header(0, 0, static_cast<uint32_t>(header.size())), header,
                            out, &none, scratch);
  if (v == RdmVerdict::kOk || v == RdmVerdict::kDataLength || v == RdmVerdict::kRange) {
    if (header.size() != rdm_header_len(out->kind))
      v = RdmVerdict::kTruncated;
    else
      v = rdm_validate(*out, data_len);
  }
  stats.bump(v);
  return v;
}

int encode_rdm(std::span<uint8_t> out, const RdmHeader& h, size_t data_len) noexcept {
  if (rdm_validate(h, data_len) != RdmVerdict::kOk) return -EINVAL;
  if (out.size() < rdm_header_len(h.kind)) return -ENOSPC;
  return static_cast<int>(write_rdm_header(out.data(), h));
}

}  // namespace dpfab::wire
