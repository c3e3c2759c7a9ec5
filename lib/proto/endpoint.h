// SPDX-License-Identifier: BSD-3-Clause
//
// What endpoint protocols (dgram today; rdm and msg next) and the per-port progress engine
// (lib/progress) know of each other:
//   - Link: the port as an endpoint sees it: the mempool to build frames from, our addresses,
//     how to transmit, the checksum offloads, one manual progress step.
//   - Receiver: an endpoint as the poll step sees it: a frame addressed to its UDP port.
#pragma once

#include <rte_ether.h>

#include <cstddef>
#include <cstdint>

#include "wire/decoder.h"
#include "wire/encoder.h"

struct rte_mbuf;
struct rte_mempool;

namespace dpfab::proto {

class Link {
 public:
  virtual ~Link() = default;
  /// Transmits up to n frames; returns how many the port took (the rest stay the caller's).
  /// Any thread (the link serialises access to its TX queue).
  virtual uint16_t transmit(rte_mbuf** frames, uint16_t n) noexcept = 0;
  /// One manual progress step of the port (receive, decode, deliver). Any thread; returns at once
  /// when another thread is progressing the port.
  virtual size_t progress() noexcept = 0;
  virtual rte_mempool* pool() const noexcept = 0;
  virtual const rte_ether_addr& mac() const noexcept = 0;
  virtual uint32_t ipv4_be() const noexcept = 0;
  virtual uint16_t mtu() const noexcept = 0;
  virtual wire::TxChecksumCaps tx_caps() const noexcept = 0;
};

class Receiver {
 public:
  virtual ~Receiver() = default;
  /// A decoded data frame for this endpoint's UDP port. Called only by the thread that owns the
  /// port's receive side at the moment (one at a time).
  /// @return true when the receiver kept `m` (it frees it later), false when the caller frees it.
  virtual bool deliver(const wire::Frame& f, rte_mbuf* m) noexcept = 0;
  /// Whether frames are held back (no receive posted yet, or no CQ room): the poll step then
  /// calls drain_backlog() every round. RX owner only.
  virtual bool has_backlog() const noexcept { return false; }
  /// Matches held-back frames with receives posted since. RX owner only. Returns frames
  /// completed.
  virtual size_t drain_backlog() noexcept { return 0; }
};

}  // namespace dpfab::proto
