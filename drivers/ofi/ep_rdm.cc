// SPDX-License-Identifier: BSD-3-Clause
//
// FI_EP_RDM endpoints: the fid_ep ops tables over proto::RdmEndpoint (reliable, ordered, tagged
// messages of any size up to max_msg_size; lib/proto/rdm_core.h has the protocol). Bind CQs or
// counters and an AV; fi_enable makes the protocol core and binds the endpoint's UDP port.
//
// Operations take one buffer (iov_limit 1): fi_sendv/recvv/...msg with more than one entry are
// refused with -FI_EINVAL. fi_inject copies up to inject_size bytes and writes no completion. A
// send of at most inject_size bytes completes once copied (FI_INJECT_COMPLETE), unless its flags
// (or the endpoint's op_flags) ask for FI_TRANSMIT_COMPLETE or FI_DELIVERY_COMPLETE; a larger
// one completes when the peer acknowledged all of it (delivery complete). FI_DIRECTED_RECV makes
// the receive's source address count; without it the source is ignored (fi_msg(3)).
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "ep.h"
#include "proto/rdm_endpoint.h"
#include "wire/format.h"
#include "wire/rdm.h"

namespace dpfab::ofi {
namespace {

struct RdmEp final : EpBase {
  std::unique_ptr<proto::RdmEndpoint> rdm;
  wire::Address address() const noexcept override { return rdm->address(); }
};

RdmEp* rdm_of(fid* f) noexcept { return static_cast<RdmEp*>(ep_base_of(f)); }
RdmEp* rdm_of(fid_ep* e) noexcept { return rdm_of(&e->fid); }

// ---- fi_ops ------------------------------------------------------------------------------

int rdm_close(fid* f) noexcept {
  RdmEp* e = rdm_of(f);
  // Operations still in progress end here without completions (fi_endpoint(3): the
  // application owns them; closing an endpoint with work outstanding discards it). Injected
  // sends are not outstanding for the application (it was told they were sent, or told
  // nothing): the close waits, boundedly, until the peer has them (RdmEndpoint::linger).
  if (e->enabled) {
    if (!e->rdm->linger())
      DPFAB_WARN(
          FI_LOG_EP_CTRL,
          "rdm endpoint closed with injected sends its peers did not acknowledge within "
          "%lu ms: they may be lost",
          static_cast<unsigned long>(std::min<uint64_t>(e->rdm->config().core.rel.peer_timeout_ns,
                                                        proto::RdmEndpoint::kCloseLingerMaxNs) /
                                     1'000'000));
    e->rdm->flush_acks();  // the peer's last messages arrived: tell it before we go
    e->engine->unbind(e->rdm->address().udp_port_be);
    const auto c = e->rdm->core_stats();
    const auto r = e->rdm->reliability_stats();
    DPFAB_INFO(FI_LOG_EP_CTRL,
               "rdm endpoint closed: sent %lu eager %lu rendezvous (%lu on the fast path), "
               "received %lu (%lu on the fast path); packets tx %lu "
               "(retransmits %lu, fast %lu, acks %lu, refused %lu) rx %lu (dup %lu, ooo %lu, "
               "refused %lu, stale epoch %lu); rto expiries %lu, probes %lu, unreachable %lu; rtt "
               "samples %lu, largest %lu us, largest rto estimate %lu us",
               c.sent_eager, c.sent_rendezvous, c.fast_sends, c.received, c.fast_receives,
               r.tx_packets, r.tx_retransmits, r.tx_fast_retransmits, r.tx_acks, r.tx_refused,
               r.rx_packets, r.rx_duplicates, r.rx_out_of_order, r.rx_refused, r.rx_stale_epoch,
               r.rto_expiries, r.probes, r.unreachable, r.rtt_samples, r.rtt_sample_max_ns / 1000,
               r.rto_estimate_max_ns / 1000);
  }
  ep_base_release(e);
  delete e;
  return FI_SUCCESS;
}

int rdm_enable(RdmEp* e) noexcept {
  if (e->enabled) return FI_SUCCESS;
  if (int r = ep_base_enable_check(e); r != FI_SUCCESS) return r;
  e->rdm->bind_cq(e->tx_cq, true, false, e->tx_selective);
  e->rdm->bind_cq(e->rx_cq, false, true, e->rx_selective);
  e->rdm->bind_cntr(e->tx_cntr, true, false);
  e->rdm->bind_cntr(e->rx_cntr, false, true);
  e->rdm->bind_av(e->av);
  // The core exists before the port is bound: the first frame may arrive at once.
  if (int r = e->rdm->enable(); r != 0) return r;
  const int port = ep_base_bind_port(e, e->rdm.get());
  if (port < 0) return port;
  e->rdm->set_address(static_cast<uint16_t>(port), e->ep_id_be);
  ep_base_enabled(e);
  return FI_SUCCESS;
}

int rdm_control(fid* f, int command, void* arg) noexcept {
  RdmEp* e = rdm_of(f);
  return command == FI_ENABLE ? rdm_enable(e) : ep_base_control(e, command, arg);
}

fi_ops g_rdm_fi_ops = {
    .size = sizeof(fi_ops),
    .close = rdm_close,
    .bind = ep_base_bind,
    .control = rdm_control,
    .ops_open = enosys<decltype(fi_ops::ops_open)>,
    .tostr = nullptr,
    .ops_set = enosys<decltype(fi_ops::ops_set)>,
};

// ---- fi_ops_ep ---------------------------------------------------------------------------

ssize_t rdm_cancel(fid* f, void* context) noexcept {
  RdmEp* e = rdm_of(f);
  if (!e->enabled) return -FI_ENOENT;
  return e->rdm->cancel(context);
}

int rdm_getopt(fid* f, int level, int name, void* val, size_t* len) noexcept {
  RdmEp* e = rdm_of(f);
  if (level != FI_OPT_ENDPOINT) return -FI_ENOPROTOOPT;
  if (name != FI_OPT_MIN_MULTI_RECV) return -FI_ENOPROTOOPT;
  if (!val || !len) return -FI_EINVAL;
  if (*len < sizeof(size_t)) {
    *len = sizeof(size_t);
    return -FI_ETOOSMALL;
  }
  *static_cast<size_t*>(val) = e->rdm->min_multi_recv();
  *len = sizeof(size_t);
  return FI_SUCCESS;
}

int rdm_setopt(fid* f, int level, int name, const void* val, size_t len) noexcept {
  RdmEp* e = rdm_of(f);
  if (level != FI_OPT_ENDPOINT) return -FI_ENOPROTOOPT;
  if (name != FI_OPT_MIN_MULTI_RECV) return -FI_ENOPROTOOPT;
  if (!val || len != sizeof(size_t)) return -FI_EINVAL;
  // Before or after fi_enable (fabtests set it after): buffers posted from now on follow it.
  e->rdm->set_min_multi_recv(*static_cast<const size_t*>(val));
  return FI_SUCCESS;
}

fi_ops_ep g_rdm_ep_ops = {
    .size = sizeof(fi_ops_ep),
    .cancel = rdm_cancel,
    .getopt = rdm_getopt,
    .setopt = rdm_setopt,
    .tx_ctx = enosys<decltype(fi_ops_ep::tx_ctx)>,
    .rx_ctx = enosys<decltype(fi_ops_ep::rx_ctx)>,
    .rx_size_left = enosys<decltype(fi_ops_ep::rx_size_left)>,
    .tx_size_left = enosys<decltype(fi_ops_ep::tx_size_left)>,
};

fi_ops_cm g_rdm_cm_ops = {
    .size = sizeof(fi_ops_cm),
    .setname = ep_setname,
    .getname = ep_getname,
    .getpeer = enosys<decltype(fi_ops_cm::getpeer)>,
    .connect = enosys<decltype(fi_ops_cm::connect)>,
    .listen = enosys<decltype(fi_ops_cm::listen)>,
    .accept = enosys<decltype(fi_ops_cm::accept)>,
    .reject = enosys<decltype(fi_ops_cm::reject)>,
    .shutdown = enosys<decltype(fi_ops_cm::shutdown)>,
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

ssize_t do_send(fid_ep* ep, Buf b, fi_addr_t dest, void* context, uint64_t flags, bool tagged,
                uint64_t tag, bool has_data, uint64_t data, bool inject) noexcept {
  RdmEp* e = rdm_of(ep);
  if (!e->enabled) return -FI_EOPBADSTATE;
  if (tagged && !(e->caps & FI_TAGGED)) return -FI_EOPNOTSUPP;
  if (!tagged && !(e->caps & FI_MSG)) return -FI_EOPNOTSUPP;
  proto::rdm::SendOp s;
  s.dest = dest;
  s.buf = b.base;
  s.len = b.len;
  s.context = context;
  s.tag = tag;
  s.data = data;
  s.tagged = tagged;
  s.has_data = has_data;
  s.completion = !inject && (!e->tx_selective || (flags & FI_COMPLETION));
  // A message that fits inject_size is copied and completes at once (FI_INJECT_COMPLETE),
  // unless the application asks for transmit or delivery completion: no ack is then waited for
  // (nor asked at once), and the peer's reply carries it.
  s.complete_now = b.len <= e->rdm->config().core.inject_size &&
                   !(flags & (FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE));
  s.inject = inject || (flags & FI_INJECT) || s.complete_now;
  return e->rdm->send(s);
}

ssize_t do_recv(fid_ep* ep, Buf b, fi_addr_t src, void* context, uint64_t flags, bool tagged,
                uint64_t tag, uint64_t ignore) noexcept {
  RdmEp* e = rdm_of(ep);
  if (!e->enabled) return -FI_EOPBADSTATE;
  if (tagged && !(e->caps & FI_TAGGED)) return -FI_EOPNOTSUPP;
  if (!tagged && !(e->caps & FI_MSG)) return -FI_EOPNOTSUPP;
  if ((flags & FI_MULTI_RECV) && !(e->caps & FI_MULTI_RECV)) return -FI_EINVAL;
  proto::rdm::RecvOp op;
  op.buf = b.base;
  op.len = b.len;
  op.context = context;
  op.match.src = (e->caps & FI_DIRECTED_RECV) ? src : FI_ADDR_UNSPEC;
  op.match.tag = tag;
  op.match.ignore = ignore;
  op.match.tagged = tagged;
  op.flags = flags & (FI_PEEK | FI_CLAIM | FI_DISCARD | FI_MULTI_RECV);
  op.completion = !e->rx_selective || (flags & FI_COMPLETION);
  return e->rdm->recv(op);
}

// -- fi_ops_msg --

ssize_t msg_recv(fid_ep* ep, void* buf, size_t len, void*, fi_addr_t src, void* ctx) noexcept {
  return do_recv(ep, {buf, len}, src, ctx, rdm_of(ep)->rx_op_flags, false, 0, 0);
}

ssize_t msg_recvv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t src,
                  void* ctx) noexcept {
  auto b = one_buf(iov, count);
  if (!b) return -FI_EINVAL;
  return do_recv(ep, *b, src, ctx, rdm_of(ep)->rx_op_flags, false, 0, 0);
}

ssize_t msg_recvmsg(fid_ep* ep, const fi_msg* msg, uint64_t flags) noexcept {
  if (!msg || (flags & ~kRecvFlags)) return -FI_EINVAL;
  auto b = one_buf(msg->msg_iov, msg->iov_count);
  if (!b) return -FI_EINVAL;
  return do_recv(ep, *b, msg->addr, msg->context, flags, false, 0, 0);
}

ssize_t msg_send(fid_ep* ep, const void* buf, size_t len, void*, fi_addr_t dest,
                 void* ctx) noexcept {
  return do_send(ep, {const_cast<void*>(buf), len}, dest, ctx, rdm_of(ep)->tx_op_flags, false, 0,
                 false, 0, false);
}

ssize_t msg_sendv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t dest,
                  void* ctx) noexcept {
  auto b = one_buf(iov, count);
  if (!b) return -FI_EINVAL;
  return do_send(ep, *b, dest, ctx, rdm_of(ep)->tx_op_flags, false, 0, false, 0, false);
}

ssize_t msg_sendmsg(fid_ep* ep, const fi_msg* msg, uint64_t flags) noexcept {
  if (!msg || (flags & ~kSendFlags)) return -FI_EINVAL;
  auto b = one_buf(msg->msg_iov, msg->iov_count);
  if (!b) return -FI_EINVAL;
  return do_send(ep, *b, msg->addr, msg->context, flags, false, 0, flags & FI_REMOTE_CQ_DATA,
                 msg->data, false);
}

ssize_t msg_inject(fid_ep* ep, const void* buf, size_t len, fi_addr_t dest) noexcept {
  return do_send(ep, {const_cast<void*>(buf), len}, dest, nullptr, 0, false, 0, false, 0, true);
}

ssize_t msg_senddata(fid_ep* ep, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest,
                     void* ctx) noexcept {
  return do_send(ep, {const_cast<void*>(buf), len}, dest, ctx, rdm_of(ep)->tx_op_flags, false, 0,
                 true, data, false);
}

ssize_t msg_injectdata(fid_ep* ep, const void* buf, size_t len, uint64_t data,
                       fi_addr_t dest) noexcept {
  return do_send(ep, {const_cast<void*>(buf), len}, dest, nullptr, 0, false, 0, true, data, true);
}

fi_ops_msg g_rdm_msg_ops = {
    .size = sizeof(fi_ops_msg),
    .recv = msg_recv,
    .recvv = msg_recvv,
    .recvmsg = msg_recvmsg,
    .send = msg_send,
    .sendv = msg_sendv,
    .sendmsg = msg_sendmsg,
    .inject = msg_inject,
    .senddata = msg_senddata,
    .injectdata = msg_injectdata,
};

// -- fi_ops_tagged --

ssize_t t_recv(fid_ep* ep, void* buf, size_t len, void*, fi_addr_t src, uint64_t tag,
               uint64_t ignore, void* ctx) noexcept {
  return do_recv(ep, {buf, len}, src, ctx, rdm_of(ep)->rx_op_flags & ~FI_MULTI_RECV, true, tag,
                 ignore);
}

ssize_t t_recvv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t src, uint64_t tag,
                uint64_t ignore, void* ctx) noexcept {
  auto b = one_buf(iov, count);
  if (!b) return -FI_EINVAL;
  return do_recv(ep, *b, src, ctx, rdm_of(ep)->rx_op_flags & ~FI_MULTI_RECV, true, tag, ignore);
}

