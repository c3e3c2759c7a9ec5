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
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <type_traits>

#include "common/config.h"
#include "common/fi_api.h"
#include "common/log.h"
#include "common/result.h"
#include "event/eq.h"
#include "port/port.h"
#include "progress/consumer.h"
#include "progress/engine.h"
#include "progress/lcores.h"
#include "progress/wakeup.h"
#include "proto/av.h"
#include "proto/endpoint.h"
#include "proto/mr_table.h"
#include "wait/waitable.h"
#include "wire/address.h"

namespace dpfab::ofi {

extern fi_provider g_provider;

inline constexpr uint32_t kProviderVersion = FI_VERSION(0, 1);
/// The API version of the libfabric headers the plugin is built against (common/fi_api.h): the
/// core skips a provider whose version is below the one an application asks for.
inline constexpr uint32_t kApiVersion = fi_api::kHeaders;
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

/// The open port behind the domain name `want` (nullptr: the first). An info taken before the
/// runtime started names the configured ports; a configured port this process could not open (a
/// memif link two others hold) stands for its placeholder "shm" when there is one, so the same
/// info works in every process of a job. nullptr when none fits.
port::Port* find_domain_port(const char* want) noexcept;

// ---- getinfo -------------------------------------------------------------------------------

int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
            const fi_info* hints, fi_info** info) noexcept;

// ---- fid objects ---------------------------------------------------------------------------

struct Fabric {
  fid_fabric fid{};
  std::atomic<int> refs{0};  ///< open domains, EQs, wait sets and passive endpoints
  const config::Config* cfg = nullptr;
};

struct Domain {
  fid_domain fid{};
  Fabric* fabric = nullptr;
  port::Port* port = nullptr;
  fi_info* info = nullptr;   ///< a copy of the info it was opened with
  std::atomic<int> refs{0};  ///< open endpoints, CQs, counters, AVs, poll sets
  /// The domain's progress source: poll steps, sleeping on the port, the spin budget
  /// (lib/progress/consumer.h).
  progress::PortConsumer progress;
  progress::PortEngine* engine = nullptr;  ///< null: no data path (application-owned port)
  /// How the domain's AVs learn peers' MACs (make_default_resolver until the port layer's ARP).
  std::unique_ptr<proto::Resolver> resolver;
  /// The domain's memory regions (mr.cc): what RMA and atomics at this domain's endpoints check.
  std::unique_ptr<proto::MrTable> mrs;
};

/// The API version the application opened the fabric with (fid_fabric.api_version, set by the
/// libfabric core); error-data rules differ below 1.5, and common/fi_api.h lists what differs
/// after 1.17.
inline uint32_t api_version(const Fabric* f) noexcept { return f->fid.api_version; }
/// Whether the application that opened `f` gets the behaviour of API `since` (fi_api::at_least).
inline bool api_at_least(const Fabric* f, uint32_t since) noexcept {
  return fi_api::at_least(api_version(f), since);
}

/// The form addresses take for an info's addr_format (attr.cc grants FI_FORMAT_UNSPEC,
/// FI_SOCKADDR_IN and FI_SOCKADDR; see wire/address.h).
inline wire::AddrFormat addr_format_of(uint32_t fi_format) noexcept {
  return fi_format == FI_SOCKADDR_IN || fi_format == FI_SOCKADDR ? wire::AddrFormat::kSockaddrIn
                                                                 : wire::AddrFormat::kNative;
}

int fabric_open(fi_fabric_attr* attr, fid_fabric** fabric, void* context) noexcept;
int domain_open(fid_fabric* fabric, fi_info* info, fid_domain** domain, void* context) noexcept;
int endpoint_open(fid_domain* domain, fi_info* info, fid_ep** ep, void* context) noexcept;

// ---- memory registration (mr.cc): regions peers reach with RMA and atomics -----------------
/// The MrTable configuration of a domain opened with `mr_mode` (FI_MR_BASIC / FI_MR_SCALABLE
/// included).
proto::MrTable::Config mr_table_config(uint64_t mr_mode) noexcept;
/// fi_control on a domain: FI_MAP_RAW_MR (a raw key is the 8-byte key), FI_UNMAP_KEY.
int domain_control(fid* f, int command, void* arg) noexcept;
int mr_reg(fid* fid, const void* buf, size_t len, uint64_t access, uint64_t offset,
           uint64_t requested_key, uint64_t flags, fid_mr** mr, void* context) noexcept;
