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
// the receive's source address count; without it the source is ignored (fi_msg(3)). Options:
// FI_OPT_MIN_MULTI_RECV, and the size options of API 1.22 (ep_base_getopt_size).
#include <algorithm>
#include <memory>

#include "ep.h"
#include "ep_rdm_data.h"
#include "ep_rma.h"
#include "proto/rdm_endpoint.h"
#include "wire/format.h"
#include "wire/rdm.h"

namespace dpfab::ofi {
namespace {

struct RdmEp final : EpBase {
  std::unique_ptr<proto::RdmEndpoint> rdm;
  wire::Address address() const noexcept override { return rdm->address(); }
};

RdmEp* rdm_of(fid* f) noexcept { return static_cast<RdmEp*>(ep_target_of(f)); }
RdmEp* rdm_of(fid_ep* e) noexcept { return rdm_of(&e->fid); }

// ---- fi_ops ------------------------------------------------------------------------------

int rdm_close(fid* f) noexcept {
  RdmEp* e = rdm_of(f);
  if (e->aliases.load(std::memory_order_acquire) != 0) return -FI_EBUSY;
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
    const proto::RdmEndpointStats& st = e->rdm->stats();
    auto load = [](const std::atomic<uint64_t>& v) {
      return static_cast<unsigned long>(v.load(std::memory_order_relaxed));
    };
    DPFAB_INFO(
        FI_LOG_EP_CTRL,
        "rdm endpoint closed: sent %lu eager %lu rendezvous (%lu on the fast path), "
        "received %lu (%lu on the fast path); writes %lu reads %lu atomics %lu, as "
        "target %lu/%lu/%lu (refused %lu, held for reads %lu); packets tx %lu "
        "(retransmits %lu, fast %lu, acks %lu, refused %lu) rx %lu (dup %lu, ooo %lu, "
        "refused %lu, stale epoch %lu); rto expiries %lu, probes %lu, unreachable %lu; timer "
        "passes %lu (visits of every active peer %lu, peers run %lu); rtt "
        "samples %lu, largest %lu us, largest rto estimate %lu us; frames tx %lu (from "
        "the application's memory %lu, of them copied after all %lu; deferred %lu) rx %lu; "
        "same-host packets tx %lu rx %lu, rendezvous by reference: messages sent %lu "
        "read %lu, cross-memory copies tx %lu rx %lu failed %lu",
        c.sent_eager, c.sent_rendezvous, c.fast_sends, c.received, c.fast_receives, c.writes,
        c.reads, c.atomics, c.target_writes, c.target_reads, c.target_atomics, c.target_refused,
        c.target_gated, r.tx_packets, r.tx_retransmits, r.tx_fast_retransmits, r.tx_acks,
        r.tx_refused, r.rx_packets, r.rx_duplicates, r.rx_out_of_order, r.rx_refused,
        r.rx_stale_epoch, r.rto_expiries, r.probes, r.unreachable, c.timer_passes, c.timer_visits,
        c.timer_peers, r.rtt_samples, r.rtt_sample_max_ns / 1000, r.rto_estimate_max_ns / 1000,
        load(st.tx_frames), load(st.tx_by_reference), load(st.tx_by_reference_copied),
        load(st.tx_deferred), load(st.rx_frames), load(st.local_tx), load(st.local_rx), c.ref_sent,
        c.ref_received, load(st.local_indirect_tx), load(st.local_indirect_rx),
        load(st.local_indirect_failed));
  }
  ep_base_release(e);
  delete e;
  return FI_SUCCESS;
}

int rdm_enable(RdmEp* e) noexcept {
  if (e->enabled) return FI_SUCCESS;
  if (int r = ep_base_enable_check(e); r != FI_SUCCESS) return r;
  rdm_data::bind_completions(e, *e->rdm);
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
  if (level != FI_OPT_ENDPOINT) return -FI_ENOPROTOOPT;
  if (name != FI_OPT_MIN_MULTI_RECV) return ep_base_getopt_size(rdm_of(f), name, val, len);
  return rdm_data::get_min_multi_recv(*rdm_of(f)->rdm, val, len);
}

int rdm_setopt(fid* f, int level, int name, const void* val, size_t len) noexcept {
  if (level != FI_OPT_ENDPOINT) return -FI_ENOPROTOOPT;
  if (name != FI_OPT_MIN_MULTI_RECV) return ep_base_setopt_size(rdm_of(f), name, val, len);
  return rdm_data::set_min_multi_recv(*rdm_of(f)->rdm, val, len);
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

// ---- data path (ep_rdm_data.h) -----------------------------------------------------------

struct RdmTraits {
  using Ep = RdmEp;
  static constexpr bool kAddressed = true;
  static RdmEp* of(fid_ep* e) noexcept { return rdm_of(e); }
  static proto::RdmEndpoint& rdm(RdmEp* e) noexcept { return *e->rdm; }
  static ssize_t send(RdmEp* e, const proto::rdm::SendOp& s) noexcept { return e->rdm->send(s); }
  static ssize_t recv(RdmEp* e, const proto::rdm::RecvOp& r) noexcept { return e->rdm->recv(r); }
  static ssize_t trigger(RdmEp* e, const proto::rdm::SendOp& s, event::Cntr* c,
                         uint64_t threshold) noexcept {
    return e->rdm->trigger(s, c, threshold);
  }
};
using RdmOps = rdm_data::Ops<RdmTraits>;
using RdmRmaOps = rma_data::RmaOps<RdmTraits>;

}  // namespace

int rdm_endpoint_open(Domain* dom, fi_info* info, fid_ep** ep, void* context) noexcept {
  auto e = std::make_unique<RdmEp>();
  e->type = FI_EP_RDM;
  ep_base_init(e.get(), dom, info, context);
  proto::RdmEndpoint::Config c;
  rdm_data::core_config(dom, info, e.get(), c.core);
  // Out-of-order copies: the same bytes whatever the MTU (1024 slots of a 1500-MTU segment), at
  // least four peers' full windows.
  const auto standard_seg = static_cast<uint32_t>(wire::max_payload(1500) - wire::kRdmHeaderLen);
  c.core.reorder_slots = std::max<uint32_t>(256, 1024 * standard_seg / c.core.seg_size);
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
  e->fid.msg = &RdmOps::msg_ops;
  e->fid.rma = &RdmRmaOps::rma_ops;
  e->fid.tagged = &RdmOps::tagged_ops;
  e->fid.atomic = &RdmRmaOps::atomic_ops;
  dom->refs.fetch_add(1, std::memory_order_relaxed);
  *ep = &e.release()->fid;
  return FI_SUCCESS;
}

}  // namespace dpfab::ofi
