// SPDX-License-Identifier: BSD-3-Clause
//
// Fuzz target: the CM header decoder (lib/wire/cm.h). The input is the 20-byte dpfab header of a
// frame followed by its dpfab payload (the CM header and connection data), as the frame decoder
// hands them over. Besides "no crash, no sanitizer report", it checks properties:
//   - every decode is counted exactly once, under its verdict;
//   - an accepted header passes cm_validate, its data is the rest of the input right after the
//     header (at most kCmMaxData bytes), and re-encoding it gives exactly the input's header bytes;
//   - encode_cm refuses exactly what the decoder rejects (for a header that got that far).
// A violated property aborts (__builtin_trap), which libFuzzer reports as a crash.
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "wire/cm.h"
#include "wire/format.h"

using namespace dpfab::wire;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

CmVerdict run(const uint8_t* data, size_t size) {
  if (size < kHeaderLen) return CmVerdict::kCount;  // not an input of this target
  const Header outer = read_header(data);
  std::span<const uint8_t> payload(data + kHeaderLen, size - kHeaderLen);
  CmDecodeStats stats;
  CmHeader h;
  std::span<const uint8_t> d;
  const CmVerdict v = decode_cm(outer, payload, &h, &d, stats);
  check(stats.get(v) == 1 && stats.rejected() == (v == CmVerdict::kOk ? 0u : 1u));
  if (v == CmVerdict::kOk) {
    check(cm_validate(h, d.size()) == CmVerdict::kOk);
    check(d.data() == payload.data() + kCmHeaderLen && d.size() == payload.size() - kCmHeaderLen);
    check(d.size() == h.data_len && d.size() <= kCmMaxData);
    uint8_t again[kCmHeaderLen];
    check(encode_cm(again, h) == static_cast<int>(kCmHeaderLen));
    check(std::memcmp(again, payload.data(), kCmHeaderLen) == 0);
  } else if (v != CmVerdict::kOuterHeader && v != CmVerdict::kTruncated &&
             v != CmVerdict::kVersion && v != CmVerdict::kKind) {
    // The decoder read a whole header of a known kind: encoding it must be refused too, unless
    // only the length of the data that follows was wrong (encode_cm trusts data_len).
    uint8_t again[kCmHeaderLen];
    if (v != CmVerdict::kDataLength || cm_validate(h, h.data_len) != CmVerdict::kOk)
      check(encode_cm(again, h) == -EINVAL);
  }
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  run(data, size);
  return 0;
}

// The corpus runner's verdict check: seeds are named "<verdict>--<what>".
extern "C" const char* dpfab_fuzz_verdict(const uint8_t* data, size_t size) {
  const CmVerdict v = run(data, size);
  return v == CmVerdict::kCount ? "short" : cm_verdict_name(v);
}
