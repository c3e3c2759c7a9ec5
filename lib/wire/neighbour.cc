// SPDX-License-Identifier: BSD-3-Clause
#include "wire/neighbour.h"

#include <rte_pause.h>

#include <algorithm>
#include <bit>
#include <cerrno>

namespace dpfab::wire {

namespace {

uint64_t pack(NeighState st, const rte_ether_addr& mac) noexcept {
  uint64_t v = static_cast<uint64_t>(st) << 56;
  for (int i = 0; i < RTE_ETHER_ADDR_LEN; ++i)
    v |= static_cast<uint64_t>(mac.addr_bytes[i]) << (8 * i);
  return v;
}

NeighState unpack(uint64_t v, rte_ether_addr* mac) noexcept {
  for (int i = 0; i < RTE_ETHER_ADDR_LEN; ++i)
    mac->addr_bytes[i] = static_cast<uint8_t>(v >> (8 * i));
  return static_cast<NeighState>(v >> 56);
}

constexpr rte_ether_addr kZeroMac{};

}  // namespace

const char* neigh_state_name(NeighState s) noexcept {
  switch (s) {
    case NeighState::kFree:
      return "free";
    case NeighState::kIncomplete:
      return "incomplete";
    case NeighState::kReachable:
      return "reachable";
    case NeighState::kFailed:
      return "failed";
  }
  return "?";
}

NeighbourTable::NeighbourTable(const NeighbourConfig& cfg) : cfg_(cfg) {
  cfg_.max_requests = std::max<uint32_t>(cfg_.max_requests, 1);
  uint32_t cap = std::clamp<uint32_t>(cfg_.capacity, 8, 1u << 20);
  cap = std::bit_ceil(cap);
  cfg_.capacity = cap;
  mask_ = cap - 1;
  shift_ = 32 - static_cast<unsigned>(std::countr_zero(cap));
  slots_ = std::make_unique<Slot[]>(cap);
}

size_t NeighbourTable::home(uint32_t ip_be) const noexcept {
  // Fibonacci hashing: the top bits of a multiplicative hash spread consecutive addresses.
  return static_cast<uint32_t>(ip_be * 0x9e3779b1u) >> shift_;
}

// Reader side of the sequence lock.
Neighbour NeighbourTable::read_slot(const Slot& s) noexcept {
  for (;;) {
    // Acquire: pairs with the writer's release store of the even sequence that ended the last
    // rewrite, so the fields read below are at least that version.
    const uint32_t q1 = s.seq.load(std::memory_order_acquire);
    if (q1 & 1) {
      rte_pause();
      continue;
    }
    Neighbour n;
    n.ip_be = s.ip_be.load(std::memory_order_relaxed);
    const uint64_t ms = s.mac_state.load(std::memory_order_relaxed);
    n.updated_ns = s.updated_ns.load(std::memory_order_relaxed);
    // Acquire fence: if any field load above read a value stored after the writer's release
    // fence (a rewrite in progress), this fence synchronizes with that fence and the sequence
    // load below sees the odd (or a later) value, so we retry.
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.seq.load(std::memory_order_relaxed) == q1) {
      n.state = unpack(ms, &n.mac);
      return n;
    }
  }
}

// Writer side of the sequence lock (single writer: the sequence is read relaxed).
void NeighbourTable::write_slot_st(Slot& s, uint32_t ip_be, NeighState st,
                                   const rte_ether_addr& mac, uint64_t updated_ns) noexcept {
  const uint32_t q = s.seq.load(std::memory_order_relaxed);
  s.seq.store(q + 1, std::memory_order_relaxed);
  // Release fence: orders the odd sequence before the field stores; pairs with the reader's
  // acquire fence (see read_slot).
  std::atomic_thread_fence(std::memory_order_release);
  s.ip_be.store(ip_be, std::memory_order_relaxed);
  s.mac_state.store(pack(st, mac), std::memory_order_relaxed);
  s.updated_ns.store(updated_ns, std::memory_order_relaxed);
  // Release: the field stores happen before the even sequence; pairs with the reader's acquire
  // load of the sequence.
  s.seq.store(q + 2, std::memory_order_release);
}

std::optional<Neighbour> NeighbourTable::lookup(uint32_t ip_be) const noexcept {
  if (ip_be == 0) return std::nullopt;
  size_t i = home(ip_be);
  for (size_t n = 0; n <= mask_; ++n, i = (i + 1) & mask_) {
    Neighbour e = read_slot(slots_[i]);
    if (e.ip_be == 0) return std::nullopt;  // never used: the end of this address's probe
    if (e.ip_be == ip_be && e.state != NeighState::kFree) return e;
  }
  return std::nullopt;
}

int NeighbourTable::request_resolve(uint32_t ip_be) noexcept {
  if (ip_be == 0) return -EINVAL;
  if (auto e = lookup(ip_be)) return e->state == NeighState::kFailed ? -EHOSTUNREACH : 0;
  // Relaxed throughout the slots: the address itself is the only data, and it travels in the
  // slot the writer exchanges (one atomic object: coherence suffices).
  for (auto& m : mailbox_)
    if (m.load(std::memory_order_relaxed) == ip_be) return 0;
  for (auto& m : mailbox_) {
    uint32_t expected = 0;
    if (m.compare_exchange_strong(expected, ip_be, std::memory_order_relaxed)) {
      // Release: the CAS above happens before the writer's acquire exchange that reads this
      // count, so its scan sees the address.
      mailbox_pending_.fetch_add(1, std::memory_order_release);
      return 0;
    }
  }
  return -EAGAIN;
}

