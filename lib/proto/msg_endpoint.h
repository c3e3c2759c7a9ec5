// SPDX-License-Identifier: BSD-3-Clause
//
// MsgEndpoint: an FI_EP_MSG endpoint on a port: the connection-management state machine
// (msg_cm.h) and, for the data, an RdmEndpoint (rdm_endpoint.h) bound to the one connected peer,
// on a UDP port of its own. CM frames (Type::kCm, wire/cm.h) go to the state machine; data frames
// (Type::kRdm) of the connection go to the RDM endpoint, so connected transfers have RDM's
// reliability, segmentation, rendezvous and tagged matching. Connection events (FI_CONNECTED,
// FI_SHUTDOWN, error entries for failed connects and accepts) are written to the bound EQ.
//
// Stale traffic. A connection is its two ends' ids (msg_cm.h); each end's id is also the epoch of
// the RDM stream it sends (RdmCore's epoch is set to it). A data frame is delivered only while
// the connection is up (or being accepted), from the peer's address (IPv4, UDP port, endpoint
// id), with the peer's id as its epoch, and, for a pure ack, naming our id (or none) as the
// stream it acknowledges; anything else (an earlier connection at the same addresses, a crashed
// peer, a replay) is dropped and counted (MsgPortStats, telemetry). CM frames that name other
// ids are dropped and counted the same way.
//
// The data path (send, recv) takes no CM lock: the state it checks is an atomic mirror of the
// state machine's, published after the peer is bound.
//
// Threads. The CM state has one owner at a time: every call into it (application threads:
// connect, accept, shutdown, close; the port's RX owner: deliver, backlog_pass) holds cm_mu_.
// cm_mu_ may be held while calling into the RDM endpoint (its own lock), the EQ (its own lock)
// and the port's TX path, never while polling the port (RdmEndpoint's rule): the RX owner takes
// cm_mu_ from deliver.
#pragma once

#include <rdma/fi_eq.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>

#include "common/result.h"
#include "event/eq.h"
#include "proto/av.h"
#include "proto/endpoint.h"
#include "proto/msg_cm.h"
#include "proto/rdm_endpoint.h"
#include "wire/address.h"
#include "wire/cm.h"

namespace dpfab::proto {

/// FI_EP_MSG counters of one port, kept by the port's engine for every MSG endpoint and passive
/// endpoint on it (telemetry: port<N>_msg_*). Any thread adds (relaxed); readers see recent values.
struct MsgPortStats {
  std::atomic<uint64_t> cm_rx{0};          ///< CM frames decoded and handled
  std::atomic<uint64_t> cm_rejected{0};    ///< CM frames decode_cm refused
  std::atomic<uint64_t> cm_tx{0};          ///< CM frames sent (endpoints, passive endpoints, port)
  std::atomic<uint64_t> stale_cm{0};       ///< CM frames naming another connection: dropped
  std::atomic<uint64_t> stale_data{0};     ///< data frames of another connection: dropped
  std::atomic<uint64_t> not_connected{0};  ///< data frames while not connected: dropped
  std::atomic<uint64_t> connreqs{0};       ///< FI_CONNREQ events reported
  std::atomic<uint64_t> connreq_repeats{0};  ///< repeated requests dropped (or re-rejected)
  std::atomic<uint64_t> connreq_full{0};     ///< requests dropped: the listen table was full
  std::atomic<uint64_t> no_listener{0};      ///< CM frames to an unbound UDP port the port answered
  /// CM frames a poll step dropped because an application thread held the endpoint's
  /// connection state at that moment (the poll step never waits for it; the peer repeats them).
  std::atomic<uint64_t> cm_busy{0};
};

/// Sends one CM frame (CM header + data) from `link`'s address and `src` (UDP port and endpoint
/// id, network order) to `to`. Control path, any thread. @return false when no mbuf or the port
/// did not take it.
bool send_cm_frame(Link* link, uint16_t src_port_be, uint16_t src_ep_be, const wire::Address& to,
                   const wire::CmHeader& h, std::span<const uint8_t> data,
                   MsgPortStats* stats) noexcept;

/// A CM frame for an endpoint that is not there (a UDP port nobody bound, an endpoint id of a
/// shared port nobody holds) is answered as a closed TCP port would be: a connection request with
/// a reject (kCmNoListener), a kShutdown with its acknowledgement (the sender stops repeating it),
/// a keepalive with a kShutdown (the endpoint is gone). Stateless; nothing else is answered. From
/// the address the frame went to. RX owner.
void answer_absent_cm(Link* link, const wire::Frame& f, MsgPortStats* stats) noexcept;

/// Whether two addresses name the same endpoint (IPv4, UDP port, endpoint id; not the MAC).
inline bool same_endpoint(const wire::Address& a, const wire::Address& b) noexcept {
  return a.ipv4_be == b.ipv4_be && a.udp_port_be == b.udp_port_be && a.ep_id_be == b.ep_id_be;
}

class MsgEndpoint final : public Receiver, private msg::CmSink {
 public:
  struct Config {
    RdmEndpoint::Config rdm;
    msg::CmConfig cm;
  };
  /// What fi_accept needs of a connection request (the passive endpoint's FI_CONNREQ).
  struct Request {
    wire::Address from;    ///< the connector's address
    uint32_t peer_id = 0;  ///< the connector's connection id
  };
  /// The endpoint on `link`. `resolver` learns the MAC of an fi_connect address without one;
  /// `stats` are the port's MSG counters. -FI_ENODEV without a mempool; -FI_ENOMEM.
  static Result<std::unique_ptr<MsgEndpoint>> create(Link* link, Resolver* resolver,
                                                     MsgPortStats* stats, const Config& cfg);
  ~MsgEndpoint() override;

