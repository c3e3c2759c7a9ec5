// SPDX-License-Identifier: BSD-3-Clause
//
// What endpoint protocols (dgram, rdm, msg) and the per-port progress engine (lib/progress) know
// of each other:
//   - Link: the port as an endpoint sees it: the mempool to build frames from, our addresses,
//     how to transmit, the checksum offloads, one manual progress step, ownership of the receive
//     side for control-path calls, and the share of the mempool that receivers may keep held
//     back.
//   - Receiver: an endpoint as the poll step sees it: a frame addressed to its UDP port.
//   - The same-host path (shm/node.h): a link may have a node through which endpoints reach the
//     peers of this host instead of the port (local()); the poll step delivers what comes through
//     it to the same receivers, as frames (kFrame records) or as RDM packets (kRdm records,
//     deliver() with a Frame whose src_node_be is set and no mbuf), and tells them when a peer
//     node is gone (link_lost).
#pragma once

#include <endian.h>
#include <rte_ether.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "shm/node.h"
#include "wire/address.h"
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
  /// Frames whose data is at least this many bytes may point to memory the caller owns (an
  /// external-buffer mbuf chained after the headers, rte_pktmbuf_attach_extbuf) instead of
  /// carrying a copy: the port's transmit copies every frame it takes before it returns and
  /// keeps no reference to it (memif in copy mode, af_packet). 0: always copy (NICs, whose
  /// DMA reads the frame later, and PMDs that take one segment only).
  virtual uint32_t tx_extbuf_min() const noexcept { return 0; }

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

  /// The same-host path, or null when it is off (shm/node.h). Fixed before endpoints are bound.
  shm::Node* local() const noexcept { return local_; }
  /// Whether `a` names a node of this host (the same-host path carries what goes to it).
  bool is_local(const wire::Address& a) const noexcept {
    return local_ && a.has_node() && a.host_be == local_host_be_;
  }
  /// The link to the node `a` names when `a` is an address of this host that the same-host path
  /// reaches (or is about to: kConnecting), else null (the port carries it). Starts a link to a
  /// node not tried yet (shm::Node::request: no syscall). Any thread.
  /// `pending`, when given, says whether a null answer means "wait": `a` names a node of this
  /// host whose link is not there yet (a sender waits for it rather than use the port, which the
  /// peer may not have). One look at the node's table answers both: two looks (a route, then
  /// "pending?") let a link that came up in between send a frame through the port, and a peer
  /// that learnt our address from it did not know us as same-host (an MSG connection whose
  /// peer's death then went unnoticed until the keepalive timeout).
  shm::Conn* local_route(const wire::Address& a, bool* pending = nullptr) const noexcept {
    if (pending) *pending = false;
    if (!local_ || !a.has_node() || a.host_be != local_host_be_) return nullptr;
    const uint32_t node = ntohl_(a.node_be), nonce = ntohl_(a.nonce_be);
    shm::Conn* c = local_->find(node);
    if (!c || c->nonce() != nonce) {
      local_->request(node, nonce);
      if (pending) *pending = true;
      return nullptr;
    }
    return c->state() == shm::LinkState::kRefused ? nullptr : c;
  }
  /// Fills the host part of one of our own addresses (nothing when the path is off).
  void set_host_part(wire::Address& a) const noexcept {
    if (!local_) return;
    a.host_be = local_host_be_;
    a.node_be = local_node_be_;
    a.nonce_be = local_nonce_be_;
  }

 protected:
  /// The implementation sets the bound once, before any receiver is bound (default: none).
  void set_held_limit(size_t n) noexcept { held_limit_ = n; }
  /// Called by the RX owner at the start of every poll step, before the backlog pass.
  void begin_poll_step() noexcept { ++poll_steps_; }
  /// Sets the same-host path (before any endpoint is bound).
  void set_local(shm::Node* n) noexcept {
    local_ = n;
    if (!n) return;
    local_host_be_ = htobe64_(n->host());
    local_node_be_ = htonl_(n->id());
    local_nonce_be_ = htonl_(n->nonce());
  }

 private:
  std::atomic<size_t> held_mbufs_{0};
  size_t held_limit_ = SIZE_MAX;
  uint64_t poll_steps_ = 0;
  shm::Node* local_ = nullptr;
  uint64_t local_host_be_ = 0;
  uint32_t local_node_be_ = 0, local_nonce_be_ = 0;
  static uint32_t ntohl_(uint32_t v) noexcept { return be32toh(v); }
  static uint32_t htonl_(uint32_t v) noexcept { return htobe32(v); }
  static uint64_t htobe64_(uint64_t v) noexcept { return htobe64(v); }
};

/// Sends the frame `m` (built by encode_mbuf, one segment) to `to`: through the same-host path when
/// `to` names a node of this host that it reaches (the frame as a kFrame record, the mbuf freed),
/// else through the port. Any thread.
/// @return 1: sent (`m` consumed); 0: not now, `m` is still the caller's (the same-host link is
///         being made, its ring is full, or the port's queue is); -1: the peer's node is gone,
///         the frame was dropped (`m` consumed), as on a link nobody listens to.
int transmit_frame(Link* link, const wire::Address& to, rte_mbuf* m) noexcept;

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
  /// (UINT64_MAX: none). Read by the RX owner after each backlog pass (backlog_pass), and again
  /// when a sleeper arms after a step that took frames (PortEngine::refresh_rx_deadline), which
  /// give the minimum to sleepers' timer fd (PortEngine::timer_due_ns). A receiver that
  /// overrides backlog_pass overrides this too, with the same answer. Any thread (PortShare: the
  /// RX owner).
  virtual uint64_t timer_due_ns() const noexcept { return UINT64_MAX; }
  /// A poll step's backlog pass over this receiver: drain_backlog() when has_backlog(), then
  /// timer_due_ns(), which it returns (UINT64_MAX: none); the frames completed are added to
  /// `*done`. What PortEngine calls: receivers that hold others (PortShare) or can read their
  /// state once (MsgEndpoint, RdmEndpoint) answer in one call instead of three. RX owner only.
  virtual uint64_t backlog_pass(size_t* done) noexcept {
    if (!has_backlog()) return UINT64_MAX;
    *done += drain_backlog();
    return timer_due_ns();
  }
  /// The same-host link to node (`node_be`, `nonce_be`) ended: that peer process is gone, and
  /// everything it sent before has been delivered. Operations involving its endpoints fail now.
  /// RX owner only.
  virtual void link_lost(uint32_t /*node_be*/, uint32_t /*nonce_be*/) noexcept {}
};

/// The source address of a decoded frame (MAC, IPv4, UDP port, endpoint id, and the same-host
/// part when it came through the same-host path: answers go back the same way).
wire::Address frame_source(const wire::Frame& f) noexcept;

}  // namespace dpfab::proto
