// SPDX-License-Identifier: BSD-3-Clause
//
// Automatic progress (FI_PROGRESS_AUTO): the worker lcores of FI_DPDK_LCORES each run the poll
// step of their share of the ports, round-robin, until stopped. An lcore never blocks, never
// allocates and never takes a lock an application thread holds (the engine's receive side is a
// try-lock; fi_cancel's brief hold of it only makes the lcore skip a round). An lcore idle for the
// spin budget (spin_us), with no consumer polling and nothing sent, parks: the wakeup thread
// watches its ports and unparks it (wakeup.h). Start the wakeup thread first; without it lcores
// never park.
#pragma once

#include <vector>

#include "common/result.h"
#include "progress/engine.h"

namespace dpfab::progress {

/// Launches the loop on every worker lcore (rte_eal_remote_launch), ports assigned round-robin.
/// Idempotent; thread-safe. @return -FI_EBUSY when a worker lcore is already running something.
Status start_lcores(const std::vector<unsigned>& lcores, const std::vector<PortEngine*>& engines);
/// Stops the loops and waits for the lcores (provider cleanup).
void stop_lcores() noexcept;
/// Whether lcores progress the ports (then inline progress in application calls is skipped).
bool lcores_running() noexcept;

}  // namespace dpfab::progress