  // ---- set-up (control path, before enable) ----
  RdmEndpoint& rdm() noexcept { return *rdm_; }
  /// Where connection events go: `fid` and `context` are reported with them.
  void bind_eq(event::Eq* eq, fid_t fid, void* context) noexcept;
  /// Picks our connection id (random, non-zero) and makes the RDM core with it as its epoch.
  /// 0 or the core's error.
  int enable() noexcept;
  void set_address(uint16_t udp_port_be, uint16_t ep_id_be) noexcept;
  wire::Address address() const noexcept { return rdm_->address(); }

  // ---- connection management (application threads, after enable) ----
  /// fi_connect to the passive endpoint at `to` with `data`. An address without a MAC is resolved
  /// first (a resolution that fails ends the connect with FI_EHOSTUNREACH).
  /// @return 0; -FI_EISCONN when connecting or connected already, -FI_EOPBADSTATE after an
  ///         accept, a failed connect or a shutdown; -FI_EINVAL for too much data.
  int connect(const wire::Address& to, std::span<const uint8_t> data) noexcept;
  /// fi_accept of `req` with `data`. 0; -FI_EISCONN / -FI_EOPBADSTATE as connect; -FI_EINVAL.
  int accept(const Request& req, std::span<const uint8_t> data) noexcept;
  /// fi_shutdown: ends the connection (msg_cm.h); the canceled operations are completed (with
  /// FI_ECANCELED) and the FI_SHUTDOWN event written before it returns. First waits, boundedly,
  /// until the peer has acknowledged every injected send (RdmEndpoint::linger). 0;
  /// -FI_ENOTCONN when never connected.
  int shutdown() noexcept;
  /// Before fi_close (the port still bound): a connection still up is shut down (without
  /// events or completions) and its kShutdown acknowledged, waiting at most kCloseLingerMaxNs.
  void close() noexcept;
  static constexpr uint64_t kCloseLingerMaxNs = 2'000'000'000;
  /// fi_getpeer: the peer's address once connected (or accepting).
  std::optional<wire::Address> peer() const noexcept;
  msg::CmState state() const noexcept { return state_.load(std::memory_order_acquire); }
  /// Our connection id (0 before enable).
  uint32_t local_id() const noexcept {
    std::lock_guard lock(cm_mu_);
    return local_id_;
  }

  // ---- data path (application threads) ----
  /// fi_send & co to the peer (op.dest is ignored). -FI_ENOTCONN unless connected; else as
  /// RdmEndpoint::send.
  ssize_t send(const rdm::SendOp& op) noexcept;
  /// fi_recv & co: may be posted before the connection is up; -FI_ENOTCONN once it ended (or
  /// failed); else as RdmEndpoint::recv.
  ssize_t recv(const rdm::RecvOp& op) noexcept;  // op.match.src is ignored
  int cancel(void* context) noexcept { return rdm_->cancel(context); }

  // ---- receive side (the port's RX owner) ----
  bool deliver(const wire::Frame& f, rte_mbuf* m) noexcept override;
  /// A same-host node is gone: the RDM side fails the peer's operations at once, and when it
  /// was our peer the connection ends too (CmConnection::lost, by the CM timers' next run: the
  /// RX owner never waits for cm_mu_).
  void link_lost(uint32_t node_be, uint32_t nonce_be) noexcept override;
  uint64_t timer_due_ns() const noexcept override {
    return std::min(cm_due_.load(std::memory_order_relaxed), rdm_->timer_due_ns());
  }
  /// RDM's pass, then the CM timers when due. Every poll step of a connected endpoint's port runs
  /// it (keepalives keep a CM deadline set).
  uint64_t backlog_pass(size_t* done) noexcept override {
    (void)rdm_->backlog_pass(done);
    run_cm_timers();  // after RDM's pass, whose time it uses
    return timer_due_ns();
  }

