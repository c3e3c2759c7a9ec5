// SPDX-License-Identifier: BSD-3-Clause
// STUB: being written (issue 3).
#include "dpdk.h"

namespace dpfab::ofi {
int cq_open(fid_domain*, fi_cq_attr*, fid_cq**, void*) noexcept { return -FI_ENOSYS; }
int cq_wait_info(fid*, WaitInfo*) noexcept { return -FI_EINVAL; }
}  // namespace dpfab::ofi
