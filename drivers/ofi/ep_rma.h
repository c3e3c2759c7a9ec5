// SPDX-License-Identifier: BSD-3-Clause
//
// The RMA (fi_rma(3)) and atomic (fi_atomic(3)) calls of the endpoint types that carry
// proto::rdm's reliable stream: FI_EP_RDM (ep_rdm.cc) and FI_EP_MSG (ep_msg.cc). One fi_ops_rma
// and one fi_ops_atomic table per type, made from one template over the same traits as
// ep_rdm_data.h (Ep, kAddressed, of, rdm, send), so both types check and translate every call
// the same way:
//   - up to kMaxIov local buffers (iov_limit), one remote range (rma_iov_limit 1), whose length
//     is the local total (-FI_EINVAL otherwise); a NULL buffer with a length is -FI_EINVAL;
//   - the flags of fi_writemsg (FI_COMPLETION, FI_MORE, FI_REMOTE_CQ_DATA, FI_INJECT,
//     FI_INJECT_COMPLETE, FI_TRANSMIT_COMPLETE, FI_DELIVERY_COMPLETE, FI_FENCE), fi_readmsg
//     (FI_COMPLETION, FI_MORE, FI_FENCE, and the completion levels, which change nothing for a
//     read) and fi_*atomicmsg (FI_COMPLETION, FI_MORE, FI_INJECT, FI_FENCE, FI_TRANSMIT_COMPLETE,
//     FI_DELIVERY_COMPLETE), each with FI_TRIGGER; any other bit is -FI_EINVAL;
//   - a write completes when the target answered (delivery complete: the data is in its
//     memory, and a failed check comes back as the error), unless FI_INJECT_COMPLETE is asked
//     for (call or op_flags) on a write of at most inject_size bytes, which then completes once
//     copied; fi_inject_write and fi_inject_writedata write no completion (a write counter still
//     counts them, errors included);
//   - atomics: fi_atomicvalid and friends give the most elements one operation takes (one
//     packet: proto::rdm::CoreConfig::atomic_max bytes of operands and compare values), and
//     -FI_EOPNOTSUPP for what the operation does not offer (proto/atomic.h); an atomic over more
//     elements is -FI_EINVAL;
//   - calls on an endpoint without FI_RMA (FI_ATOMIC) are -FI_EOPNOTSUPP; FI_READ or FI_WRITE
//     among the capabilities limits the endpoint to the one asked for; before fi_enable
//     -FI_EOPBADSTATE;
//   - FI_TRIGGER (in the flags, or the op_flags of an alias made with it) posts the operation
//     once a counter reaches a threshold (rdm_data::post).
#pragma once

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include <algorithm>
#include <optional>

#include "dpdk.h"
#include "ep.h"
#include "ep_rdm_data.h"
#include "proto/atomic.h"
#include "proto/rdm_endpoint.h"
#include "wire/format.h"
#include "wire/rdm.h"

namespace dpfab::ofi::rma_data {

using rdm_data::buf_of;
using rdm_data::Bufs;
using rdm_data::bufs_of;
using rdm_data::put_bufs;

constexpr uint64_t kWriteFlags = FI_COMPLETION | FI_MORE | FI_REMOTE_CQ_DATA | FI_INJECT |
                                 FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE |
                                 FI_FENCE | FI_TRIGGER;
constexpr uint64_t kReadFlags =
    FI_COMPLETION | FI_MORE | FI_FENCE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_TRIGGER;
constexpr uint64_t kAtomicFlags = FI_COMPLETION | FI_MORE | FI_INJECT | FI_FENCE |
                                  FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_TRIGGER;

/// The largest operands of one atomic (compare values included), in bytes, on an endpoint or
/// domain whose RDM segments carry `seg_size` bytes and whose inject_size is `inject_size`.
inline uint32_t atomic_max_bytes(uint32_t seg_size, uint32_t inject_size) noexcept {
  return std::min<uint32_t>(inject_size, seg_size - static_cast<uint32_t>(wire::kRdmRmaLen));
}

/// The same for the endpoints of `dom` opened with its default inject_size (fi_query_atomic).
inline uint32_t domain_atomic_max(const Domain* dom) noexcept {
  const uint32_t mtu = dom->engine && dom->engine->mtu() ? dom->engine->mtu() : 1500;
  const auto seg = static_cast<uint32_t>(wire::max_payload(mtu) - wire::kRdmHeaderLen);
  const auto inject = static_cast<uint32_t>(
      std::min(wire::max_payload(mtu), wire::max_payload(1500)) - wire::kRdmHeaderLen);
  return atomic_max_bytes(seg, inject);
}

/// fi_query_atomic / fi_*atomicvalid: the most elements of `dt` one `kind` operation takes.
inline int atomic_count(int op, int dt, proto::atomic::Kind kind, uint32_t max_bytes,
                        size_t* count) noexcept {
  if (!proto::atomic::valid(op, dt, kind)) return -FI_EOPNOTSUPP;
  const size_t size = proto::atomic::datatype_size(dt);
  const size_t per = kind == proto::atomic::Kind::kCompare ? 2 * size : size;
  if (count) *count = max_bytes / per;
  return FI_SUCCESS;
}

template <class T>
struct RmaOps {
  using Ep = typename T::Ep;

