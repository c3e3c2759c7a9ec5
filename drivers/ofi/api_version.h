// SPDX-License-Identifier: BSD-3-Clause
//
// What the plugin does differently for applications of different libfabric API versions, in one
// place (common/fi_api.h lists the changes and says which version each follows): the capability
// bits 2.0 reused, the deprecated threading models and AV type, the domain attributes newer
// headers added. attr.cc (fi_getinfo), av.cc and the endpoints call these.
#pragma once

#include <rdma/fabric.h>

#include <cstdint>

#include "common/fi_api.h"

namespace dpfab::ofi::api {

/// Capabilities an entry of `type` grants an application of API `version` only when it asks for
/// them: FI_AV_USER_ID where there is an AV (FI_EP_RDM, FI_EP_DGRAM; a domain capability, see
/// kDomainAskedCaps), and for 2.x applications 2.0's FI_TAGGED_DIRECTED_RECV and
/// FI_EXACT_DIRECTED_RECV on FI_EP_RDM (directed receives: FI_DIRECTED_RECV's, restricted). For
/// 1.x applications those two bits are an MR flag and FI_VARIABLE_MSG, which dpdk does not offer.
/// FI_TAGGED_MULTI_RECV is never offered (FI_MULTI_RECV is for untagged receives only).
uint64_t asked_caps(fi_ep_type type, uint32_t version) noexcept;
/// Which of asked_caps() are domain capabilities (domain_attr->caps), not receive ones.
inline constexpr uint64_t kDomainAskedCaps = FI_AV_USER_ID;

/// Whether a receive's source address counts (fi_msg(3), fi_tagged(3)) on an endpoint with `caps`
/// of an application of API `version`: FI_DIRECTED_RECV for both kinds of receive; from 2.0 also
/// FI_TAGGED_DIRECTED_RECV (tagged receives only) and FI_EXACT_DIRECTED_RECV (both; FI_ADDR_UNSPEC
/// stays accepted).
bool directed_recv(uint64_t caps, uint32_t version, bool tagged) noexcept;

/// The threading model granted for hints asking `asked` (not FI_THREAD_UNSPEC): the one asked
/// for, except that a 2.x application asking for the deprecated FI_THREAD_FID or
/// FI_THREAD_ENDPOINT gets FI_THREAD_SAFE, which gives it all they promise (dpdk is thread safe).
fi_threading threading(int asked, uint32_t version) noexcept;

/// Whether `progress` (a progress hint other than FI_PROGRESS_UNSPEC and FI_PROGRESS_AUTO, read as
/// an integer) is one an application of API `version` may ask for and dpdk, whose progress is
/// manual unless worker lcores are configured, can give: FI_PROGRESS_MANUAL, and from 1.21
/// FI_PROGRESS_CONTROL_UNIFIED (manual, the application serialising control and data calls).
bool manual_progress(int progress, uint32_t version) noexcept;

/// The domain attributes of headers newer than 1.17, filled into every entry (domain caps: no
/// authorization keys, no peer groups, 64-bit counters).
void fill_domain(fi_domain_attr* d) noexcept;

/// Checks the hints' domain attributes that exist only from some API version on: read only when
/// the application's version has them (older structures end before them). False when dpdk cannot
/// meet them.
bool domain_hints_ok(const fi_domain_attr& hints, uint32_t version) noexcept;

/// The type an AV opened with FI_AV_UNSPEC (and no av_type in the domain's info) gets: FI_AV_MAP
/// for 1.x applications (as before), FI_AV_TABLE from 2.0, which deprecates FI_AV_MAP.
fi_av_type default_av_type(uint32_t version) noexcept;

}  // namespace dpfab::ofi::api
