// SPDX-License-Identifier: BSD-3-Clause
//
// FI_EP_MSG endpoints: the fid_ep ops tables over proto::MsgEndpoint (a connection, msg_cm.h,
// carried over an RdmEndpoint bound to the one peer). Bind CQs or counters and an EQ (no AV);
// fi_connect (an address from fi_getinfo's dest_addr or a passive endpoint's fi_getname) or
// fi_accept (an endpoint opened with the info of an FI_CONNREQ event) enables the endpoint if it
// was not, and the connection's events come on the EQ: FI_CONNECTED, FI_SHUTDOWN, and error
// entries for a connect refused (FI_ECONNREFUSED, err_data the rejecting side's data), unreachable
// (FI_EHOSTUNREACH) or timed out (FI_ETIMEDOUT).
//
// Data transfer is RDM's (one template, ep_rdm_data.h): one buffer per operation (iov_limit 1),
// FI_MSG and FI_TAGGED, remote CQ data, FI_MULTI_RECV; a send of at most inject_size bytes
// completes once copied unless FI_TRANSMIT_COMPLETE or FI_DELIVERY_COMPLETE is asked for. Sends
// need the connection up (-FI_ENOTCONN otherwise); receives may be posted before it is, and are
// refused (-FI_ENOTCONN) once it ended. The address arguments of the calls are ignored (a
// connected endpoint has one peer).
#include <algorithm>
#include <memory>
#include <optional>

#include "ep.h"
#include "ep_rdm_data.h"
#include "ep_rma.h"
#include "proto/msg_endpoint.h"
#include "wire/format.h"
#include "wire/rdm.h"