ssize_t t_recvmsg(fid_ep* ep, const fi_msg_tagged* msg, uint64_t flags) noexcept {
  if (!msg || (flags & ~kTrecvFlags)) return -FI_EINVAL;
  Buf b;
  // FI_PEEK (and FI_CLAIM | FI_DISCARD) may come without a buffer.
  if (!(flags & (FI_PEEK | FI_DISCARD)) || msg->iov_count) {
    auto one = one_buf(msg->msg_iov, msg->iov_count);
    if (!one) return -FI_EINVAL;
    b = *one;
  }
  return do_recv(ep, b, msg->addr, msg->context, flags, true, msg->tag, msg->ignore);
}

ssize_t t_send(fid_ep* ep, const void* buf, size_t len, void*, fi_addr_t dest, uint64_t tag,
               void* ctx) noexcept {
  return do_send(ep, {const_cast<void*>(buf), len}, dest, ctx, rdm_of(ep)->tx_op_flags, true, tag,
                 false, 0, false);
}

ssize_t t_sendv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t dest, uint64_t tag,
                void* ctx) noexcept {
  auto b = one_buf(iov, count);
  if (!b) return -FI_EINVAL;
  return do_send(ep, *b, dest, ctx, rdm_of(ep)->tx_op_flags, true, tag, false, 0, false);
}

