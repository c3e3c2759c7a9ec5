// SPDX-License-Identifier: BSD-3-Clause
//
// Reading an rte_ring's fill level from a thread that neither enqueues nor dequeues (the arm
// protocol's re-check, readiness of a CQ for fi_poll). DPDK's rte_ring_count/rte_ring_empty read
// the tails with plain loads: fine on x86, but a data race in the C++ memory model (and for
// ThreadSanitizer). These load both tails with __atomic acquire loads instead.
#pragma once

#include <rte_ring.h>

namespace dpfab {

/// Entries visible to consumers. Acquire on the producer tail pairs with the release store of
/// the tail in the enqueue (rte_ring_c11_pvt.h R0), so entries counted here are readable.
inline uint32_t ring_count_acquire(const rte_ring* r) noexcept {
  uint32_t prod = __atomic_load_n(&r->prod.tail, __ATOMIC_ACQUIRE);
  uint32_t cons = __atomic_load_n(&r->cons.tail, __ATOMIC_ACQUIRE);
  uint32_t count = (prod - cons) & r->mask;
  return count > r->capacity ? r->capacity : count;
}

inline bool ring_empty_acquire(const rte_ring* r) noexcept { return ring_count_acquire(r) == 0; }

}  // namespace dpfab
