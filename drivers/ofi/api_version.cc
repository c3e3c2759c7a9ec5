// SPDX-License-Identifier: BSD-3-Clause
//
// The version-dependent answers of api_version.h.
#include "api_version.h"

namespace dpfab::ofi::api {

uint64_t asked_caps(fi_ep_type type, uint32_t version) noexcept {
  uint64_t caps = type == FI_EP_MSG ? 0 : FI_AV_USER_ID;
#if DPFAB_FI_HEADERS_AT_LEAST(2, 0)
  if (type == FI_EP_RDM && fi_api::at_least(version, fi_api::kV2))
    caps |= FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV;
#else
  (void)version;
#endif
  return caps;
}

bool directed_recv(uint64_t caps, uint32_t version, bool tagged) noexcept {
  if (caps & FI_DIRECTED_RECV) return true;
#if DPFAB_FI_HEADERS_AT_LEAST(2, 0)
  if (fi_api::at_least(version, fi_api::kV2)) {
    if (caps & FI_EXACT_DIRECTED_RECV) return true;
    if (tagged && (caps & FI_TAGGED_DIRECTED_RECV)) return true;
  }
#else
  (void)version, (void)tagged;
#endif
  return false;
}

fi_threading threading(int asked, uint32_t version) noexcept {
  if ((asked == FI_THREAD_FID || asked == FI_THREAD_ENDPOINT) &&
      fi_api::at_least(version, fi_api::kV2))
    return FI_THREAD_SAFE;
  return static_cast<fi_threading>(asked);
}

bool manual_progress(int progress, uint32_t version) noexcept {
  if (progress == FI_PROGRESS_MANUAL) return true;
#if DPFAB_FI_HEADERS_AT_LEAST(1, 21)
  if (progress == FI_PROGRESS_CONTROL_UNIFIED)
    return fi_api::at_least(version, fi_api::kProgressControlUnified);
#else
  (void)version;
#endif
  return false;
}

void fill_domain(fi_domain_attr* d) noexcept {
#if DPFAB_FI_HEADERS_AT_LEAST(1, 20)
  d->max_ep_auth_key = 0;  // no authorization keys
#endif
#if DPFAB_FI_HEADERS_AT_LEAST(2, 0)
  d->max_group_id = 0;  // no peer groups
#endif
#if DPFAB_FI_HEADERS_AT_LEAST(2, 5)
  d->max_cntr_value = UINT64_MAX;  // counters are 64-bit
  d->max_err_cntr_value = UINT64_MAX;
#endif
  (void)d;
}

bool domain_hints_ok(const fi_domain_attr& hints, uint32_t version) noexcept {
#if DPFAB_FI_HEADERS_AT_LEAST(1, 20)
  if (fi_api::at_least(version, fi_api::kMaxEpAuthKey) && hints.max_ep_auth_key) return false;
#endif
#if DPFAB_FI_HEADERS_AT_LEAST(2, 0)
  if (fi_api::at_least(version, fi_api::kV2) && hints.max_group_id) return false;
#endif
  // max_cntr_value / max_err_cntr_value (2.5): ours are the largest there are.
  (void)hints, (void)version;
  return true;
}

fi_av_type default_av_type(uint32_t version) noexcept {
  return fi_api::at_least(version, fi_api::kV2) ? FI_AV_TABLE : FI_AV_MAP;
}

}  // namespace dpfab::ofi::api
