// SPDX-License-Identifier: BSD-3-Clause
//
// FI_EP_DGRAM endpoints: the fid_ep ops tables over proto::DgramEndpoint. Bind a CQ (or counter)
// per direction and an AV, then fi_enable reserves the UDP port (the one in info->src_addr or
// fi_setname, else an ephemeral one) on the domain's port.
//
// Multicast (FI_MULTICAST, fi_cm(3) fi_join): an enabled endpoint bound to an EQ joins an IPv4
// group given as a struct sockaddr_in (AF_INET, 224.0.0.0/4, a non-zero UDP port) or as a dpfab
// address (wire::Address) whose IPv4 is a group; its MAC must be zero or the group's. The join is
// done when fi_join returns, and its FI_JOIN_COMPLETE event (fid = the fid_mc, context) is on the
// EQ by then. fi_mc_addr gives an fi_addr_t outside the AV's index space (kMcAddrTag | slot) that
// the send calls take, with or without FI_MULTICAST. A receiving member gets every datagram sent
// to the group and UDP port, whatever port the endpoint is bound to. fi_close on the fid_mc
// leaves; fi_close on the endpoint returns -FI_EBUSY while any of its fid_mc is open.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <array>
#include <cstring>
#include <memory>
#include <mutex>

#include "dpdk.h"
#include "ep.h"
#include "event/cntr.h"
#include "event/cq.h"
#include "proto/av.h"
#include "proto/dgram.h"
#include "wire/format.h"
#include "wire/multicast.h"

