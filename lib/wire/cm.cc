// SPDX-License-Identifier: BSD-3-Clause
#include "wire/cm.h"

#include <cerrno>
#include <iterator>

namespace dpfab::wire {

namespace {

constexpr const char* kCmVerdictNames[] = {
    "ok", "outer-header", "truncated", "version", "kind", "flags", "ids", "reserved", "data-length",
};
static_assert(std::size(kCmVerdictNames) == static_cast<size_t>(CmVerdict::kCount));

constexpr const char* kCmKindNames[] = {
    "?", "connreq", "accept", "reject", "established", "shutdown", "shutdown-ack", "keepalive",
};
static_assert(std::size(kCmKindNames) == kCmKindMax + 1);

bool kind_known(uint8_t k) noexcept { return k >= 1 && k <= kCmKindMax; }

}  // namespace

const char* cm_kind_name(CmKind k) noexcept {
  const auto i = static_cast<size_t>(k);
  return i < std::size(kCmKindNames) ? kCmKindNames[i] : "?";
}

const char* cm_verdict_name(CmVerdict v) noexcept {
  const auto i = static_cast<size_t>(v);
  return i < std::size(kCmVerdictNames) ? kCmVerdictNames[i] : "?";
}

CmVerdict cm_validate(const CmHeader& h, size_t data_len) noexcept {
  if (h.version != kCmVersion) return CmVerdict::kVersion;
  if (!kind_known(static_cast<uint8_t>(h.kind))) return CmVerdict::kKind;
  if ((h.flags & ~cm_allowed_flags(h.kind)) != 0) return CmVerdict::kFlags;
  const bool reject = h.kind == CmKind::kReject;
  if ((h.src_id == 0) != reject) return CmVerdict::kIds;
  if ((h.dst_id == 0) != (h.kind == CmKind::kConnReq)) return CmVerdict::kIds;
  if (h.reserved != 0) return CmVerdict::kReserved;
  if (h.data_len != data_len || h.data_len > kCmMaxData ||
      (h.data_len != 0 && !cm_has_data(h.kind)))
    return CmVerdict::kDataLength;
  return CmVerdict::kOk;
}

CmVerdict decode_cm(const Header& outer, std::span<const uint8_t> payload, CmHeader* out,
                    std::span<const uint8_t>* data, CmDecodeStats& stats) noexcept {
  auto verdict = [&]() noexcept -> CmVerdict {
    if (outer.type != Type::kCm || outer.flags != 0 || outer.cq_data != 0)
      return CmVerdict::kOuterHeader;
    if (payload.size() < kCmHeaderLen) return CmVerdict::kTruncated;
    const uint8_t* p = payload.data();
    CmHeader& h = *out;
    h.version = p[0];
    if (h.version != kCmVersion) return CmVerdict::kVersion;
    if (!kind_known(p[1])) return CmVerdict::kKind;
    h.kind = static_cast<CmKind>(p[1]);
    h.flags = load_be16(p + 2);
    h.src_id = load_be32(p + 4);
    h.dst_id = load_be32(p + 8);
    h.data_len = load_be16(p + 12);
    h.reserved = load_be16(p + 14);
    *data = payload.subspan(kCmHeaderLen);
    return cm_validate(h, data->size());
  }();
  stats.bump(verdict);
  return verdict;
}

int encode_cm(std::span<uint8_t> out, const CmHeader& h) noexcept {
  if (cm_validate(h, h.data_len) != CmVerdict::kOk) return -EINVAL;
  if (out.size() < kCmHeaderLen) return -ENOSPC;
  uint8_t* p = out.data();
  p[0] = h.version;
  p[1] = static_cast<uint8_t>(h.kind);
  store_be16(p + 2, h.flags);
  store_be32(p + 4, h.src_id);
  store_be32(p + 8, h.dst_id);
  store_be16(p + 12, h.data_len);
  store_be16(p + 14, h.reserved);
  return static_cast<int>(kCmHeaderLen);
}

}  // namespace dpfab::wire