  // Whether the endpoint may initiate `what` (FI_READ or FI_WRITE) of `cap` (FI_RMA, FI_ATOMIC).
  static int allowed(Ep* e, uint64_t cap, uint64_t what) noexcept {
    if (!e->enabled) return -FI_EOPBADSTATE;
    if (!(e->caps & cap)) return -FI_EOPNOTSUPP;
    if ((e->caps & (FI_READ | FI_WRITE)) && !(e->caps & what)) return -FI_EOPNOTSUPP;
    return FI_SUCCESS;
  }

  static ssize_t rma(fid_ep* ep, bool write, const Bufs& b, fi_addr_t dest, uint64_t addr,
                     uint64_t key, void* context, uint64_t flags, bool has_data, uint64_t data,
                     bool inject) noexcept {
    Ep* e = T::of(ep);
    if (int r = allowed(e, FI_RMA, write ? FI_WRITE : FI_READ)) return r;
    proto::rdm::SendOp s;
    if constexpr (T::kAddressed) s.dest = dest;
    put_bufs(b, s);
    s.kind = write ? proto::rdm::OpKind::kWrite : proto::rdm::OpKind::kRead;
    s.context = context;
    s.rkey = key;
    s.raddr = addr;
    s.has_data = has_data;
    s.data = data;
    s.fence = flags & FI_FENCE;
    s.completion = !inject && (!e->tx_selective || (flags & FI_COMPLETION));
    if (write) {
      // Copied now when asked (FI_INJECT, fi_inject_write), completed once copied only when
      // FI_INJECT_COMPLETE is asked for: the default waits for the target's answer, which
      // reports a failed check.
      s.complete_now = b.len <= T::rdm(e).config().core.inject_size &&
                       (flags & FI_INJECT_COMPLETE) &&
                       !(flags & (FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE));
      s.inject = inject || (flags & FI_INJECT) || s.complete_now;
    }
    return rdm_data::post<T>(e, s, flags);
  }

  // The op flags of the endpoint or alias the call came through.
  static uint64_t tx_flags(fid_ep* ep) noexcept { return ep_base_of(&ep->fid)->tx_op_flags; }

