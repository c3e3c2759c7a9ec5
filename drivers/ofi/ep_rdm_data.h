// SPDX-License-Identifier: BSD-3-Clause
//
// The data path of the endpoint types that carry proto::rdm's reliable messages: FI_EP_RDM
// (ep_rdm.cc, over proto::RdmEndpoint) and FI_EP_MSG (ep_msg.cc, over proto::MsgEndpoint, an
// RdmEndpoint bound to its one peer). One fi_ops_msg and one fi_ops_tagged table per type, made
// from one template, so the two types check and translate every call the same way:
//   - up to proto::rdm::kMaxIov buffers per operation (iov_limit): more iov entries are
//     -FI_EINVAL, and so is a NULL buffer with a length (valid_iov); FI_MULTI_RECV takes one;
//   - the fi_msg(3) / fi_tagged(3) flags each call takes (kSendFlags, kRecvFlags, kTrecvFlags);
//     any other bit is -FI_EINVAL;
//   - FI_MSG / FI_TAGGED calls on an endpoint without that capability are -FI_EOPNOTSUPP, calls
//     before fi_enable -FI_EOPBADSTATE;
//   - a send of at most copy_max bytes (inject_size or FI_DPDK_RDM_COPY_MAX, the larger) is
//     copied and completes at once (FI_INJECT_COMPLETE) unless it asks for FI_TRANSMIT_COMPLETE
//     or FI_DELIVERY_COMPLETE; fi_inject writes no completion;
//   - sends beyond the endpoint's size limits (max_msg_size, inject_size for injects, or what the
//     1.22 size options set) are -FI_EMSGSIZE.
// A type describes itself with a traits struct:
//   using Ep = ...;                           // derived from EpBase
//   static constexpr bool kAddressed;         // dest / src arguments count (RDM), or are ignored
//                                             // (MSG: a connected endpoint has one peer)
//   static Ep* of(fid_ep*) noexcept;
//   static proto::RdmEndpoint& rdm(Ep*) noexcept;
//   static ssize_t send(Ep*, const proto::rdm::SendOp&) noexcept;
//   static ssize_t recv(Ep*, const proto::rdm::RecvOp&) noexcept;
//   static ssize_t trigger(Ep*, const proto::rdm::SendOp&, event::Cntr*, uint64_t) noexcept;
// Calls through an alias (fi_ep_alias) find the endpoint with T::of and take the alias's op
// flags. FI_TRIGGER in a transmit call's flags (or op_flags) posts it once a counter reaches a
// threshold (post()).
#pragma once

#include <rdma/fi_tagged.h>
#include <rdma/fi_trigger.h>

#include <algorithm>
#include <optional>

#include "dpdk.h"
#include "ep.h"
#include "proto/rdm_endpoint.h"
#include "wire/format.h"
#include "wire/rdm.h"

