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
// Data transfer is RDM's (ep_rdm.cc has the same rules): one buffer per operation (iov_limit 1),
// FI_MSG and FI_TAGGED, remote CQ data, FI_MULTI_RECV; a send of at most inject_size bytes
// completes once copied unless FI_TRANSMIT_COMPLETE or FI_DELIVERY_COMPLETE is asked for. Sends
// need the connection up (-FI_ENOTCONN otherwise); receives may be posted before it is, and are
// refused (-FI_ENOTCONN) once it ended. The address arguments of the calls are ignored (a
// connected endpoint has one peer).
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "ep.h"
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

MsgEp* msg_of(fid* f) noexcept { return static_cast<MsgEp*>(ep_base_of(f)); }
MsgEp* msg_of(fid_ep* e) noexcept { return msg_of(&e->fid); }

// ---- fi_ops ------------------------------------------------------------------------------

int msg_close(fid* f) noexcept {
  MsgEp* e = msg_of(f);
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
  proto::RdmEndpoint& rdm = e->msg->rdm();
  rdm.bind_cq(e->tx_cq, true, false, e->tx_selective);
  rdm.bind_cq(e->rx_cq, false, true, e->rx_selective);
  rdm.bind_cntr(e->tx_cntr, true, false);
  rdm.bind_cntr(e->rx_cntr, false, true);
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
  MsgEp* e = msg_of(f);
  if (level != FI_OPT_ENDPOINT) return -FI_ENOPROTOOPT;
  if (name == FI_OPT_CM_DATA_SIZE) return msg_cm_data_size_opt(val, len);
  if (name != FI_OPT_MIN_MULTI_RECV) return -FI_ENOPROTOOPT;
  if (!val || !len) return -FI_EINVAL;
  if (*len < sizeof(size_t)) {
    *len = sizeof(size_t);
    return -FI_ETOOSMALL;
  }
  *static_cast<size_t*>(val) = e->msg->rdm().min_multi_recv();
  *len = sizeof(size_t);
  return FI_SUCCESS;
}