  static ssize_t read(fid_ep* ep, void* buf, size_t len, void*, fi_addr_t src, uint64_t addr,
                      uint64_t key, void* ctx) noexcept {
    if (!buf && len) return -FI_EINVAL;
    return rma(ep, false, buf_of(buf, len), src, addr, key, ctx, tx_flags(ep), false, 0, false);
  }
  static ssize_t readv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t src,
                       uint64_t addr, uint64_t key, void* ctx) noexcept {
    auto b = bufs_of(iov, count);
    return b ? rma(ep, false, *b, src, addr, key, ctx, tx_flags(ep), false, 0, false) : -FI_EINVAL;
  }
  static ssize_t readmsg(fid_ep* ep, const fi_msg_rma* msg, uint64_t flags) noexcept {
    if (!msg || (flags & ~kReadFlags)) return -FI_EINVAL;
    auto b = bufs_of(msg->msg_iov, msg->iov_count);
    if (!b || msg->rma_iov_count != 1 || !msg->rma_iov || msg->rma_iov[0].len != b->len)
      return -FI_EINVAL;
    return rma(ep, false, *b, msg->addr, msg->rma_iov[0].addr, msg->rma_iov[0].key, msg->context,
               flags, false, 0, false);
  }
  static ssize_t write(fid_ep* ep, const void* buf, size_t len, void*, fi_addr_t dest,
                       uint64_t addr, uint64_t key, void* ctx) noexcept {
    if (!buf && len) return -FI_EINVAL;
    return rma(ep, true, buf_of(buf, len), dest, addr, key, ctx, tx_flags(ep), false, 0, false);
  }
  static ssize_t writev(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t dest,
                        uint64_t addr, uint64_t key, void* ctx) noexcept {
    auto b = bufs_of(iov, count);
    return b ? rma(ep, true, *b, dest, addr, key, ctx, tx_flags(ep), false, 0, false) : -FI_EINVAL;
  }
  static ssize_t writemsg(fid_ep* ep, const fi_msg_rma* msg, uint64_t flags) noexcept {
    if (!msg || (flags & ~kWriteFlags)) return -FI_EINVAL;
    auto b = bufs_of(msg->msg_iov, msg->iov_count);
    if (!b || msg->rma_iov_count != 1 || !msg->rma_iov || msg->rma_iov[0].len != b->len)
      return -FI_EINVAL;
    return rma(ep, true, *b, msg->addr, msg->rma_iov[0].addr, msg->rma_iov[0].key, msg->context,
               flags, flags & FI_REMOTE_CQ_DATA, msg->data, false);
  }
  static ssize_t inject(fid_ep* ep, const void* buf, size_t len, fi_addr_t dest, uint64_t addr,
                        uint64_t key) noexcept {
    if (!buf && len) return -FI_EINVAL;
    return rma(ep, true, buf_of(buf, len), dest, addr, key, nullptr, 0, false, 0, true);
  }
  static ssize_t writedata(fid_ep* ep, const void* buf, size_t len, void*, uint64_t data,
                           fi_addr_t dest, uint64_t addr, uint64_t key, void* ctx) noexcept {
    if (!buf && len) return -FI_EINVAL;
    return rma(ep, true, buf_of(buf, len), dest, addr, key, ctx, tx_flags(ep), true, data, false);
  }
  static ssize_t injectdata(fid_ep* ep, const void* buf, size_t len, uint64_t data, fi_addr_t dest,
                            uint64_t addr, uint64_t key) noexcept {
    if (!buf && len) return -FI_EINVAL;
    return rma(ep, true, buf_of(buf, len), dest, addr, key, nullptr, 0, true, data, true);
  }

  inline static fi_ops_rma rma_ops = {
      .size = sizeof(fi_ops_rma),
      .read = read,
      .readv = readv,
      .readmsg = readmsg,
      .write = write,
      .writev = writev,
      .writemsg = writemsg,
      .inject = inject,
      .writedata = writedata,
      .injectdata = injectdata,
  };

  // ---- atomics ----

  // Elements of fi_ioc arrays as bytes (count in elements of `size`); nullopt when invalid.
  static std::optional<Bufs> ioc_bufs(const fi_ioc* ioc, size_t count, size_t size) noexcept {
    if (count > proto::rdm::kMaxIov || (count && !ioc)) return std::nullopt;
    iovec v[proto::rdm::kMaxIov];
    for (size_t k = 0; k < count; ++k) {
      if (ioc[k].count > SIZE_MAX / (size ? size : 1)) return std::nullopt;
      v[k] = {ioc[k].addr, ioc[k].count * size};
    }
    return bufs_of(v, count);
  }

  static uint32_t max_bytes(Ep* e) noexcept {
    const auto& c = T::rdm(e).config().core;
    return c.atomic_max;
  }

