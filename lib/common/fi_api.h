// SPDX-License-Identifier: BSD-3-Clause
//
// The libfabric API versions dpfab serves. One source tree builds against Debian 12's libfabric
// 1.17 and against libfabric 2.x: the plugin reports the API version of the headers it is built
// against (kHeaders) and implements what that version promises. Where behaviour changed between
// 1.17 and that version, it follows the version the application asked for (fi_getinfo's version
// argument, which the core hands on to fi_fabric through fabric_attr->api_version and then keeps
// in fid_fabric.api_version), capped at kHeaders: follow(), at_least().
//
// The changes followed (fi_dpdk(7), "LIBFABRIC VERSIONS", lists them for users):
//   1.20  fi_cq_err_entry.src_addr: written (FI_ADDR_NOTAVAIL) only for 1.20 applications; the
//         entry of an older one ends before it. fi_av_set_user_id, AVs opened with
//         FI_AV_USER_ID. fi_domain_attr.max_ep_auth_key is read from 1.20 hints only.
//   1.21  FI_PROGRESS_CONTROL_UNIFIED.
//   1.22  the endpoint options FI_OPT_MAX_{MSG,TAGGED,RMA,ATOMIC}_SIZE, FI_OPT_INJECT_*_SIZE.
//   2.0   capability bits reused: 1 << 45, 46 and 48 are FI_TAGGED_DIRECTED_RECV,
//         FI_TAGGED_MULTI_RECV and FI_EXACT_DIRECTED_RECV for a 2.x application, and an MR flag,
//         an MR flag and FI_VARIABLE_MSG for a 1.x one. Deprecated: FI_AV_MAP (an FI_AV_UNSPEC
//         AV becomes FI_AV_TABLE), FI_THREAD_FID / FI_THREAD_ENDPOINT (answered FI_THREAD_SAFE),
//         rx_attr->total_buffered_recv (ignored), the old MR modes, wait sets, poll sets and
//         FI_WAIT_MUTEX_COND (all still served: applications built against 1.x use them).
//         fi_domain_attr.max_group_id is read from 2.0 hints only.
//   2.5   fi_domain_attr.max_cntr_value / max_err_cntr_value, read from 2.5 hints only.
//
// Compile-time checks: the DPFAB_FI_HEADERS_AT_LEAST() sections compile only against headers that
// declare what they use. Nothing of libfabric is copied here; the few constants below stand for
// macros that 2.x headers deprecate with a warning at every use (`#pragma GCC warning`).
#pragma once

#include <rdma/fabric.h>

#include <cstdint>

/// Whether the libfabric headers this file is compiled against are of API `maj`.`min` or later.
#define DPFAB_FI_HEADERS_AT_LEAST(maj, min) \
  (FI_MAJOR_VERSION > (maj) || (FI_MAJOR_VERSION == (maj) && FI_MINOR_VERSION >= (min)))

namespace dpfab::fi_api {

/// The API version of the headers this tree is built against: what the plugin reports
/// (fi_provider.fi_version) and the most it follows.
inline constexpr uint32_t kHeaders = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);

/// The versions whose behaviour differs from 1.17 (see the file comment).
inline constexpr uint32_t kCqErrSrcAddr = FI_VERSION(1, 20);
inline constexpr uint32_t kAvUserIdAttr = FI_VERSION(1, 20);
inline constexpr uint32_t kMaxEpAuthKey = FI_VERSION(1, 20);
inline constexpr uint32_t kProgressControlUnified = FI_VERSION(1, 21);
inline constexpr uint32_t kSizeOptions = FI_VERSION(1, 22);
inline constexpr uint32_t kV2 = FI_VERSION(2, 0);
inline constexpr uint32_t kMaxCntrValue = FI_VERSION(2, 5);

/// The version whose behaviour an application that asked for `asked` gets: `asked`, capped at
/// kHeaders (the core refuses fi_getinfo above its own version, but takes any api_version in
/// fi_fabric's attributes: this build cannot do more than its headers describe).
constexpr uint32_t follow(uint32_t asked) noexcept { return asked > kHeaders ? kHeaders : asked; }

/// Whether an application that asked for `asked` gets the behaviour of API `since`.
constexpr bool at_least(uint32_t asked, uint32_t since) noexcept { return follow(asked) >= since; }

// Values the 2.x headers still define but deprecate with a warning at each use.
inline constexpr int kMrBasic = 1 << 0;               ///< FI_MR_BASIC (1.0 MR mode)
inline constexpr int kMrScalable = 1 << 1;            ///< FI_MR_SCALABLE (1.0 MR mode)
inline constexpr uint64_t kModeLocalMr = 1ull << 55;  ///< FI_LOCAL_MR (mode bit)
inline constexpr uint64_t kOrderNone = 0;             ///< FI_ORDER_NONE

}  // namespace dpfab::fi_api
