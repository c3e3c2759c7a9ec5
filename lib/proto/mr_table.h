// SPDX-License-Identifier: BSD-3-Clause
//
// MrTable: the memory regions of one domain (fi_mr(3)) and the checks a remote access passes
// before it touches one. The RDM core (rdm_core.h) looks regions up at the target of an RMA or
// atomic operation, in the poll step; drivers/ofi's fi_mr_reg* / fi_mr_bind / fi_mr_enable /
// fi_close map onto add / bind_endpoint / bind_counter / enable / remove. No DPDK, no libfabric
// object: the fuzz targets compile it on its own.
//
// Keys. With provider keys (FI_MR_PROV_KEY) a key is
//
//   bits 63..32  32 random bits drawn for this registration
//   bits 31..20  the slot's generation, 1..4095, advanced by every registration of the slot
//   bits 19..0   the slot index
//
// so a key cannot be guessed (2^-32 per try for a known slot and generation), and the key of a
// closed region never names a later one: a slot is registered again only with the next
// generation, and a slot whose generation would wrap is retired for good (after 4095
// registrations; the table then takes fresh slots, 2^20 - 1 of them). Freed slots are reused
// oldest first, and only once kReuseAfter of them wait, so that a slot's next registration
// comes as late as possible. Without FI_MR_PROV_KEY the application's requested key is the key;
// it must be unique among the open regions of the domain (-FI_ENOKEY), and an application that
// registers a closed region's key again gives it to the new region (its choice).
//
// Addresses. With FI_MR_VIRT_ADDR a peer names a byte by its virtual address (the region spans
// [iov[0].base, iov[0].base + total length)); without it, by its offset from the region's start.
// A region of several iovs (fi_mr_regv, up to kMaxIov) is their concatenation in that address
// space.
//
// Access. A remote access names a key, an address, a length and the rights it needs
// (FI_REMOTE_READ, FI_REMOTE_WRITE). acquire() fails with -FI_EKEYREJECTED when the key names no
// open, enabled region (never registered, closed, or, with FI_MR_ENDPOINT, bound to another
// endpoint) and with -FI_EACCES when the range leaves the region or a right is missing; on
// success it hands out a Ref that keeps the region from closing while the access copies.
//
// Threads. add / bind_* / enable / remove: application threads, serialised by the table's own
// mutex (control path). acquire and the Ref: the poll step of any endpoint of the domain, lock
// free: a slot is published by a release store of its stamp and looked up by index (provider
// keys) or through hash chains read under a sequence counter (requested keys); remove()
// unpublishes the slot, then waits until no Ref holds it (the accesses in flight end within a
// segment's copy), so once fi_close returns no byte of the region is touched again.
#pragma once

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>

#include "common/result.h"

namespace dpfab::proto {

class MrTable {
  struct Slot;

 public:
  static constexpr size_t kMaxIov = 4;        ///< fi_mr_regv entries (mr_iov_limit)
  static constexpr uint32_t kIndexBits = 20;  ///< slot index bits of a provider key
  static constexpr uint32_t kGenBits = 12;    ///< generation bits of a provider key
  static constexpr uint32_t kMaxRegions = (1u << kIndexBits) - 1;  ///< mr_cnt
  static constexpr uint32_t kReuseAfter = 256;  ///< freed slots that wait before one is reused
  static constexpr uint32_t kNoSlot = UINT32_MAX;

  struct Config {
    bool prov_key = true;   ///< FI_MR_PROV_KEY: keys are ours; else requested keys
    bool virt_addr = true;  ///< FI_MR_VIRT_ADDR: peers use virtual addresses; else offsets
    bool endpoint = false;  ///< FI_MR_ENDPOINT: regions are bound to one endpoint, then enabled
  };

  /// What a registration names (fi_mr_attr).
  struct Spec {
    const iovec* iov = nullptr;
    size_t count = 0;
    uint64_t access = 0;  ///< FI_READ, FI_WRITE, FI_REMOTE_READ, FI_REMOTE_WRITE, FI_SEND, FI_RECV
    uint64_t requested_key = 0;
  };

