// SPDX-License-Identifier: BSD-3-Clause
#include "shm/hello.h"

#include <cstring>

#include "shm/ring.h"

namespace dpfab::shm {
namespace {

constexpr char kHelloMagic[8] = {'d', 'p', 'f', 'a', 'b', 'S', 'H', '1'};
constexpr char kAckMagic[8] = {'d', 'p', 'f', 'a', 'b', 'S', 'A', '1'};

template <typename T>
void put(uint8_t* p, size_t off, T v) noexcept {
  std::memcpy(p + off, &v, sizeof(v));
}
template <typename T>
T get(const uint8_t* p, size_t off) noexcept {
  T v;
  std::memcpy(&v, p + off, sizeof(v));
  return v;
}

}  // namespace

const char* hello_verdict_name(HelloVerdict v) noexcept {
  switch (v) {
    case HelloVerdict::kOk:
      return "ok";
    case HelloVerdict::kLength:
      return "length";
    case HelloVerdict::kMagic:
      return "magic";
    case HelloVerdict::kVersion:
      return "version";
    case HelloVerdict::kStatus:
      return "status";
    case HelloVerdict::kNode:
      return "node";
    case HelloVerdict::kRing:
      return "ring";
    case HelloVerdict::kReserved:
      return "reserved";
  }
  return "?";
}

void encode_hello(const Hello& h, uint8_t out[kHelloBytes]) noexcept {
  std::memset(out, 0, kHelloBytes);
  std::memcpy(out, h.kind == HelloKind::kHello ? kHelloMagic : kAckMagic, 8);
  put<uint32_t>(out, 8, kHelloVersion);
  put<uint32_t>(out, 12, static_cast<uint32_t>(h.status));
  put<uint64_t>(out, 16, h.host);
  put<uint32_t>(out, 24, h.node);
  put<uint32_t>(out, 28, h.nonce);
  put<uint32_t>(out, 32, h.to_node);
  put<uint32_t>(out, 36, h.to_nonce);
  put<uint32_t>(out, 40, h.ring_bytes);
  put<uint32_t>(out, 44, h.ipv4_be);
  std::memcpy(out + 48, h.mac, 6);
  put<uint64_t>(out, 56, h.probe_addr);
  std::memcpy(out + 64, h.probe, 16);
  put<uint64_t>(out, 80, h.seg_bytes);
}

HelloVerdict decode_hello(std::span<const uint8_t> bytes, Hello* out) noexcept {
  if (bytes.size() != kHelloBytes) return HelloVerdict::kLength;
  const uint8_t* p = bytes.data();
  Hello h;
  if (std::memcmp(p, kHelloMagic, 8) == 0)
    h.kind = HelloKind::kHello;
  else if (std::memcmp(p, kAckMagic, 8) == 0)
    h.kind = HelloKind::kAck;
  else
    return HelloVerdict::kMagic;
  if (get<uint32_t>(p, 8) != kHelloVersion) return HelloVerdict::kVersion;
  const uint32_t status = get<uint32_t>(p, 12);
  if (status > kHelloStatusMax || (h.kind == HelloKind::kHello && status != 0))
    return HelloVerdict::kStatus;
  h.status = static_cast<HelloStatus>(status);
  h.host = get<uint64_t>(p, 16);
  h.node = get<uint32_t>(p, 24);
  h.nonce = get<uint32_t>(p, 28);
  h.to_node = get<uint32_t>(p, 32);
  h.to_nonce = get<uint32_t>(p, 36);
  h.ring_bytes = get<uint32_t>(p, 40);
  h.ipv4_be = get<uint32_t>(p, 44);
  std::memcpy(h.mac, p + 48, 6);
  h.probe_addr = get<uint64_t>(p, 56);
  std::memcpy(h.probe, p + 64, 16);
  h.seg_bytes = get<uint64_t>(p, 80);
  if (h.node == 0 || h.nonce == 0 || h.to_node == 0) return HelloVerdict::kNode;
  if (h.kind == HelloKind::kHello) {
    if (!valid_ring_size(h.ring_bytes) || h.seg_bytes != segment_bytes(h.ring_bytes))
      return HelloVerdict::kRing;
  } else if (h.ring_bytes != 0 || h.seg_bytes != 0) {
    return HelloVerdict::kRing;
  }
  if (get<uint16_t>(p, 54) != 0) return HelloVerdict::kReserved;
  for (size_t i = 88; i < kHelloBytes; ++i)
    if (p[i] != 0) return HelloVerdict::kReserved;
  *out = h;
  return HelloVerdict::kOk;
}

}  // namespace dpfab::shm