int mr_regv(fid* fid, const iovec* iov, size_t count, uint64_t access, uint64_t offset,
            uint64_t requested_key, uint64_t flags, fid_mr** mr, void* context) noexcept;
int mr_regattr(fid* fid, const fi_mr_attr* attr, uint64_t flags, fid_mr** mr) noexcept;
/// fi_open_ops on a domain (worker.cc): FI_DPDK_WORKER_OPS ("dpdk_worker_v1") gives the
/// struct fi_dpdk_worker_ops of <rdma/fi_ext_dpdk.h>; -FI_ENOSYS for any other name.
int domain_ops_open(fid* f, const char* name, uint64_t flags, void** ops, void* context) noexcept;

// ---- address vectors (av.cc) ----------------------------------------------------------------

int av_open(fid_domain* domain, fi_av_attr* attr, fid_av** av, void* context) noexcept;
/// Counts endpoints bound to an AV (+1 on fi_ep_bind, -1 when the endpoint closes); fi_close on
/// the AV returns -FI_EBUSY while the count is not 0. Returns the new count, or -FI_EINVAL when
/// `av` is not one of our AVs or the count would go negative.
int av_bind_ref(fid_av* av, int delta) noexcept;
/// The address vector behind one of our AVs (lookup / reverse on the data path, progress_pending
/// from the progress step), or nullptr. Valid while the caller holds a bind reference.
proto::AddressVector* av_of(fid_av* av) noexcept;
/// The Resolver domain_open gives a domain: a proto::StaticResolver that knows only `port`'s own
/// address and fails any other IPv4 after 1 s. The port layer's ARP resolver replaces it.
std::unique_ptr<proto::Resolver> make_default_resolver(const port::Port& port);

// ---- waitable objects: CQ (cq.cc), EQ (eq.cc), counter (cntr.cc) ---------------------------

int cq_open(fid_domain* domain, fi_cq_attr* attr, fid_cq** cq, void* context) noexcept;
int cntr_open(fid_domain* domain, fi_cntr_attr* attr, fid_cntr** cntr, void* context) noexcept;
int eq_open(fid_fabric* fabric, fi_eq_attr* attr, fid_eq** eq, void* context) noexcept;
/// fi_passive_ep (pep.cc): an FI_EP_MSG passive endpoint on the port info names.
int passive_ep_open(fid_fabric* fabric, fi_info* info, fid_pep** pep, void* context) noexcept;
/// Connection events come in as frames on a port: an EQ's reads and waits progress one (and sleep
/// on its wake fds, as a CQ's do). eq_open gives an EQ the process's first port; the first passive
/// or MSG endpoint bound to it gives it its own port (once: FI_GETWAIT's fds follow the port).
void eq_progress_port(fid_eq* eq, progress::PortEngine* engine) noexcept;
/// An EQ's reads and waits also run `extra` (the pending insertions of its asynchronous AVs:
/// av.cc). One at a time: false when the EQ runs another already.
bool eq_attach_progress(fid_eq* eq, wait::ProgressSource* extra) noexcept;
/// Stops running `extra` (if it is the one attached).
void eq_detach_progress(fid_eq* eq, wait::ProgressSource* extra) noexcept;
/// The queue behind one of our EQs (for objects that write events: AVs, connections), or nullptr.
event::Eq* eq_of(fid_eq* eq) noexcept;
/// Counts objects bound to an EQ (endpoints, AVs, passive endpoints: +1 on bind, -1 when they
/// close); fi_close on the EQ returns -FI_EBUSY while the count is not 0. Returns the new count,
/// or -FI_EINVAL when `eq` is not one of our EQs or the count would go negative.
int eq_bind_ref(fid_eq* eq, int delta) noexcept;

/// RM disabled: an overrun of CQ `cq` is reported as an FI_EOVERRUN error event on `eq` (an
/// endpoint bound to both sets this at enable).
void cq_report_overrun_to(fid* cq, fid_eq* eq) noexcept;

