// SPDX-License-Identifier: BSD-3-Clause
#include "proto/msg_endpoint.h"

#include <rte_byteorder.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>
#include <random>
#include <thread>

#include "common/clock.h"
#include "common/log.h"
#include "wire/encoder.h"
#include "wire/format.h"
#include "wire/rdm.h"

namespace dpfab::proto {

using msg::CmState;

namespace {

// A connect waiting for ARP looks again this often.
constexpr uint64_t kResolvePollNs = 10'000'000;

uint32_t random_id() {
  uint32_t id = 0;
  std::random_device rd;
  while (id == 0) id = rd();
  return id;
}

}  // namespace

bool send_cm_frame(Link* link, uint16_t src_port_be, uint16_t src_ep_be, const wire::Address& to,
                   const wire::CmHeader& h, std::span<const uint8_t> data,
                   MsgPortStats* stats) noexcept {
  static std::atomic<uint16_t> ip_id{0};
  rte_mbuf* m = rte_pktmbuf_alloc(link->pool());
  if (!m) return false;
  const size_t len = wire::kCmHeaderLen + data.size();
  auto* b = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(len)));
  if (!b || h.data_len != data.size() || wire::encode_cm({b, wire::kCmHeaderLen}, h) < 0) {
    rte_pktmbuf_free(m);
    return false;
  }
  if (!data.empty()) std::memcpy(b + wire::kCmHeaderLen, data.data(), data.size());
  wire::Route route;
  route.src_mac = link->mac();
  std::memcpy(route.dst_mac.addr_bytes, to.mac, 6);
  route.src_ip_be = link->ipv4_be();
  route.dst_ip_be = to.ipv4_be;
  route.src_port_be = src_port_be;
  route.dst_port_be = to.udp_port_be;
  const wire::Header outer = wire::cm_outer_header(
      rte_be_to_cpu_16(src_ep_be), rte_be_to_cpu_16(to.ep_id_be), static_cast<uint32_t>(len));
  if (wire::encode_mbuf(m, route, outer, ip_id.fetch_add(1, std::memory_order_relaxed),
                        link->tx_caps()) != 0) {
    rte_pktmbuf_free(m);
    return false;
  }
  if (const int r = transmit_frame(link, to, m); r <= 0) {
    if (r == 0) rte_pktmbuf_free(m);
    return false;
  }
  if (stats) stats->cm_tx.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void answer_absent_cm(Link* link, const wire::Frame& f, MsgPortStats* stats) noexcept {
  wire::CmHeader h;
  std::span<const uint8_t> data;
  wire::CmDecodeStats decode;
  if (!f.payload || wire::decode_cm(f.header, {f.payload, f.payload_len}, &h, &data, decode) !=
                        wire::CmVerdict::kOk) {
    stats->cm_rejected.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  wire::CmHeader a;
  switch (h.kind) {
    case wire::CmKind::kConnReq:
      a.kind = wire::CmKind::kReject;
      a.flags = wire::kCmNoListener;
      a.dst_id = h.src_id;
      break;
    case wire::CmKind::kShutdown:
      a.kind = wire::CmKind::kShutdownAck;
      a.src_id = h.dst_id;
      a.dst_id = h.src_id;
      break;
    case wire::CmKind::kKeepalive:
      a.kind = wire::CmKind::kShutdown;
      a.src_id = h.dst_id;
      a.dst_id = h.src_id;
      break;
    default:
      return;
  }
  if (send_cm_frame(link, f.dst_port_be, rte_cpu_to_be_16(f.header.dst_ep), frame_source(f), a, {},
                    stats))
    stats->no_listener.fetch_add(1, std::memory_order_relaxed);
}

wire::Address frame_source(const wire::Frame& f) noexcept {
  wire::Address a;
  std::memcpy(a.mac, f.src_mac.addr_bytes, 6);
  a.ipv4_be = f.src_ip_be;
  a.udp_port_be = f.src_port_be;
  a.ep_id_be = rte_cpu_to_be_16(f.header.src_ep);
  a.host_be = f.src_host_be;  // came through the same-host path: answers go back the same way
  a.node_be = f.src_node_be;
  a.nonce_be = f.src_nonce_be;
  return a;
}

MsgEndpoint::MsgEndpoint(Link* link, Resolver* resolver, MsgPortStats* stats,
                         const Config& cfg) noexcept
    : link_(link), resolver_(resolver), stats_(stats), cfg_(cfg), cm_(cfg.cm, this) {}

Result<std::unique_ptr<MsgEndpoint>> MsgEndpoint::create(Link* link, Resolver* resolver,
                                                         MsgPortStats* stats, const Config& cfg) {
  if (!link || !link->pool() || !stats) return make_error(-FI_ENODEV, "msg: no port");
  std::unique_ptr<MsgEndpoint> ep(new (std::nothrow) MsgEndpoint(link, resolver, stats, cfg));
  if (!ep) return make_error(-FI_ENOMEM, "msg: out of memory");
  auto r = RdmEndpoint::create(link, cfg.rdm);
  if (!r) return r.error();
  ep->rdm_ = std::move(r.value());
  return ep;
}

MsgEndpoint::~MsgEndpoint() = default;

uint64_t MsgEndpoint::now_ns() noexcept { return static_cast<uint64_t>(clock::mono_ns()); }

void MsgEndpoint::bind_eq(event::Eq* eq, fid_t fid, void* context) noexcept {
  std::lock_guard lock(cm_mu_);
  eq_ = eq;
  fid_ = fid;
  context_ = context;
}

int MsgEndpoint::enable() noexcept {
  uint32_t id;
  try {
    id = random_id();
  } catch (...) {  // std::random_device without an entropy source
    return -FI_EIO;
  }
  rdm_->config().core.epoch = id;  // our stream's epoch is our connection id
  if (int r = rdm_->enable(); r != 0) return r;
  std::lock_guard lock(cm_mu_);
  local_id_ = id;
  return 0;
}

void MsgEndpoint::set_address(uint16_t udp_port_be, uint16_t ep_id_be) noexcept {
  rdm_->set_address(udp_port_be, ep_id_be);
  std::lock_guard lock(cm_mu_);
  udp_port_be_ = udp_port_be;
  ep_id_be_ = ep_id_be;
}

void MsgEndpoint::sync() noexcept {
  state_.store(cm_.state(), std::memory_order_release);
  uint64_t due = cm_.next_deadline();
  if (cm_.routing()) due = std::min(due, now_ns() + kResolvePollNs);
  cm_due_.store(due, std::memory_order_seq_cst);
  // Pairs with link_lost and establish_later (flag, then deadline, both seq_cst): either their
  // store of 0 comes after ours, or this load sees the flag. Work left for the CM timers by the
  // RX owner is never put off to a later deadline.
  if (peer_lost_.load(std::memory_order_seq_cst) ||
      data_while_accepting_.load(std::memory_order_seq_cst))
    cm_due_.store(0, std::memory_order_relaxed);
}

void MsgEndpoint::establish_later() noexcept {
  data_while_accepting_.store(true, std::memory_order_seq_cst);
  cm_due_.store(0, std::memory_order_seq_cst);
}

// ---- connection management ---------------------------------------------------------------------

int MsgEndpoint::connect(const wire::Address& to, std::span<const uint8_t> data) noexcept {
  if (data.size() > wire::kCmMaxData) return -FI_EINVAL;
  HeldCm f;
  int r;
  {
    std::lock_guard lock(cm_mu_);
    if (local_id_ == 0) return -FI_EOPBADSTATE;  // not enabled
    const CmState st = cm_.state();
    if (st == CmState::kConnecting || st == CmState::kConnected) return -FI_EISCONN;
    if (st != CmState::kIdle) return -FI_EOPBADSTATE;
    target_ = to;
    static constexpr uint8_t kNoMac[6] = {};
    const bool routed = std::memcmp(to.mac, kNoMac, 6) != 0;
    const uint64_t now = now_ns();
    held_cm_.holding = true;
    r = cm_.connect(local_id_, data, now, routed);
    if (r == 0 && !routed) try_resolved(now);
    held_cm_.holding = false;
    f = held_cm_;
    held_cm_.held = false;
    sync();
  }
  send_held(f);
  return r;
}

void MsgEndpoint::send_held(const HeldCm& f) noexcept {
  // Not taken by the port or the ring: the state machine repeats kConnReq and kAccept (rto).
  if (f.held)
    (void)send_cm_frame(link_, udp_port_be_, ep_id_be_, f.to, f.h, {f.data, f.len}, stats_);
}

void MsgEndpoint::try_resolved(uint64_t now) noexcept {
  if (!cm_.routing()) return;
  if (auto mac = resolver_ ? resolver_->resolve(target_.ipv4_be) : std::nullopt) {
    std::memcpy(target_.mac, mac->addr_bytes, 6);
    cm_.routed(now);
  } else if (!resolver_ || resolver_->failed(target_.ipv4_be)) {
    cm_.unroutable();
  }
}

int MsgEndpoint::accept(const Request& req, std::span<const uint8_t> data) noexcept {
  if (data.size() > wire::kCmMaxData) return -FI_EINVAL;
  HeldCm f;
  const int r = accept_locked(req, data, &f);
  send_held(f);
  return r;
}

int MsgEndpoint::accept_locked(const Request& req, std::span<const uint8_t> data,
                               HeldCm* f) noexcept {
  std::lock_guard lock(cm_mu_);
  if (local_id_ == 0) return -FI_EOPBADSTATE;
  const CmState st = cm_.state();
  if (st == CmState::kAccepting || st == CmState::kConnected) return -FI_EISCONN;
  if (st != CmState::kIdle) return -FI_EOPBADSTATE;
  if (req.peer_id == 0) return -FI_EINVAL;
  peer_ = req.from;
  peer_id_ = req.peer_id;
  rdm_->bind_peer(req.from);
  // Published (release) before the kAccept goes: its answer may reach the RX owner before sync()
  // (the same-host path delivers in microseconds), and deliver() judges it by state_, peer_ and
  // peer_id_. A refused accept puts the real state back (sync).
  state_.store(CmState::kAccepting, std::memory_order_release);
  held_cm_.holding = true;
  const int r = cm_.accept(local_id_, req.peer_id, data, now_ns());
  held_cm_.holding = false;
  *f = held_cm_;
  held_cm_.held = false;
  sync();
  return r;
}

int MsgEndpoint::shutdown() noexcept {
  CmState st;
  {
    std::lock_guard lock(cm_mu_);
    st = cm_.state();
  }
  if (st == CmState::kIdle || st == CmState::kFailed) return -FI_ENOTCONN;
  if (st == CmState::kShutdown) return 0;
  // Messages the application was told were sent (inject-completed) reach the peer before it
  // hears the shutdown; without the CM lock (linger polls the port).
  if (st == CmState::kConnected) rdm_->linger();
  std::lock_guard lock(cm_mu_);
  const int r = cm_.shutdown(now_ns());
  sync();
  return r;
}

void MsgEndpoint::close() noexcept {
  CmState st;
  {
    std::lock_guard lock(cm_mu_);
    closing_ = true;  // no events, no completions from now on (fi_close discards)
    st = cm_.state();
  }
  if (st == CmState::kConnected) rdm_->linger();
  {
    std::lock_guard lock(cm_mu_);
    if (st == CmState::kConnecting || st == CmState::kAccepting || st == CmState::kConnected)
      (void)cm_.shutdown(now_ns());
    sync();
  }
  // Wait for the peer's acknowledgement of our kShutdown (it stops waiting for us), boundedly.
  const uint64_t end = now_ns() + std::min(cfg_.cm.shutdown_ns, kCloseLingerMaxNs);
  for (;;) {
    {
      std::lock_guard lock(cm_mu_);
      if (!cm_.shutdown_pending()) break;
    }
    if (now_ns() >= end) break;
    if (link_->progress() == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  rdm_->flush_acks();
}

std::optional<wire::Address> MsgEndpoint::peer() const noexcept {
  std::lock_guard lock(cm_mu_);
  if (peer_id_ == 0) return std::nullopt;
  return peer_;
}

// ---- data path
// -----------------------------------------------------------------------------------

ssize_t MsgEndpoint::send(const rdm::SendOp& op) noexcept {
  // Acquire: pairs with the release store of the state, after the peer was bound.
  if (state_.load(std::memory_order_acquire) != CmState::kConnected) return -FI_ENOTCONN;
  return rdm_->send(op, 0);  // 0: the connected peer (RdmEndpoint::bind_peer)
}

ssize_t MsgEndpoint::recv(const rdm::RecvOp& op) noexcept {
  const CmState st = state_.load(std::memory_order_acquire);
  if (st == CmState::kShutdown || st == CmState::kFailed) return -FI_ENOTCONN;
  if (op.match.src == FI_ADDR_UNSPEC) return rdm_->recv(op);
  rdm::RecvOp any;  // the connection's peer, whatever source the op names
  rdm::copy_op(any, op);
  any.match.src = FI_ADDR_UNSPEC;
  return rdm_->recv(any);
}

// ---- receive side
// --------------------------------------------------------------------------------

bool MsgEndpoint::data_of_connection(std::span<const uint8_t> p) const noexcept {
  if (p.size() < wire::kRdmCommonLen) return false;             // the RDM decoder counts it
  if (wire::load_be32(p.data() + 4) != peer_id_) return false;  // another stream's epoch
  // A pure ack names the stream it acknowledges (ours), or none yet.
  if (p[1] == static_cast<uint8_t>(wire::RdmKind::kAck)) {
    const uint32_t acked = wire::load_be32(p.data() + 28);
    if (acked != 0 && acked != local_id_) return false;
  }
  return true;
}

bool MsgEndpoint::deliver(const wire::Frame& f, rte_mbuf* m) noexcept {
  if (f.header.type == wire::Type::kRdm) {
    // Acquire: pairs with the release store in connected()/sync(): peer_ and peer_id_ are set.
    const CmState st = state_.load(std::memory_order_acquire);
    if (st != CmState::kConnected && st != CmState::kAccepting) {
      bump(stats_->not_connected);
      return false;
    }
    uint8_t head[wire::kRdmCommonLen];
    std::span<const uint8_t> p;
    if (f.payload) {
      p = {f.payload, f.payload_len};
    } else if (f.payload_len >= sizeof(head)) {  // spans segments: read the header only
      const void* h = rte_pktmbuf_read(m, f.payload_offset, sizeof(head), head);
      if (h) p = {static_cast<const uint8_t*>(h), sizeof(head)};
    }
    if (!same_endpoint(frame_source(f), peer_) || !data_of_connection(p)) {
      bump(stats_->stale_data);
      return false;
    }
    // Relaxed: a hint for the CM timers (the RX owner runs them too); written only when clear,
    // so that a stream of frames does not write the line every time.
    if (!heard_.load(std::memory_order_relaxed)) heard_.store(true, std::memory_order_relaxed);
    if (st == CmState::kAccepting) {  // the connector's data: it had our accept
      // The RX owner never waits for an application thread's CM call: the timers do it then.
      std::unique_lock lock(cm_mu_, std::try_to_lock);
      if (lock.owns_lock()) {
        cm_.on_data(now_ns());
        sync();
      } else {
        establish_later();
      }
    }
    return rdm_->deliver(f, m);
  }
  if (f.header.type != wire::Type::kCm || !f.payload) return false;
  wire::CmHeader h;
  std::span<const uint8_t> data;
  wire::CmDecodeStats decode;  // the verdict is counted in the port's MSG counters
  if (wire::decode_cm(f.header, {f.payload, f.payload_len}, &h, &data, decode) !=
      wire::CmVerdict::kOk) {
    bump(stats_->cm_rejected);
    return false;
  }
  bump(stats_->cm_rx);
  // The RX owner never waits for an application thread's CM call (the peer repeats CM frames
  // until they are answered, as it does after a loss).
  std::unique_lock lock(cm_mu_, std::try_to_lock);
  if (!lock.owns_lock()) {
    bump(stats_->cm_busy);
    // The connector sends kEstablished once, and again only for a repeated kAccept, which it
    // hears only while its application progresses the port. Dropped here (fi_accept still held
    // the lock while the same-host path, or a fast port, brought the answer to its kAccept), it
    // would leave the accept to time out: taken as the connector's first data is.
    if (h.kind == wire::CmKind::kEstablished &&
        state_.load(std::memory_order_acquire) == CmState::kAccepting && h.src_id == peer_id_ &&
        h.dst_id == local_id_ && same_endpoint(frame_source(f), peer_))
      establish_later();
    return false;
  }
  on_cm_frame(h, data, frame_source(f), now_ns());
  return false;
}

void MsgEndpoint::on_cm_frame(const wire::CmHeader& h, std::span<const uint8_t> data,
                              const wire::Address& from, uint64_t now) noexcept {
  // Once the peer is known, its frames come from its address (a reject from the passive side or
  // the port names no connection of the peer's and is judged by its ids alone).
  if (peer_id_ != 0 && h.kind != wire::CmKind::kReject && !same_endpoint(from, peer_)) {
    bump(stats_->stale_cm);
    return;
  }
  from_ = from;
  if (cm_.on_cm(h, data, now) == msg::CmConnection::Taken::kStale) bump(stats_->stale_cm);
  sync();
}

void MsgEndpoint::link_lost(uint32_t node_be, uint32_t nonce_be) noexcept {
  rdm_->link_lost(node_be, nonce_be);
  // peer_ is published before state_ turns to accepting or connected (acquire here).
  const CmState st = state_.load(std::memory_order_acquire);
  if ((st != CmState::kAccepting && st != CmState::kConnected) || peer_.host_be == 0 ||
      peer_.node_be != node_be || peer_.nonce_be != nonce_be)
    return;
  // The CM timers are due now (run_cm_timers). seq_cst: pairs with sync()'s deadline store and
  // flag load, so that a concurrent sync() cannot put a later deadline back over this one.
  peer_lost_.store(true, std::memory_order_seq_cst);
  cm_due_.store(0, std::memory_order_seq_cst);
}

void MsgEndpoint::run_cm_timers() noexcept {
  const uint64_t due = cm_due_.load(std::memory_order_relaxed);
  if (due == UINT64_MAX) return;
  // Usually far off (the next keepalive). The RDM side's pass of this step read the time if it
  // has a deadline (anything in flight); if not, the coarse clock says "far off" for less than
  // the precise one.
  uint64_t t;
  if (rdm_->time_of_step(&t) ? t < due : clock::clearly_before(due)) return;
  {
    const uint64_t now = now_ns();
    // An application thread in a CM call does the work soon enough; do not wait for it.
    std::unique_lock lock(cm_mu_, std::try_to_lock);
    if (now >= due && lock.owns_lock()) {
      if (data_while_accepting_.exchange(false, std::memory_order_relaxed)) cm_.on_data(now);
      if (heard_.exchange(false, std::memory_order_relaxed)) cm_.heard(now);
      if (peer_lost_.exchange(false, std::memory_order_relaxed)) cm_.lost();
      try_resolved(now);
      cm_.poll(now);
      sync();
    }
  }
}

// ---- msg::CmSink
// ---------------------------------------------------------------------------------

bool MsgEndpoint::send_cm(const wire::CmHeader& h, std::span<const uint8_t> data) noexcept {
  const wire::Address& to = peer_id_ != 0 ? peer_ : target_;
  if (held_cm_.holding && !held_cm_.held && data.size() <= sizeof(held_cm_.data)) {
    held_cm_.held = true;  // sent by the application call once it released cm_mu_ (send_held)
    held_cm_.h = h;
    held_cm_.to = to;
    if (!data.empty()) std::memcpy(held_cm_.data, data.data(), data.size());
    held_cm_.len = static_cast<uint16_t>(data.size());
    return true;
  }
  return send_cm_frame(link_, udp_port_be_, ep_id_be_, to, h, data, stats_);
}

void MsgEndpoint::connected(std::span<const uint8_t> data) noexcept {
  if (peer_id_ == 0) {  // the connector: the accept came from the peer's own address
    peer_ = from_;
    peer_id_ = cm_.peer_id();
    rdm_->bind_peer(peer_);
  }
  // Release: the peer is bound before the application can see the event and send.
  state_.store(CmState::kConnected, std::memory_order_release);
  if (closing_ || !eq_) return;
  if (eq_->write_cm(FI_CONNECTED, fid_, nullptr, data.data(), data.size()) < 0)
    DPFAB_WARN(FI_LOG_EP_CTRL, "msg: FI_CONNECTED could not be written to the EQ");
}

void MsgEndpoint::failed(int err, std::span<const uint8_t> data) noexcept {
  state_.store(CmState::kFailed, std::memory_order_release);
  if (closing_ || !eq_) return;
  fi_eq_err_entry e{};
  e.fid = fid_;
  e.context = context_;
  e.err = err;
  e.prov_errno = -err;
  if (eq_->write_error(e, data.data(), data.size()) < 0)
    DPFAB_WARN(FI_LOG_EP_CTRL, "msg: a connection error could not be written to the EQ");
}

void MsgEndpoint::disconnected(int err) noexcept {
  state_.store(CmState::kShutdown, std::memory_order_release);
  if (closing_) return;
  rdm_->abort(err);  // the canceled completions first (fi_shutdown: before it returns)
  if (eq_ && eq_->write_cm(FI_SHUTDOWN, fid_, nullptr, nullptr, 0) < 0)
    DPFAB_WARN(FI_LOG_EP_CTRL, "msg: FI_SHUTDOWN could not be written to the EQ");
}

}  // namespace dpfab::proto
