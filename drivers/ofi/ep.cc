// SPDX-License-Identifier: BSD-3-Clause
//
// What every endpoint type shares (ep.h): fi_endpoint, which hands the info to its type's file
// (ep_dgram.cc, ep_rdm.cc, ep_msg.cc), and the parts of fid_ep that do not depend on the
// protocol.
#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include <iterator>

#include "api_version.h"
#include "ep.h"
#include "wire/multicast.h"

namespace dpfab::ofi {

int endpoint_open(fid_domain* domain, fi_info* info, fid_ep** ep, void* context) noexcept {
  if (!domain || !info || !ep) return -FI_EINVAL;
  Domain* dom = container_of_fid<Domain>(&domain->fid);
  const int type = info->ep_attr ? app_enum(info->ep_attr->type) : FI_EP_UNSPEC;
  if (type != FI_EP_DGRAM && type != FI_EP_RDM && type != FI_EP_MSG && type != FI_EP_UNSPEC)
    return -FI_EINVAL;
  if (!dom->engine) return -FI_ENODEV;  // a port the application owns: no data path
  if (type == FI_EP_RDM) return rdm_endpoint_open(dom, info, ep, context);
  if (type == FI_EP_MSG) return msg_endpoint_open(dom, info, ep, context);
  return dgram_endpoint_open(dom, info, ep, context);
}

void ep_base_init(EpBase* e, Domain* dom, const fi_info* info, void* context) noexcept {
  static std::atomic<uint64_t> tokens{0};
  e->token = tokens.fetch_add(1, std::memory_order_relaxed) + 1;  // relaxed: only unique
  e->domain = dom;
  e->engine = dom->engine;
  e->caps = info->caps ? info->caps : (FI_MSG | FI_SEND | FI_RECV);
  if (!(e->caps & (FI_SEND | FI_RECV))) e->caps |= FI_SEND | FI_RECV;
  if (info->tx_attr) e->tx_op_flags = info->tx_attr->op_flags;
  if (info->rx_attr) e->rx_op_flags = info->rx_attr->op_flags;
  e->format = addr_format_of(info->addr_format);
  const uint32_t version = api_version(dom->fabric);
  e->directed_msg = api::directed_recv(e->caps, version, false);
  e->directed_tagged = api::directed_recv(e->caps, version, true);
  EpBase::SizeLimits& l = e->info_limits;
  if (info->ep_attr && info->ep_attr->max_msg_size)
    l.max_msg = l.max_tagged = info->ep_attr->max_msg_size;
  if (info->tx_attr && info->tx_attr->inject_size)
    l.inject_msg = l.inject_tagged = info->tx_attr->inject_size;
  e->limits = l;
  if (auto a = wire::read_address(info->src_addr, info->src_addrlen)) {
    e->udp_port_be = a->udp_port_be;
    e->ep_id_be = a->ep_id_be;
  }
  e->fid.fid.fclass = FI_CLASS_EP;
  e->fid.fid.context = context;
}

void ep_base_release(EpBase* e) noexcept {
  if (e->tx_cq) e->tx_cq->remove_binding();
  if (e->rx_cq && e->rx_cq != e->tx_cq) e->rx_cq->remove_binding();
  // Each counter bound holds one reference, however many of the flags it was bound with.
  event::Cntr* bound[] = {e->tx_cntr,   e->rx_cntr,     e->write_cntr,
                          e->read_cntr, e->rwrite_cntr, e->rread_cntr};
  for (size_t i = 0; i < std::size(bound); ++i) {
    bool seen = false;
    for (size_t j = 0; j < i; ++j) seen |= bound[j] == bound[i];
    if (bound[i] && !seen) bound[i]->bind_unref();
  }
  if (e->av_fid) av_bind_ref(e->av_fid, -1);
  if (e->eq) eq_bind_ref(e->eq, -1);
  e->domain->refs.fetch_sub(1, std::memory_order_release);
}

int ep_base_bind(fid* f, fid* bfid, uint64_t flags) noexcept {
  EpBase* e = ep_base_of(f);
  if (!bfid) return -FI_EINVAL;
  if (e->enabled) return -FI_EOPBADSTATE;
  switch (bfid->fclass) {
    case FI_CLASS_CQ: {
      if (flags & ~(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION)) return -FI_EBADFLAGS;
      WaitInfo wi;
      if (cq_wait_info(bfid, &wi) != FI_SUCCESS) return -FI_EINVAL;
      auto* cq = static_cast<event::Cq*>(wi.waitable);
      bool tx = flags & FI_TRANSMIT, rx = flags & FI_RECV;
      if ((tx && e->tx_cq) || (rx && e->rx_cq)) return -FI_EINVAL;  // one CQ per direction
      if (!tx && !rx) return -FI_EBADFLAGS;
      cq->add_binding();
      const bool selective = flags & FI_SELECTIVE_COMPLETION;
      if (tx) e->tx_cq = cq, e->tx_cq_fid = bfid, e->tx_selective = selective;
      if (rx) e->rx_cq = cq, e->rx_cq_fid = bfid, e->rx_selective = selective;
      return FI_SUCCESS;
    }
    case FI_CLASS_CNTR: {
      // Sends and receives; on RDM and MSG endpoints also the RMA and atomic operations this
      // endpoint starts (FI_WRITE, FI_READ) and those that reach it (FI_REMOTE_WRITE,
      // FI_REMOTE_READ).
      constexpr uint64_t kRma = FI_WRITE | FI_READ | FI_REMOTE_WRITE | FI_REMOTE_READ;
      const uint64_t allowed = FI_SEND | FI_RECV | (e->type == FI_EP_DGRAM ? 0 : kRma);
      if (flags & ~allowed) return -FI_EBADFLAGS;
      WaitInfo wi;
      if (cntr_wait_info(bfid, &wi) != FI_SUCCESS) return -FI_EINVAL;
      auto* c = static_cast<event::Cntr*>(wi.waitable);
      struct {
        uint64_t flag;
        event::Cntr** slot;
      } kinds[] = {{FI_SEND, &e->tx_cntr},
                   {FI_RECV, &e->rx_cntr},
                   {FI_WRITE, &e->write_cntr},
                   {FI_READ, &e->read_cntr},
                   {FI_REMOTE_WRITE, &e->rwrite_cntr},
                   {FI_REMOTE_READ, &e->rread_cntr}};
      if (!(flags & allowed)) return -FI_EINVAL;
      for (auto& k : kinds)
        if ((flags & k.flag) && *k.slot) return -FI_EINVAL;  // one counter per event
      bool held = false;  // a counter bound for other events already holds its reference
      for (auto& k : kinds) held |= *k.slot == c;
      if (!held) c->bind_ref();
      for (auto& k : kinds)
        if (flags & k.flag) *k.slot = c;
      return FI_SUCCESS;
    }
    case FI_CLASS_AV: {
      if (e->av_fid) return -FI_EINVAL;
      auto* av = av_of(container_of_fid<fid_av>(bfid));
      if (!av) return -FI_EINVAL;
      av_bind_ref(container_of_fid<fid_av>(bfid), +1);
      e->av_fid = container_of_fid<fid_av>(bfid);
      e->av = av;
      return FI_SUCCESS;
    }
    case FI_CLASS_EQ:
      if (e->eq) return -FI_EINVAL;
      if (eq_bind_ref(container_of_fid<fid_eq>(bfid), +1) < 0) return -FI_EINVAL;
      e->eq = container_of_fid<fid_eq>(bfid);
      return FI_SUCCESS;
    default:
      return -FI_EINVAL;
  }
}

int ep_base_enable_check(const EpBase* e) noexcept {
  if ((e->caps & FI_SEND) && !e->tx_cq && !e->tx_cntr) return -FI_ENOCQ;
  if ((e->caps & FI_RECV) && !e->rx_cq && !e->rx_cntr) return -FI_ENOCQ;
  if (!e->av) return -FI_ENOAV;
  return FI_SUCCESS;
}

int ep_base_bind_port(EpBase* e, proto::Receiver* r) noexcept {
  uint16_t port = e->udp_port_be;
  if (port) {
    if (int rc = e->engine->bind(port, r); rc != FI_SUCCESS) return rc;
    return port;
  }
  port = e->engine->bind_ephemeral(r);
  return port ? port : -FI_EADDRINUSE;
}

void ep_base_enabled(EpBase* e) noexcept {
  if (e->eq) {  // RM disabled: CQ overruns become asynchronous errors on this EQ
    if (e->tx_cq_fid) cq_report_overrun_to(e->tx_cq_fid, e->eq);
    if (e->rx_cq_fid) cq_report_overrun_to(e->rx_cq_fid, e->eq);
  }
  e->enabled = true;
}

namespace {

// fi_ep_alias: the endpoint's tables with op flags of its own (ep.h).
struct EpAlias final : EpBase {
  wire::Address address() const noexcept override { return alias_of->address(); }
};

int alias_close(fid* f) noexcept {
  EpBase* a = ep_base_of(f);
  a->alias_of->aliases.fetch_sub(1, std::memory_order_release);
  delete static_cast<EpAlias*>(a);
  return FI_SUCCESS;
}

int alias_control(fid* f, int command, void* arg) noexcept {
  // Its own op flags; anything else is the endpoint's business (and not an alias's).
  if (command != FI_GETOPSFLAG && command != FI_SETOPSFLAG) return -FI_ENOSYS;
  return ep_base_control(ep_base_of(f), command, arg);
}

fi_ops g_alias_fi_ops = {
    .size = sizeof(fi_ops),
    .close = alias_close,
    .bind = enosys<decltype(fi_ops::bind)>,
    .control = alias_control,
    .ops_open = enosys<decltype(fi_ops::ops_open)>,
    .tostr = nullptr,
    .ops_set = enosys<decltype(fi_ops::ops_set)>,
};

int make_alias(EpBase* e, const struct fi_alias* al) noexcept {
  if (!al || !al->fid) return -FI_EINVAL;
  if (e->type == FI_EP_DGRAM || e->alias_of) return -FI_ENOSYS;
  const uint64_t dir = al->flags & (FI_TRANSMIT | FI_RECV);
  if (dir != FI_TRANSMIT && dir != FI_RECV) return -FI_EINVAL;  // one direction
  auto* a = new (std::nothrow) EpAlias();
  if (!a) return -FI_ENOMEM;
  a->fid = e->fid;                   // the endpoint's tables (msg, tagged, rma, atomic, cm, ops)...
  a->fid.fid.ops = &g_alias_fi_ops;  // ...but its own close and op flags
  a->alias_of = e;
  a->type = e->type;
  a->tx_op_flags = e->tx_op_flags;
  a->rx_op_flags = e->rx_op_flags;
  if (dir == FI_TRANSMIT)
    a->tx_op_flags = al->flags & ~dir;
  else
    a->rx_op_flags = al->flags & ~dir;
  e->aliases.fetch_add(1, std::memory_order_relaxed);
  *al->fid = &a->fid.fid;
  return FI_SUCCESS;
}

}  // namespace

int ep_base_control(EpBase* e, int command, void* arg) noexcept {
  switch (command) {
    case FI_ALIAS:
      return make_alias(e, static_cast<const struct fi_alias*>(arg));
    case FI_GETOPSFLAG: {
      auto* flags = static_cast<uint64_t*>(arg);
      if (!flags) return -FI_EINVAL;
      if (*flags & FI_TRANSMIT)
        *flags = e->tx_op_flags;
      else if (*flags & FI_RECV)
        *flags = e->rx_op_flags;
      else
        return -FI_EINVAL;
      return FI_SUCCESS;
    }
    case FI_SETOPSFLAG: {
      auto* flags = static_cast<uint64_t*>(arg);
      if (!flags) return -FI_EINVAL;
      if (*flags & FI_TRANSMIT)
        e->tx_op_flags = *flags & ~FI_TRANSMIT;
      else if (*flags & FI_RECV)
        e->rx_op_flags = *flags & ~FI_RECV;
      else
        return -FI_EINVAL;
      return FI_SUCCESS;
    }
    default:
      return -FI_ENOSYS;
  }
}

namespace {

// The limit a size option names, and the one of the info it may not exceed; nullptr when the
// endpoint has no such option (see ep.h).
size_t* size_option(EpBase* e, int name, size_t* info_value) noexcept {
#if DPFAB_FI_HEADERS_AT_LEAST(1, 22)
  if (!api_at_least(e->domain->fabric, fi_api::kSizeOptions)) return nullptr;
  EpBase::SizeLimits& l = e->limits;
  const EpBase::SizeLimits& info = e->info_limits;
  const bool msg = e->caps & FI_MSG, tagged = e->caps & FI_TAGGED;
  switch (name) {
    case FI_OPT_MAX_MSG_SIZE:
      *info_value = info.max_msg;
      return msg ? &l.max_msg : nullptr;
    case FI_OPT_MAX_TAGGED_SIZE:
      *info_value = info.max_tagged;
      return tagged ? &l.max_tagged : nullptr;
    case FI_OPT_INJECT_MSG_SIZE:
      *info_value = info.inject_msg;
      return msg ? &l.inject_msg : nullptr;
    case FI_OPT_INJECT_TAGGED_SIZE:
      *info_value = info.inject_tagged;
      return tagged ? &l.inject_tagged : nullptr;
    default:  // FI_OPT_MAX_RMA_SIZE, FI_OPT_MAX_ATOMIC_SIZE, FI_OPT_INJECT_{RMA,ATOMIC}_SIZE
      return nullptr;
  }
#else
  (void)e, (void)name, (void)info_value;
  return nullptr;
#endif
}

}  // namespace

int ep_base_getopt_size(EpBase* e, int name, void* val, size_t* len) noexcept {
  size_t info_value = 0;
  const size_t* v = size_option(e, name, &info_value);
  if (!v) return -FI_ENOPROTOOPT;
  if (!val || !len) return -FI_EINVAL;
  if (*len < sizeof(size_t)) {
    *len = sizeof(size_t);
    return -FI_ETOOSMALL;
  }
  *static_cast<size_t*>(val) = *v;
  *len = sizeof(size_t);
  return FI_SUCCESS;
}

int ep_base_setopt_size(EpBase* e, int name, const void* val, size_t len) noexcept {
  size_t info_value = 0;
  size_t* v = size_option(e, name, &info_value);
  if (!v) return -FI_ENOPROTOOPT;
  if (!val || len != sizeof(size_t)) return -FI_EINVAL;
  const size_t want = *static_cast<const size_t*>(val);
  if (want > info_value) return -FI_EINVAL;  // "less than or equal to" the info's (fi_endpoint(3))
  *v = want;
  return FI_SUCCESS;
}

int ep_getname(fid* f, void* addr, size_t* addrlen) noexcept {
  EpBase* e = ep_base_of(f);
  if (!addrlen) return -FI_EINVAL;
  wire::Address a = e->address();
  if (!e->enabled) a.udp_port_be = e->udp_port_be, a.ep_id_be = e->ep_id_be;
  size_t have = *addrlen;
  *addrlen = wire::address_len(a, e->format);
  if (!addr || have < *addrlen) return -FI_ETOOSMALL;
  wire::write_address(a, e->format, addr, have);
  return FI_SUCCESS;
}

int ep_setname(fid* f, void* addr, size_t addrlen) noexcept {
  EpBase* e = ep_base_of(f);
  if (e->enabled) return -FI_EOPBADSTATE;
  auto a = wire::read_address(addr, addrlen);
  if (!a) return -FI_EINVAL;
  // Not our port's address (a loopback address names this host, and so our port too).
  if (a->ipv4_be && a->ipv4_be != e->engine->ipv4_be() && !wire::is_loopback_ipv4(a->ipv4_be))
    return -FI_EINVAL;
  e->udp_port_be = a->udp_port_be;
  e->ep_id_be = a->ep_id_be;
  return FI_SUCCESS;
}

bool valid_iov(const iovec* iov, size_t count, size_t limit) noexcept {
  if (count > limit || (count && !iov)) return false;
  for (size_t i = 0; i < count; ++i)
    if (!iov[i].iov_base && iov[i].iov_len) return false;
  return true;
}

fi_ops_rma g_no_rma_ops = {
    .size = sizeof(fi_ops_rma),
    .read = enosys<decltype(fi_ops_rma::read)>,
    .readv = enosys<decltype(fi_ops_rma::readv)>,
    .readmsg = enosys<decltype(fi_ops_rma::readmsg)>,
    .write = enosys<decltype(fi_ops_rma::write)>,
    .writev = enosys<decltype(fi_ops_rma::writev)>,
    .writemsg = enosys<decltype(fi_ops_rma::writemsg)>,
    .inject = enosys<decltype(fi_ops_rma::inject)>,
    .writedata = enosys<decltype(fi_ops_rma::writedata)>,
    .injectdata = enosys<decltype(fi_ops_rma::injectdata)>,
};

fi_ops_atomic g_no_atomic_ops = {
    .size = sizeof(fi_ops_atomic),
    .write = enosys<decltype(fi_ops_atomic::write)>,
    .writev = enosys<decltype(fi_ops_atomic::writev)>,
    .writemsg = enosys<decltype(fi_ops_atomic::writemsg)>,
    .inject = enosys<decltype(fi_ops_atomic::inject)>,
    .readwrite = enosys<decltype(fi_ops_atomic::readwrite)>,
    .readwritev = enosys<decltype(fi_ops_atomic::readwritev)>,
    .readwritemsg = enosys<decltype(fi_ops_atomic::readwritemsg)>,
    .compwrite = enosys<decltype(fi_ops_atomic::compwrite)>,
    .compwritev = enosys<decltype(fi_ops_atomic::compwritev)>,
    .compwritemsg = enosys<decltype(fi_ops_atomic::compwritemsg)>,
    .writevalid = enosys<decltype(fi_ops_atomic::writevalid)>,
    .readwritevalid = enosys<decltype(fi_ops_atomic::readwritevalid)>,
    .compwritevalid = enosys<decltype(fi_ops_atomic::compwritevalid)>,
};

}  // namespace dpfab::ofi