namespace dpfab::ofi {
namespace {

// FI_SOURCE lookups go to the bound address vector (and give its user IDs: FI_AV_USER_ID).
class AvSource final : public proto::SourceLookup {
 public:
  const proto::AddressVector* av = nullptr;
  fi_addr_t reverse(uint32_t ip, uint16_t port, uint16_t ep) const noexcept override {
    return av ? av->completion_addr(av->reverse(ip, port, ep)) : FI_ADDR_NOTAVAIL;
  }
};

struct Endpoint;

// fi_mc_addr values: the tag bit keeps them apart from AV indices (below kMaxEntries) and from
// FI_ADDR_NOTAVAIL; the low bits are the group's slot in its endpoint.
constexpr fi_addr_t kMcAddrTag = fi_addr_t{1} << 62;
constexpr size_t kMaxJoins = 64;  // open fid_mc per endpoint

// A joined group (fid_mc).
struct Mc {
  fid_mc fid{};
  Endpoint* ep = nullptr;
  size_t slot = 0;
  uint32_t group_be = 0;
  uint16_t udp_port_be = 0;
  bool sends = false;     // may send to the group through fi_mc_addr
  bool receives = false;  // a member of the port's group table
  proto::Destination dest;
};

struct Endpoint final : EpBase {
  std::unique_ptr<proto::DgramEndpoint> dgram;
  proto::DgramEndpoint::Config cfg;
  AvSource source;
  wire::Address address() const noexcept override { return dgram->address(); }
  // Joined groups: fi_join/fi_close(mc) write under mc_mutex; the send path reads the slots.
  std::mutex mc_mutex;
  std::array<std::atomic<Mc*>, kMaxJoins> mcs{};
  size_t mc_open = 0;  // under mc_mutex
};

Endpoint* ep_of(fid* f) noexcept { return static_cast<Endpoint*>(ep_base_of(f)); }
Endpoint* ep_of(fid_ep* e) noexcept { return ep_of(&e->fid); }

// ---- fi_ops ------------------------------------------------------------------------------

int ep_close(fid* f) noexcept {
  Endpoint* e = ep_of(f);
  {
    std::lock_guard lock(e->mc_mutex);
    if (e->mc_open) return -FI_EBUSY;  // close the fid_mc objects first
  }
  if (e->enabled) {
    e->engine->unbind(e->dgram->address().udp_port_be);
    e->dgram->clear_backlog();
  }
  ep_base_release(e);
  delete e;
  return FI_SUCCESS;
}

int ep_enable(Endpoint* e) noexcept {
  if (e->enabled) return FI_SUCCESS;
  if (int r = ep_base_enable_check(e); r != FI_SUCCESS) return r;
  if (e->tx_cq) e->dgram->bind_cq(e->tx_cq, true, false, e->tx_selective);
  if (e->rx_cq) e->dgram->bind_cq(e->rx_cq, false, true, e->rx_selective);
  e->dgram->bind_cntr(e->tx_cntr, true, false);
  e->dgram->bind_cntr(e->rx_cntr, false, true);
  e->source.av = e->av;
  e->dgram->bind_source_lookup(&e->source);
  const int port = ep_base_bind_port(e, e->dgram.get());
  if (port < 0) return port;
  e->dgram->set_address(static_cast<uint16_t>(port), e->ep_id_be);
  ep_base_enabled(e);
  return FI_SUCCESS;
}

int ep_control(fid* f, int command, void* arg) noexcept {
  Endpoint* e = ep_of(f);
  return command == FI_ENABLE ? ep_enable(e) : ep_base_control(e, command, arg);
}

fi_ops g_ep_fi_ops = {
    .size = sizeof(fi_ops),
    .close = ep_close,
    .bind = ep_base_bind,
    .control = ep_control,
    .ops_open = enosys<decltype(fi_ops::ops_open)>,
    .tostr = nullptr,
    .ops_set = enosys<decltype(fi_ops::ops_set)>,
};

// ---- fi_ops_ep ---------------------------------------------------------------------------

ssize_t ep_cancel(fid* f, void* context) noexcept { return ep_of(f)->dgram->cancel(context); }

// DGRAM's only endpoint options are the untagged size options of API 1.22 (FI_OPT_MIN_MULTI_RECV
// needs FI_MULTI_RECV, CM data needs connections).
int ep_getopt(fid* f, int level, int name, void* val, size_t* len) noexcept {
  if (level != FI_OPT_ENDPOINT) return -FI_ENOPROTOOPT;
  return ep_base_getopt_size(ep_of(f), name, val, len);
}

int ep_setopt(fid* f, int level, int name, const void* val, size_t len) noexcept {
  if (level != FI_OPT_ENDPOINT) return -FI_ENOPROTOOPT;
  return ep_base_setopt_size(ep_of(f), name, val, len);
}

fi_ops_ep g_ep_ops = {
    .size = sizeof(fi_ops_ep),
    .cancel = ep_cancel,
    .getopt = ep_getopt,
    .setopt = ep_setopt,
    .tx_ctx = enosys<decltype(fi_ops_ep::tx_ctx)>,
    .rx_ctx = enosys<decltype(fi_ops_ep::rx_ctx)>,
    .rx_size_left = enosys<decltype(fi_ops_ep::rx_size_left)>,
    .tx_size_left = enosys<decltype(fi_ops_ep::tx_size_left)>,
};

// ---- fi_ops_cm ---------------------------------------------------------------------------

// ---- multicast ---------------------------------------------------------------------------

int mc_close(fid* f) noexcept {
  Mc* mc = container_of_fid<Mc>(f);
  Endpoint* e = mc->ep;
  std::lock_guard lock(e->mc_mutex);
  // Release: nothing is published through the slot's clearing; a sender still holding the old
  // pointer is the application's race (sending on a group it is closing).
  e->mcs[mc->slot].store(nullptr, std::memory_order_release);
  if (mc->receives) e->engine->leave_group(mc->group_be, mc->udp_port_be, e->dgram.get());
  --e->mc_open;
  delete mc;
  return FI_SUCCESS;
}

fi_ops g_mc_fi_ops = {
    .size = sizeof(fi_ops),
    .close = mc_close,
    .bind = enosys<decltype(fi_ops::bind)>,
    .control = enosys<decltype(fi_ops::control)>,
    .ops_open = enosys<decltype(fi_ops::ops_open)>,
    .tostr = nullptr,
    .ops_set = enosys<decltype(fi_ops::ops_set)>,
};

// The group fi_join names: a sockaddr_in or a wire::Address (told apart by their first bytes:
// sa_family AF_INET, or the address version with a zero reserved byte).
// @return 0; -FI_EINVAL when `addr` is neither or not a group with a UDP port (and a MAC that is
//         zero or the group's); -FI_ENOSYS for AF_INET6 (IPv6 groups are not offered).
int parse_group(const void* addr, uint32_t* group_be, uint16_t* port_be) noexcept {
  if (!addr) return -FI_EINVAL;
  sa_family_t family;
  std::memcpy(&family, addr, sizeof(family));
  const auto* bytes = static_cast<const uint8_t*>(addr);
  if (family == AF_INET) {
    sockaddr_in sin;
    std::memcpy(&sin, addr, sizeof(sin));
    *group_be = sin.sin_addr.s_addr;
    *port_be = sin.sin_port;
  } else if (family == AF_INET6) {
    return -FI_ENOSYS;
  } else if ((bytes[0] == wire::kAddressVersion || bytes[0] == wire::kAddressVersionShort) &&
             bytes[1] == 0) {
    wire::Address a;
    std::memcpy(static_cast<void*>(&a), addr, wire::kShortAddressLen);  // MAC, IPv4, port
    static constexpr uint8_t kZero[6] = {};
    const rte_ether_addr want = wire::multicast_mac(a.ipv4_be);
    if (std::memcmp(a.mac, kZero, 6) != 0 && std::memcmp(a.mac, want.addr_bytes, 6) != 0)
      return -FI_EINVAL;
    *group_be = a.ipv4_be;
    *port_be = a.udp_port_be;
  } else {
    return -FI_EINVAL;
  }
  if (!wire::is_multicast_ipv4(*group_be) || *port_be == 0) return -FI_EINVAL;
  return 0;
}

int ep_join(fid_ep* ep, const void* addr, uint64_t flags, fid_mc** mc_out, void* context) noexcept {
  return guard("fi_join", [&]() -> int {
    Endpoint* e = ep_of(ep);
    if (!mc_out) return -FI_EINVAL;
    if (!(e->caps & FI_MULTICAST)) return -FI_EOPNOTSUPP;
    if (flags & ~(FI_SEND | FI_RECV)) return -FI_EBADFLAGS;
    // "The endpoint must be configured for transmit (receive) operations to use this flag."
    if ((flags & FI_SEND) && !(e->caps & FI_SEND)) return -FI_EINVAL;
    if ((flags & FI_RECV) && !(e->caps & FI_RECV)) return -FI_EINVAL;
    if (!e->eq) return -FI_ENOEQ;
    if (!e->enabled) return -FI_EOPBADSTATE;
    event::Eq* eq = eq_of(e->eq);
    if (!eq) return -FI_EINVAL;
    uint32_t group_be = 0;
    uint16_t port_be = 0;
    if (int r = parse_group(addr, &group_be, &port_be); r != 0) return r;

    auto mc = std::make_unique<Mc>();
    mc->ep = e;
    mc->group_be = group_be;
    mc->udp_port_be = port_be;
    const uint64_t want = flags ? flags : e->caps;  // default: what the endpoint can do
    mc->sends = want & FI_SEND;
    mc->receives = want & FI_RECV;
    mc->dest.mac = wire::multicast_mac(group_be);
    mc->dest.ipv4_be = group_be;
    mc->dest.udp_port_be = port_be;
    mc->dest.ep_id_be = 0;  // every member: group frames are matched by group and port

    std::lock_guard lock(e->mc_mutex);
    size_t slot = kMaxJoins;
    for (size_t i = 0; i < kMaxJoins && slot == kMaxJoins; ++i)
      if (!e->mcs[i].load(std::memory_order_relaxed)) slot = i;
    if (slot == kMaxJoins) return -FI_ENOSPC;
    mc->slot = slot;
    if (mc->receives) {
      if (int r = e->engine->join_group(group_be, port_be, e->dgram.get()); r != 0) return r;
    }
    mc->fid.fid.fclass = FI_CLASS_MC;
    mc->fid.fid.context = context;
    mc->fid.fid.ops = &g_mc_fi_ops;
    mc->fid.fi_addr = kMcAddrTag | slot;

    fi_eq_entry entry{};
    entry.fid = &mc->fid.fid;
    entry.context = context;
    if (ssize_t w = eq->write(FI_JOIN_COMPLETE, &entry, sizeof(entry), 0); w < 0) {
      if (mc->receives) e->engine->leave_group(group_be, port_be, e->dgram.get());
      return static_cast<int>(w);
    }
    // Release: pairs with the acquire load in destination(): a sender that finds the slot sees
    // the group's destination.
    e->mcs[slot].store(mc.get(), std::memory_order_release);
    ++e->mc_open;
    char ip[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &group_be, ip, sizeof(ip));
    DPFAB_INFO(FI_LOG_EP_CTRL, "joined %s:%u (%s%s)", ip, ntohs(port_be), mc->sends ? "send" : "",
               mc->receives ? (mc->sends ? "+recv" : "recv") : "");
    *mc_out = &mc.release()->fid;
    return FI_SUCCESS;
  });
}

fi_ops_cm g_ep_cm_ops = {
    .size = sizeof(fi_ops_cm),
    .setname = ep_setname,
    .getname = ep_getname,
    .getpeer = enosys<decltype(fi_ops_cm::getpeer)>,
    .connect = enosys<decltype(fi_ops_cm::connect)>,
    .listen = enosys<decltype(fi_ops_cm::listen)>,
    .accept = enosys<decltype(fi_ops_cm::accept)>,
    .reject = enosys<decltype(fi_ops_cm::reject)>,
    .shutdown = enosys<decltype(fi_ops_cm::shutdown)>,
    .join = ep_join,
};

// ---- fi_ops_msg --------------------------------------------------------------------------

// -FI_EINVAL for an address that is neither in the AV nor a joined group; -FI_EPERM for a group
// joined receive-only (fi_join with FI_RECV).
int destination(const Endpoint* e, fi_addr_t a, proto::Destination* d) noexcept {
  if (a != FI_ADDR_NOTAVAIL && (a & kMcAddrTag)) {
    const fi_addr_t slot = a & ~kMcAddrTag;
    // Acquire: pairs with the release store in ep_join.
    const Mc* mc = slot < kMaxJoins ? e->mcs[slot].load(std::memory_order_acquire) : nullptr;
    if (!mc) return -FI_EINVAL;
    if (!mc->sends) return -FI_EPERM;
    *d = mc->dest;
    return 0;
  }
  const proto::AvEntry* entry = e->av ? e->av->lookup(a) : nullptr;
  if (!entry) return -FI_EINVAL;
  std::memcpy(d->mac.addr_bytes, entry->addr.mac, 6);
  d->ipv4_be = entry->addr.ipv4_be;
  d->udp_port_be = entry->addr.udp_port_be;
  d->ep_id_be = entry->addr.ep_id_be;
  d->host_be = entry->addr.host_be;
  d->node_be = entry->addr.node_be;
  d->nonce_be = entry->addr.nonce_be;
  return 0;
}

ssize_t do_send(fid_ep* ep, const iovec* iov, size_t count, fi_addr_t dest, void* context,
                uint64_t flags, bool has_data, uint64_t data, bool inject) noexcept {
  Endpoint* e = ep_of(ep);
  if (!e->enabled) return -FI_EOPBADSTATE;
  // The protocol checks the port's limits; the size options (API 1.22) may have set lower ones.
  const EpBase::SizeLimits &l = e->limits, &info = e->info_limits;
  if ((l.max_msg < info.max_msg || l.inject_msg < info.inject_msg) && valid_iov(iov, count, 4)) {
    size_t len = 0;
    for (size_t i = 0; i < count; ++i) len += iov[i].iov_len;
    if (!ep_size_ok(e, len, false, inject || (flags & FI_INJECT))) return -FI_EMSGSIZE;
  }
  proto::Destination d;
  if (int r = destination(e, dest, &d); r != 0) return r;
  return e->dgram->send(iov, count, d, context, flags, has_data, data, inject);
}

ssize_t do_recv(fid_ep* ep, const iovec* iov, size_t count, void* context,
                uint64_t flags) noexcept {
  Endpoint* e = ep_of(ep);
  if (!e->enabled) return -FI_EOPBADSTATE;
  if (flags & FI_MULTI_RECV) return -FI_EINVAL;  // not offered
  return e->dgram->post_recv(iov, count, context, flags);
}

ssize_t msg_recv(fid_ep* ep, void* buf, size_t len, void*, fi_addr_t, void* context) noexcept {
  iovec iov{buf, len};
  return do_recv(ep, &iov, 1, context, ep_of(ep)->rx_op_flags);
}

ssize_t msg_recvv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t,
                  void* context) noexcept {
  return do_recv(ep, iov, count, context, ep_of(ep)->rx_op_flags);
}

// The fi_msg(3) flags fi_sendmsg and fi_recvmsg take here; any other bit is -FI_EINVAL: bits
// libfabric does not define, flags of the other direction, and those this endpoint does not offer
// (FI_FENCE: no FI_FENCE capability; FI_DELIVERY_COMPLETE: "applies only to reliable endpoints",
// fi_cq(3); FI_MULTI_RECV, FI_CLAIM, FI_DISCARD: neither multi-receive nor buffered receives).
constexpr uint64_t kSendmsgFlags = FI_COMPLETION | FI_MORE | FI_REMOTE_CQ_DATA | FI_INJECT |
                                   FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_MULTICAST;
constexpr uint64_t kRecvmsgFlags = FI_COMPLETION | FI_MORE | FI_TRANSMIT_COMPLETE;

ssize_t msg_recvmsg(fid_ep* ep, const fi_msg* msg, uint64_t flags) noexcept {
  if (!msg || (flags & ~kRecvmsgFlags)) return -FI_EINVAL;
  return do_recv(ep, msg->msg_iov, msg->iov_count, msg->context, flags);
}

ssize_t msg_send(fid_ep* ep, const void* buf, size_t len, void*, fi_addr_t dest,
                 void* context) noexcept {
  iovec iov{const_cast<void*>(buf), len};
  return do_send(ep, &iov, 1, dest, context, ep_of(ep)->tx_op_flags, false, 0, false);
}

ssize_t msg_sendv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t dest,
                  void* context) noexcept {
  return do_send(ep, iov, count, dest, context, ep_of(ep)->tx_op_flags, false, 0, false);
}

