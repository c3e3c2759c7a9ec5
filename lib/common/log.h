// SPDX-License-Identifier: BSD-3-Clause
//
// The logging bridge. libdpfab logs through a sink that the libfabric plugin points at
// libfabric's fi_log() with our provider struct (so FI_LOG_LEVEL / FI_LOG_PROV / FI_LOG_SUBSYS
// apply), and that tools without libfabric (dpfab-info, unit tests) point at stderr.
//
// On the data path log only with DPFAB_WARN_ONCE (a log call formats a string; once per call
// site, it costs one relaxed exchange after the first) or count instead: statistics, not lines.
#pragma once

#include <rdma/fabric.h>
#include <rdma/providers/fi_log.h>

#include <atomic>

namespace dpfab::log {

/// Receives one formatted message. Must be callable from any thread.
using Sink = void (*)(fi_log_level level, fi_log_subsys subsys, const char* func, int line,
                      const char* msg);
/// Says whether a message at this level/subsystem would be kept (so callers skip formatting).
using Filter = bool (*)(fi_log_level level, fi_log_subsys subsys);

/// Installs the sink and filter; nullptr restores the default (warnings to stderr).
void set_sink(Sink sink, Filter filter) noexcept;

bool enabled(fi_log_level level, fi_log_subsys subsys) noexcept;

void write(fi_log_level level, fi_log_subsys subsys, const char* func, int line, const char* fmt,
           ...) noexcept __attribute__((format(printf, 5, 6)));

/// A sink that writes "dpfab:<level>:<subsys>:<func>():<line> msg" to stderr at every level up to
/// `max_level`; used by dpfab-info and the tests.
void use_stderr(fi_log_level max_level) noexcept;

}  // namespace dpfab::log

#define DPFAB_LOG_(level, subsys, ...)                                     \
  do {                                                                     \
    if (::dpfab::log::enabled(level, subsys))                              \
      ::dpfab::log::write(level, subsys, __func__, __LINE__, __VA_ARGS__); \
  } while (0)

#define DPFAB_WARN(subsys, ...) DPFAB_LOG_(FI_LOG_WARN, subsys, __VA_ARGS__)
#define DPFAB_INFO(subsys, ...) DPFAB_LOG_(FI_LOG_INFO, subsys, __VA_ARGS__)
#define DPFAB_DBG(subsys, ...) DPFAB_LOG_(FI_LOG_DEBUG, subsys, __VA_ARGS__)

/// Logs at most once per call site for the life of the process (data-path safe after the first).
#define DPFAB_WARN_ONCE(subsys, ...)                                   \
  do {                                                                 \
    static std::atomic<bool> dpfab_warned_once_{false};                \
    if (!dpfab_warned_once_.exchange(true, std::memory_order_relaxed)) \
      DPFAB_WARN(subsys, __VA_ARGS__);                                 \
  } while (0)