/// What wait sets, poll sets, fi_trywait and the worker need to know of a waitable fid.
struct WaitInfo {
  wait::Waitable* waitable = nullptr;
  fi_wait_obj wait_obj = FI_WAIT_NONE;  ///< as opened (FI_WAIT_UNSPEC resolved to what we use)
  fid_wait* wait_set = nullptr;         ///< with FI_WAIT_SET: the set it belongs to
};
/// Each returns -FI_EINVAL when `f` is not of its class. Defined next to each object.
int cq_wait_info(fid* f, WaitInfo* out) noexcept;
int eq_wait_info(fid* f, WaitInfo* out) noexcept;
int cntr_wait_info(fid* f, WaitInfo* out) noexcept;
/// Dispatches on f->fclass (FI_CLASS_CQ/EQ/CNTR). -FI_EINVAL for anything else.
int wait_info(fid* f, WaitInfo* out) noexcept;

// ---- wait sets and poll sets (wait.cc, poll.cc) -------------------------------------------

int wait_open(fid_fabric* fabric, fi_wait_attr* attr, fid_wait** waitset) noexcept;
int poll_open(fid_domain* domain, fi_poll_attr* attr, fid_poll** pollset) noexcept;
int trywait(fid_fabric* fabric, fid** fids, int count) noexcept;

/// An object opened with wait_obj FI_WAIT_SET joins the set here (with its fid's context) and
/// leaves it with waitset_leave before it is destroyed. waitset_join fails with -FI_EINVAL when
/// `ws` is null or not a wait set.
int waitset_join(fid_wait* ws, wait::Waitable* member, void* context) noexcept;
int waitset_leave(fid_wait* ws, wait::Waitable* member) noexcept;
/// Whether members of this wait set need an eventfd of their own (FI_WAIT_POLLFD sets).
bool waitset_members_need_fd(fid_wait* ws) noexcept;

/// An enumeration field an application filled in, read as its integer: a value outside the
/// enumeration must not be loaded as the enum type (undefined behaviour; UBSan reports it).
template <typename E>
inline int app_enum(const E& e) noexcept {
  static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof(v));
  return v;
}

/// An application's wait_obj, read as an integer: a value outside the enumeration must not be
/// loaded as fi_wait_obj (undefined behaviour). nullopt for a value libfabric does not define.
inline std::optional<fi_wait_obj> app_wait_obj(const fi_wait_obj& w) noexcept {
  static_assert(sizeof(fi_wait_obj) == sizeof(int));
  int v;
  std::memcpy(&v, &w, sizeof(v));
  switch (v) {
    case FI_WAIT_NONE:
    case FI_WAIT_UNSPEC:
    case FI_WAIT_SET:
    case FI_WAIT_FD:
    case FI_WAIT_MUTEX_COND:
    case FI_WAIT_YIELD:
    case FI_WAIT_POLLFD:
      return static_cast<fi_wait_obj>(v);
    default:
      return std::nullopt;
  }
}

/// Creates the Signal for a CQ/EQ/counter opened with `wait_obj` (nullptr for FI_WAIT_NONE, and
/// for FI_WAIT_SET unless the set needs members' own fds). -FI_EINVAL for an unknown wait_obj or
/// FI_WAIT_SET without a wait set. `resolved` receives what FI_WAIT_UNSPEC became (FI_WAIT_FD).
Result<std::unique_ptr<wait::Signal>> make_signal(fi_wait_obj wait_obj, fid_wait* wait_set,
                                                  fi_wait_obj* resolved);
/// FI_GETWAIT / FI_GETWAITOBJ for a waitable fid opened with `wait_obj` (fi_control).
int control_wait(wait::Waitable& w, fi_wait_obj wait_obj, int command, void* arg) noexcept;

/// The object that embeds fid `f` as its member named `fid`. Our fid objects hold C++ members
/// (atomics, unique_ptrs, a polymorphic progress source), which makes them non-standard-layout;
/// offsetof on them is "conditionally supported" and GCC and Clang support it.
template <typename T>
T* container_of_fid(fid* f) noexcept {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
  return reinterpret_cast<T*>(reinterpret_cast<char*>(f) - offsetof(T, fid));
#pragma GCC diagnostic pop
}

}  // namespace dpfab::ofi
