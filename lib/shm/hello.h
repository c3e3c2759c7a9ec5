// SPDX-License-Identifier: BSD-3-Clause
//
// The hello of a same-host link: what two nodes (node.h) tell each other over their unix socket
// when a link is made, with the file descriptors that travel with it (SCM_RIGHTS).
//
//   connector -> acceptor  kHello, fds: the pair segment, the connector's node page, its eventfd
//   acceptor -> connector  kAck,   fds: the acceptor's node page, its eventfd (status kOk only)
//
// Both are one 128-byte message (SOCK_SEQPACKET keeps it whole), fields in host byte order (both
// ends run on this host):
//
//   offset size field
//        0    8 magic        "dpfabSH1" (hello) or "dpfabSA1" (ack)
//        8    4 version      kHelloVersion
//       12    4 status       ack: HelloStatus; hello: 0
//       16    8 host         the sender's host identity (node.h: boot and network namespace)
//       24    4 node         the sender's node id
//       28    4 nonce        the sender's instance (random, never 0)
//       32    4 to_node      the node the sender wants (hello) or answers (ack)
//       36    4 to_nonce     its instance as the sender knows it (hello: from the address used)
//       40    4 ring_bytes   hello: the data area of each ring in the segment; ack: 0
//       44    4 ipv4_be      the sender's port address (what frames from it carry)
//       48    6 mac          the sender's port MAC
//       54    2 reserved     0
//       56    8 probe_addr   where, in the sender's memory, probe[] lies (cross-memory attach test)
//       64   16 probe        16 random bytes: the peer reads them with process_vm_readv to learn
//                            whether it may read the sender's memory
//       80    8 seg_bytes    hello: the pair segment's size; ack: 0
//       88   40 reserved     0
//
// decode_hello checks everything a message can get wrong by itself (magic, version, sizes, the
// status, reserved bytes); what depends on the receiver (is to_node us, does the segment have
// seg_bytes) is node.h's. test/fuzz/shm_hello_fuzz.cc feeds it arbitrary bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace dpfab::shm {

inline constexpr uint32_t kHelloVersion = 1;
inline constexpr size_t kHelloBytes = 128;

enum class HelloKind : uint8_t { kHello, kAck };

/// An ack's answer.
enum class HelloStatus : uint32_t {
  kOk = 0,
  kStale = 1,    ///< to_nonce is not ours: the address names an earlier instance of this node
  kRefused = 2,  ///< the acceptor will not link (no resources)
  /// The acceptor's own link to us wins (simultaneous connects, node.h): wait for its hello.
  kYield = 3,
};
inline constexpr uint32_t kHelloStatusMax = 3;

struct Hello {
  HelloKind kind = HelloKind::kHello;
  HelloStatus status = HelloStatus::kOk;
  uint64_t host = 0;
  uint32_t node = 0, nonce = 0;
  uint32_t to_node = 0, to_nonce = 0;
  uint32_t ring_bytes = 0;
  uint32_t ipv4_be = 0;
  uint8_t mac[6] = {};
  uint64_t probe_addr = 0;
  uint8_t probe[16] = {};
  uint64_t seg_bytes = 0;
};

/// Why decode_hello refused a message.
enum class HelloVerdict : uint8_t {
  kOk,
  kLength,    ///< not kHelloBytes
  kMagic,     ///< neither hello nor ack
  kVersion,   ///< another version
  kStatus,    ///< a hello with a status, or an unknown one
  kNode,      ///< node 0, nonce 0, or to_node 0
  kRing,      ///< hello: ring_bytes not valid_ring_size, or seg_bytes not the segment of it;
              ///< ack: either set
  kReserved,  ///< reserved bytes not 0
};
const char* hello_verdict_name(HelloVerdict v) noexcept;

/// The segment a hello's rings need: a header page, then each ring's control page and data area.
constexpr uint64_t segment_bytes(uint64_t ring_bytes) noexcept {
  return 4096 + 2 * (4096 + ring_bytes);
}

/// Writes `h` into `out` (kHelloBytes).
void encode_hello(const Hello& h, uint8_t out[kHelloBytes]) noexcept;
/// Reads a message; on kOk *out is set.
HelloVerdict decode_hello(std::span<const uint8_t> bytes, Hello* out) noexcept;

}  // namespace dpfab::shm
