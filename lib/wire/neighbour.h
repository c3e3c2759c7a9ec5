// SPDX-License-Identifier: BSD-3-Clause
//
// The neighbour table of one port: IPv4 address -> MAC, learnt from ARP (arp.h).
//
// Entries and their states:
//   kIncomplete  resolution under way: ARP requests go out, up to max_requests of them
//                retry_ns apart; no MAC yet. No answer after the last one -> kFailed.
//   kReachable   MAC known, last confirmed at updated_ns. reachable_ns after that the entry is
//                refreshed: requests go out as for kIncomplete while the MAC stays usable; no
//                answer -> kFailed.
//   kFailed      resolution failed at updated_ns; lookups report it (the sender can fail fast)
//                for failed_hold_ns, then the entry is forgotten and a new request_resolve starts
//                over.
// Any ARP message from the address (learn_st) makes the entry kReachable again.
//
// Threading (who may call what):
//   - One writer, the progress thread that owns the port: every *_st function. It alone creates,
//     changes and forgets entries, so the table needs no lock.
//   - Any thread (application threads inserting into an address vector, diagnostics): lookup(),
//     request_resolve(), size(), capacity(), config(). They never block the writer and never
//     take a lock.
//
// How reads stay lock-free and consistent: the table is a fixed-capacity open-addressed hash
// table (linear probing) allocated once. Entries never move; a forgotten entry becomes a tombstone
// whose slot a later insertion may reuse, and a never-used slot ends a probe. Each slot has a
// sequence lock: the writer makes the sequence odd, writes the fields, makes it even again; a
// reader reads the sequence, the fields, the sequence again, and retries if it changed or was odd.
// A reader therefore never sees a torn MAC or a MAC paired with another address or state. A reader
// retries only while the writer is rewriting the very slot it reads (a few stores). The writer
// never waits for readers. Strictly, a sequence lock is not lock-free for readers: if the writer
// is preempted in the middle of those stores, readers of that one slot spin until it resumes (the
// writer is the progress lcore, normally pinned; readers of other slots are unaffected).
//
// An application thread cannot create entries itself: request_resolve() leaves the address in a
// small lock-free mailbox that the writer drains at its next tick_st(), which then creates the
// kIncomplete entry and returns the first request to send.
//
// Time is a caller-supplied monotonic nanosecond count (`now_ns`), so tests drive the state
// machine without waiting.
#pragma once

#include <rte_ether.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

namespace dpfab::wire {

enum class NeighState : uint8_t {
  kFree = 0,  ///< internal: never used or forgotten; never returned by lookup()
  kIncomplete = 1,
  kReachable = 2,
  kFailed = 3,
};
/// "free", "incomplete", "reachable", "failed".
const char* neigh_state_name(NeighState s) noexcept;

struct NeighbourConfig {
  uint32_t capacity = 256;                  ///< entries; rounded up to a power of two, at least 8
  uint32_t max_requests = 3;                ///< ARP requests per resolution (>= 1) before kFailed
  uint64_t retry_ns = 200'000'000;          ///< between two requests of one resolution
  uint64_t reachable_ns = 30'000'000'000;   ///< a kReachable entry is refreshed this long after
                                            ///< its last confirmation
  uint64_t failed_hold_ns = 5'000'000'000;  ///< a kFailed entry is kept this long
};

/// A consistent view of one entry, as lookup() returns it.
struct Neighbour {
  uint32_t ip_be = 0;
  NeighState state = NeighState::kFree;
  rte_ether_addr mac{};     ///< valid in kReachable; zero otherwise
  uint64_t updated_ns = 0;  ///< creation, last confirmation, or the moment it failed
};

class NeighbourTable {
 public:
  /// Allocates the table (control path). Clamps max_requests to >= 1 and the capacity to
  /// [8, 1 << 20]. Throws std::bad_alloc only.
  explicit NeighbourTable(const NeighbourConfig& cfg = {});
  NeighbourTable(const NeighbourTable&) = delete;
  NeighbourTable& operator=(const NeighbourTable&) = delete;

  // ---- Any thread ----

  /// The entry for `ip_be` (network byte order), or nullopt when there is none (never asked for,
  /// or forgotten). Lock-free; the returned fields are one consistent version of the entry.
  std::optional<Neighbour> lookup(uint32_t ip_be) const noexcept;

