// SPDX-License-Identifier: BSD-3-Clause
//
// Internal header of the libfabric plugin (libdpdk-fi.so): the provider struct, the process-wide
// runtime (configuration, EAL, ports) and the fid objects. The plugin only maps libfabric's fid
// ops tables onto libdpfab; the engine lives in lib/.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include <atomic>
#include <new>
#include <string>

#include "common/config.h"
#include "common/log.h"
#include "common/result.h"
#include "port/port.h"

namespace dpfab::ofi {

extern fi_provider g_provider;

inline constexpr uint32_t kProviderVersion = FI_VERSION(0, 1);
inline constexpr uint32_t kApiVersion = FI_VERSION(1, 17);
inline constexpr const char* kFabricName = "dpdk";

/// One shared stub for every unimplemented op: a function of the op's exact type that returns
/// -FI_ENOSYS. Use as `.cq_open = enosys<decltype(fi_ops_domain::cq_open)>`.
template <typename Fn>
struct Stub;
template <typename R, typename... Args>
struct Stub<R (*)(Args...)> {
  static R fn(Args...) noexcept { return static_cast<R>(-FI_ENOSYS); }
};
template <typename Fn>
inline constexpr Fn enosys = &Stub<Fn>::fn;

/// Runs `f` and turns anything thrown into an error code: nothing crosses the C boundary.
template <typename F>
int guard(const char* what, F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    DPFAB_WARN(FI_LOG_CORE, "%s: out of memory", what);
    return -FI_ENOMEM;
  } catch (const std::exception& e) {
    DPFAB_WARN(FI_LOG_CORE, "%s: %s", what, e.what());
    return -FI_EOTHER;
  } catch (...) {
    DPFAB_WARN(FI_LOG_CORE, "%s: unknown exception", what);
    return -FI_EOTHER;
  }
}

// ---- runtime ---------------------------------------------------------------------------------

/// Loads the configuration (FI_DPDK_* through fi_param_get, then the file). A configuration error
/// is logged with FI_WARN and, when warnings are not being shown, once to stderr: a provider that
/// silently vanishes is worse than one line of output.
Result<config::Config> load_config();

/// Starts EAL and opens the configured ports, once per process. Returns the configuration they
/// were started with (later environment changes do not apply to a running EAL).
Result<const config::Config*> start_runtime();

/// The configuration the runtime started with, or nullptr before start_runtime succeeded.
const config::Config* runtime_config() noexcept;

// ---- getinfo -------------------------------------------------------------------------------

int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
            const fi_info* hints, fi_info** info) noexcept;

// ---- fid objects ---------------------------------------------------------------------------

struct Fabric {
  fid_fabric fid{};
  std::atomic<int> refs{0};  ///< open domains (and, later, EQs and wait sets)
  const config::Config* cfg = nullptr;
};

struct Domain {
  fid_domain fid{};
  Fabric* fabric = nullptr;
  port::Port* port = nullptr;
  fi_info* info = nullptr;   ///< a copy of the info it was opened with
  std::atomic<int> refs{0};  ///< open endpoints, CQs, counters, AVs
};

int fabric_open(fi_fabric_attr* attr, fid_fabric** fabric, void* context) noexcept;
int domain_open(fid_fabric* fabric, fi_info* info, fid_domain** domain, void* context) noexcept;
int endpoint_open(fid_domain* domain, fi_info* info, fid_ep** ep, void* context) noexcept;

template <typename T>
T* container_of_fid(fid* f) noexcept {
  return reinterpret_cast<T*>(reinterpret_cast<char*>(f) - offsetof(T, fid));
}

}  // namespace dpfab::ofi
