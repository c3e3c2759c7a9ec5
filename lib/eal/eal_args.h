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
};

/// Plans the EAL arguments: the configured extra arguments, then `--lcores` mapping the main
/// lcore to the caller's current CPU set (so EAL does not re-pin the application thread) and each
/// worker lcore to the CPU of the same number, `--main-lcore`, and `-a <addr>` for PCI ports.
/// @return -FI_EINVAL when the extra arguments already choose lcores (-l, -c, --lcores,
///         --main-lcore: use FI_DPDK_LCORES), when a PCI port is listed together with --no-pci,
///         or when `main_cpus` is empty.
Result<Plan> plan(const config::Config& cfg, const std::vector<unsigned>& main_cpus);

/// True when `port` looks like a PCI address (DDDD:BB:DD.F or BB:DD.F), not a vdev spec.
bool is_pci_address(const std::string& port);

/// The calling thread's CPU affinity as a sorted list.
std::vector<unsigned> current_cpus();

}  // namespace dpfab::eal
