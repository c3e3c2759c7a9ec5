// SPDX-License-Identifier: BSD-3-Clause
//
// Builds the EAL command line from the configuration. Kept apart from eal.cc (and free of EAL
// calls) so that it is unit-tested without starting DPDK.
#pragma once

#include <string>
#include <vector>

#include "common/config.h"
#include "common/result.h"

namespace dpfab::eal {

struct Plan {
  std::vector<std::string> argv;    ///< argv[0] is the program name
  unsigned main_lcore = 0;          ///< lcore id of the calling (application) thread
  std::vector<unsigned> main_cpus;  ///< the application thread's CPU set, kept as it was
  std::vector<unsigned> workers;    ///< worker lcore ids; lcore id == CPU id
  /// The --file-prefix plan() added (dpfab-<pid>), empty when the arguments chose one or use
  /// hugepage files. Its runtime directory is ours to remove at exit.
  std::string own_prefix;
};

/// Plans the EAL arguments: the configured extra arguments, then `--lcores` mapping the main
/// lcore to the caller's current CPU set (so EAL does not re-pin the application thread) and each
/// worker lcore to the CPU of the same number, `--main-lcore`, and `-a <addr>` for PCI ports.
/// @return -FI_EINVAL when the extra arguments already choose lcores (-l, -c, --lcores,
///         --main-lcore: use FI_DPDK_LCORES), when a PCI port is listed together with --no-pci,
///         or when `main_cpus` is empty.
///
/// Without a `--file-prefix` in the arguments and without hugepage files (`--no-huge` or
/// `--in-memory`), it adds `--file-prefix=dpfab-<pid>`: DPDK 22.11 gives the telemetry socket
/// (`<runtime dir>/<prefix>/dpdk_telemetry.v2`) to the first process of a prefix only, so a
/// process of its own prefix is what lets `dpfab-info --stats` read every process. With hugepage
/// files the prefix also names them, and a per-process prefix would leave a crashed process's
/// pages to nobody: the arguments are then left as they are.
Result<Plan> plan(const config::Config& cfg, const std::vector<unsigned>& main_cpus, int pid = 0);

/// EAL's runtime base directory as DPDK 22.11 picks it: /var/run/dpdk for root, else
/// $XDG_RUNTIME_DIR/dpdk or /tmp/dpdk. Each file prefix is a directory in it.
std::string runtime_base();

/// Removes the runtime directories `dpfab-<pid>` under `base` whose process is gone (what a
/// killed process left), with the sockets in them. Returns how many it removed.
int sweep_stale_runtime_dirs(const std::string& base);

/// True when `port` looks like a PCI address (DDDD:BB:DD.F or BB:DD.F), not a vdev spec.
bool is_pci_address(const std::string& port);

/// The calling thread's CPU affinity as a sorted list.
std::vector<unsigned> current_cpus();

}  // namespace dpfab::eal
