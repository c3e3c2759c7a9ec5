// SPDX-License-Identifier: BSD-3-Clause
//
// CmConnection: the connection-management state machine of one FI_EP_MSG endpoint, without ports,
// mbufs or EQs: what to send (CmSink::send_cm), what to report (connected, failed, disconnected),
// driven by frames (on_cm, on_data), calls (connect, accept, shutdown) and time (poll). The frames
// are the CM header's kinds (wire/cm.h); the endpoint around it (msg_endpoint.h) carries them and
// turns the reports into EQ events.
//
//   connector                                   accepting endpoint
//   connect():  kConnReq (data) ---------->  (to the passive endpoint; FI_CONNREQ there)
//               <---------- kAccept (data)   accept(): from its own address; repeated until...
//   kEstablished ------------------------->  ...this, or any data or keepalive of the connection
//   FI_CONNECTED (with the accept's data)    FI_CONNECTED
//
// Identity. Each end has a random non-zero id (also the epoch of the reliable stream it sends).
// A frame counts for this connection only when it names both ends as expected: its dst_id is our
// id and, once we know the peer's, its src_id is the peer's; anything else is stale (an earlier
// connection at the same address, a peer that crashed and came back, a replay) and is dropped
// (on_cm returns kStale, the endpoint counts it).
//
// Retransmission. kConnReq, kAccept and kShutdown are repeated until answered: first after
// rto_ns, then doubling up to rto_max_ns. A connect or accept not answered within
// connect_timeout_ns fails with FI_ETIMEDOUT; a shutdown not acknowledged within shutdown_ns is
// given up (the peer is gone or will find out through its keepalive timeout). A kReject ends a
// connect with FI_ECONNREFUSED and the rejecting side's data.
//
// Liveness. While connected each end sends kKeepalive every keepalive_ns, and any frame of the
// connection (CM or data, on_data) counts as a sign of life. A peer silent for peer_timeout_ns is
// lost: the connection ends as after a shutdown, with FI_EHOSTUNREACH for the operations still
// outstanding, and a kShutdown is sent once in case the peer can still hear.
//
// Shutdown. The first of: fi_shutdown here (shutdown()), the peer's kShutdown, the peer lost, ends
// the connection (state kShutdown) and reports disconnected() exactly once: the endpoint writes
// one FI_SHUTDOWN event and flushes the outstanding operations (FI_ECANCELED, or FI_EHOSTUNREACH
// for a lost peer). Each kShutdown received is acknowledged (kShutdownAck) so that the peer stops
// repeating it.
//
// Threading: one owner at a time (the endpoint's CM lock); nothing here is atomic. Sink callbacks
// are made on the owner and must not call back into the connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/cm.h"

namespace dpfab::proto::msg {

/// Times in nanoseconds of the caller's clock.
struct CmConfig {
  uint64_t rto_ns = 100'000'000;                 ///< first resend of an unanswered request
  uint64_t rto_max_ns = 1'000'000'000;           ///< resends double up to this
  uint64_t connect_timeout_ns = 10'000'000'000;  ///< connect or accept unanswered: FI_ETIMEDOUT
  uint64_t shutdown_ns = 2'000'000'000;       ///< how long a kShutdown is repeated unacknowledged
  uint64_t keepalive_ns = 1'000'000'000;      ///< keepalive interval while connected
  uint64_t peer_timeout_ns = 10'000'000'000;  ///< silence after which the peer is lost
};

enum class CmState : uint8_t {
  kIdle,        ///< not connecting yet (or never)
  kConnecting,  ///< kConnReq sent, waiting for kAccept or kReject
  kAccepting,   ///< kAccept sent, waiting for kEstablished (or data)
  kConnected,
  kShutdown,  ///< ended: shut down here or by the peer, or the peer was lost
  kFailed,    ///< the connect or accept failed (refused, timed out)
};
const char* cm_state_name(CmState s) noexcept;

/// What the connection needs of the endpoint around it (owner thread only).
class CmSink {
 public:
  virtual ~CmSink() = default;
  /// Sends one CM frame: to the passive endpoint while connecting, to the peer afterwards.
  /// @return false when the port did not take it (the timer sends it again).
  virtual bool send_cm(const wire::CmHeader& h, std::span<const uint8_t> data) noexcept = 0;
  /// The connection is up (FI_CONNECTED); `data` is the acceptor's (connector side; empty on the
  /// accepting side). On the connector, the kAccept being handled came from the peer: its source
  /// is the peer's address from now on (the kEstablished that follows goes there).
  virtual void connected(std::span<const uint8_t> data) noexcept = 0;
  /// The connect or accept failed (an error event): FI_ECONNREFUSED with the rejecting side's
  /// `data`, FI_ETIMEDOUT.
  virtual void failed(int err, std::span<const uint8_t> data) noexcept = 0;
  /// The connection ended (FI_SHUTDOWN): `err` is what outstanding operations complete with,
  /// FI_ECANCELED (shut down here or by the peer) or FI_EHOSTUNREACH (the peer was lost).
  virtual void disconnected(int err) noexcept = 0;
};

class CmConnection {
 public:
  /// What on_cm made of a frame.
  enum class Taken : uint8_t {
    kStale,  ///< not for this connection (or not now): dropped, counted by the caller
    kTaken,  ///< handled
  };

