// SPDX-License-Identifier: BSD-3-Clause
#include "proto/msg_cm.h"

#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstring>
#include <iterator>

namespace dpfab::proto::msg {

using wire::CmHeader;
using wire::CmKind;

namespace {
constexpr const char* kStateNames[] = {"idle",      "connecting", "accepting",
                                       "connected", "shutdown",   "failed"};
}  // namespace

const char* cm_state_name(CmState s) noexcept {
  const auto i = static_cast<size_t>(s);
  return i < std::size(kStateNames) ? kStateNames[i] : "?";
}

int CmConnection::connect(uint32_t local_id, std::span<const uint8_t> data, uint64_t now,
                          bool routed) noexcept {
  if (state_ != CmState::kIdle) return -FI_EOPBADSTATE;
  if (local_id == 0 || data.size() > wire::kCmMaxData) return -FI_EINVAL;
  local_ = local_id;
  connector_ = true;
  routed_ = routed;
  start(CmState::kConnecting, CmKind::kConnReq, data, now);
  return 0;
}

void CmConnection::routed(uint64_t now) noexcept {
  if (!routing()) return;
  routed_ = true;
  rto_ = cfg_.rto_ns;
  send(pending_, {data_, data_len_});
  resend_at_ = std::min(now + rto_, started_ + bound());
}

void CmConnection::unroutable() noexcept {
  if (routing()) fail(FI_EHOSTUNREACH, {});
}

int CmConnection::accept(uint32_t local_id, uint32_t peer_id, std::span<const uint8_t> data,
                         uint64_t now) noexcept {
  if (state_ != CmState::kIdle) return -FI_EOPBADSTATE;
  if (local_id == 0 || peer_id == 0 || data.size() > wire::kCmMaxData) return -FI_EINVAL;
  local_ = local_id;
  peer_ = peer_id;
  connector_ = false;
  last_heard_ = now;
  start(CmState::kAccepting, CmKind::kAccept, data, now);
  return 0;
}

int CmConnection::shutdown(uint64_t now) noexcept {
  switch (state_) {
    case CmState::kIdle:
    case CmState::kFailed:
      return -FI_ENOTCONN;
    case CmState::kShutdown:
      return 0;
    case CmState::kConnecting:
      // Nothing to tell: the passive side has no connection yet (an accept that comes later is
      // stale here, and the accepting side's accept times out).
      end(FI_ECANCELED);
      return 0;
    case CmState::kAccepting:
    case CmState::kConnected:
      start(CmState::kShutdown, CmKind::kShutdown, {}, now);
      keepalive_at_ = UINT64_MAX;
      sink_->disconnected(FI_ECANCELED);
      return 0;
  }
  return 0;
}

void CmConnection::start(CmState s, CmKind kind, std::span<const uint8_t> data,
                         uint64_t now) noexcept {
  state_ = s;
  pending_ = kind;
  pending_active_ = true;
  if (!data.empty()) std::memcpy(data_, data.data(), data.size());
  data_len_ = static_cast<uint16_t>(data.size());
  started_ = now;
  rto_ = cfg_.rto_ns;
  if (!routed_) {  // nothing goes until routed(); the timeout runs from now
    resend_at_ = started_ + bound();
    return;
  }
  send(kind, {data_, data_len_});
  resend_at_ = std::min(now + rto_, started_ + bound());
}

uint64_t CmConnection::bound() const noexcept {
  return pending_ == CmKind::kShutdown ? cfg_.shutdown_ns : cfg_.connect_timeout_ns;
}

void CmConnection::send(CmKind kind, std::span<const uint8_t> data) noexcept {
  CmHeader h;
  h.kind = kind;
  h.src_id = local_;
  h.dst_id = kind == CmKind::kConnReq ? 0 : peer_;
  h.data_len = static_cast<uint16_t>(data.size());
  sink_->send_cm(h, data);  // a frame the port did not take goes again at the next resend
}

CmConnection::Taken CmConnection::on_cm(const CmHeader& h, std::span<const uint8_t> data,
                                        uint64_t now) noexcept {
  if (local_ == 0 || h.dst_id != local_) return Taken::kStale;
  // Before the accept arrives the connector knows no peer id; a reject names none.
  if (peer_ != 0 && h.kind != CmKind::kReject && h.src_id != peer_) return Taken::kStale;
  switch (state_) {
    case CmState::kConnecting:
      if (h.kind == CmKind::kAccept && routed_) {
        peer_ = h.src_id;
        become_connected(data, now);
        return Taken::kTaken;
      }
      if (h.kind == CmKind::kReject) {
        fail(FI_ECONNREFUSED, data);
        return Taken::kTaken;
      }
      return Taken::kStale;
    case CmState::kAccepting:
      switch (h.kind) {
        case CmKind::kEstablished:
        case CmKind::kKeepalive:
          become_connected({}, now);
          return Taken::kTaken;
        case CmKind::kShutdown:
          // The connector was up (it had our accept) and left before we heard it: up, then down.
          become_connected({}, now);
          send(CmKind::kShutdownAck);
          end(FI_ECANCELED);
          return Taken::kTaken;
        default:
          return Taken::kStale;
      }
    case CmState::kConnected:
      switch (h.kind) {
        case CmKind::kAccept:  // our kEstablished was lost: say it again
          last_heard_ = now;
          send(CmKind::kEstablished);
          return Taken::kTaken;
        case CmKind::kEstablished:
        case CmKind::kKeepalive:
          last_heard_ = now;
          return Taken::kTaken;
        case CmKind::kShutdown:
          send(CmKind::kShutdownAck);
          end(FI_ECANCELED);
          return Taken::kTaken;
        default:
          return Taken::kStale;
      }
    case CmState::kShutdown:
      switch (h.kind) {
        case CmKind::kShutdown:
          send(CmKind::kShutdownAck);
          break;
        case CmKind::kShutdownAck:
          if (shutdown_pending()) {
            pending_active_ = false;
            resend_at_ = UINT64_MAX;
          }
          break;
        case CmKind::kKeepalive:
        case CmKind::kEstablished:
          // The peer still thinks we are connected (our kShutdown was lost, or never sent:
          // we lost the peer): tell it again, unless we are repeating it anyway.
          if (!shutdown_pending()) send(CmKind::kShutdown);
          break;
        default:
          break;
      }
      return Taken::kTaken;
    case CmState::kIdle:
    case CmState::kFailed:
      return Taken::kStale;
  }
  return Taken::kStale;
}

void CmConnection::on_data(uint64_t now) noexcept {
  if (state_ == CmState::kAccepting) {
    become_connected({}, now);
  } else {
    heard(now);
  }
}

void CmConnection::become_connected(std::span<const uint8_t> data, uint64_t now) noexcept {
  state_ = CmState::kConnected;
  pending_active_ = false;
  resend_at_ = UINT64_MAX;
  last_heard_ = now;
  keepalive_at_ = now + cfg_.keepalive_ns;
  sink_->connected(data);  // first: the connector's sink learns the peer's address here
  if (connector_) send(CmKind::kEstablished);
}

void CmConnection::end(int err) noexcept {
  state_ = CmState::kShutdown;
  pending_active_ = false;
  resend_at_ = UINT64_MAX;
  keepalive_at_ = UINT64_MAX;
  sink_->disconnected(err);
}

void CmConnection::fail(int err, std::span<const uint8_t> data) noexcept {
  state_ = CmState::kFailed;
  pending_active_ = false;
  resend_at_ = UINT64_MAX;
  sink_->failed(err, data);
}

void CmConnection::lost() noexcept {
  if (state_ == CmState::kConnected) {
    end(FI_EHOSTUNREACH);
  } else if (state_ == CmState::kAccepting) {
    fail(FI_EHOSTUNREACH, {});
  }
}

void CmConnection::poll(uint64_t now) noexcept {
  if (pending_active_ && now >= resend_at_) {
    if (now - started_ >= bound()) {
      if (state_ == CmState::kShutdown) {
        pending_active_ = false;  // never acknowledged: the peer's own timeout covers it
        resend_at_ = UINT64_MAX;
      } else {
        fail(FI_ETIMEDOUT, {});
        return;
      }
    } else if (!routed_) {
      resend_at_ = started_ + bound();  // still resolving: only the timeout is due
    } else {
      send(pending_, {data_, data_len_});
      rto_ = std::min(2 * rto_, cfg_.rto_max_ns);
      resend_at_ = std::min(now + rto_, started_ + bound());
    }
  }
  if (state_ != CmState::kConnected) return;
  if (now - last_heard_ >= cfg_.peer_timeout_ns) {
    send(CmKind::kShutdown);  // once, in case the peer can still hear
    end(FI_EHOSTUNREACH);
    return;
  }
  if (now >= keepalive_at_) {
    send(CmKind::kKeepalive);
    keepalive_at_ = now + cfg_.keepalive_ns;
  }
}

uint64_t CmConnection::next_deadline() const noexcept {
  uint64_t d = pending_active_ ? resend_at_ : UINT64_MAX;
  if (state_ == CmState::kConnected)
    d = std::min({d, keepalive_at_, last_heard_ + cfg_.peer_timeout_ns});
  return d;
}

}  // namespace dpfab::proto::msg
