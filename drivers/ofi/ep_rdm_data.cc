// SPDX-License-Identifier: BSD-3-Clause
//
// What FI_EP_RDM and FI_EP_MSG endpoints share besides their data-path tables (ep_rdm_data.h).
#include "ep_rdm_data.h"

#include "ep_rma.h"

namespace dpfab::ofi::rdm_data {

int get_min_multi_recv(proto::RdmEndpoint& rdm, void* val, size_t* len) noexcept {
  if (!val || !len) return -FI_EINVAL;
  if (*len < sizeof(size_t)) {
    *len = sizeof(size_t);
    return -FI_ETOOSMALL;
  }
  *static_cast<size_t*>(val) = rdm.min_multi_recv();
  *len = sizeof(size_t);
  return FI_SUCCESS;
}

int set_min_multi_recv(proto::RdmEndpoint& rdm, const void* val, size_t len) noexcept {
  if (!val || len != sizeof(size_t)) return -FI_EINVAL;
  rdm.set_min_multi_recv(*static_cast<const size_t*>(val));
  return FI_SUCCESS;
}

void core_config(const Domain* dom, const fi_info* info, const EpBase* e,
                 proto::rdm::CoreConfig& c) noexcept {
  const config::Config* cfg = dom->fabric->cfg;
  const uint16_t mtu = dom->engine->mtu() ? dom->engine->mtu() : 1500;
  c.seg_size = static_cast<uint32_t>(wire::max_payload(mtu) - wire::kRdmHeaderLen);
  c.tx_ops = info->tx_attr && info->tx_attr->size ? static_cast<uint32_t>(info->tx_attr->size)
                                                  : (cfg ? cfg->tx_depth : 512);
  c.rx_ops = info->rx_attr && info->rx_attr->size ? static_cast<uint32_t>(info->rx_attr->size)
                                                  : (cfg ? cfg->rx_depth : 512);
  if (info->tx_attr && info->tx_attr->inject_size)
    c.inject_size = static_cast<uint32_t>(info->tx_attr->inject_size);
  // Sends up to FI_DPDK_RDM_COPY_MAX complete once copied: a sender blocked on its CQ is then
  // woken by the reply alone, not first by the ack of its send (doc/performance.md).
  c.copy_max = std::max(c.inject_size, cfg ? cfg->rdm_copy_max : c.inject_size);
  if (info->ep_attr && info->ep_attr->max_msg_size)
    c.max_msg_size = std::min<uint64_t>(info->ep_attr->max_msg_size, c.max_msg_size);
  // Eager up to 64 KiB over a port: a rendezvous costs a round trip before the data and, on
  // memif, more CPU per message than the eager segments it saves (doc/performance.md, "64 KiB
  // messages"). Over the same-host path a rendezvous is one copy (by reference) where an eager
  // message is two: 16 KiB there.
  c.eager_max = std::min<uint64_t>(kEagerMax, c.max_msg_size);
  c.eager_max_same_host = std::min<uint64_t>(kEagerMaxSameHost, c.eager_max);
  if (cfg) {  // liveness: FI_DPDK_RDM_PEER_TIMEOUT_MS, FI_DPDK_RDM_MAX_RETRIES; ack delay
    c.rel.peer_timeout_ns = cfg->rdm_peer_timeout_ms * 1'000'000;
    c.rel.max_retries = cfg->rdm_max_retries;
    c.rel.ack_delay_ns = cfg->rdm_ack_delay_us * 1'000;
  }
  // One atomic is one packet, its operands copied like an inject.
  c.atomic_max = rma_data::atomic_max_bytes(c.seg_size, c.inject_size);
  if (e->caps & (FI_RMA | FI_ATOMIC)) {  // a target of RMA and atomics
    c.mrs = dom->mrs.get();
    c.ep_token = e->token;
  }
}

void bind_completions(EpBase* e, proto::RdmEndpoint& rdm) noexcept {
  using proto::CntrKind;
  rdm.bind_cq(e->tx_cq, true, false, e->tx_selective);
  rdm.bind_cq(e->rx_cq, false, true, e->rx_selective);
  rdm.bind_cntr(e->tx_cntr, CntrKind::kSend);
  rdm.bind_cntr(e->rx_cntr, CntrKind::kRecv);
  rdm.bind_cntr(e->write_cntr, CntrKind::kWrite);
  rdm.bind_cntr(e->read_cntr, CntrKind::kRead);
  rdm.bind_cntr(e->rwrite_cntr, CntrKind::kRemoteWrite);
  rdm.bind_cntr(e->rread_cntr, CntrKind::kRemoteRead);
}

}  // namespace dpfab::ofi::rdm_data