  /// What a remote access gets: the region's bytes at the range asked for, which stay
  /// registered while the Ref lives. Owner: the accessing thread; not copyable.
  class Ref {
   public:
    Ref() = default;
    Ref(const Ref&) = delete;
    Ref& operator=(const Ref&) = delete;
    ~Ref() { release(); }
    void release() noexcept;
    bool held() const noexcept { return slot_ != nullptr; }
    /// The bytes [off, off + n) of the accessed range as a contiguous pointer, or nullptr when
    /// they cross from one iov of the region into another (the copies below still work).
    uint8_t* contiguous(uint64_t off, uint64_t n) const noexcept;
    /// Copies into / out of the accessed range at `off` (n bytes, within the range).
    void copy_in(uint64_t off, const void* src, uint64_t n) const noexcept;
    void copy_out(uint64_t off, void* dst, uint64_t n) const noexcept;
    /// The counters bound to the region for these events (FI_REMOTE_WRITE / FI_REMOTE_READ), as
    /// given to bind_counter; nullptr when none.
    void* counter(bool write) const noexcept;

   private:
    friend class MrTable;
    Slot* slot_ = nullptr;
    uint64_t start_ = 0;  // byte offset of the range in the region's concatenation
  };

  explicit MrTable(const Config& cfg) noexcept : cfg_(cfg) {}
  ~MrTable();
  MrTable(const MrTable&) = delete;
  MrTable& operator=(const MrTable&) = delete;

  const Config& config() const noexcept { return cfg_; }

  // ---- control path (application threads) ----
  /// Registers a region; enabled at once unless cfg.endpoint (then bind_endpoint + enable).
  /// @return the slot; -FI_EINVAL (no iov, a NULL base with a length, more than kMaxIov entries,
  ///         a zero total length), -FI_ENOKEY (requested key in use), -FI_ENOSPC (kMaxRegions open
  ///         or every slot retired), -FI_ENOMEM.
  Result<uint32_t> add(const Spec& s);
  /// The key of slot `slot` (valid from add() on, usable by peers once enabled).
  uint64_t key(uint32_t slot) const noexcept;
  /// FI_MR_ENDPOINT: the endpoint (its token, never 0) through which peers reach the region.
  /// -FI_EINVAL after enable or for a second endpoint.
  int bind_endpoint(uint32_t slot, uint64_t ep_token) noexcept;
  /// Counter bindings (FI_REMOTE_WRITE, FI_REMOTE_READ); opaque to the table. -FI_EINVAL for a
  /// flag already bound. Before or after enable.
  int bind_counter(uint32_t slot, void* cntr, uint64_t flags) noexcept;
  /// Publishes the region. -FI_EOPBADSTATE: FI_MR_ENDPOINT without an endpoint bound.
  int enable(uint32_t slot) noexcept;
  /// Closes the region: no access starts from now on and the ones in flight are waited for.
  /// The counters bound to it are returned (to drop their references).
  void remove(uint32_t slot, void** cntr_write, void** cntr_read) noexcept;
  /// Open regions.
  size_t size() const;

  // ---- data path (any poll step) ----
  /// Checks a remote access of [addr, addr + len) with `rights` (FI_REMOTE_READ and/or
  /// FI_REMOTE_WRITE) through the endpoint `ep_token`, and holds the region in `ref` on success.
  /// @return 0; -FI_EKEYREJECTED: no open, enabled region with this key (for this endpoint);
  ///         -FI_EACCES: the range leaves the region, or a right is missing.
  int acquire(uint64_t key, uint64_t addr, uint64_t len, uint64_t rights, uint64_t ep_token,
              Ref* ref) const noexcept;

 private:
  static constexpr uint32_t kChunkBits = 10;
  static constexpr uint32_t kChunk = 1u << kChunkBits;
  static constexpr uint32_t kChunks = (1u << kIndexBits) / kChunk;
  static constexpr uint32_t kBuckets = 1024;
  static constexpr uint32_t kMaxGen = (1u << kGenBits) - 1;

  int enable_locked(uint32_t slot) noexcept;  // under mu_
  Slot* at(uint32_t i) const noexcept;
  Slot* make(uint32_t i);
  uint32_t find_user_key(uint64_t key) const noexcept;
  static uint32_t bucket_of(uint64_t key) noexcept;
  void unlink_user_key(uint32_t i) noexcept;

  Config cfg_;
  mutable std::mutex mu_;  // writers
  std::array<std::atomic<Slot*>, kChunks> chunks_{};
  uint32_t fresh_ = 1;          // next never-used slot index (0 is kept unused)
  std::deque<uint32_t> freed_;  // freed slots, oldest first
  size_t live_ = 0;
  // Requested keys: hash chains through the slots' `next` links, read under seq_ (odd while a
  // writer changes them).
  std::atomic<uint32_t> seq_{0};
  std::array<std::atomic<uint32_t>, kBuckets> buckets_{};
};

}  // namespace dpfab::proto