ssize_t t_sendmsg(fid_ep* ep, const fi_msg_tagged* msg, uint64_t flags) noexcept {
  if (!msg || (flags & ~kSendFlags)) return -FI_EINVAL;
  auto b = one_buf(msg->msg_iov, msg->iov_count);
  if (!b) return -FI_EINVAL;
  return do_send(ep, *b, msg->addr, msg->context, flags, true, msg->tag, flags & FI_REMOTE_CQ_DATA,
                 msg->data, false);
}

ssize_t t_inject(fid_ep* ep, const void* buf, size_t len, fi_addr_t dest, uint64_t tag) noexcept {
  return do_send(ep, {const_cast<void*>(buf), len}, dest, nullptr, 0, true, tag, false, 0, true);
}

ssize_t t_senddata(fid_ep* ep, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest,
                   uint64_t tag, void* ctx) noexcept {
  return do_send(ep, {const_cast<void*>(buf), len}, dest, ctx, rdm_of(ep)->tx_op_flags, true, tag,
                 true, data, false);
}

ssize_t t_injectdata(fid_ep* ep, const void* buf, size_t len, uint64_t data, fi_addr_t dest,
                     uint64_t tag) noexcept {
  return do_send(ep, {const_cast<void*>(buf), len}, dest, nullptr, 0, true, tag, true, data, true);
}

