// SPDX-License-Identifier: BSD-3-Clause
//
// Faulting in the shared memory of the process's memif links at link-up (Port::
// prefault_shared_memory), so that its pages do not fault on the first laps of the rings. No
// DPDK, no logging: dpfab-bench's raw-port floor (app/dpfab-bench/floor.cc) compiles it in to
// prepare its link exactly as the provider does.
#pragma once

#include <cstddef>

namespace dpfab::port {

/// Populates every shared, writable "/memfd:memif_region_<n>" mapping of the process (every memif
/// port's, the client's memfds and the server's mappings of them alike). The two ends of a link
/// walk in opposite directions (`backward` for the server) so that they contend for a page's
/// lock once rather than on every page. @return the pages covered.
size_t prefault_memif_regions(bool backward) noexcept;

}  // namespace dpfab::port