namespace dpfab::ofi {
namespace {

struct MsgEp final : EpBase {
  std::unique_ptr<proto::MsgEndpoint> msg;
  fid_t connreq = nullptr;  // info->handle of an FI_CONNREQ: what fi_accept accepts
  proto::MsgEndpoint::Request req;
  // Accepting endpoints live on their passive endpoint's UDP port, under an endpoint id of their
  // own (as an accepted TCP socket has its listener's port).
  std::shared_ptr<SharedPort> shared;
  wire::Address address() const noexcept override { return msg->address(); }
};

MsgEp* msg_of(fid* f) noexcept { return static_cast<MsgEp*>(ep_target_of(f)); }
MsgEp* msg_of(fid_ep* e) noexcept { return msg_of(&e->fid); }

// ---- fi_ops ------------------------------------------------------------------------------

int msg_close(fid* f) noexcept {
  MsgEp* e = msg_of(f);
  if (e->aliases.load(std::memory_order_acquire) != 0) return -FI_EBUSY;
  if (e->enabled) {
    // A connection still up is shut down and its shutdown acknowledged first, boundedly; what is
    // still in progress is discarded (fi_endpoint(3)).
    e->msg->close();
    if (e->shared)
      e->shared->remove(e->ep_id_be);  // the port goes with its last user
    else
      e->engine->unbind(e->msg->address().udp_port_be);
    const auto r = e->msg->rdm().reliability_stats();
    DPFAB_INFO(FI_LOG_EP_CTRL,
               "msg endpoint closed (%s): packets tx %lu (retransmits %lu) rx %lu (dup %lu), "
               "unreachable %lu",
               proto::msg::cm_state_name(e->msg->state()), r.tx_packets, r.tx_retransmits,
               r.rx_packets, r.rx_duplicates, r.unreachable);
  }
  ep_base_release(e);
  delete e;
  return FI_SUCCESS;
}

int msg_enable(MsgEp* e) noexcept {
  if (e->enabled) return FI_SUCCESS;
  if (!e->eq) return -FI_ENOEQ;  // connection events have nowhere to go
  if ((e->caps & FI_SEND) && !e->tx_cq && !e->tx_cntr) return -FI_ENOCQ;
  if ((e->caps & FI_RECV) && !e->rx_cq && !e->rx_cntr) return -FI_ENOCQ;
  event::Eq* eq = eq_of(e->eq);
  if (!eq) return -FI_EINVAL;
  rdm_data::bind_completions(e, e->msg->rdm());
  e->msg->bind_eq(eq, &e->fid.fid, e->fid.fid.context);
  // The state machine and the core exist before the port is bound: a frame may arrive at once.
  if (int r = e->msg->enable(); r != 0) return r;
  if (e->shared) {  // an endpoint id on the passive endpoint's port
    const uint16_t id = e->shared->share.add(
        e->msg.get(), proto::PassiveEndpoint::key_of(e->req.from, e->req.peer_id));
    if (!id) return -FI_EADDRINUSE;
    e->udp_port_be = e->shared->udp_port_be;
    e->ep_id_be = id;
    e->msg->set_address(e->udp_port_be, id);
  } else {
    const int port = ep_base_bind_port(e, e->msg.get());
    if (port < 0) return port;
    e->msg->set_address(static_cast<uint16_t>(port), e->ep_id_be);
  }
  ep_base_enabled(e);
  return FI_SUCCESS;
}

int msg_control(fid* f, int command, void* arg) noexcept {
  MsgEp* e = msg_of(f);
  return command == FI_ENABLE ? msg_enable(e) : ep_base_control(e, command, arg);
}

int msg_bind(fid* f, fid* bfid, uint64_t flags) noexcept {
  if (bfid && bfid->fclass == FI_CLASS_AV) return -FI_EINVAL;  // one peer: no address vector
  const int r = ep_base_bind(f, bfid, flags);
  if (r == FI_SUCCESS && bfid->fclass == FI_CLASS_EQ) {
    MsgEp* e = msg_of(f);
    eq_progress_port(e->eq, e->engine);  // its waits progress the port the events come from
  }
  return r;
}

fi_ops g_msg_fi_ops = {
    .size = sizeof(fi_ops),
    .close = msg_close,
    .bind = msg_bind,
    .control = msg_control,
    .ops_open = enosys<decltype(fi_ops::ops_open)>,
    .tostr = nullptr,
    .ops_set = enosys<decltype(fi_ops::ops_set)>,
};

// ---- fi_ops_ep ---------------------------------------------------------------------------

ssize_t msg_cancel(fid* f, void* context) noexcept {
  MsgEp* e = msg_of(f);
  if (!e->enabled) return -FI_ENOENT;
  return e->msg->cancel(context);
}

int msg_getopt(fid* f, int level, int name, void* val, size_t* len) noexcept {
  if (level != FI_OPT_ENDPOINT) return -FI_ENOPROTOOPT;
  if (name == FI_OPT_CM_DATA_SIZE) return msg_cm_data_size_opt(val, len);
  if (name != FI_OPT_MIN_MULTI_RECV) return ep_base_getopt_size(msg_of(f), name, val, len);
  return rdm_data::get_min_multi_recv(msg_of(f)->msg->rdm(), val, len);
}

int msg_setopt(fid* f, int level, int name, const void* val, size_t len) noexcept {
  if (level != FI_OPT_ENDPOINT) return -FI_ENOPROTOOPT;
  if (name != FI_OPT_MIN_MULTI_RECV) return ep_base_setopt_size(msg_of(f), name, val, len);
  return rdm_data::set_min_multi_recv(msg_of(f)->msg->rdm(), val, len);
}

fi_ops_ep g_msg_ep_ops = {
    .size = sizeof(fi_ops_ep),
    .cancel = msg_cancel,
    .getopt = msg_getopt,
    .setopt = msg_setopt,
    .tx_ctx = enosys<decltype(fi_ops_ep::tx_ctx)>,
    .rx_ctx = enosys<decltype(fi_ops_ep::rx_ctx)>,
    .rx_size_left = enosys<decltype(fi_ops_ep::rx_size_left)>,
    .tx_size_left = enosys<decltype(fi_ops_ep::tx_size_left)>,
};

// ---- fi_ops_cm ---------------------------------------------------------------------------

std::span<const uint8_t> cm_data(const void* param, size_t paramlen) noexcept {
  return {static_cast<const uint8_t*>(param), paramlen};
}

int msg_connect(fid_ep* ep, const void* addr, const void* param, size_t paramlen) noexcept {
  MsgEp* e = msg_of(ep);
  if (!addr || (paramlen && !param) || paramlen > wire::kCmMaxData) return -FI_EINVAL;
  if (e->connreq) return -FI_EOPBADSTATE;  // made to accept a request
  auto to = wire::read_address(addr, sizeof(wire::Address));
  if (!to || !to->udp_port_be) return -FI_EINVAL;
  if (int r = msg_enable(e); r != FI_SUCCESS) return r;
  return e->msg->connect(*to, cm_data(param, paramlen));
}

int msg_accept(fid_ep* ep, const void* param, size_t paramlen) noexcept {
  MsgEp* e = msg_of(ep);
  if ((paramlen && !param) || paramlen > wire::kCmMaxData) return -FI_EINVAL;
  if (!e->connreq) return -FI_EOPBADSTATE;  // not opened with an FI_CONNREQ's info
  if (e->enabled) {
    const auto st = e->msg->state();
    if (st == proto::msg::CmState::kAccepting || st == proto::msg::CmState::kConnected)
      return -FI_EISCONN;
    if (st != proto::msg::CmState::kIdle) return -FI_EOPBADSTATE;
  }
  if (int r = msg_enable(e); r != FI_SUCCESS) return r;
  // The request must still be open (not rejected, not accepted by another endpoint).
  if (int r = msg_accepted_connreq(e->connreq); r != FI_SUCCESS) return r;
  return e->msg->accept(e->req, cm_data(param, paramlen));
}

int msg_shutdown(fid_ep* ep, uint64_t flags) noexcept {
  MsgEp* e = msg_of(ep);
  if (flags) return -FI_EBADFLAGS;
  if (!e->enabled) return -FI_ENOTCONN;
  return e->msg->shutdown();
}

int msg_getpeer(fid_ep* f, void* addr, size_t* addrlen) noexcept {
  MsgEp* e = msg_of(f);
  if (!addrlen) return -FI_EINVAL;
  std::optional<wire::Address> a = e->enabled ? e->msg->peer() : std::nullopt;
  if (!a) return -FI_ENOTCONN;
  const size_t have = *addrlen;
  *addrlen = wire::address_len(*a, e->format);  // 16 bytes without a host part
  if (!addr || have < *addrlen) return -FI_ETOOSMALL;
  wire::write_address(*a, e->format, addr, have);
  return FI_SUCCESS;
}

fi_ops_cm g_msg_cm_ops = {
    .size = sizeof(fi_ops_cm),
    .setname = ep_setname,
    .getname = ep_getname,
    .getpeer = msg_getpeer,
    .connect = msg_connect,
    .listen = [](fid_pep*) noexcept -> int { return -FI_EOPNOTSUPP; },  // passive endpoints
    .accept = msg_accept,
    .reject = [](fid_pep*, fid_t, const void*, size_t) noexcept -> int { return -FI_EOPNOTSUPP; },
    .shutdown = msg_shutdown,
    .join = enosys<decltype(fi_ops_cm::join)>,
};

// ---- data path (ep_rdm_data.h) -----------------------------------------------------------

struct MsgTraits {
  using Ep = MsgEp;
  static constexpr bool kAddressed = false;  // one peer: the address arguments are ignored
  static MsgEp* of(fid_ep* e) noexcept { return msg_of(e); }
  static proto::RdmEndpoint& rdm(MsgEp* e) noexcept { return e->msg->rdm(); }
  static ssize_t send(MsgEp* e, const proto::rdm::SendOp& s) noexcept { return e->msg->send(s); }
  static ssize_t recv(MsgEp* e, const proto::rdm::RecvOp& r) noexcept { return e->msg->recv(r); }
  static ssize_t trigger(MsgEp* e, const proto::rdm::SendOp& s, event::Cntr* c,
                         uint64_t threshold) noexcept {
    if (e->msg->state() != proto::msg::CmState::kConnected) return -FI_ENOTCONN;
    proto::rdm::SendOp op = s;
    op.dest = 0;  // the connected peer
    return e->msg->rdm().trigger(op, c, threshold);
  }
};
using MsgOps = rdm_data::Ops<MsgTraits>;
using MsgRmaOps = rma_data::RmaOps<MsgTraits>;

// The RDM protocol's parameters for a connected endpoint: RDM's, sized for one peer.
proto::MsgEndpoint::Config msg_config(const Domain* dom, const fi_info* info,
                                      const EpBase* e) noexcept {
  const config::Config* cfg = dom->fabric->cfg;
  proto::MsgEndpoint::Config c;
  auto& core = c.rdm.core;
  rdm_data::core_config(dom, info, e, core);
  core.reorder_slots = core.rel.window;  // one peer's window of out-of-order packets
  c.rdm.max_peers = 1;
  c.rdm.rm_enabled = !(info->domain_attr && info->domain_attr->resource_mgmt == FI_RM_DISABLED);
  if (cfg) {
    c.cm.connect_timeout_ns = cfg->msg_connect_timeout_ms * 1'000'000;
    // The RDM timeout may be 0 (retries alone decide there); a connection needs some silence.
    c.cm.peer_timeout_ns = std::max<uint64_t>(cfg->rdm_peer_timeout_ms, 100) * 1'000'000;
    // Keepalives well within the peer timeout: a live peer is never taken for a lost one.
    c.cm.keepalive_ns = std::min<uint64_t>(c.cm.keepalive_ns, c.cm.peer_timeout_ns / 4);
  }
  return c;
}

}  // namespace

int msg_endpoint_open(Domain* dom, fi_info* info, fid_ep** ep, void* context) noexcept {
  auto e = std::make_unique<MsgEp>();
  e->type = FI_EP_MSG;
  int pep_port = -1;
  if (fid_t h = info->handle) {
    // An FI_CONNREQ's info: the endpoint accepts that request, on its passive endpoint's UDP
    // port. A passive endpoint's: it takes over that one's port (fi_endpoint(3)). Anything else,
    // or a request that is no longer open, is refused (looked up first, not read).
    if (msg_take_connreq(h, &e->req.from, &e->req.peer_id, &e->shared) == FI_SUCCESS)
      e->connreq = h;
    else if ((pep_port = msg_pep_port(h)) < 0)
      return -FI_EINVAL;
  }
  ep_base_init(e.get(), dom, info, context);
  if (e->shared && e->shared->engine != dom->engine) return -FI_EINVAL;  // another port's request
  if (pep_port >= 0) e->udp_port_be = static_cast<uint16_t>(pep_port);
  auto r = proto::MsgEndpoint::create(dom->engine, dom->resolver.get(), &dom->engine->msg_stats(),
                                      msg_config(dom, info, e.get()));
  if (!r) return r.code();
  e->msg = std::move(r.value());
  e->fid.fid.ops = &g_msg_fi_ops;
  e->fid.ops = &g_msg_ep_ops;
  e->fid.cm = &g_msg_cm_ops;
  e->fid.msg = &MsgOps::msg_ops;
  e->fid.rma = &MsgRmaOps::rma_ops;
  e->fid.tagged = &MsgOps::tagged_ops;
  e->fid.atomic = &MsgRmaOps::atomic_ops;
  dom->refs.fetch_add(1, std::memory_order_relaxed);
  *ep = &e.release()->fid;
  return FI_SUCCESS;
}

}  // namespace dpfab::ofi
