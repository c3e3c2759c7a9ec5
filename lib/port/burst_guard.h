// SPDX-License-Identifier: BSD-3-Clause
//
// A memif burst that the peer's exit unmaps under it.
//
// DPDK 22.11's net_memif tears a connection down on EAL's interrupt thread: when the peer's
// control socket closes (the peer process exited or was killed), memif_disconnect() clears the
// link and then munmap()s the shared regions, with nothing that waits for a burst the polling
// thread is running on the same queue. A burst that passed its "connected" check just before
// reads the ring (or copies a buffer) in memory that is gone: SIGSEGV in eth_memif_rx/tx, and the
// process dies because its peer exited (seen: a soak client polling while its server exited
// after the last message, 3 of 60 runs).
//
// The guard turns that one fault into "the burst found nothing": the bursts of a memif port run
// under sigsetjmp, and the process's SIGSEGV/SIGBUS handler (installed once, before the first
// memif port starts; the handler found then is chained) jumps back out of a guarded burst when
// the port's link is down, which memif_disconnect sets before it unmaps. Any other fault, in a
// burst on a link that is up or outside a burst, goes to the previous handler or, when there was
// none, to the default action (a core dump at the faulting instruction), as without the guard.
// A burst cut short may leave the mbufs memif had taken for it (at most a burst's worth): they
// are counted (PortEngine telemetry burst_faults), not freed, since memif may have freed some.
#pragma once

#include <setjmp.h>

#include <cstdint>

struct rte_mbuf;

namespace dpfab::port {

/// Installs the handler (once per process; thread-safe). false when sigaction failed, and always
/// in ThreadSanitizer builds (its signal handling cannot jump out): bursts then run unguarded.
bool install_burst_guard() noexcept;

/// rte_eth_rx_burst / rte_eth_tx_burst on queue 0 of `port_id` under the guard. `*faulted` is set
/// when the burst was cut short by the peer's disconnect (the result is then 0). Without the
/// handler installed they are the plain bursts.
uint16_t guarded_rx_burst(uint16_t port_id, rte_mbuf** pkts, uint16_t n, bool* faulted) noexcept;
uint16_t guarded_tx_burst(uint16_t port_id, rte_mbuf** pkts, uint16_t n, bool* faulted) noexcept;

namespace detail {
/// For tests: runs fn(arg) as a guarded burst of `port_id` would run. Returns true when it faulted
/// and the guard jumped out.
bool run_guarded(uint16_t port_id, void (*fn)(void*), void* arg) noexcept;
}  // namespace detail

}  // namespace dpfab::port