 private:
  MsgEndpoint(Link* link, Resolver* resolver, MsgPortStats* stats, const Config& cfg) noexcept;
  static uint64_t now_ns() noexcept;
  /// The CM timers' work when due (cm_mu_ if free). The deadline, usually far off, is judged by
  /// the time RDM's pass of this step read, or else the coarse clock, before any precise one.
  void run_cm_timers() noexcept;
  // Under cm_mu_: the state mirror and the CM deadline, after every state machine call.
  void sync() noexcept;
  // An application call's CM frame (connect's kConnReq, accept's kAccept), held while cm_mu_ is
  // and sent once it is released: the answer, which the same-host path brings back in
  // microseconds, then does not find the lock taken (the RX owner would drop or put it off, after
  // events that came later). Under cm_mu_ but for the sending.
  struct HeldCm {
    bool holding = false;  // the state machine's sends are held (send_cm)
    bool held = false;
    wire::CmHeader h;
    wire::Address to;
    uint8_t data[wire::kCmMaxData];
    uint16_t len = 0;
  };
  HeldCm held_cm_;
  // Sends a held frame, if any (the caller has released cm_mu_; `f` is its copy of held_cm_).
  void send_held(const HeldCm& f) noexcept;
  int accept_locked(const Request& req, std::span<const uint8_t> data, HeldCm* f) noexcept;
  // RX owner, cm_mu_ held by an application thread: the connector's data or kEstablished came
  // while accepting; the CM timers (run_cm_timers, due now) make the connection established.
  void establish_later() noexcept;
  // Under cm_mu_: the connect waiting for the MAC of its address (resolving_): starts it once
  // resolved, fails it once resolution failed.
  void try_resolved(uint64_t now) noexcept;
  // Under cm_mu_: the CM frame `h` from `from`.
  void on_cm_frame(const wire::CmHeader& h, std::span<const uint8_t> data,
                   const wire::Address& from, uint64_t now) noexcept;
  // The data frame's epoch and ack fields name this connection (payload: the RDM header).
  bool data_of_connection(std::span<const uint8_t> payload) const noexcept;
  void bump(std::atomic<uint64_t>& c) noexcept { c.fetch_add(1, std::memory_order_relaxed); }

  // msg::CmSink (under cm_mu_)
  bool send_cm(const wire::CmHeader& h, std::span<const uint8_t> data) noexcept override;
  void connected(std::span<const uint8_t> data) noexcept override;
  void failed(int err, std::span<const uint8_t> data) noexcept override;
  void disconnected(int err) noexcept override;

  Link* link_;
  Resolver* resolver_;
  MsgPortStats* stats_;
  Config cfg_;
  std::unique_ptr<RdmEndpoint> rdm_;
  event::Eq* eq_ = nullptr;
  fid_t fid_ = nullptr;
  void* context_ = nullptr;
  uint16_t udp_port_be_ = 0, ep_id_be_ = 0;

  mutable std::mutex cm_mu_;
  msg::CmConnection cm_;
  uint32_t local_id_ = 0;   // our id (enable), also our RDM epoch
  wire::Address target_;    // connect: where the requests go (the passive endpoint)
  bool resolving_ = false;  // connect: waiting for target_'s MAC
  uint8_t connect_data_[wire::kCmMaxData] = {};
  uint16_t connect_len_ = 0;
  wire::Address from_;    // the source of the CM frame being handled
  bool closing_ = false;  // close(): no events, no completions
  // Published before state_ turns to accepting or connected (release), read by the RX owner
  // after an acquire load of state_.
  wire::Address peer_;
  uint32_t peer_id_ = 0;
  std::atomic<msg::CmState> state_{msg::CmState::kIdle};
  std::atomic<uint64_t> cm_due_{UINT64_MAX};  // CM timers (and resolution polls)
  // A data frame of the connection arrived since the CM timers last ran (liveness: the timers
  // take it as heard at their time, at most a keepalive interval late). A flag, not a time: the
  // data path reads no clock for it.
  std::atomic<bool> heard_{false};
  // The connector's first data frame, or its kEstablished, came while accepting and an
  // application thread held cm_mu_ (a poll step never waits for it): the CM timers
  // (run_cm_timers) make the connection established at once (CmConnection::on_data).
  std::atomic<bool> data_while_accepting_{false};
  // The peer's same-host node is gone (link_lost): the CM timers end the connection at once.
  std::atomic<bool> peer_lost_{false};
};

}  // namespace dpfab::proto