int msg_setopt(fid* f, int level, int name, const void* val, size_t len) noexcept {
  MsgEp* e = msg_of(f);
  if (level != FI_OPT_ENDPOINT || name != FI_OPT_MIN_MULTI_RECV) return -FI_ENOPROTOOPT;
  if (!val || len != sizeof(size_t)) return -FI_EINVAL;
  e->msg->rdm().set_min_multi_recv(*static_cast<const size_t*>(val));
  return FI_SUCCESS;
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
  *addrlen = sizeof(*a);
  if (!addr || have < sizeof(*a)) return -FI_ETOOSMALL;
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

// ---- data path ---------------------------------------------------------------------------

// The fi_msg(3) / fi_tagged(3) flags each call takes here; any other bit is -FI_EINVAL.
constexpr uint64_t kSendFlags = FI_COMPLETION | FI_MORE | FI_REMOTE_CQ_DATA | FI_INJECT |
                                FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE;
constexpr uint64_t kRecvFlags = FI_COMPLETION | FI_MORE | FI_MULTI_RECV;
constexpr uint64_t kTrecvFlags = FI_COMPLETION | FI_MORE | FI_PEEK | FI_CLAIM | FI_DISCARD;

struct Buf {
  void* base = nullptr;
  size_t len = 0;
};

// The one buffer of an iov array (iov_limit 1); nullopt when the array is not valid.
std::optional<Buf> one_buf(const iovec* iov, size_t count) noexcept {
  if (!valid_iov(iov, count, 1)) return std::nullopt;
  return count ? Buf{iov[0].iov_base, iov[0].iov_len} : Buf{};
}

ssize_t do_send(fid_ep* ep, Buf b, void* context, uint64_t flags, bool tagged, uint64_t tag,
                bool has_data, uint64_t data, bool inject) noexcept {
  MsgEp* e = msg_of(ep);
  if (!e->enabled) return -FI_EOPBADSTATE;
  if (!(e->caps & (tagged ? FI_TAGGED : FI_MSG))) return -FI_EOPNOTSUPP;
  proto::rdm::SendOp s;
  s.buf = b.base;
  s.len = b.len;
  s.context = context;
  s.tag = tag;
  s.data = data;
  s.tagged = tagged;
  s.has_data = has_data;
  s.completion = !inject && (!e->tx_selective || (flags & FI_COMPLETION));
  s.complete_now = b.len <= e->msg->rdm().config().core.inject_size &&
                   !(flags & (FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE));
  s.inject = inject || (flags & FI_INJECT) || s.complete_now;
  return e->msg->send(s);
}

ssize_t do_recv(fid_ep* ep, Buf b, void* context, uint64_t flags, bool tagged, uint64_t tag,
                uint64_t ignore) noexcept {
  MsgEp* e = msg_of(ep);
  if (!e->enabled) return -FI_EOPBADSTATE;
  if (!(e->caps & (tagged ? FI_TAGGED : FI_MSG))) return -FI_EOPNOTSUPP;
  if ((flags & FI_MULTI_RECV) && !(e->caps & FI_MULTI_RECV)) return -FI_EINVAL;
  proto::rdm::RecvOp op;
  op.buf = b.base;
  op.len = b.len;
  op.context = context;
  op.match.tag = tag;
  op.match.ignore = ignore;
  op.match.tagged = tagged;
  op.flags = flags & (FI_PEEK | FI_CLAIM | FI_DISCARD | FI_MULTI_RECV);
  op.completion = !e->rx_selective || (flags & FI_COMPLETION);
  return e->msg->recv(op);
}

Buf buf_of(const void* p, size_t len) noexcept { return {const_cast<void*>(p), len}; }

// -- fi_ops_msg --

fi_ops_msg g_msg_msg_ops = {
    .size = sizeof(fi_ops_msg),
    .recv =
        [](fid_ep* ep, void* buf, size_t len, void*, fi_addr_t, void* ctx) noexcept {
          return do_recv(ep, {buf, len}, ctx, msg_of(ep)->rx_op_flags, false, 0, 0);
        },
    .recvv = [](fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t,
                void* ctx) noexcept -> ssize_t {
      auto b = one_buf(iov, count);
      return b ? do_recv(ep, *b, ctx, msg_of(ep)->rx_op_flags, false, 0, 0) : -FI_EINVAL;
    },
    .recvmsg = [](fid_ep* ep, const fi_msg* msg, uint64_t flags) noexcept -> ssize_t {
      if (!msg || (flags & ~kRecvFlags)) return -FI_EINVAL;
      auto b = one_buf(msg->msg_iov, msg->iov_count);
      return b ? do_recv(ep, *b, msg->context, flags, false, 0, 0) : -FI_EINVAL;
    },
    .send =
        [](fid_ep* ep, const void* buf, size_t len, void*, fi_addr_t, void* ctx) noexcept {
          return do_send(ep, buf_of(buf, len), ctx, msg_of(ep)->tx_op_flags, false, 0, false, 0,
                         false);
        },
    .sendv = [](fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t,
                void* ctx) noexcept -> ssize_t {
      auto b = one_buf(iov, count);
      return b ? do_send(ep, *b, ctx, msg_of(ep)->tx_op_flags, false, 0, false, 0, false)
               : -FI_EINVAL;
    },
    .sendmsg = [](fid_ep* ep, const fi_msg* msg, uint64_t flags) noexcept -> ssize_t {
      if (!msg || (flags & ~kSendFlags)) return -FI_EINVAL;
      auto b = one_buf(msg->msg_iov, msg->iov_count);
      return b ? do_send(ep, *b, msg->context, flags, false, 0, flags & FI_REMOTE_CQ_DATA,
                         msg->data, false)
               : -FI_EINVAL;
    },
    .inject =
        [](fid_ep* ep, const void* buf, size_t len, fi_addr_t) noexcept {
          return do_send(ep, buf_of(buf, len), nullptr, 0, false, 0, false, 0, true);
        },
    .senddata =
        [](fid_ep* ep, const void* buf, size_t len, void*, uint64_t data, fi_addr_t,
           void* ctx) noexcept {
          return do_send(ep, buf_of(buf, len), ctx, msg_of(ep)->tx_op_flags, false, 0, true, data,
                         false);
        },
    .injectdata =
        [](fid_ep* ep, const void* buf, size_t len, uint64_t data, fi_addr_t) noexcept {
          return do_send(ep, buf_of(buf, len), nullptr, 0, false, 0, true, data, true);
        },
};

// -- fi_ops_tagged --

fi_ops_tagged g_msg_tagged_ops = {
    .size = sizeof(fi_ops_tagged),
    .recv =
        [](fid_ep* ep, void* buf, size_t len, void*, fi_addr_t, uint64_t tag, uint64_t ignore,
           void* ctx) noexcept {
          return do_recv(ep, {buf, len}, ctx, msg_of(ep)->rx_op_flags & ~FI_MULTI_RECV, true, tag,
                         ignore);
        },
    .recvv = [](fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t, uint64_t tag,
                uint64_t ignore, void* ctx) noexcept -> ssize_t {
      auto b = one_buf(iov, count);
      return b ? do_recv(ep, *b, ctx, msg_of(ep)->rx_op_flags & ~FI_MULTI_RECV, true, tag, ignore)
               : -FI_EINVAL;
    },
    .recvmsg = [](fid_ep* ep, const fi_msg_tagged* msg, uint64_t flags) noexcept -> ssize_t {
      if (!msg || (flags & ~kTrecvFlags)) return -FI_EINVAL;
      Buf b;
      // FI_PEEK (and FI_CLAIM | FI_DISCARD) may come without a buffer.
      if (!(flags & (FI_PEEK | FI_DISCARD)) || msg->iov_count) {
        auto one = one_buf(msg->msg_iov, msg->iov_count);
        if (!one) return -FI_EINVAL;
        b = *one;
      }
      return do_recv(ep, b, msg->context, flags, true, msg->tag, msg->ignore);
    },
    .send =
        [](fid_ep* ep, const void* buf, size_t len, void*, fi_addr_t, uint64_t tag,
           void* ctx) noexcept {
          return do_send(ep, buf_of(buf, len), ctx, msg_of(ep)->tx_op_flags, true, tag, false, 0,
                         false);
        },
    .sendv = [](fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t, uint64_t tag,
                void* ctx) noexcept -> ssize_t {
      auto b = one_buf(iov, count);
      return b ? do_send(ep, *b, ctx, msg_of(ep)->tx_op_flags, true, tag, false, 0, false)
               : -FI_EINVAL;
    },
    .sendmsg = [](fid_ep* ep, const fi_msg_tagged* msg, uint64_t flags) noexcept -> ssize_t {
      if (!msg || (flags & ~kSendFlags)) return -FI_EINVAL;
      auto b = one_buf(msg->msg_iov, msg->iov_count);
      return b ? do_send(ep, *b, msg->context, flags, true, msg->tag, flags & FI_REMOTE_CQ_DATA,
                         msg->data, false)
               : -FI_EINVAL;
    },
    .inject =
        [](fid_ep* ep, const void* buf, size_t len, fi_addr_t, uint64_t tag) noexcept {
          return do_send(ep, buf_of(buf, len), nullptr, 0, true, tag, false, 0, true);
        },
    .senddata =
        [](fid_ep* ep, const void* buf, size_t len, void*, uint64_t data, fi_addr_t, uint64_t tag,
           void* ctx) noexcept {
          return do_send(ep, buf_of(buf, len), ctx, msg_of(ep)->tx_op_flags, true, tag, true, data,
                         false);
        },
    .injectdata =
        [](fid_ep* ep, const void* buf, size_t len, uint64_t data, fi_addr_t,
           uint64_t tag) noexcept {
          return do_send(ep, buf_of(buf, len), nullptr, 0, true, tag, true, data, true);
        },
};

// The RDM protocol's parameters for a connected endpoint: RDM's, sized for one peer.
proto::MsgEndpoint::Config msg_config(const Domain* dom, const fi_info* info) noexcept {
  const config::Config* cfg = dom->fabric->cfg;
  proto::MsgEndpoint::Config c;
  auto& core = c.rdm.core;
  const uint16_t mtu = dom->engine->mtu() ? dom->engine->mtu() : 1500;
  core.seg_size = static_cast<uint32_t>(wire::max_payload(mtu) - wire::kRdmHeaderLen);
  core.reorder_slots = core.rel.window;  // one peer's window of out-of-order packets
  core.tx_ops = info->tx_attr && info->tx_attr->size ? static_cast<uint32_t>(info->tx_attr->size)
                                                     : (cfg ? cfg->tx_depth : 512);
  core.rx_ops = info->rx_attr && info->rx_attr->size ? static_cast<uint32_t>(info->rx_attr->size)
                                                     : (cfg ? cfg->rx_depth : 512);
  if (info->tx_attr && info->tx_attr->inject_size)
    core.inject_size = static_cast<uint32_t>(info->tx_attr->inject_size);
  if (info->ep_attr && info->ep_attr->max_msg_size)
    core.max_msg_size = std::min<uint64_t>(info->ep_attr->max_msg_size, core.max_msg_size);
  c.rdm.max_peers = 1;
  c.rdm.rm_enabled = !(info->domain_attr && info->domain_attr->resource_mgmt == FI_RM_DISABLED);
  if (cfg) {
    core.rel.peer_timeout_ns = cfg->rdm_peer_timeout_ms * 1'000'000;
    core.rel.max_retries = cfg->rdm_max_retries;
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
                                      msg_config(dom, info));
  if (!r) return r.code();
  e->msg = std::move(r.value());
  e->fid.fid.ops = &g_msg_fi_ops;
  e->fid.ops = &g_msg_ep_ops;
  e->fid.cm = &g_msg_cm_ops;
  e->fid.msg = &g_msg_msg_ops;
  e->fid.rma = &g_no_rma_ops;
  e->fid.tagged = &g_msg_tagged_ops;
  e->fid.atomic = &g_no_atomic_ops;
  dom->refs.fetch_add(1, std::memory_order_relaxed);
  *ep = &e.release()->fid;
  return FI_SUCCESS;
}

}  // namespace dpfab::ofi
