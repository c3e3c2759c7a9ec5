// SPDX-License-Identifier: BSD-3-Clause
//
// One-per-process EAL bootstrap. DPDK's EAL can be initialised once per process and never again
// (not even after rte_eal_cleanup), so dpfab starts it on first use, keeps it for the process
// lifetime, and attaches to it when the application initialised it first.
//
// Start EAL only when the application has chosen this provider (fi_fabric, or getinfo hints that
// name "dpdk"): libfabric calls every provider's getinfo, and starting DPDK threads and memory in
// processes that never use us would be rude.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/result.h"

namespace dpfab::eal {

enum class LcoreRole { kMain, kWorker, kUnavailable };

struct LcoreInfo {
  unsigned id = 0;
  unsigned cpu = 0;  ///< first CPU of the lcore's set
  std::string cpus;  ///< the lcore's CPU set as a list
  LcoreRole role = LcoreRole::kMain;
  std::string note;  ///< why a configured worker cannot be used, etc.
};

struct State {
  bool owned = false;             ///< we called rte_eal_init (false: the application did)
  std::vector<std::string> argv;  ///< arguments we passed (empty when attached)
  unsigned main_lcore = 0;
  std::vector<LcoreInfo> lcores;
};

/// Starts EAL with `cfg` if nobody has yet, or attaches to the application's EAL.
/// Thread-safe; later calls return the first call's result (a failure is final: EAL cannot be
/// initialised twice). The calling thread becomes the main lcore and keeps its CPU affinity.
/// @return -FI_EINVAL for arguments EAL rejects or that eal::plan refuses (message says which),
///         -FI_ENODEV when EAL fails to start for another reason.
Result<const State*> start(const config::Config& cfg);

/// The state after a successful start(), else nullptr.
const State* state() noexcept;

/// Routes DPDK's own log lines (rte_log) into the dpfab log bridge. Called by start() when we own
/// EAL; harmless to call twice.
void route_rte_log() noexcept;

}  // namespace dpfab::eal