ssize_t msg_sendmsg(fid_ep* ep, const fi_msg* msg, uint64_t flags) noexcept {
  if (!msg || (flags & ~kSendmsgFlags)) return -FI_EINVAL;
  // FI_INJECT: the buffer is free on return -- always true here (the payload is copied); the
  // completion is still written as the flags ask.
  return do_send(ep, msg->msg_iov, msg->iov_count, msg->addr, msg->context, flags,
                 flags & FI_REMOTE_CQ_DATA, msg->data, false);
}

ssize_t msg_inject(fid_ep* ep, const void* buf, size_t len, fi_addr_t dest) noexcept {
  iovec iov{const_cast<void*>(buf), len};
  return do_send(ep, &iov, 1, dest, nullptr, 0, false, 0, true);
}

ssize_t msg_senddata(fid_ep* ep, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest,
                     void* context) noexcept {
  iovec iov{const_cast<void*>(buf), len};
  return do_send(ep, &iov, 1, dest, context, ep_of(ep)->tx_op_flags, true, data, false);
}

ssize_t msg_injectdata(fid_ep* ep, const void* buf, size_t len, uint64_t data,
                       fi_addr_t dest) noexcept {
  iovec iov{const_cast<void*>(buf), len};
  return do_send(ep, &iov, 1, dest, nullptr, 0, true, data, true);
}

