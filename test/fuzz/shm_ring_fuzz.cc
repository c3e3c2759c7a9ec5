// SPDX-License-Identifier: BSD-3-Clause
//
// Fuzz target: the consumer side of a same-host ring (lib/shm/ring.h), which reads memory another
// process writes. The input is what a broken or hostile producer could leave: the first 8 bytes
// are the producer's head, the next 8 a second head it publishes after the reader's first pass,
// the rest the data area (4 KiB, zero-filled past the input). Properties:
//   - the reader ends (empty or corrupt) within as many records as the area can hold;
//   - every record it returns lies inside the data area and below the head it read, with a
//     known kind, and reading it touches nothing outside the area (ASan);
//   - once corrupt, it stays corrupt.
// A violated property aborts (__builtin_trap).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "shm/ring.h"

using namespace dpfab::shm;

namespace {

constexpr uint64_t kSize = 4096;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

// "record" (at least one record, then empty), "empty", or "corrupt": what the first pass found.
const char* run(const uint8_t* data, size_t size) {
  std::vector<uint8_t> area(kRingControlBytes + kSize);
  auto* ctl = reinterpret_cast<RingControl*>(area.data());
  uint64_t head1 = 0, head2 = 0;
  if (size >= 8) std::memcpy(&head1, data, 8);
  if (size >= 16) std::memcpy(&head2, data + 8, 8);
  const size_t body = size > 16 ? size - 16 : 0;
  std::memcpy(area.data() + kRingControlBytes, data + 16 * (size >= 16),
              std::min<size_t>(body, kSize));
  ctl->head.store(head1);
  ctl->tail.store(0);
  RingReader r(area.data(), kSize);
  const uint8_t* lo = area.data() + kRingControlBytes;
  const char* verdict = "empty";
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) ctl->head.store(head2);
    for (uint64_t i = 0;; ++i) {
      check(i <= kSize / kAlign + 1);
      RecordHeader h;
      const uint8_t* p = nullptr;
      const auto st = r.next(&h, &p);
      if (st == RingReader::Status::kEmpty) break;
      if (st == RingReader::Status::kCorrupt) {
        check(r.corrupt());
        check(r.next(&h, &p) == RingReader::Status::kCorrupt);
        if (pass == 0) verdict = "corrupt";
        return verdict;
      }
      if (pass == 0) verdict = "record";
      check(h.kind != RecordKind::kPad && static_cast<uint8_t>(h.kind) <= kRecordKindMax);
      check(p >= lo + kRecordHeaderBytes && p + h.len <= lo + kSize);
      volatile uint8_t sink = 0;
      for (uint32_t b = 0; b < h.len; ++b) sink = sink ^ p[b];  // every byte readable
    }
    r.release();
    check(ctl->tail.load() <= ctl->head.load() || pass == 1);
  }
  return verdict;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  run(data, size);
  return 0;
}

extern "C" const char* dpfab_fuzz_verdict(const uint8_t* data, size_t size) {
  return run(data, size);
}