namespace dpfab::ofi::rdm_data {

/// The fi_msg(3) / fi_tagged(3) flags each call takes; any other bit is -FI_EINVAL.
constexpr uint64_t kSendFlags = FI_COMPLETION | FI_MORE | FI_REMOTE_CQ_DATA | FI_INJECT |
                                FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE |
                                FI_FENCE | FI_TRIGGER;
constexpr uint64_t kRecvFlags = FI_COMPLETION | FI_MORE | FI_MULTI_RECV;
constexpr uint64_t kTrecvFlags = FI_COMPLETION | FI_MORE | FI_PEEK | FI_CLAIM | FI_DISCARD;

/// The local buffers of an operation, as the core takes them: one (base/len, count 0) or up to
/// kMaxIov (count, iov; len is their total).
struct Bufs {
  void* base = nullptr;
  size_t len = 0;
  uint8_t count = 0;
  proto::rdm::Iov iov[proto::rdm::kMaxIov];
};

inline Bufs buf_of(const void* p, size_t len) noexcept {
  Bufs b;
  b.base = const_cast<void*>(p);
  b.len = len;
  return b;
}

/// The buffers of an iov array (iov_limit kMaxIov); nullopt when the array is not valid or its
/// total does not fit a size_t.
inline std::optional<Bufs> bufs_of(const iovec* iov, size_t count) noexcept {
  if (!valid_iov(iov, count, proto::rdm::kMaxIov)) return std::nullopt;
  Bufs b;
  if (count == 1) return buf_of(iov[0].iov_base, iov[0].iov_len);
  for (size_t k = 0; k < count; ++k) {
    if (iov[k].iov_len > SIZE_MAX - b.len) return std::nullopt;
    b.len += iov[k].iov_len;
    b.iov[k] = {iov[k].iov_base, iov[k].iov_len};
  }
  b.count = static_cast<uint8_t>(count);
  b.base = count ? iov[0].iov_base : nullptr;
  return b;
}

/// Puts the buffers into an operation of the core (SendOp, RecvOp).
template <class Op>
inline void put_bufs(const Bufs& b, Op& op) noexcept {
  op.buf = b.base;
  op.len = b.len;
  op.iov_count = b.count;
  std::copy(b.iov, b.iov + b.count, op.iov);
}

/// fi_getopt / fi_setopt FI_OPT_MIN_MULTI_RECV (a size_t) of `rdm`. Before or after fi_enable
/// (fabtests set it after): buffers posted from then on follow it.
int get_min_multi_recv(proto::RdmEndpoint& rdm, void* val, size_t* len) noexcept;
int set_min_multi_recv(proto::RdmEndpoint& rdm, const void* val, size_t len) noexcept;

/// Posts `s` for endpoint `e`: now, or with FI_TRIGGER in `flags` once the counter of the
/// fi_triggered_context that is its context reaches the threshold (FI_TRIGGER_THRESHOLD only;
/// -FI_EINVAL otherwise, and without the FI_TRIGGER capability).
template <class T>
ssize_t post(typename T::Ep* e, const proto::rdm::SendOp& s, uint64_t flags) noexcept {
  if (!(flags & FI_TRIGGER)) return T::send(e, s);
  if (!(e->caps & FI_TRIGGER)) return -FI_EINVAL;
  auto* tc = static_cast<fi_triggered_context*>(s.context);
  if (!tc || app_enum(tc->event_type) != FI_TRIGGER_THRESHOLD || !tc->trigger.threshold.cntr)
    return -FI_EINVAL;
  WaitInfo wi;
  if (cntr_wait_info(&tc->trigger.threshold.cntr->fid, &wi) != FI_SUCCESS) return -FI_EINVAL;
  return T::trigger(e, s, static_cast<event::Cntr*>(wi.waitable), tc->trigger.threshold.threshold);
}

/// The largest message sent eagerly to a peer over a port, and to a same-host peer (fi_dpdk(7)).
inline constexpr uint64_t kEagerMax = 65536;
inline constexpr uint64_t kEagerMaxSameHost = 16384;

/// The RDM core's parameters both types take from their info and FI_DPDK_* configuration: the
/// segment size of the port's MTU, queue depths, inject_size, max_msg_size, the eager limits,
/// peer liveness, and the target side of RMA and atomics (the domain's regions, the endpoint's
/// token) when the endpoint has FI_RMA or FI_ATOMIC.
void core_config(const Domain* dom, const fi_info* info, const EpBase* e,
                 proto::rdm::CoreConfig& c) noexcept;
/// Binds the endpoint's CQs and counters to its RdmEndpoint (fi_enable).
void bind_completions(EpBase* e, proto::RdmEndpoint& rdm) noexcept;

template <class T>
struct Ops {
  using Ep = typename T::Ep;

  static ssize_t send(fid_ep* ep, const Bufs& b, fi_addr_t dest, void* context, uint64_t flags,
                      bool tagged, uint64_t tag, bool has_data, uint64_t data,
                      bool inject) noexcept {
    Ep* e = T::of(ep);
    if (!e->enabled) return -FI_EOPBADSTATE;
    if (!(e->caps & (tagged ? FI_TAGGED : FI_MSG))) return -FI_EOPNOTSUPP;
    if (!ep_size_ok(e, b.len, tagged, inject || (flags & FI_INJECT))) return -FI_EMSGSIZE;
    proto::rdm::SendOp s;
    if constexpr (T::kAddressed) s.dest = dest;
    put_bufs(b, s);
    s.fence = flags & FI_FENCE;
    s.context = context;
    s.tag = tag;
    s.data = data;
    s.tagged = tagged;
    s.has_data = has_data;
    s.completion = !inject && (!e->tx_selective || (flags & FI_COMPLETION));
    // A message of at most copy_max bytes (inject_size or more: FI_DPDK_RDM_COPY_MAX) is copied
    // and completes at once (FI_INJECT_COMPLETE), unless the application asks for transmit or
    // delivery completion: no ack is then waited for (nor asked at once), and the peer's reply
    // carries it. A longer one is sent from its buffer and completes when acknowledged.
    s.complete_now = b.len <= T::rdm(e).config().core.copy_max &&
                     !(flags & (FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE));
    s.inject = inject || (flags & FI_INJECT) || s.complete_now;
    return post<T>(e, s, flags);
  }