fi_ops_tagged g_rdm_tagged_ops = {
    .size = sizeof(fi_ops_tagged),
    .recv = t_recv,
    .recvv = t_recvv,
    .recvmsg = t_recvmsg,
    .send = t_send,
    .sendv = t_sendv,
    .sendmsg = t_sendmsg,
    .inject = t_inject,
    .senddata = t_senddata,
    .injectdata = t_injectdata,
};

}  // namespace

int rdm_endpoint_open(Domain* dom, fi_info* info, fid_ep** ep, void* context) noexcept {
  auto e = std::make_unique<RdmEp>();
  e->type = FI_EP_RDM;
  ep_base_init(e.get(), dom, info, context);
  const config::Config* cfg = dom->fabric->cfg;
  proto::RdmEndpoint::Config c;
  const uint16_t mtu = dom->engine->mtu() ? dom->engine->mtu() : 1500;
  c.core.seg_size = static_cast<uint32_t>(wire::max_payload(mtu) - wire::kRdmHeaderLen);
  // Out-of-order copies: the same bytes whatever the MTU (1024 slots of a 1500-MTU segment), at
  // least four peers' full windows.
  const auto standard_seg = static_cast<uint32_t>(wire::max_payload(1500) - wire::kRdmHeaderLen);
  c.core.reorder_slots = std::max<uint32_t>(256, 1024 * standard_seg / c.core.seg_size);
  c.core.tx_ops = info->tx_attr && info->tx_attr->size ? static_cast<uint32_t>(info->tx_attr->size)
                                                       : (cfg ? cfg->tx_depth : 512);
  c.core.rx_ops = info->rx_attr && info->rx_attr->size ? static_cast<uint32_t>(info->rx_attr->size)
                                                       : (cfg ? cfg->rx_depth : 512);
  if (info->tx_attr && info->tx_attr->inject_size)
    c.core.inject_size = static_cast<uint32_t>(info->tx_attr->inject_size);
  if (info->ep_attr && info->ep_attr->max_msg_size)
    c.core.max_msg_size = std::min<uint64_t>(info->ep_attr->max_msg_size, c.core.max_msg_size);
  if (cfg) {  // liveness: FI_DPDK_RDM_PEER_TIMEOUT_MS, FI_DPDK_RDM_MAX_RETRIES
    c.core.rel.peer_timeout_ns = cfg->rdm_peer_timeout_ms * 1'000'000;
    c.core.rel.max_retries = cfg->rdm_max_retries;
  }
  c.source = e->caps & FI_SOURCE;
  c.source_err = e->caps & FI_SOURCE_ERR;
  c.rm_enabled = !(info->domain_attr && info->domain_attr->resource_mgmt == FI_RM_DISABLED);
  c.format = e->format;
  auto r = proto::RdmEndpoint::create(dom->engine, c);
  if (!r) return r.code();
  e->rdm = std::move(r.value());
  e->fid.fid.ops = &g_rdm_fi_ops;
  e->fid.ops = &g_rdm_ep_ops;
  e->fid.cm = &g_rdm_cm_ops;
  e->fid.msg = &g_rdm_msg_ops;
  e->fid.rma = &g_no_rma_ops;
  e->fid.tagged = &g_rdm_tagged_ops;
  e->fid.atomic = &g_no_atomic_ops;
  dom->refs.fetch_add(1, std::memory_order_relaxed);
  *ep = &e.release()->fid;
  return FI_SUCCESS;
}

}  // namespace dpfab::ofi