  CmConnection(const CmConfig& cfg, CmSink* sink) noexcept : cfg_(cfg), sink_(sink) {}

  CmState state() const noexcept { return state_; }
  uint32_t local_id() const noexcept { return local_; }
  uint32_t peer_id() const noexcept { return peer_; }

  /// fi_connect: sends kConnReq with `data` (at most wire::kCmMaxData bytes). `local_id` != 0.
  /// `routed` false: the passive endpoint's address is still being resolved; nothing is sent
  /// until routed() (or the attempt fails with unroutable() or the connect timeout).
  /// @return 0; -FI_EOPBADSTATE unless idle; -FI_EINVAL for a zero id or too much data.
  int connect(uint32_t local_id, std::span<const uint8_t> data, uint64_t now,
              bool routed = true) noexcept;
  /// The address of a connect is resolved now: the kConnReq goes.
  void routed(uint64_t now) noexcept;
  /// It cannot be resolved: the connect fails with FI_EHOSTUNREACH.
  void unroutable() noexcept;
  /// Connecting, and the address is not resolved yet.
  bool routing() const noexcept { return state_ == CmState::kConnecting && !routed_; }
  /// Our kShutdown is still repeated (not acknowledged yet).
  bool shutdown_pending() const noexcept {
    return pending_active_ && pending_ == wire::CmKind::kShutdown;
  }
  /// fi_accept of a kConnReq from `peer_id`: sends kAccept with `data`.
  /// @return 0; -FI_EOPBADSTATE unless idle; -FI_EINVAL for zero ids or too much data.
  int accept(uint32_t local_id, uint32_t peer_id, std::span<const uint8_t> data,
             uint64_t now) noexcept;
  /// fi_shutdown. Connected or accepting: sends kShutdown (repeated until acknowledged) and
  /// reports disconnected(FI_ECANCELED); connecting: gives the attempt up, reported the same way.
  /// @return 0 (also when already ended); -FI_ENOTCONN when idle or failed.
  int shutdown(uint64_t now) noexcept;

  /// A decoded CM frame that reached the endpoint.
  Taken on_cm(const wire::CmHeader& h, std::span<const uint8_t> data, uint64_t now) noexcept;
  /// A data frame of this connection (the peer's source and epoch checked by the caller) arrived:
  /// a sign of life; while accepting, the connector's first data makes the connection up.
  void on_data(uint64_t now) noexcept;
  /// The peer was last heard from (a data frame) at `when`: liveness only, while connected.
  void heard(uint64_t when) noexcept {
    if (state_ == CmState::kConnected && when > last_heard_) last_heard_ = when;
  }

  /// The peer is known to be gone (a same-host peer whose process ended: its host says so, no
  /// silence needs waiting out). Connected: the connection ends now as after the peer's silence
  /// (disconnected(FI_EHOSTUNREACH)); accepting: the accept fails with FI_EHOSTUNREACH. Nothing
  /// is sent. No-op in any other state.
  void lost() noexcept;
  /// Timers: resends, timeouts, keepalives, the peer's silence. Call by next_deadline().
  void poll(uint64_t now) noexcept;
  /// The earliest time poll() has work, or UINT64_MAX.
  uint64_t next_deadline() const noexcept;

 private:
  void start(CmState s, wire::CmKind kind, std::span<const uint8_t> data, uint64_t now) noexcept;
  void send(wire::CmKind kind, std::span<const uint8_t> data = {}) noexcept;
  // How long the pending request is repeated: connect_timeout_ns, or shutdown_ns for kShutdown.
  uint64_t bound() const noexcept;
  void become_connected(std::span<const uint8_t> data, uint64_t now) noexcept;
  // The connection ended without our kShutdown to repeat (the peer's, the peer lost, a connect
  // given up): state kShutdown, disconnected(err).
  void end(int err) noexcept;
  void fail(int err, std::span<const uint8_t> data) noexcept;

  CmConfig cfg_;
  CmSink* sink_;
  CmState state_ = CmState::kIdle;
  uint32_t local_ = 0;
  uint32_t peer_ = 0;  // 0 until the connector hears the accept
  bool connector_ = false;
  bool routed_ = true;  // connect: the kConnReq may go (its address is resolved)
  // The request repeated until answered (kConnReq or kAccept with its data, or kShutdown).
  wire::CmKind pending_ = wire::CmKind::kKeepalive;
  bool pending_active_ = false;
  uint8_t data_[wire::kCmMaxData] = {};
  uint16_t data_len_ = 0;
  uint64_t started_ = 0;  // when the pending request was first sent
  uint64_t resend_at_ = UINT64_MAX;
  uint64_t rto_ = 0;
  uint64_t last_heard_ = 0;
  uint64_t keepalive_at_ = UINT64_MAX;
};

}  // namespace dpfab::proto::msg