  // One atomic: `kind`, `n` operand bytes in `ops` (may be empty for ATOMIC_READ, then `n` is
  // given by `count_bytes`), compare values in `cmp`, results into `res`.
  static ssize_t atomic(fid_ep* ep, proto::atomic::Kind kind, int op, int dt, const Bufs& ops,
                        const Bufs* cmp, const Bufs* res, fi_addr_t dest, uint64_t addr,
                        uint64_t key, void* context, uint64_t flags, bool inject) noexcept {
    Ep* e = T::of(ep);
    const uint64_t what = kind == proto::atomic::Kind::kWrite ? FI_WRITE : FI_READ;
    if (int r = allowed(e, FI_ATOMIC, what)) return r;
    if (!proto::atomic::valid(op, dt, kind)) return -FI_EOPNOTSUPP;
    proto::rdm::SendOp s;
    if constexpr (T::kAddressed) s.dest = dest;
    put_bufs(ops, s);
    s.kind = proto::rdm::OpKind::kAtomic;
    s.atomic_op = static_cast<uint8_t>(op);
    s.datatype = static_cast<uint8_t>(dt);
    s.fetch = kind == proto::atomic::Kind::kFetch;
    s.compare_op = kind == proto::atomic::Kind::kCompare;
    s.context = context;
    s.rkey = key;
    s.raddr = addr;
    s.fence = flags & FI_FENCE;
    s.completion = !inject && (!e->tx_selective || (flags & FI_COMPLETION));
    s.inject = inject;
    // Compare values travel after the operands: gathered here (at most atomic_max bytes).
    uint8_t compare[wire::kMaxPayload];
    if (cmp) {
      if (cmp->len != ops.len || ops.len > sizeof(compare)) return -FI_EINVAL;
      proto::rdm::Iov one{cmp->base, cmp->len};
      const proto::rdm::Iov* iv = cmp->count ? cmp->iov : &one;
      size_t at = 0;
      for (uint8_t k = 0; k < (cmp->count ? cmp->count : 1); ++k) {
        if (iv[k].len) std::memcpy(compare + at, iv[k].base, iv[k].len);
        at += iv[k].len;
      }
      s.compare = compare;
    }
    if (res) {
      if (res->len < ops.len) return -FI_EINVAL;
      if (res->count == 0) {
        s.result_count = 1;
        s.result[0] = {res->base, res->len};
      } else {
        s.result_count = res->count;
        std::copy(res->iov, res->iov + res->count, s.result);
      }
    }
    return rdm_data::post<T>(e, s, flags);
  }

  static int dtype(const fi_datatype& d) noexcept { return app_enum(d); }
  static int opcode(const fi_op& o) noexcept { return app_enum(o); }

