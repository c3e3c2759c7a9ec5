// SPDX-License-Identifier: BSD-3-Clause
// STUB: being written (issue 3).
#include "dpdk.h"

namespace dpfab::ofi {
int eq_open(fid_fabric*, fi_eq_attr*, fid_eq**, void*) noexcept { return -FI_ENOSYS; }
int eq_wait_info(fid*, WaitInfo*) noexcept { return -FI_EINVAL; }
}  // namespace dpfab::ofi
