// SPDX-License-Identifier: BSD-3-Clause
//
// fid_fabric: one per fi_fabric call, all sharing the process-wide runtime (EAL and ports), which
// starts here if getinfo did not start it.
#include <cstring>

#include "dpdk.h"

namespace dpfab::ofi {
namespace {

int fabric_close(fid* f) noexcept {
  auto* fab = container_of_fid<Fabric>(f);
  if (fab->refs.load(std::memory_order_acquire) != 0) return -FI_EBUSY;
  delete fab;
  return FI_SUCCESS;
}

fi_ops g_fabric_fi_ops = {
    .size = sizeof(fi_ops),
    .close = fabric_close,
    .bind = enosys<decltype(fi_ops::bind)>,
    .control = enosys<decltype(fi_ops::control)>,
    .ops_open = enosys<decltype(fi_ops::ops_open)>,
    .tostr = nullptr,
    .ops_set = enosys<decltype(fi_ops::ops_set)>,
};

fi_ops_fabric g_fabric_ops = {
    .size = sizeof(fi_ops_fabric),
    .domain = domain_open,
    .passive_ep = passive_ep_open,
    .eq_open = eq_open,
    .wait_open = wait_open,
    .trywait = trywait,
    .domain2 = enosys<decltype(fi_ops_fabric::domain2)>,
};

}  // namespace

int fabric_open(fi_fabric_attr* attr, fid_fabric** fabric, void* context) noexcept {
  return guard("fi_fabric", [&]() -> int {
    if (!attr || !fabric) return -FI_EINVAL;
    if (attr->name && std::strcmp(attr->name, kFabricName) != 0) return -FI_ENODATA;
    auto cfg = start_runtime();
    if (!cfg) return cfg.code();
    auto* fab = new Fabric();
    fab->cfg = *cfg;
    // The core sets it too once we return (fi_fabric); set here, it also holds for a caller of
    // the provider's own entry points.
    fab->fid.api_version = attr->api_version;
    fab->fid.fid.fclass = FI_CLASS_FABRIC;
    fab->fid.fid.context = context;
    fab->fid.fid.ops = &g_fabric_fi_ops;
    fab->fid.ops = &g_fabric_ops;
    *fabric = &fab->fid;
    return FI_SUCCESS;
  });
}

}  // namespace dpfab::ofi