  static ssize_t a_write(fid_ep* ep, const void* buf, size_t count, void*, fi_addr_t dest,
                         uint64_t addr, uint64_t key, fi_datatype datatype, fi_op op,
                         void* ctx) noexcept {
    const fi_ioc ioc{const_cast<void*>(buf), count};
    auto b = ioc_bufs(&ioc, 1, proto::atomic::datatype_size(dtype(datatype)));
    if (!b) return -FI_EINVAL;
    return atomic(ep, proto::atomic::Kind::kWrite, opcode(op), dtype(datatype), *b, nullptr,
                  nullptr, dest, addr, key, ctx, tx_flags(ep), false);
  }
  static ssize_t a_writev(fid_ep* ep, const fi_ioc* iov, void**, size_t count, fi_addr_t dest,
                          uint64_t addr, uint64_t key, fi_datatype datatype, fi_op op,
                          void* ctx) noexcept {
    auto b = ioc_bufs(iov, count, proto::atomic::datatype_size(dtype(datatype)));
    if (!b) return -FI_EINVAL;
    return atomic(ep, proto::atomic::Kind::kWrite, opcode(op), dtype(datatype), *b, nullptr,
                  nullptr, dest, addr, key, ctx, tx_flags(ep), false);
  }
  static ssize_t a_writemsg(fid_ep* ep, const fi_msg_atomic* msg, uint64_t flags) noexcept {
    if (!msg || (flags & ~kAtomicFlags) || msg->rma_iov_count != 1 || !msg->rma_iov)
      return -FI_EINVAL;
    const int dt = dtype(msg->datatype);
    auto b = ioc_bufs(msg->msg_iov, msg->iov_count, proto::atomic::datatype_size(dt));
    if (!b || msg->rma_iov[0].count * proto::atomic::datatype_size(dt) != b->len) return -FI_EINVAL;
    return atomic(ep, proto::atomic::Kind::kWrite, opcode(msg->op), dt, *b, nullptr, nullptr,
                  msg->addr, msg->rma_iov[0].addr, msg->rma_iov[0].key, msg->context, flags, false);
  }
  static ssize_t a_inject(fid_ep* ep, const void* buf, size_t count, fi_addr_t dest, uint64_t addr,
                          uint64_t key, fi_datatype datatype, fi_op op) noexcept {
    const fi_ioc ioc{const_cast<void*>(buf), count};
    auto b = ioc_bufs(&ioc, 1, proto::atomic::datatype_size(dtype(datatype)));
    if (!b) return -FI_EINVAL;
    return atomic(ep, proto::atomic::Kind::kWrite, opcode(op), dtype(datatype), *b, nullptr,
                  nullptr, dest, addr, key, nullptr, 0, true);
  }
  static ssize_t a_readwrite(fid_ep* ep, const void* buf, size_t count, void*, void* result, void*,
                             fi_addr_t dest, uint64_t addr, uint64_t key, fi_datatype datatype,
                             fi_op op, void* ctx) noexcept {
    const int dt = dtype(datatype);
    const size_t size = proto::atomic::datatype_size(dt);
    // ATOMIC_READ takes no operands: buf may be NULL, the count still counts.
    const bool reads = opcode(op) == FI_ATOMIC_READ;
    const fi_ioc ioc{const_cast<void*>(buf), count};
    auto b = reads ? std::optional<Bufs>(Bufs{}) : ioc_bufs(&ioc, 1, size);
    const fi_ioc rioc{result, count};
    auto r = ioc_bufs(&rioc, 1, size);
    if (!b || !r || !result) return -FI_EINVAL;
    if (reads) b->len = r->len;
    return atomic(ep, proto::atomic::Kind::kFetch, opcode(op), dt, *b, nullptr, &*r, dest, addr,
                  key, ctx, tx_flags(ep), false);
  }
  static ssize_t a_readwritev(fid_ep* ep, const fi_ioc* iov, void**, size_t count, fi_ioc* resultv,
                              void**, size_t result_count, fi_addr_t dest, uint64_t addr,
                              uint64_t key, fi_datatype datatype, fi_op op, void* ctx) noexcept {
    const int dt = dtype(datatype);
    const size_t size = proto::atomic::datatype_size(dt);
    auto r = ioc_bufs(resultv, result_count, size);
    const bool reads = opcode(op) == FI_ATOMIC_READ;
    auto b = reads ? std::optional<Bufs>(Bufs{}) : ioc_bufs(iov, count, size);
    if (!b || !r || result_count == 0) return -FI_EINVAL;
    if (reads) b->len = r->len;
    return atomic(ep, proto::atomic::Kind::kFetch, opcode(op), dt, *b, nullptr, &*r, dest, addr,
                  key, ctx, tx_flags(ep), false);
  }
  static ssize_t a_readwritemsg(fid_ep* ep, const fi_msg_atomic* msg, fi_ioc* resultv, void**,
                                size_t result_count, uint64_t flags) noexcept {
    if (!msg || (flags & ~kAtomicFlags) || msg->rma_iov_count != 1 || !msg->rma_iov)
      return -FI_EINVAL;
    const int dt = dtype(msg->datatype);
    const size_t size = proto::atomic::datatype_size(dt);
    auto r = ioc_bufs(resultv, result_count, size);
    const bool reads = opcode(msg->op) == FI_ATOMIC_READ;
    auto b = reads ? std::optional<Bufs>(Bufs{}) : ioc_bufs(msg->msg_iov, msg->iov_count, size);
    if (!b || !r || result_count == 0) return -FI_EINVAL;
    if (reads) b->len = r->len;
    if (msg->rma_iov[0].count * size != b->len) return -FI_EINVAL;
    return atomic(ep, proto::atomic::Kind::kFetch, opcode(msg->op), dt, *b, nullptr, &*r, msg->addr,
                  msg->rma_iov[0].addr, msg->rma_iov[0].key, msg->context, flags, false);
  }
  static ssize_t a_compwrite(fid_ep* ep, const void* buf, size_t count, void*, const void* compare,
                             void*, void* result, void*, fi_addr_t dest, uint64_t addr,
                             uint64_t key, fi_datatype datatype, fi_op op, void* ctx) noexcept {
    const int dt = dtype(datatype);
    const size_t size = proto::atomic::datatype_size(dt);
    const fi_ioc ioc{const_cast<void*>(buf), count};
    const fi_ioc cioc{const_cast<void*>(compare), count};
    const fi_ioc rioc{result, count};
    auto b = ioc_bufs(&ioc, 1, size);
    auto c = ioc_bufs(&cioc, 1, size);
    auto r = ioc_bufs(&rioc, 1, size);
    if (!b || !c || !r || !result || !compare) return -FI_EINVAL;
    return atomic(ep, proto::atomic::Kind::kCompare, opcode(op), dt, *b, &*c, &*r, dest, addr, key,
                  ctx, tx_flags(ep), false);
  }
  static ssize_t a_compwritev(fid_ep* ep, const fi_ioc* iov, void**, size_t count,
                              const fi_ioc* comparev, void**, size_t compare_count, fi_ioc* resultv,
                              void**, size_t result_count, fi_addr_t dest, uint64_t addr,
                              uint64_t key, fi_datatype datatype, fi_op op, void* ctx) noexcept {
    const int dt = dtype(datatype);
    const size_t size = proto::atomic::datatype_size(dt);
    auto b = ioc_bufs(iov, count, size);
    auto c = ioc_bufs(comparev, compare_count, size);
    auto r = ioc_bufs(resultv, result_count, size);
    if (!b || !c || !r || !compare_count || !result_count) return -FI_EINVAL;
    return atomic(ep, proto::atomic::Kind::kCompare, opcode(op), dt, *b, &*c, &*r, dest, addr, key,
                  ctx, tx_flags(ep), false);
  }
  static ssize_t a_compwritemsg(fid_ep* ep, const fi_msg_atomic* msg, const fi_ioc* comparev,
                                void**, size_t compare_count, fi_ioc* resultv, void**,
                                size_t result_count, uint64_t flags) noexcept {
    if (!msg || (flags & ~kAtomicFlags) || msg->rma_iov_count != 1 || !msg->rma_iov)
      return -FI_EINVAL;
    const int dt = dtype(msg->datatype);
    const size_t size = proto::atomic::datatype_size(dt);
    auto b = ioc_bufs(msg->msg_iov, msg->iov_count, size);
    auto c = ioc_bufs(comparev, compare_count, size);
    auto r = ioc_bufs(resultv, result_count, size);
    if (!b || !c || !r || !compare_count || !result_count || msg->rma_iov[0].count * size != b->len)
      return -FI_EINVAL;
    return atomic(ep, proto::atomic::Kind::kCompare, opcode(msg->op), dt, *b, &*c, &*r, msg->addr,
                  msg->rma_iov[0].addr, msg->rma_iov[0].key, msg->context, flags, false);
  }