fi_ops_msg g_msg_ops = {
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

// Tagged operations: not offered on DGRAM endpoints.
fi_ops_tagged g_tagged_ops = {
    .size = sizeof(fi_ops_tagged),
    .recv = enosys<decltype(fi_ops_tagged::recv)>,
    .recvv = enosys<decltype(fi_ops_tagged::recvv)>,
    .recvmsg = enosys<decltype(fi_ops_tagged::recvmsg)>,
    .send = enosys<decltype(fi_ops_tagged::send)>,
    .sendv = enosys<decltype(fi_ops_tagged::sendv)>,
    .sendmsg = enosys<decltype(fi_ops_tagged::sendmsg)>,
    .inject = enosys<decltype(fi_ops_tagged::inject)>,
    .senddata = enosys<decltype(fi_ops_tagged::senddata)>,
    .injectdata = enosys<decltype(fi_ops_tagged::injectdata)>,
};

}  // namespace

int dgram_endpoint_open(Domain* dom, fi_info* info, fid_ep** ep, void* context) noexcept {
  return guard("fi_endpoint", [&]() -> int {
    auto e = std::make_unique<Endpoint>();
    ep_base_init(e.get(), dom, info, context);
    size_t max_msg = wire::max_payload(dom->engine->mtu() ? dom->engine->mtu() : 1500);
    e->cfg.max_msg = max_msg;
    e->cfg.inject_size = max_msg;
    e->cfg.rx_size = info->rx_attr && info->rx_attr->size ? info->rx_attr->size : 512;
    e->cfg.source = e->caps & FI_SOURCE;
    e->cfg.rm_enabled = !(info->domain_attr && info->domain_attr->resource_mgmt == FI_RM_DISABLED);
    auto dg = proto::DgramEndpoint::create(dom->engine, e->cfg);
    if (!dg) return dg.code();
    e->dgram = std::move(dg.value());
    e->fid.fid.ops = &g_ep_fi_ops;
    e->fid.ops = &g_ep_ops;
    e->fid.cm = &g_ep_cm_ops;
    e->fid.msg = &g_msg_ops;
    e->fid.rma = &g_no_rma_ops;
    e->fid.tagged = &g_tagged_ops;
    e->fid.atomic = &g_no_atomic_ops;
    dom->refs.fetch_add(1, std::memory_order_relaxed);
    *ep = &e.release()->fid;
    return FI_SUCCESS;
  });
}

}  // namespace dpfab::ofi
