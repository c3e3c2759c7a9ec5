// SPDX-License-Identifier: BSD-3-Clause
#include "proto/groups.h"

#include <rdma/fi_errno.h>

namespace dpfab::proto {

int GroupTable::add(uint32_t group_be, uint16_t udp_port_be, Receiver* r) noexcept {
  if (!r) return -FI_EINVAL;
  const uint64_t k = key(group_be, udp_port_be);
  std::lock_guard lock(mutex_);
  const size_t used = used_.load(std::memory_order_relaxed);
  size_t free_slot = kMaxMembers;
  for (size_t i = 0; i < used; ++i) {
    const uint64_t have = slots_[i].key.load(std::memory_order_relaxed);
    if (have == k && slots_[i].receiver.load(std::memory_order_relaxed) == r) return -FI_EALREADY;
    if (have == 0 && free_slot == kMaxMembers) free_slot = i;
  }
  if (free_slot == kMaxMembers) {
    if (used == kMaxMembers) return -FI_ENOSPC;
    free_slot = used;
  }
  Slot& s = slots_[free_slot];
  // Release: pairs with the acquire load of the receiver in for_each_member: a reader that sees
  // it sees the free slot's key (0) or a later one, never the key of the membership before.
  s.receiver.store(r, std::memory_order_release);
  // Release: pairs with the acquire load of the key in for_each_member: a reader that sees the
  // key sees this receiver.
  s.key.store(k, std::memory_order_release);
  // Release: pairs with the acquire load of used_ in for_each_member.
  if (free_slot == used) used_.store(used + 1, std::memory_order_release);
  count_.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

int GroupTable::remove(uint32_t group_be, uint16_t udp_port_be, Receiver* r) noexcept {
  const uint64_t k = key(group_be, udp_port_be);
  std::lock_guard lock(mutex_);
  const size_t used = used_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < used; ++i) {
    Slot& s = slots_[i];
    if (s.key.load(std::memory_order_relaxed) != k ||
        s.receiver.load(std::memory_order_relaxed) != r)
      continue;
    // Seq_cst: ordered before the caller's load of the port's receive-busy flag (the engine waits
    // for a receive step that may have read the key before this store), as unbind does.
    s.key.store(0, std::memory_order_seq_cst);
    s.receiver.store(nullptr, std::memory_order_relaxed);
    count_.fetch_sub(1, std::memory_order_relaxed);
    return 0;
  }
  return -FI_ENOENT;
}

size_t GroupTable::members_of(uint32_t group_be) const noexcept {
  std::lock_guard lock(mutex_);
  size_t n = 0;
  const size_t used = used_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < used; ++i) {
    const uint64_t k = slots_[i].key.load(std::memory_order_relaxed);
    if (k != 0 && static_cast<uint32_t>(k >> 16) == group_be) ++n;
  }
  return n;
}

}  // namespace dpfab::proto
