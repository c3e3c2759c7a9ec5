// SPDX-License-Identifier: BSD-3-Clause
//
// Memory registration. Frames are built by copying into mbufs, so nothing needs registering
// (domain mr_mode 0). Applications may still register (fabtests and MPI do): fi_mr_reg returns a
// region with key 0 and a null descriptor, which every data call accepts.
#include "dpdk.h"

namespace dpfab::ofi {
namespace {

struct Mr {
  fid_mr fid{};
  Domain* domain = nullptr;
};

int mr_close(fid* f) noexcept {
  Mr* mr = container_of_fid<Mr>(f);
  mr->domain->refs.fetch_sub(1, std::memory_order_release);
  delete mr;
  return FI_SUCCESS;
}

fi_ops g_mr_fi_ops = {
    .size = sizeof(fi_ops),
    .close = mr_close,
    .bind = enosys<decltype(fi_ops::bind)>,
    .control = enosys<decltype(fi_ops::control)>,
    .ops_open = enosys<decltype(fi_ops::ops_open)>,
    .tostr = nullptr,
    .ops_set = enosys<decltype(fi_ops::ops_set)>,
};

constexpr uint64_t kAccess = FI_SEND | FI_RECV;

}  // namespace

int mr_regattr(fid* fid, const fi_mr_attr* attr, uint64_t flags, fid_mr** mr_out) noexcept {
  return guard("fi_mr_regattr", [&]() -> int {
    if (!fid || fid->fclass != FI_CLASS_DOMAIN || !attr || !mr_out) return -FI_EINVAL;
    if (flags) return -FI_EBADFLAGS;
    // RMA and atomic access would need remote keys: not offered by this provider.
    if (attr->access & ~kAccess) return -FI_EINVAL;
    if (attr->iface != FI_HMEM_SYSTEM) return -FI_ENOSYS;
    auto* mr = new Mr();
    mr->domain = container_of_fid<Domain>(fid);
    mr->fid.fid.fclass = FI_CLASS_MR;
    mr->fid.fid.context = attr->context;
    mr->fid.fid.ops = &g_mr_fi_ops;
    mr->fid.mem_desc = nullptr;
    mr->fid.key = 0;
    mr->domain->refs.fetch_add(1, std::memory_order_relaxed);
    *mr_out = &mr->fid;
    return FI_SUCCESS;
  });
}

int mr_regv(fid* fid, const iovec* iov, size_t count, uint64_t access, uint64_t offset,
            uint64_t requested_key, uint64_t flags, fid_mr** mr, void* context) noexcept {
  fi_mr_attr attr{};
  attr.mr_iov = iov;
  attr.iov_count = count;
  attr.access = access;
  attr.offset = offset;
  attr.requested_key = requested_key;
  attr.context = context;
  attr.iface = FI_HMEM_SYSTEM;
  return mr_regattr(fid, &attr, flags, mr);
}

int mr_reg(fid* fid, const void* buf, size_t len, uint64_t access, uint64_t offset,
           uint64_t requested_key, uint64_t flags, fid_mr** mr, void* context) noexcept {
  iovec iov{const_cast<void*>(buf), len};
  return mr_regv(fid, &iov, 1, access, offset, requested_key, flags, mr, context);
}

}  // namespace dpfab::ofi
