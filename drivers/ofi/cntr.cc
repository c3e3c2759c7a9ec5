// SPDX-License-Identifier: BSD-3-Clause
// STUB: being written (issue 3).
#include "dpdk.h"

namespace dpfab::ofi {
int cntr_open(fid_domain*, fi_cntr_attr*, fid_cntr**, void*) noexcept { return -FI_ENOSYS; }
int cntr_wait_info(fid*, WaitInfo*) noexcept { return -FI_EINVAL; }
}  // namespace dpfab::ofi
