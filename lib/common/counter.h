// SPDX-License-Identifier: BSD-3-Clause
//
// Statistics counters on the data path. Readers on any thread load them relaxed (a recent value).
#pragma once

#include <atomic>
#include <cstdint>

namespace dpfab {

/// Adds `n` to a counter that only one thread at a time writes (the RX owner of a port, or the
/// holder of a lock): a relaxed load and store, no locked instruction (a locked add costs about
/// 20 cycles on the data path, and there are several per datagram). Counters that several threads
/// write at once must use fetch_add.
inline void bump(std::atomic<uint64_t>& c, uint64_t n = 1) noexcept {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

}  // namespace dpfab