void NeighbourTable::drain_mailbox_st(uint64_t now_ns) noexcept {
  if (mailbox_pending_.load(std::memory_order_relaxed) == 0) return;
  // Acquire: pairs with request_resolve's release fetch_add (see there). A request whose
  // fetch_add comes after this exchange leaves the count non-zero for the next tick.
  mailbox_pending_.exchange(0, std::memory_order_acquire);
  for (auto& m : mailbox_) {
    if (m.load(std::memory_order_relaxed) == 0) continue;
    const uint32_t ip = m.exchange(0, std::memory_order_relaxed);
    if (ip != 0) (void)resolve_st(ip, now_ns);  // -ENOSPC: the table is full; lookup says so
  }
}

NeighbourTable::Slot* NeighbourTable::find_live_st(uint32_t ip_be) noexcept {
  size_t i = home(ip_be);
  for (size_t n = 0; n <= mask_; ++n, i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    const uint32_t key = s.ip_be.load(std::memory_order_relaxed);  // our own store
    if (key == 0) return nullptr;
    if (key == ip_be && (s.mac_state.load(std::memory_order_relaxed) >> 56) !=
                            static_cast<uint64_t>(NeighState::kFree))
      return &s;
  }
  return nullptr;
}

NeighbourTable::Slot* NeighbourTable::insert_st(uint32_t ip_be, NeighState st,
                                                const rte_ether_addr& mac,
                                                uint64_t now_ns) noexcept {
  // The caller checked that no live entry for ip_be exists. Take the first free slot on the
  // probe path: a tombstone or the never-used slot that ends the path. Readers looking for other
  // addresses are unaffected (no slot becomes never-used, no entry moves).
  size_t i = home(ip_be);
  for (size_t n = 0; n <= mask_; ++n, i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if ((s.mac_state.load(std::memory_order_relaxed) >> 56) ==
        static_cast<uint64_t>(NeighState::kFree)) {
      write_slot_st(s, ip_be, st, mac, now_ns);
      s.sent = 0;
      live_.store(live_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return &s;
    }
  }
  return nullptr;
}

void NeighbourTable::set_due_st(Slot& s, uint64_t due_ns) noexcept {
  s.due_ns = due_ns;
  next_due_ = std::min(next_due_, due_ns);
}

NeighbourTable::Learnt NeighbourTable::learn_st(uint32_t ip_be, const rte_ether_addr& mac,
                                                uint64_t now_ns, bool create) noexcept {
  if (ip_be == 0) return Learnt::kIgnored;
  Learnt result = Learnt::kUpdated;
  Slot* s = find_live_st(ip_be);
  if (s != nullptr) {
    write_slot_st(*s, ip_be, NeighState::kReachable, mac, now_ns);
  } else {
    if (!create) return Learnt::kIgnored;
    s = insert_st(ip_be, NeighState::kReachable, mac, now_ns);
    if (s == nullptr) return Learnt::kFull;
    result = Learnt::kCreated;
  }
  s->sent = 0;
  set_due_st(*s, now_ns + cfg_.reachable_ns);
  return result;
}

int NeighbourTable::resolve_st(uint32_t ip_be, uint64_t now_ns) noexcept {
  if (ip_be == 0) return -EINVAL;
  if (find_live_st(ip_be) != nullptr) return 0;
  Slot* s = insert_st(ip_be, NeighState::kIncomplete, kZeroMac, now_ns);
  if (s == nullptr) return -ENOSPC;
  set_due_st(*s, now_ns);
  return 0;
}

size_t NeighbourTable::tick_st(uint64_t now_ns, std::span<uint32_t> requests) noexcept {
  drain_mailbox_st(now_ns);
  if (now_ns < next_due_) return 0;
  size_t n = 0;
  uint64_t next = UINT64_MAX;
  for (size_t i = 0; i <= mask_; ++i) {
    Slot& s = slots_[i];
    const uint32_t ip = s.ip_be.load(std::memory_order_relaxed);
    if (ip == 0) continue;
    const uint64_t ms = s.mac_state.load(std::memory_order_relaxed);
    const auto st = static_cast<NeighState>(ms >> 56);
    if (st == NeighState::kFree) continue;
    if (s.due_ns <= now_ns) {
      if (st == NeighState::kFailed) {
        write_slot_st(s, ip, NeighState::kFree, kZeroMac, now_ns);  // forget: a tombstone
        live_.store(live_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
        continue;
      }
      // kIncomplete, or kReachable whose confirmation is older than reachable_ns.
      if (s.sent < cfg_.max_requests) {
        if (n == requests.size()) {
          next = now_ns;  // still due: the next call returns it
          continue;
        }
        requests[n++] = ip;
        ++s.sent;
        s.due_ns = now_ns + cfg_.retry_ns;
      } else {
        write_slot_st(s, ip, NeighState::kFailed, kZeroMac, now_ns);
        s.due_ns = now_ns + cfg_.failed_hold_ns;
      }
    }
    next = std::min(next, s.due_ns);
  }
  next_due_ = next;
  return n;
}

}  // namespace dpfab::wire