  static ssize_t recv(fid_ep* ep, const Bufs& b, fi_addr_t src, void* context, uint64_t flags,
                      bool tagged, uint64_t tag, uint64_t ignore) noexcept {
    Ep* e = T::of(ep);
    if (!e->enabled) return -FI_EOPBADSTATE;
    if (!(e->caps & (tagged ? FI_TAGGED : FI_MSG))) return -FI_EOPNOTSUPP;
    if ((flags & FI_MULTI_RECV) && !(e->caps & FI_MULTI_RECV)) return -FI_EINVAL;
    proto::rdm::RecvOp op;
    put_bufs(b, op);
    op.context = context;
    // FI_DIRECTED_RECV (2.x: also FI_TAGGED_DIRECTED_RECV, FI_EXACT_DIRECTED_RECV) makes the
    // source count; without it the source is ignored (fi_msg(3)).
    if constexpr (T::kAddressed)
      op.match.src = (tagged ? e->directed_tagged : e->directed_msg) ? src : FI_ADDR_UNSPEC;
    op.match.tag = tag;
    op.match.ignore = ignore;
    op.match.tagged = tagged;
    op.flags = flags & (FI_PEEK | FI_CLAIM | FI_DISCARD | FI_MULTI_RECV);
    op.completion = !e->rx_selective || (flags & FI_COMPLETION);
    return T::recv(e, op);
  }

  // The op flags of the endpoint or alias the call came through.
  static uint64_t tx_flags(fid_ep* ep) noexcept { return ep_base_of(&ep->fid)->tx_op_flags; }
  static uint64_t rx_flags(fid_ep* ep) noexcept { return ep_base_of(&ep->fid)->rx_op_flags; }

  // -- fi_ops_msg --

