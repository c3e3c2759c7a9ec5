// SPDX-License-Identifier: BSD-3-Clause
#include "proto/mr_table.h"

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <sys/random.h>

#include <algorithm>
#include <new>
#include <thread>

namespace dpfab::proto {

// One region's state. The fields below the atomics are written by the control path only while
// the slot is unpublished (stamp 0) and no Ref holds it, and read by accesses after an acquire
// load of a matching stamp: the release store that publishes the slot orders them.
struct MrTable::Slot {
  // 0: not reachable; else the key (provider keys) or any non-zero value (requested keys). Its
  // seq_cst store in remove() and the accessor's seq_cst increment of `active` before its load
  // of the stamp make a Dekker pair: either the accessor sees 0, or remove() sees it active.
  std::atomic<uint64_t> stamp{0};
  std::atomic<uint32_t> active{0};  // Refs held (acquire: seq_cst add; release: release sub)
  // Requested keys: the key and the hash chain link, read by lookups without the lock (relaxed,
  // validated by the table's sequence counter).
  std::atomic<uint64_t> user_key{0};
  std::atomic<uint32_t> next{kNoSlot};
  // Counters (fi_mr_bind), which may be bound after the region is published: relaxed atomics.
  std::atomic<void*> cntr_write{nullptr}, cntr_read{nullptr};
  uint64_t key = 0;
  uint16_t gen = 0;
  bool in_use = false, enabled = false;
  uint64_t access = 0;
  uint64_t base = 0;  // the peers' address of byte 0
  uint64_t len = 0;   // total bytes
  uint64_t ep_token = 0;
  uint32_t niov = 0;
  iovec iov[kMaxIov] = {};
};

namespace {

constexpr uint64_t kRemoteRights = FI_REMOTE_READ | FI_REMOTE_WRITE;

uint32_t random32() noexcept {
  uint32_t r = 0;
  // getrandom: the kernel's CSPRNG, so that a peer that has seen keys cannot predict the next.
  while (getrandom(&r, sizeof(r), 0) != static_cast<ssize_t>(sizeof(r))) {
  }
  return r;
}

}  // namespace

MrTable::~MrTable() {
  for (auto& c : chunks_) delete[] c.load(std::memory_order_relaxed);
}

MrTable::Slot* MrTable::at(uint32_t i) const noexcept {
  if (i >= (1u << kIndexBits)) return nullptr;
  // Acquire: pairs with the release store in make(): the slots are constructed.
  Slot* c = chunks_[i >> kChunkBits].load(std::memory_order_acquire);
  return c ? &c[i & (kChunk - 1)] : nullptr;
}

MrTable::Slot* MrTable::make(uint32_t i) {
  auto& c = chunks_[i >> kChunkBits];
  if (!c.load(std::memory_order_relaxed)) c.store(new Slot[kChunk], std::memory_order_release);
  return at(i);
}

uint32_t MrTable::bucket_of(uint64_t key) noexcept {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  return static_cast<uint32_t>(key % kBuckets);
}

uint32_t MrTable::find_user_key(uint64_t key) const noexcept {
  // A seqlock read: the chains may change under us (a writer links or unlinks a slot), but every
  // slot stays allocated and every index is checked, so a walk is safe; a walk that overlapped a
  // change is done again.
  for (;;) {
    const uint32_t s1 = seq_.load(std::memory_order_acquire);
    if (s1 & 1) {
      std::this_thread::yield();
      continue;
    }
    uint32_t found = kNoSlot;
    uint32_t i = buckets_[bucket_of(key)].load(std::memory_order_relaxed);
    for (uint32_t steps = 0; i != kNoSlot && steps <= kMaxRegions; ++steps) {
      const Slot* s = at(i);
      if (!s) break;
      if (s->user_key.load(std::memory_order_relaxed) == key) {
        found = i;
        break;
      }
      i = s->next.load(std::memory_order_relaxed);
    }
    // Acquire fence: the loads above happen before the second read of the counter (pairs with
    // the writer's release increments).
    std::atomic_thread_fence(std::memory_order_acquire);
    if (seq_.load(std::memory_order_relaxed) == s1) return found;
  }
}

void MrTable::unlink_user_key(uint32_t i) noexcept {
  Slot* s = at(i);
  auto& head = buckets_[bucket_of(s->user_key.load(std::memory_order_relaxed))];
  seq_.fetch_add(1, std::memory_order_acq_rel);  // odd: readers retry
  uint32_t prev = kNoSlot;
  for (uint32_t j = head.load(std::memory_order_relaxed); j != kNoSlot;
       prev = j, j = at(j)->next.load(std::memory_order_relaxed)) {
    if (j != i) continue;
    const uint32_t n = s->next.load(std::memory_order_relaxed);
    if (prev == kNoSlot)
      head.store(n, std::memory_order_relaxed);
    else
      at(prev)->next.store(n, std::memory_order_relaxed);
    break;
  }
  seq_.fetch_add(1, std::memory_order_release);  // even again
}

Result<uint32_t> MrTable::add(const Spec& sp) {
  if (!sp.iov || sp.count == 0 || sp.count > kMaxIov)
    return Error{-FI_EINVAL, "mr: 1 to 4 iov entries"};
  uint64_t total = 0;
  for (size_t k = 0; k < sp.count; ++k) {
    if (!sp.iov[k].iov_base && sp.iov[k].iov_len) return Error{-FI_EINVAL, "mr: NULL buffer"};
    total += sp.iov[k].iov_len;
  }
  if (total == 0) return Error{-FI_EINVAL, "mr: zero length"};
  std::lock_guard lock(mu_);
  if (live_ >= kMaxRegions) return Error{-FI_ENOSPC, "mr: too many regions"};
  if (!cfg_.prov_key && find_user_key(sp.requested_key) != kNoSlot)
    return Error{-FI_ENOKEY, "mr: requested key in use"};
  uint32_t i;
  if (!freed_.empty() && (freed_.size() >= kReuseAfter || fresh_ >= (1u << kIndexBits))) {
    i = freed_.front();
    freed_.pop_front();
  } else if (fresh_ < (1u << kIndexBits)) {
    i = fresh_++;
  } else {
    return Error{-FI_ENOSPC, "mr: every region slot is retired"};
  }
  Slot* s;
  try {
    s = make(i);
  } catch (const std::bad_alloc&) {
    if (i == fresh_ - 1) --fresh_;
    return Error{-FI_ENOMEM, "mr: out of memory"};
  }
  s->in_use = true;
  s->enabled = false;
  ++s->gen;  // 1 on first use; remove() retires the slot before it would wrap
  s->access = sp.access;
  s->len = total;
  s->niov = static_cast<uint32_t>(sp.count);
  for (size_t k = 0; k < sp.count; ++k) s->iov[k] = sp.iov[k];
  s->base = cfg_.virt_addr ? reinterpret_cast<uintptr_t>(sp.iov[0].iov_base) : 0;
  s->ep_token = 0;
  s->cntr_write.store(nullptr, std::memory_order_relaxed);
  s->cntr_read.store(nullptr, std::memory_order_relaxed);
  if (cfg_.prov_key) {
    s->key = uint64_t{random32()} << 32 | uint64_t{s->gen} << kIndexBits | i;
  } else {
    s->key = sp.requested_key;
    s->user_key.store(sp.requested_key, std::memory_order_relaxed);
    auto& head = buckets_[bucket_of(sp.requested_key)];
    seq_.fetch_add(1, std::memory_order_acq_rel);
    s->next.store(head.load(std::memory_order_relaxed), std::memory_order_relaxed);
    head.store(i, std::memory_order_relaxed);
    seq_.fetch_add(1, std::memory_order_release);
  }
  ++live_;
  if (!cfg_.endpoint) (void)enable_locked(i);
  return i;
}

uint64_t MrTable::key(uint32_t slot) const noexcept {
  const Slot* s = at(slot);
  return s ? s->key : FI_KEY_NOTAVAIL;
}

int MrTable::bind_endpoint(uint32_t slot, uint64_t ep_token) noexcept {
  std::lock_guard lock(mu_);
  Slot* s = at(slot);
  if (!s || !s->in_use || s->enabled || ep_token == 0 || s->ep_token != 0) return -FI_EINVAL;
  s->ep_token = ep_token;
  return 0;
}

int MrTable::bind_counter(uint32_t slot, void* cntr, uint64_t flags) noexcept {
  std::lock_guard lock(mu_);
  Slot* s = at(slot);
  if (!s || !s->in_use || !cntr || !(flags & kRemoteRights) || (flags & ~kRemoteRights))
    return -FI_EINVAL;
  if (((flags & FI_REMOTE_WRITE) && s->cntr_write.load(std::memory_order_relaxed)) ||
      ((flags & FI_REMOTE_READ) && s->cntr_read.load(std::memory_order_relaxed)))
    return -FI_EINVAL;
  if (flags & FI_REMOTE_WRITE) s->cntr_write.store(cntr, std::memory_order_relaxed);
  if (flags & FI_REMOTE_READ) s->cntr_read.store(cntr, std::memory_order_relaxed);
  return 0;
}

int MrTable::enable(uint32_t slot) noexcept {
  std::lock_guard lock(mu_);
  return enable_locked(slot);
}

int MrTable::enable_locked(uint32_t slot) noexcept {
  Slot* s = at(slot);
  if (!s || !s->in_use) return -FI_EINVAL;
  if (s->enabled) return 0;
  if (cfg_.endpoint && s->ep_token == 0) return -FI_EOPBADSTATE;
  s->enabled = true;
  // Release: the fields above are written before any access can match the stamp.
  s->stamp.store(cfg_.prov_key ? s->key : 1, std::memory_order_release);
  return 0;
}

void MrTable::remove(uint32_t slot, void** cntr_write, void** cntr_read) noexcept {
  std::lock_guard lock(mu_);
  Slot* s = at(slot);
  if (cntr_write) *cntr_write = nullptr;
  if (cntr_read) *cntr_read = nullptr;
  if (!s || !s->in_use) return;
  // seq_cst: the Dekker pair with acquire() (see Slot::stamp).
  s->stamp.store(0, std::memory_order_seq_cst);
  // Accesses that matched the stamp before it went copy at most a segment: wait them out.
  while (s->active.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  if (!cfg_.prov_key) unlink_user_key(slot);
  if (cntr_write) *cntr_write = s->cntr_write.load(std::memory_order_relaxed);
  if (cntr_read) *cntr_read = s->cntr_read.load(std::memory_order_relaxed);
  s->cntr_write.store(nullptr, std::memory_order_relaxed);
  s->cntr_read.store(nullptr, std::memory_order_relaxed);
  s->in_use = s->enabled = false;
  s->user_key.store(0, std::memory_order_relaxed);
  --live_;
  // A provider-key slot whose generation would wrap is never registered again: its old keys
  // stay dead for good.
  if (!cfg_.prov_key || s->gen < kMaxGen) freed_.push_back(slot);
}

size_t MrTable::size() const {
  std::lock_guard lock(mu_);
  return live_;
}

int MrTable::acquire(uint64_t key, uint64_t addr, uint64_t len, uint64_t rights, uint64_t ep_token,
                     Ref* ref) const noexcept {
  ref->release();
  const uint32_t i =
      cfg_.prov_key ? static_cast<uint32_t>(key & ((1u << kIndexBits) - 1)) : find_user_key(key);
  Slot* s = at(i);
  if (!s) return -FI_EKEYREJECTED;
  s->active.fetch_add(1, std::memory_order_seq_cst);
  const uint64_t st = s->stamp.load(std::memory_order_seq_cst);
  const bool ok =
      st != 0 && (cfg_.prov_key ? st == key : s->user_key.load(std::memory_order_relaxed) == key);
  int err = 0;
  if (!ok || (cfg_.endpoint && s->ep_token != ep_token)) {
    err = -FI_EKEYREJECTED;
  } else if (addr < s->base || addr - s->base > s->len || len > s->len - (addr - s->base) ||
             (rights & ~s->access & kRemoteRights) != 0) {
    err = -FI_EACCES;
  }
  if (err) {
    s->active.fetch_sub(1, std::memory_order_release);
    return err;
  }
  ref->slot_ = s;
  ref->start_ = addr - s->base;
  return 0;
}

// ---- Ref -------------------------------------------------------------------------------------

void MrTable::Ref::release() noexcept {
  // Release: the copies made through this Ref happen before remove() sees the slot idle.
  if (slot_) slot_->active.fetch_sub(1, std::memory_order_release);
  slot_ = nullptr;
}

uint8_t* MrTable::Ref::contiguous(uint64_t off, uint64_t n) const noexcept {
  uint64_t at = start_ + off;
  for (uint32_t k = 0; k < slot_->niov; ++k) {
    const iovec& v = slot_->iov[k];
    if (at < v.iov_len)
      return n <= v.iov_len - at ? static_cast<uint8_t*>(v.iov_base) + at : nullptr;
    at -= v.iov_len;
  }
  return n == 0 && slot_->niov ? static_cast<uint8_t*>(slot_->iov[slot_->niov - 1].iov_base) +
                                     slot_->iov[slot_->niov - 1].iov_len
                               : nullptr;
}

void MrTable::Ref::copy_in(uint64_t off, const void* src, uint64_t n) const noexcept {
  uint64_t at = start_ + off;
  auto* from = static_cast<const uint8_t*>(src);
  for (uint32_t k = 0; k < slot_->niov && n; ++k) {
    const iovec& v = slot_->iov[k];
    if (at >= v.iov_len) {
      at -= v.iov_len;
      continue;
    }
    const uint64_t c = std::min<uint64_t>(n, v.iov_len - at);
    std::memcpy(static_cast<uint8_t*>(v.iov_base) + at, from, c);
    from += c;
    n -= c;
    at = 0;
  }
}

void MrTable::Ref::copy_out(uint64_t off, void* dst, uint64_t n) const noexcept {
  uint64_t at = start_ + off;
  auto* to = static_cast<uint8_t*>(dst);
  for (uint32_t k = 0; k < slot_->niov && n; ++k) {
    const iovec& v = slot_->iov[k];
    if (at >= v.iov_len) {
      at -= v.iov_len;
      continue;
    }
    const uint64_t c = std::min<uint64_t>(n, v.iov_len - at);
    std::memcpy(to, static_cast<const uint8_t*>(v.iov_base) + at, c);
    to += c;
    n -= c;
    at = 0;
  }
}

void* MrTable::Ref::counter(bool write) const noexcept {
  return (write ? slot_->cntr_write : slot_->cntr_read).load(std::memory_order_relaxed);
}

}  // namespace dpfab::proto
