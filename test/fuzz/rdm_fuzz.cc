// SPDX-License-Identifier: BSD-3-Clause
//
// Fuzz target: the RDM header decoder (lib/wire/rdm.h). The input is the 20-byte dpfab header of
// a frame followed by its dpfab payload (the RDM header and data), as the frame decoder hands
// them over. Besides "no crash, no sanitizer report", it checks properties:
//   - every decode is counted exactly once, under its verdict;
//   - an accepted header passes rdm_validate, its data lies inside the input right after the
//     header, and re-encoding it gives exactly the input's header bytes;
//   - encode_rdm refuses exactly what the decoder rejects (for a header that got that far);
//   - decode_rdm_detached (a same-host packet whose data stays in the sender's memory) agrees with
//     decode_rdm on the header with the same data length, and never reads past the header.
// A violated property aborts (__builtin_trap), which libFuzzer reports as a crash.
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "wire/format.h"
#include "wire/rdm.h"

using namespace dpfab::wire;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

RdmVerdict run(const uint8_t* data, size_t size) {
  if (size < kHeaderLen) return RdmVerdict::kCount;  // not an input of this target
  const Header outer = read_header(data);
  std::span<const uint8_t> payload(data + kHeaderLen, size - kHeaderLen);
  RdmDecodeStats stats;
  RdmHeader h;
  std::span<const uint8_t> d;
  const RdmVerdict v = decode_rdm(outer, payload, &h, &d, stats);
  check(stats.get(v) == 1 && stats.rejected() == (v == RdmVerdict::kOk ? 0u : 1u));
  if (v == RdmVerdict::kOk) {
    const size_t hlen = rdm_header_len(h.kind);
    check(rdm_validate(h, d.size()) == RdmVerdict::kOk);
    check(d.data() == payload.data() + hlen && d.size() == payload.size() - hlen);
    std::vector<uint8_t> again(hlen);
    check(encode_rdm(again, h, d.size()) == static_cast<int>(hlen));
    check(std::memcmp(again.data(), payload.data(), hlen) == 0);
    RdmHeader hd;
    RdmDecodeStats dstats;
    check(decode_rdm_detached(payload.first(hlen), d.size(), &hd, dstats) == RdmVerdict::kOk);
    check(hd == h && dstats.get(RdmVerdict::kOk) == 1);
  } else if (v != RdmVerdict::kOuterHeader && v != RdmVerdict::kTruncated &&
             v != RdmVerdict::kKind) {
    // The decoder read a whole header of a known kind: encoding it must be refused too.
    std::vector<uint8_t> again(kRdmHeaderLen);
    check(encode_rdm(again, h, d.size()) == -EINVAL);
  }
  // The detached decoder on the same bytes, with a data length taken from them: counted once, and
  // what it accepts is valid with that length. The header alone is copied (ASan: nothing beyond).
  if (!payload.empty()) {
    const size_t hlen = payload.size() >= kRdmHeaderLen   ? kRdmHeaderLen
                        : payload.size() >= kRdmCommonLen ? kRdmCommonLen
                                                          : payload.size();
    std::vector<uint8_t> header(payload.begin(), payload.begin() + hlen);
    const uint64_t data_len = payload.size() > hlen ? payload[hlen] * 997u : 0;
    RdmHeader hd;
    RdmDecodeStats dstats;
    const RdmVerdict dv = decode_rdm_detached(header, data_len, &hd, dstats);
    check(dstats.get(dv) == 1);
    if (dv == RdmVerdict::kOk)
      check(rdm_validate(hd, data_len) == RdmVerdict::kOk &&
            header.size() == rdm_header_len(hd.kind));
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
  const RdmVerdict v = run(data, size);
  return v == RdmVerdict::kCount ? "short" : rdm_verdict_name(v);
}
