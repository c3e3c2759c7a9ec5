// SPDX-License-Identifier: BSD-3-Clause
//
// What endpoint protocols (dgram, rdm, msg) and the per-port progress engine (lib/progress) know
// of each other:
//   - Link: the port as an endpoint sees it: the mempool to build frames from, our addresses,
//     how to transmit, the checksum offloads, one manual progress step, ownership of the receive
//     side for control-path calls, and the share of the mempool that receivers may keep held
//     back.
//   - Receiver: an endpoint as the poll step sees it: a frame addressed to its UDP port.
#pragma once

#include <rte_ether.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

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
  /// Runs fn(arg) as the owner of the receive side, waiting for a poll step on another thread to
  /// end: what a receiver's control path does with state only the RX owner touches (fi_cancel of
  /// a posted receive, dropping held frames at close). Not from inside a poll step.
  virtual void run_as_rx_owner(void (*fn)(void*), void* arg) noexcept = 0;
  /// run_as_rx_owner for a callable.
  template <typename Fn>
  void with_rx_owner(Fn&& fn) noexcept {
    using F = std::remove_reference_t<Fn>;
    run_as_rx_owner([](void* f) { (*static_cast<F*>(f))(); }, &fn);
  }
  virtual rte_mempool* pool() const noexcept = 0;
  virtual const rte_ether_addr& mac() const noexcept = 0;
  virtual uint32_t ipv4_be() const noexcept = 0;
  virtual uint16_t mtu() const noexcept = 0;
  virtual wire::TxChecksumCaps tx_caps() const noexcept = 0;

  // Held mbufs. Receivers keep the mbufs of datagrams that found no receive posted (backlogs);
  // transmit allocates from the same mempool. So that held datagrams never starve transmit, all
  // the receivers of a link together may hold at most held_limit() mbufs (half the pool for a
  // port engine); a receiver that cannot hold a frame drops it. RX owner only (deliver, drain,
  // clear), so relaxed atomics: the receive side's hand-over orders them.

  /// Reserves `n` mbufs (a frame's segments) of the held share. @return false when that would
  /// exceed held_limit(): the caller drops the frame.
  bool try_hold_mbufs(size_t n) noexcept {
    const size_t held = held_mbufs_.load(std::memory_order_relaxed);
    if (held + n > held_limit_) return false;
    held_mbufs_.store(held + n, std::memory_order_relaxed);
    return true;
  }
  /// Returns `n` mbufs reserved with try_hold_mbufs (the frame was completed or freed).
  void release_held_mbufs(size_t n) noexcept {
    held_mbufs_.fetch_sub(n, std::memory_order_relaxed);
  }
  size_t held_mbufs() const noexcept { return held_mbufs_.load(std::memory_order_relaxed); }
  size_t held_limit() const noexcept { return held_limit_; }

  /// Poll steps begun on this link so far. RX owner only (the hand-over of the receive side
  /// orders it): a receiver that read the clock in this step's backlog pass (drain_backlog runs
  /// before the step receives) tells from it that frames it is given now belong to that step.
  /// 0 until the first step: a link whose steps are not counted (it never calls
  /// begin_poll_step) always reads 0, and a receiver then takes no time from an earlier step.
  uint64_t poll_step_count() const noexcept { return poll_steps_; }

 protected:
  /// The implementation sets the bound once, before any receiver is bound (default: none).
  void set_held_limit(size_t n) noexcept { held_limit_ = n; }
  /// Called by the RX owner at the start of every poll step, before the backlog pass.
  void begin_poll_step() noexcept { ++poll_steps_; }

 private:
  std::atomic<size_t> held_mbufs_{0};
  size_t held_limit_ = SIZE_MAX;
  uint64_t poll_steps_ = 0;
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
  /// When the receiver's protocol timers next want drain_backlog() to run, in CLOCK_MONOTONIC ns
  /// (UINT64_MAX: none). Read by the RX owner after each backlog pass, which gives the minimum to
  /// sleepers' timer fd (PortEngine::timer_due_ns). Any thread.
  virtual uint64_t timer_due_ns() const noexcept { return UINT64_MAX; }
};

}  // namespace dpfab::proto
