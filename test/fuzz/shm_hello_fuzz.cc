// SPDX-License-Identifier: BSD-3-Clause
//
// Fuzz target: the hello and ack of a same-host link (lib/shm/hello.h), which any local process
// can send to a node's socket. Properties: an accepted message re-encodes to exactly its input
// bytes; a refused one names its reason. A violated property aborts (__builtin_trap).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "shm/hello.h"
#include "shm/ring.h"

using namespace dpfab::shm;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

HelloVerdict run(const uint8_t* data, size_t size) {
  Hello h;
  const HelloVerdict v = decode_hello({data, size}, &h);
  if (v == HelloVerdict::kOk) {
    uint8_t again[kHelloBytes];
    encode_hello(h, again);
    check(size == kHelloBytes && std::memcmp(again, data, kHelloBytes) == 0);
    check(h.node != 0 && h.nonce != 0 && h.to_node != 0);
    if (h.kind == HelloKind::kHello)
      check(valid_ring_size(h.ring_bytes) && h.seg_bytes == segment_bytes(h.ring_bytes));
  }
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  run(data, size);
  return 0;
}

extern "C" const char* dpfab_fuzz_verdict(const uint8_t* data, size_t size) {
  return hello_verdict_name(run(data, size));
}
