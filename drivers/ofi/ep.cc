// SPDX-License-Identifier: BSD-3-Clause
//
// Endpoints. The DGRAM data path is not there yet: fi_endpoint says so with -FI_ENOSYS, so that
// fabric, domain, EQ, CQ and counter work can be exercised through the core meanwhile.
#include "dpdk.h"

namespace dpfab::ofi {

int endpoint_open(fid_domain* domain, fi_info* info, fid_ep** ep, void*) noexcept {
  if (!domain || !info || !ep) return -FI_EINVAL;
  DPFAB_INFO(FI_LOG_EP_CTRL, "FI_EP_DGRAM endpoints are not implemented yet");
  return -FI_ENOSYS;
}

}  // namespace dpfab::ofi