  static int valid(fid_ep* ep, fi_datatype datatype, fi_op op, size_t* count,
                   proto::atomic::Kind kind) noexcept {
    Ep* e = T::of(ep);
    if (!(e->caps & FI_ATOMIC)) return -FI_EOPNOTSUPP;
    return atomic_count(opcode(op), dtype(datatype), kind, max_bytes(e), count);
  }
  static int writevalid(fid_ep* ep, fi_datatype datatype, fi_op op, size_t* count) noexcept {
    return valid(ep, datatype, op, count, proto::atomic::Kind::kWrite);
  }
  static int readwritevalid(fid_ep* ep, fi_datatype datatype, fi_op op, size_t* count) noexcept {
    return valid(ep, datatype, op, count, proto::atomic::Kind::kFetch);
  }
  static int compwritevalid(fid_ep* ep, fi_datatype datatype, fi_op op, size_t* count) noexcept {
    return valid(ep, datatype, op, count, proto::atomic::Kind::kCompare);
  }

  inline static fi_ops_atomic atomic_ops = {
      .size = sizeof(fi_ops_atomic),
      .write = a_write,
      .writev = a_writev,
      .writemsg = a_writemsg,
      .inject = a_inject,
      .readwrite = a_readwrite,
      .readwritev = a_readwritev,
      .readwritemsg = a_readwritemsg,
      .compwrite = a_compwrite,
      .compwritev = a_compwritev,
      .compwritemsg = a_compwritemsg,
      .writevalid = writevalid,
      .readwritevalid = readwritevalid,
      .compwritevalid = compwritevalid,
  };
};

}  // namespace dpfab::ofi::rma_data
