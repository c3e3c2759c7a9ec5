// SPDX-License-Identifier: BSD-3-Clause
#include "proto/av.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <rdma/fi_errno.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <string_view>

#include "common/log.h"
#include "common/strings.h"
#include "wait/deadline.h"
#include "wire/multicast.h"

namespace dpfab::proto {
namespace {

using wait::Deadline;

constexpr size_t kMinRevCapacity = 64;
constexpr size_t kMaxRevHint = 16384;         // count hints beyond this do not presize further
constexpr size_t kMaxPreallocChunks = 64;     // nor preallocate more entries
constexpr int64_t kSyncPollPauseNs = 50'000;  // between resolver polls of a synchronous insert

size_t pow2_at_least(size_t n) noexcept {
  size_t c = 1;
  while (c < n) c <<= 1;
  return c;
}

// A 64-bit finaliser (MurmurHash3 fmix64): keys differ mostly in their low IPv4 and port bits.
size_t rev_hash(uint64_t k) noexcept {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return static_cast<size_t>(k);
}

bool mac_is_zero(const uint8_t (&mac)[6]) noexcept {
  for (uint8_t b : mac)
    if (b) return false;
  return true;
}

bool same_endpoint(const wire::Address& a, uint32_t ip, uint16_t port, uint16_t ep) noexcept {
  return a.ipv4_be == ip && a.udp_port_be == port && a.ep_id_be == ep;
}

void pause_ns(int64_t ns) noexcept {
  timespec ts{0, static_cast<long>(ns)};
  nanosleep(&ts, nullptr);
}

// A decimal UDP port.
std::optional<uint32_t> parse_port(const char* service) noexcept {
  if (!service) return std::nullopt;
  auto v = str::parse_int(service);
  if (!v || *v < 0 || *v > 0xffff) return std::nullopt;
  return static_cast<uint32_t>(*v);
}

// The IPv4 address (network order) of a host name; nullopt when it has none.
std::optional<uint32_t> resolve_host(const std::string& name) noexcept {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  if (getaddrinfo(name.c_str(), nullptr, &hints, &res) != 0 || !res) return std::nullopt;
  uint32_t ip = reinterpret_cast<const sockaddr_in*>(res->ai_addr)->sin_addr.s_addr;
  freeaddrinfo(res);
  return ip;
}

}  // namespace

// ---- StaticResolver ----------------------------------------------------------------------------

void StaticResolver::add(uint32_t ipv4_be, const rte_ether_addr& mac) {
  std::lock_guard lock(mutex_);
  known_[ipv4_be] = mac;
  asked_ns_.erase(ipv4_be);
}

std::optional<rte_ether_addr> StaticResolver::resolve(uint32_t ipv4_be) noexcept {
  std::lock_guard lock(mutex_);
  if (auto it = known_.find(ipv4_be); it != known_.end()) return it->second;
  const int64_t now = Deadline::now_ns();
  try {
    auto [it, fresh] = asked_ns_.emplace(ipv4_be, now);
    // A failure is remembered for as long as resolution took (a negative cache entry), then a new
    // request starts over.
    if (!fresh && now - it->second >= 2 * fail_after_ns_) it->second = now;
  } catch (const std::bad_alloc&) {
    // Not recorded: failed() reports nothing for this IP and the caller's own bound applies.
  }
  return std::nullopt;
}

bool StaticResolver::failed(uint32_t ipv4_be) noexcept {
  std::lock_guard lock(mutex_);
  if (known_.count(ipv4_be)) return false;
  auto it = asked_ns_.find(ipv4_be);
  return it != asked_ns_.end() && Deadline::now_ns() - it->second >= fail_after_ns_;
}

// ---- AddressVector: construction ---------------------------------------------------------------

AddressVector::RevTable::RevTable(size_t capacity)
    : mask(capacity - 1), slots(std::make_unique<std::atomic<uint64_t>[]>(capacity)) {}

AddressVector::AddressVector(const Options& opts, std::unique_ptr<SharedAvTable> shared)
    : type_(opts.type),
      async_(opts.async),
      resolver_(opts.resolver),
      resolve_timeout_ns_(std::max<int64_t>(opts.resolve_timeout_ms, 0) * 1'000'000),
      fid_(opts.fid),
      format_(opts.format),
      link_(opts.link),
      shared_(std::move(shared)),
      reader_(shared_ && !shared_->writable() ? shared_.get() : nullptr),
      chunks_(std::make_unique<std::atomic<Chunk*>[]>(kMaxChunks)),
      user_ids_open_(opts.user_ids) {
  if (user_ids_open_) {
    user_ids_ = std::make_unique<std::atomic<UserIdChunk*>[]>(kMaxChunks);
    has_user_ids_.store(true, std::memory_order_relaxed);  // before the AV is shared
  }
  const size_t hint = std::min(opts.count, kMaxRevHint);
  rev_tables_.push_back(
      std::make_unique<RevTable>(pow2_at_least(std::max(kMinRevCapacity, 2 * hint))));
  rev_.store(rev_tables_.back().get(), std::memory_order_release);
  // Entries for the expected count, within reason: a hint, not a limit.
  const size_t chunks =
      std::min((opts.count + kChunkEntries - 1) / kChunkEntries, kMaxPreallocChunks);
  try {
    for (size_t c = 0; c < chunks; ++c) chunks_[c].store(new Chunk(), std::memory_order_release);
  } catch (...) {
    for (size_t c = 0; c < chunks; ++c) delete chunks_[c].load(std::memory_order_relaxed);
    throw;
  }
}

AddressVector::~AddressVector() {
  {
    std::lock_guard lock(pending_mutex_);
    for (Pending& p : pending_) {
      for (Item& item : p.waiting) {
        if (item.done) continue;
        if (p.out) p.out[item.pos] = FI_ADDR_NOTAVAIL;
        report_error(p.context, item.pos, FI_ECANCELED);
      }
      report_complete(p.context, p.inserted);
    }
    pending_.clear();
  }
  for (size_t c = 0; c < kMaxChunks; ++c) delete chunks_[c].load(std::memory_order_relaxed);
  if (user_ids_)
    for (size_t c = 0; c < kMaxChunks; ++c) delete user_ids_[c].load(std::memory_order_relaxed);
}

std::atomic<fi_addr_t>* AddressVector::user_id_slot_locked(fi_addr_t a) noexcept {
  if (a >= kMaxEntries) return nullptr;
  try {
    if (!user_ids_) user_ids_ = std::make_unique<std::atomic<UserIdChunk*>[]>(kMaxChunks);
    std::atomic<UserIdChunk*>& p = user_ids_[a >> kChunkBits];
    UserIdChunk* c = p.load(std::memory_order_relaxed);  // under mutex_: the only writer
    if (!c) {
      c = new UserIdChunk();
      const fi_addr_t first = a & ~fi_addr_t{kChunkEntries - 1};
      for (size_t i = 0; i < kChunkEntries; ++i)
        c->ids[i].store(user_ids_open_ ? FI_ADDR_NOTAVAIL : first + i, std::memory_order_relaxed);
      // Release: pairs with the acquire load in user_id_at(): the defaults are seen.
      p.store(c, std::memory_order_release);
    }
    // Release: pairs with the acquire load in completion_addr(): the chunk array is seen made.
    has_user_ids_.store(true, std::memory_order_release);
    return &c->ids[a & (kChunkEntries - 1)];
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

int AddressVector::set_user_id(fi_addr_t a, fi_addr_t id, uint64_t flags) noexcept {
  if (flags) return -FI_EINVAL;
  if (!lookup(a)) return -FI_EINVAL;
  std::lock_guard lock(mutex_);
  std::atomic<fi_addr_t>* slot = user_id_slot_locked(a);
  if (!slot) return -FI_ENOMEM;
  slot->store(id, std::memory_order_relaxed);
  return FI_SUCCESS;
}

// ---- data path ---------------------------------------------------------------------------------

fi_addr_t AddressVector::reverse(uint32_t ipv4_be, uint16_t udp_port_be,
                                 uint16_t ep_id_be) const noexcept {
  if (ipv4_be == 0) return FI_ADDR_NOTAVAIL;  // never inserted (invalid)
  const fi_addr_t found = probe(ipv4_be, udp_port_be, ep_id_be);
  if (found != FI_ADDR_NOTAVAIL || !reader_) return found;
  // A reader AV learns the writer's entries here, on a miss, when the table changed. The map is
  // the AV's own cache of the table: filling it does not change the AV as the application sees it.
  {
    std::lock_guard lock(mutex_);
    if (!const_cast<AddressVector*>(this)->sync_reverse_locked()) return FI_ADDR_NOTAVAIL;
  }
  return probe(ipv4_be, udp_port_be, ep_id_be);
}

fi_addr_t AddressVector::probe(uint32_t ipv4_be, uint16_t udp_port_be,
                               uint16_t ep_id_be) const noexcept {
  const uint64_t key = rev_key(ipv4_be, udp_port_be, ep_id_be);
  // Acquire: pairs with the release store of a new table in rev_insert_locked(): its slots are
  // seen filled. A table that has been replaced meanwhile stays readable (never freed before the
  // AV), and answers as of when it was current.
  const RevTable* t = rev_.load(std::memory_order_acquire);
  const uint64_t hash = rev_hash(key);
  size_t i = hash & t->mask;
  for (size_t n = 0; n <= t->mask; ++n, i = (i + 1) & t->mask) {
    // Acquire: pairs with the release store of the slot in rev_insert_locked(), which follows the
    // entry's publication.
    const uint64_t w = t->slots[i].load(std::memory_order_acquire);
    if (w == kRevEmpty) return FI_ADDR_NOTAVAIL;
    if (!rev_tag_is(w, hash)) continue;
    // Another key may share the tag, and the slot may be changing under us (removed, reused for
    // another address): the index is only an fi_addr to check. Entries are written once, so a
    // valid entry with this address is a right answer whatever happened to the slot; otherwise
    // keep probing.
    const fi_addr_t v = rev_index(w);
    const AvEntry* e = lookup(v);
    if (e && same_endpoint(e->addr, ipv4_be, udp_port_be, ep_id_be)) return v;
  }
  return FI_ADDR_NOTAVAIL;
}

bool AddressVector::sync_reverse_locked() noexcept {
  const uint64_t gen = reader_->generation();
  if (gen == synced_generation_) return false;
  synced_generation_ = gen;
  const uint64_t n = std::min<uint64_t>(reader_->next(), reader_->capacity());
  for (fi_addr_t a = 0; a < n; ++a) {
    const AvEntry* e = reader_->lookup(a);
    // The same key again overwrites its slot with the same index: a rescan adds nothing twice.
    // Entries removed since stay in the map until replaced: probe() checks each against lookup().
    if (e) rev_insert_locked(rev_key(e->addr.ipv4_be, e->addr.udp_port_be, e->addr.ep_id_be), a);
  }
  return true;
}

// ---- control path: storage ---------------------------------------------------------------------

int AddressVector::reserve_locked(size_t n, fi_addr_t* base) noexcept {
  *base = next_;
  if (n == 0) return FI_SUCCESS;
  if (n > kMaxEntries - next_) return -FI_ENOSPC;
  // A shared table does not grow.
  if (shared_ && n > shared_->capacity() - std::min<size_t>(next_, shared_->capacity()))
    return -FI_ENOSPC;
  for (size_t c = next_ >> kChunkBits; c <= (next_ + n - 1) >> kChunkBits; ++c) {
    if (chunks_[c].load(std::memory_order_relaxed)) continue;
    auto* chunk = new (std::nothrow) Chunk();
    if (!chunk) return -FI_ENOMEM;  // chunks made so far stay; nothing is reserved
    // Release: pairs with the acquire load in lookup(): the slots' initial state is visible.
    chunks_[c].store(chunk, std::memory_order_release);
  }
  next_ += n;
  if (shared_) shared_->set_next(next_);
  return FI_SUCCESS;
}

void AddressVector::publish_locked(fi_addr_t index, const wire::Address& addr) noexcept {
  Slot& s = slot(index);
  s.entry.addr = addr;  // no reader looks before the state says valid, and it is written once
  // Release: pairs with the acquire load of the state in lookup().
  s.state.store(kValid, std::memory_order_release);
  ++valid_;
  rev_insert_locked(rev_key(addr.ipv4_be, addr.udp_port_be, addr.ep_id_be), index);
  if (shared_) shared_->publish(index, addr);
  // A node of this host: its link is made now, in the background (no wait, no syscall here but
  // the node's doorbell), so that it is up by the time the first message goes.
  if (link_ && link_->is_local(addr)) (void)link_->local_route(addr);
}

void AddressVector::rev_insert_locked(uint64_t key, fi_addr_t index) noexcept {
  RevTable* t = rev_tables_.back().get();
  if ((t->used + 1) * 2 > t->mask + 1) {
    // Too full (live entries or tombstones): a clean table sized for the live entries, at most a
    // third full (a table half full of live entries doubles). Readers may be in the old one; it
    // is retired, not freed.
    try {
      auto fresh =
          std::make_unique<RevTable>(pow2_at_least(std::max(kMinRevCapacity, (t->live + 1) * 3)));
      for (size_t i = 0; i <= t->mask; ++i) {
        const uint64_t w = t->slots[i].load(std::memory_order_relaxed);
        if (w == kRevEmpty || w == kRevTomb) continue;
        uint64_t k;
        if (!rev_key_at(rev_index(w), &k)) continue;  // a reader's entry the writer removed
        size_t j = rev_hash(k) & fresh->mask;
        while (fresh->slots[j].load(std::memory_order_relaxed) != kRevEmpty)
          j = (j + 1) & fresh->mask;
        fresh->slots[j].store(w, std::memory_order_relaxed);
        ++fresh->used;
        ++fresh->live;
      }
      rev_tables_.push_back(std::move(fresh));
      t = rev_tables_.back().get();
      // Release: pairs with the acquire load in reverse(): the copied slots are visible.
      rev_.store(t, std::memory_order_release);
    } catch (const std::bad_alloc&) {
      // Keep the old table while it still has an empty slot to end probes.
      if (t->used + 2 > t->mask + 1) {
        DPFAB_WARN(FI_LOG_AV, "out of memory: fi_addr %llu has no reverse (FI_SOURCE) mapping",
                   static_cast<unsigned long long>(index));
        return;
      }
    }
  }
  const uint64_t hash = rev_hash(key);
  std::atomic<uint64_t>* tomb = nullptr;
  size_t i = hash & t->mask;
  for (;; i = (i + 1) & t->mask) {
    const uint64_t w = t->slots[i].load(std::memory_order_relaxed);
    uint64_t k;
    if (rev_tag_is(w, hash) && rev_key_at(rev_index(w), &k) && k == key) {
      // The same address again (undefined by fi_av(3)): the latest insertion wins.
      // Release: as below.
      t->slots[i].store(rev_word(hash, index), std::memory_order_release);
      return;
    }
    if (w == kRevTomb && !tomb) tomb = &t->slots[i];
    if (w == kRevEmpty) break;
  }
  std::atomic<uint64_t>* target = tomb ? tomb : &t->slots[i];
  if (!tomb) ++t->used;
  // Release: pairs with the acquire load of the slot in reverse(); orders the entry's
  // publication (publish_locked) before it.
  target->store(rev_word(hash, index), std::memory_order_release);
  ++t->live;
}

void AddressVector::rev_remove_locked(uint64_t key, fi_addr_t index) noexcept {
  RevTable* t = rev_tables_.back().get();
  const uint64_t hash = rev_hash(key);
  size_t i = hash & t->mask;
  for (size_t n = 0; n <= t->mask; ++n, i = (i + 1) & t->mask) {
    const uint64_t w = t->slots[i].load(std::memory_order_relaxed);
    if (w == kRevEmpty) return;
    uint64_t k;
    if (!rev_tag_is(w, hash) || !rev_key_at(rev_index(w), &k) || k != key) continue;
    // A later insertion of the same address owns the slot: leave it.
    if (rev_index(w) != index) return;
    // Relaxed: a reader that still sees the old word checks the (now removed) entry and moves on.
    t->slots[i].store(kRevTomb, std::memory_order_relaxed);
    --t->live;
    // A run of tombstones that ends at an empty slot lies on no live key's probe path (that path
    // would cross the empty slot): make it empty again, so that removals do not fill the table.
    size_t j = i;
    while (t->slots[(j + 1) & t->mask].load(std::memory_order_relaxed) == kRevEmpty &&
           t->slots[j].load(std::memory_order_relaxed) == kRevTomb) {
      t->slots[j].store(kRevEmpty, std::memory_order_relaxed);
      --t->used;
      j = (j - 1) & t->mask;
    }
    return;
  }
}

size_t AddressVector::size() const noexcept {
  if (reader_) return reader_->valid();
  std::lock_guard lock(mutex_);
  return valid_;
}

fi_addr_t AddressVector::next_index() const noexcept {
  if (reader_) return reader_->next();
  std::lock_guard lock(mutex_);
  return next_;
}

// ---- control path: EQ --------------------------------------------------------------------------

int AddressVector::bind_eq(event::Eq* eq) noexcept {
  if (!eq || !async_) return -FI_EINVAL;
  event::Eq* none = nullptr;
  // acq_rel: pairs with the acquire loads in insert_batch() and report_*(): the EQ is seen set up.
  if (!eq_.compare_exchange_strong(none, eq, std::memory_order_acq_rel)) return -FI_EINVAL;
  return FI_SUCCESS;
}

void AddressVector::report_error(void* context, size_t pos, int err) noexcept {
  event::Eq* eq = eq_.load(std::memory_order_acquire);
  if (!eq) return;
  fi_eq_err_entry e{};
  e.fid = fid_;
  e.context = context;
  e.data = pos;
  e.err = err;
  e.prov_errno = -err;
  if (ssize_t r = eq->write_error(e, nullptr, 0); r < 0)
    DPFAB_WARN(FI_LOG_AV, "AV insertion error (address %zu: %s) not reported: EQ write %zd", pos,
               fi_strerror(err), r);
}

void AddressVector::report_complete(void* context, uint64_t inserted) noexcept {
  event::Eq* eq = eq_.load(std::memory_order_acquire);
  if (!eq) return;
  fi_eq_entry e{};
  e.fid = fid_;
  e.context = context;
  e.data = inserted;
  if (ssize_t r = eq->write(FI_AV_COMPLETE, &e, sizeof(e), 0); r < 0)
    DPFAB_WARN(FI_LOG_AV, "FI_AV_COMPLETE (%llu inserted) not reported: EQ write %zd",
               static_cast<unsigned long long>(inserted), r);
}

// ---- control path: insertion -------------------------------------------------------------------

bool AddressVector::try_resolve(Item& item, bool give_up) noexcept {
  const uint32_t ip = item.addr.ipv4_be;
  if (auto mac = resolver_->resolve(ip)) {
    std::memcpy(item.addr.mac, mac->addr_bytes, sizeof(item.addr.mac));
    if (!mac_is_zero(item.addr.mac)) {
      std::lock_guard lock(mutex_);
      publish_locked(item.index, item.addr);
      item.done = true;
      return true;
    }
  }
  if (give_up || resolver_->failed(ip)) {
    item.err = FI_EHOSTUNREACH;
    item.done = true;
    return true;
  }
  return false;
}

int AddressVector::insert_batch(std::vector<Candidate>& cands, fi_addr_t* out, uint64_t flags,
                                void* context) noexcept {
  if (reader_) return -FI_EOPNOTSUPP;  // opened with FI_READ
  if (flags & ~(FI_MORE | FI_SYNC_ERR | FI_AV_USER_ID)) return -FI_EBADFLAGS;
  // "Using the FI_AV_USER_ID flag per insert is invalid if the AV was opened with the
  // FI_AV_USER_ID" (fi_av(3)); the IDs come in the fi_addr array.
  const bool user_ids = flags & FI_AV_USER_ID;
  if (user_ids && (user_ids_open_ || (!out && !cands.empty()))) return -FI_EINVAL;
  event::Eq* eq = eq_.load(std::memory_order_acquire);
  if (async_ && !eq) return -FI_ENOEQ;
  int* sync_err = nullptr;
  if (!async_ && (flags & FI_SYNC_ERR)) {
    if (!context) return -FI_EINVAL;
    sync_err = static_cast<int*>(context);
  }
  // IPv4 groups need no resolution: their MAC is the group's (RFC 1112 6.4); another is an error.
  for (Candidate& c : cands) {
    if (c.err || !wire::is_multicast_ipv4(c.addr.ipv4_be)) continue;
    const rte_ether_addr group_mac = wire::multicast_mac(c.addr.ipv4_be);
    if (mac_is_zero(c.addr.mac))
      std::memcpy(c.addr.mac, group_mac.addr_bytes, sizeof(c.addr.mac));
    else if (std::memcmp(c.addr.mac, group_mac.addr_bytes, sizeof(c.addr.mac)) != 0)
      c.err = FI_EINVAL;
  }
  const size_t n = cands.size();
  std::vector<Item> items;
  try {
    items.resize(n);
  } catch (const std::bad_alloc&) {
    return -FI_ENOMEM;
  }

  fi_addr_t base = 0;
  int reserved;
  {
    std::lock_guard lock(mutex_);
    reserved = reserve_locked(n, &base);
    if (reserved == -FI_ENOMEM) return reserved;
    // The IDs are read before the array is overwritten with the indices, and stored before the
    // addresses are published.
    if (user_ids && reserved != -FI_ENOSPC)
      for (size_t i = 0; i < n; ++i) {
        std::atomic<fi_addr_t>* id = user_id_slot_locked(base + i);
        if (!id) return -FI_ENOMEM;  // reserved indices stay unused, as for a failed address
        id->store(out[i], std::memory_order_relaxed);
      }
    for (size_t i = 0; i < n; ++i) {
      Item& item = items[i];
      item.pos = i;
      item.addr = cands[i].addr;
      item.err = reserved == -FI_ENOSPC ? FI_ENOSPC : cands[i].err;
      item.index = reserved == -FI_ENOSPC ? FI_ADDR_NOTAVAIL : base + i;
      if (!item.err && mac_is_zero(item.addr.mac) && !resolver_) item.err = FI_EHOSTUNREACH;
      if (item.err) {
        item.done = true;
      } else if (!mac_is_zero(item.addr.mac)) {
        publish_locked(item.index, item.addr);
        item.done = true;
      }
    }
  }
  // Addresses without a MAC: the resolver may know them already (outside the lock: it may be
  // slow, and it is never called with the AV's mutex held).
  size_t waiting = 0;
  for (Item& item : items)
    if (!item.done && !try_resolve(item, false)) ++waiting;

  if (!async_) {
    const int64_t deadline = Deadline::now_ns() + resolve_timeout_ns_;
    while (waiting) {
      resolver_->poll();
      const bool give_up = Deadline::now_ns() >= deadline;
      waiting = 0;
      for (Item& item : items)
        if (!item.done && !try_resolve(item, give_up)) ++waiting;
      if (waiting) pause_ns(kSyncPollPauseNs);
    }
    int inserted = 0;
    for (const Item& item : items) {
      if (out) out[item.pos] = item.err ? FI_ADDR_NOTAVAIL : item.index;
      if (sync_err) sync_err[item.pos] = item.err;
      if (!item.err) ++inserted;
    }
    return inserted;
  }

  // Asynchronous: report what is decided now; the rest completes in progress_pending().
  Pending p;
  p.context = context;
  p.out = out;
  p.deadline_ns = Deadline::now_ns() + resolve_timeout_ns_;
  for (Item& item : items) {
    if (!item.done) continue;
    if (out) out[item.pos] = item.err ? FI_ADDR_NOTAVAIL : item.index;
    if (item.err)
      report_error(context, item.pos, item.err);
    else
      ++p.inserted;
  }
  if (!waiting) {
    report_complete(context, p.inserted);
    return FI_SUCCESS;
  }
  try {
    for (Item& item : items)
      if (!item.done) p.waiting.push_back(item);
    std::lock_guard lock(pending_mutex_);
    pending_.push_back(std::move(p));
    pending_count_.fetch_add(1, std::memory_order_relaxed);
  } catch (const std::bad_alloc&) {
    // Nowhere to keep them: those addresses fail now, and the call completes.
    for (Item& item : items) {
      if (item.done) continue;
      if (out) out[item.pos] = FI_ADDR_NOTAVAIL;
      report_error(context, item.pos, FI_ENOMEM);
    }
    report_complete(context, p.inserted);
  }
  return FI_SUCCESS;
}

size_t AddressVector::progress_pending() noexcept {
  if (!has_pending()) return 0;
  std::unique_lock lock(pending_mutex_, std::try_to_lock);
  if (!lock) return 0;  // another thread is at it
  const int64_t now = Deadline::now_ns();
  size_t completed = 0;
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending& p = *it;
    bool all = true;
    for (Item& item : p.waiting) {
      if (item.done) continue;
      if (!try_resolve(item, now >= p.deadline_ns)) {
        all = false;
        continue;
      }
      if (p.out) p.out[item.pos] = item.err ? FI_ADDR_NOTAVAIL : item.index;
      if (item.err)
        report_error(p.context, item.pos, item.err);
      else
        ++p.inserted;
    }
    if (!all) {
      ++it;
      continue;
    }
    report_complete(p.context, p.inserted);
    it = pending_.erase(it);
    pending_count_.fetch_sub(1, std::memory_order_relaxed);
    ++completed;
  }
  return completed;
}

int AddressVector::insert(const void* addr, size_t count, fi_addr_t* fi_addr, uint64_t flags,
                          void* context) noexcept {
  if (!addr && count) return -FI_EINVAL;
  std::vector<Candidate> cands;
  try {
    cands.resize(count);
  } catch (const std::bad_alloc&) {
    return -FI_ENOMEM;
  }
  // Each address takes the size of its own form (wire/address.h): 32 bytes with a host part, 16
  // for the short native form and a sockaddr_in. An element neither form reads takes the size of
  // the array's first element (applications pass arrays of one size).
  const auto* bytes = static_cast<const uint8_t*>(addr);
  size_t stride = wire::kShortAddressLen;
  if (size_t used = 0; count && wire::read_address(bytes, sizeof(wire::Address), nullptr, &used))
    stride = used;
  for (size_t i = 0; i < count; ++i) {
    size_t used = stride;
    auto a = wire::read_address(bytes, sizeof(wire::Address), nullptr, &used);
    bytes += used;
    if (!a) {
      cands[i].err = FI_EINVAL;
      continue;
    }
    cands[i].addr = *a;
    if (cands[i].addr.ipv4_be == 0) cands[i].err = FI_EINVAL;  // nothing can be sent to it
  }
  return insert_batch(cands, fi_addr, flags, context);
}

int AddressVector::insert_svc(const char* node, const char* service, fi_addr_t* fi_addr,
                              uint64_t flags, void* context) noexcept {
  if (!node) return -FI_EINVAL;
  if (!service) {
    // FI_ADDR_STR: "Applications may also pass in an FI_ADDR_STR formatted address as the node
    // parameter. In such cases, the service parameter must be NULL."
    std::optional<wire::Address> a;
    try {
      a = wire::parse_address(node);
    } catch (const std::bad_alloc&) {
      return -FI_ENOMEM;
    }
    if (!a) return -FI_EINVAL;
    return insert(&*a, 1, fi_addr, flags, context);
  }
  return insert_sym(node, 1, service, 1, fi_addr, flags, context);
}

int AddressVector::insert_sym(const char* node, size_t nodecnt, const char* service, size_t svccnt,
                              fi_addr_t* fi_addr, uint64_t flags, void* context) noexcept {
  if (!node || !service) return -FI_EINVAL;
  auto port = parse_port(service);
  if (!port || (svccnt && svccnt - 1 > 0xffff - *port)) return -FI_EINVAL;
  if (nodecnt && svccnt > kMaxEntries / nodecnt) return -FI_EINVAL;
  try {
    std::vector<Candidate> cands(nodecnt * svccnt);
    // The node range: numeric IPv4 counts up; a host name counts up its numeric suffix.
    in_addr first{};
    const bool numeric = inet_pton(AF_INET, node, &first) == 1;
    std::string_view name(node);
    size_t digits = 0;
    while (digits < name.size() && name[name.size() - 1 - digits] >= '0' &&
           name[name.size() - 1 - digits] <= '9')
      ++digits;
    uint64_t suffix = 0;
    if (numeric) {
      if (nodecnt && nodecnt - 1 > 0xffffffffULL - ntohl(first.s_addr)) return -FI_EINVAL;
    } else if (nodecnt > 1) {
      if (digits == 0 || digits > 18) return -FI_EINVAL;  // "must contain a numeric suffix"
      suffix = std::stoull(std::string(name.substr(name.size() - digits)));
    }
    for (size_t n = 0; n < nodecnt; ++n) {
      std::optional<uint32_t> ip;
      if (numeric) {
        ip = htonl(ntohl(first.s_addr) + static_cast<uint32_t>(n));
      } else if (nodecnt == 1) {
        ip = resolve_host(std::string(name));
      } else {
        char num[24];
        std::snprintf(num, sizeof(num), "%0*llu", static_cast<int>(digits),
                      static_cast<unsigned long long>(suffix + n));
        ip = resolve_host(std::string(name.substr(0, name.size() - digits)) + num);
      }
      for (size_t s = 0; s < svccnt; ++s) {
        Candidate& c = cands[n * svccnt + s];
        if (!ip || *ip == 0) {
          c.err = FI_EADDRNOTAVAIL;
          continue;
        }
        c.addr.ipv4_be = *ip;
        c.addr.udp_port_be = htons(static_cast<uint16_t>(*port + s));
        c.addr.ep_id_be = 0;
      }
    }
    return insert_batch(cands, fi_addr, flags, context);
  } catch (const std::bad_alloc&) {
    return -FI_ENOMEM;
  } catch (const std::exception&) {
    return -FI_EINVAL;
  }
}

// ---- control path: removal, lookup, straddr ----------------------------------------------------

int AddressVector::remove(const fi_addr_t* fi_addr, size_t count, uint64_t flags) noexcept {
  if (flags) return -FI_EINVAL;  // "Flags are reserved for future use and must be 0."
  if (!fi_addr && count) return -FI_EINVAL;
  if (reader_) return -FI_EOPNOTSUPP;  // opened with FI_READ
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < count; ++i) {
    const fi_addr_t a = fi_addr[i];
    if (a >= next_ || slot(a).state.load(std::memory_order_relaxed) != kValid) return -FI_EINVAL;
  }
  for (size_t i = 0; i < count; ++i) {
    Slot& s = slot(fi_addr[i]);
    if (s.state.load(std::memory_order_relaxed) != kValid) continue;  // listed twice
    // Relaxed: nothing is published with it; a reader that still sees kValid reads the old,
    // unchanged address ("operations in progress that reference the removed addresses").
    s.state.store(kRemoved, std::memory_order_relaxed);
    --valid_;
    const wire::Address& a = s.entry.addr;
    rev_remove_locked(rev_key(a.ipv4_be, a.udp_port_be, a.ep_id_be), fi_addr[i]);
    if (shared_) shared_->remove(fi_addr[i]);
  }
  return FI_SUCCESS;
}

int AddressVector::lookup_address(fi_addr_t a, void* addr, size_t* addrlen) const noexcept {
  if (!addrlen) return -FI_EINVAL;
  if (!addr && *addrlen) return -FI_EINVAL;
  const AvEntry* e = lookup(a);
  if (!e) return -FI_EINVAL;
  // "If the actual address is larger than what can fit into the buffer, it will be truncated. On
  // output, addrlen is set to the size of the buffer needed to store the address."
  *addrlen = wire::write_address(e->addr, format_, addr, *addrlen);
  return FI_SUCCESS;
}

const char* AddressVector::straddr(const void* addr, char* buf, size_t* len) noexcept {
  if (!len) return nullptr;
  wire::AddrFormat format;
  auto a = wire::read_address(addr, sizeof(wire::Address), &format);
  if (!a) return nullptr;
  std::string s;
  try {
    s = wire::format_address(*a, format);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  if (buf && *len) {
    const size_t n = std::min(*len - 1, s.size());
    std::memcpy(buf, s.data(), n);
    buf[n] = '\0';
  }
  *len = s.size() + 1;
  return buf;
}

}  // namespace dpfab::proto