  /// Asks the writer to resolve `ip_be` at its next tick_st(). Does nothing when an entry exists.
  /// Lock-free, never blocks.
  /// @return 0 when queued, already queued, or the entry is kReachable or kIncomplete;
  ///         -EHOSTUNREACH when the entry is kFailed (held; retry after failed_hold_ns);
  ///         -EINVAL for the address 0; -EAGAIN when the mailbox (kMailboxSize addresses) is
  ///         full: call again after the writer's next tick.
  int request_resolve(uint32_t ip_be) noexcept;

  /// Entries that are not free (kIncomplete, kReachable or kFailed).
  size_t size() const noexcept { return live_.load(std::memory_order_relaxed); }
  size_t capacity() const noexcept { return mask_ + 1; }
  const NeighbourConfig& config() const noexcept { return cfg_; }

  static constexpr size_t kMailboxSize = 64;

  // ---- The writer (progress thread) only ----

  enum class Learnt : uint8_t {
    kUpdated,  ///< the existing entry now holds `mac` and is kReachable
    kCreated,  ///< a new kReachable entry
    kIgnored,  ///< no entry and `create` was false (or the address is 0)
    kFull,     ///< no entry, `create` was true, and the table is full of live entries
  };
  /// Records that `ip_be` is at `mac` as of `now_ns` (an ARP message from it). Updates an
  /// existing entry in any state; creates one only when `create` (RFC 826: when we are the
  /// target of the message).
  Learnt learn_st(uint32_t ip_be, const rte_ether_addr& mac, uint64_t now_ns, bool create) noexcept;

  /// Starts resolving `ip_be` unless an entry exists: creates a kIncomplete entry whose first
  /// request is due now (returned by the next tick_st).
  /// @return 0 (also when an entry exists); -EINVAL for the address 0; -ENOSPC when the table is
  ///         full of live entries.
  int resolve_st(uint32_t ip_be, uint64_t now_ns) noexcept;

  /// Advances the state machine to `now_ns`: drains the request_resolve() mailbox, writes into
  /// `requests` the addresses to send an ARP request for now (at most requests.size(); those that
  /// do not fit stay due and come out of the next call), fails entries whose requests went
  /// unanswered, and forgets failed entries after failed_hold_ns. Cheap when nothing is due.
  /// @return the number of addresses written to `requests`.
  size_t tick_st(uint64_t now_ns, std::span<uint32_t> requests) noexcept;

  /// The earliest time tick_st has work (UINT64_MAX when none), not counting the mailbox.
  uint64_t next_due_st() const noexcept { return next_due_; }

 private:
  // One entry. The atomics are read by any thread under the sequence lock; due_ns and sent are
  // the writer's own bookkeeping, never read by readers.
  struct alignas(64) Slot {
    std::atomic<uint32_t> seq{0};        // odd while the writer rewrites the slot
    std::atomic<uint32_t> ip_be{0};      // 0: never used (ends a probe)
    std::atomic<uint64_t> mac_state{0};  // MAC bytes 0-5 in bits 0-47, NeighState in bits 56-63
    std::atomic<uint64_t> updated_ns{0};
    uint64_t due_ns = 0;  // writer: when the entry next needs attention
    uint32_t sent = 0;    // writer: requests sent in the current resolution or refresh
  };

  size_t home(uint32_t ip_be) const noexcept;
  static Neighbour read_slot(const Slot& s) noexcept;
  void write_slot_st(Slot& s, uint32_t ip_be, NeighState st, const rte_ether_addr& mac,
                     uint64_t updated_ns) noexcept;
  Slot* find_live_st(uint32_t ip_be) noexcept;
  Slot* insert_st(uint32_t ip_be, NeighState st, const rte_ether_addr& mac,
                  uint64_t now_ns) noexcept;
  void drain_mailbox_st(uint64_t now_ns) noexcept;
  void set_due_st(Slot& s, uint64_t due_ns) noexcept;

  NeighbourConfig cfg_;
  size_t mask_ = 0;
  unsigned shift_ = 0;
  std::unique_ptr<Slot[]> slots_;
  std::atomic<uint32_t> live_{0};   // written by the writer only (relaxed: a statistic)
  uint64_t next_due_ = UINT64_MAX;  // writer only

  // request_resolve() mailbox: 0 = empty slot. Application threads CAS an address into an empty
  // slot, then bump mailbox_pending_ (release); the writer exchanges mailbox_pending_ to 0
  // (acquire, pairs with that release) and then empties every slot.
  alignas(64) std::array<std::atomic<uint32_t>, kMailboxSize> mailbox_{};
  std::atomic<uint32_t> mailbox_pending_{0};
};

}  // namespace dpfab::wire