  static ssize_t m_recv(fid_ep* ep, void* buf, size_t len, void*, fi_addr_t src,
                        void* ctx) noexcept {
    return recv(ep, buf_of(buf, len), src, ctx, rx_flags(ep), false, 0, 0);
  }
  static ssize_t m_recvv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t src,
                         void* ctx) noexcept {
    auto b = bufs_of(iov, count);
    return b ? recv(ep, *b, src, ctx, rx_flags(ep), false, 0, 0) : -FI_EINVAL;
  }
  static ssize_t m_recvmsg(fid_ep* ep, const fi_msg* msg, uint64_t flags) noexcept {
    if (!msg || (flags & ~kRecvFlags)) return -FI_EINVAL;
    auto b = bufs_of(msg->msg_iov, msg->iov_count);
    return b ? recv(ep, *b, msg->addr, msg->context, flags, false, 0, 0) : -FI_EINVAL;
  }
  static ssize_t m_send(fid_ep* ep, const void* buf, size_t len, void*, fi_addr_t dest,
                        void* ctx) noexcept {
    return send(ep, buf_of(buf, len), dest, ctx, tx_flags(ep), false, 0, false, 0, false);
  }
  static ssize_t m_sendv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t dest,
                         void* ctx) noexcept {
    auto b = bufs_of(iov, count);
    return b ? send(ep, *b, dest, ctx, tx_flags(ep), false, 0, false, 0, false) : -FI_EINVAL;
  }
  static ssize_t m_sendmsg(fid_ep* ep, const fi_msg* msg, uint64_t flags) noexcept {
    if (!msg || (flags & ~kSendFlags)) return -FI_EINVAL;
    auto b = bufs_of(msg->msg_iov, msg->iov_count);
    return b ? send(ep, *b, msg->addr, msg->context, flags, false, 0, flags & FI_REMOTE_CQ_DATA,
                    msg->data, false)
             : -FI_EINVAL;
  }
  static ssize_t m_inject(fid_ep* ep, const void* buf, size_t len, fi_addr_t dest) noexcept {
    return send(ep, buf_of(buf, len), dest, nullptr, 0, false, 0, false, 0, true);
  }
  static ssize_t m_senddata(fid_ep* ep, const void* buf, size_t len, void*, uint64_t data,
                            fi_addr_t dest, void* ctx) noexcept {
    return send(ep, buf_of(buf, len), dest, ctx, tx_flags(ep), false, 0, true, data, false);
  }
  static ssize_t m_injectdata(fid_ep* ep, const void* buf, size_t len, uint64_t data,
                              fi_addr_t dest) noexcept {
    return send(ep, buf_of(buf, len), dest, nullptr, 0, false, 0, true, data, true);
  }

  // -- fi_ops_tagged (FI_MULTI_RECV is FI_MSG's only) --

  static ssize_t t_recv(fid_ep* ep, void* buf, size_t len, void*, fi_addr_t src, uint64_t tag,
                        uint64_t ignore, void* ctx) noexcept {
    return recv(ep, buf_of(buf, len), src, ctx, rx_flags(ep) & ~FI_MULTI_RECV, true, tag, ignore);
  }
  static ssize_t t_recvv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t src,
                         uint64_t tag, uint64_t ignore, void* ctx) noexcept {
    auto b = bufs_of(iov, count);
    return b ? recv(ep, *b, src, ctx, rx_flags(ep) & ~FI_MULTI_RECV, true, tag, ignore)
             : -FI_EINVAL;
  }
  static ssize_t t_recvmsg(fid_ep* ep, const fi_msg_tagged* msg, uint64_t flags) noexcept {
    if (!msg || (flags & ~kTrecvFlags)) return -FI_EINVAL;
    Bufs b;
    // FI_PEEK (and FI_CLAIM | FI_DISCARD) may come without a buffer.
    if (!(flags & (FI_PEEK | FI_DISCARD)) || msg->iov_count) {
      auto one = bufs_of(msg->msg_iov, msg->iov_count);
      if (!one) return -FI_EINVAL;
      b = *one;
    }
    return recv(ep, b, msg->addr, msg->context, flags, true, msg->tag, msg->ignore);
  }
  static ssize_t t_send(fid_ep* ep, const void* buf, size_t len, void*, fi_addr_t dest,
                        uint64_t tag, void* ctx) noexcept {
    return send(ep, buf_of(buf, len), dest, ctx, tx_flags(ep), true, tag, false, 0, false);
  }
  static ssize_t t_sendv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t dest,
                         uint64_t tag, void* ctx) noexcept {
    auto b = bufs_of(iov, count);
    return b ? send(ep, *b, dest, ctx, tx_flags(ep), true, tag, false, 0, false) : -FI_EINVAL;
  }
  static ssize_t t_sendmsg(fid_ep* ep, const fi_msg_tagged* msg, uint64_t flags) noexcept {
    if (!msg || (flags & ~kSendFlags)) return -FI_EINVAL;
    auto b = bufs_of(msg->msg_iov, msg->iov_count);
    return b ? send(ep, *b, msg->addr, msg->context, flags, true, msg->tag,
                    flags & FI_REMOTE_CQ_DATA, msg->data, false)
             : -FI_EINVAL;
  }
  static ssize_t t_inject(fid_ep* ep, const void* buf, size_t len, fi_addr_t dest,
                          uint64_t tag) noexcept {
    return send(ep, buf_of(buf, len), dest, nullptr, 0, true, tag, false, 0, true);
  }
  static ssize_t t_senddata(fid_ep* ep, const void* buf, size_t len, void*, uint64_t data,
                            fi_addr_t dest, uint64_t tag, void* ctx) noexcept {
    return send(ep, buf_of(buf, len), dest, ctx, tx_flags(ep), true, tag, true, data, false);
  }
  static ssize_t t_injectdata(fid_ep* ep, const void* buf, size_t len, uint64_t data,
                              fi_addr_t dest, uint64_t tag) noexcept {
    return send(ep, buf_of(buf, len), dest, nullptr, 0, true, tag, true, data, true);
  }

  inline static fi_ops_msg msg_ops = {
      .size = sizeof(fi_ops_msg),
      .recv = m_recv,
      .recvv = m_recvv,
      .recvmsg = m_recvmsg,
      .send = m_send,
      .sendv = m_sendv,
      .sendmsg = m_sendmsg,
      .inject = m_inject,
      .senddata = m_senddata,
      .injectdata = m_injectdata,
  };

  inline static fi_ops_tagged tagged_ops = {
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
};

}  // namespace dpfab::ofi::rdm_data
