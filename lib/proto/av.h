// SPDX-License-Identifier: BSD-3-Clause
//
// AddressVector: the storage and semantics of a libfabric address vector (fi_av(3)), without the
// fid tables (those are in drivers/ofi/av.cc). It maps fabric addresses (wire::Address: MAC, IPv4,
// UDP port, endpoint id) to fi_addr_t values for the data path, and back (FI_SOURCE on receive).
//
// fi_addr_t values. For FI_AV_TABLE and FI_AV_MAP alike an fi_addr is an index: every insertion
// call reserves consecutive indices for all of its addresses, in the order the calls are made
// ("Index values accumulate across successive insert calls in the order the calls are made"), so
// the first address ever inserted is 0. An address that fails to insert leaves its index unused
// (fi_av_lookup on it fails), which is what lets an application pass fi_addr = NULL to a table
// and still know each address's index. Indices are never reused: a removed entry stays invalid
// for the life of the AV (fi_av(3): "a provider may lazily release resources from removed
// entries"), so an AV takes at most kMaxEntries insertions over its lifetime (-FI_ENOSPC per
// address beyond that).
//
// Data path (lookup, reverse): any thread, lock-free, wait-free, O(1) expected.
//   - Entries live in chunks of kChunkEntries slots, allocated on demand; the chunk pointers sit in
//     a fixed array of atomics, so a lookup is two dependent loads and a state check. A slot is
//     written once: its address is filled in, then its state is set valid with a release store;
//     removal only sets the state to removed. A pointer returned by lookup() therefore always
//     points at a complete, unchanging address, whatever inserts and removes run concurrently.
//   - fi_av_remove of an address with operations still in flight is the application's problem:
//     "The behavior of operations in progress that reference the removed addresses is
//     undefined." Here such an operation keeps using the (still readable) old address.
//   - reverse() is an open-addressing hash (linear probing) on (IPv4, UDP port, endpoint id)
//     packed in 64 bits, with tombstones on removal, written under the AV's control mutex. A slot
//     is one atomic word, 8 bytes: a 32-bit tag (half of the key's hash) and the fi_addr; the key
//     itself is the entry's address. A reader whose tag matches checks the entry the slot names
//     (entries never change, so a valid entry with that address is a right answer even if the
//     slot is being reused meanwhile). Tombstone runs that end at an empty slot become empty
//     again; a table that still fills up is replaced by a clean one sized for the live entries.
//     Readers may still be inside the old one, so old tables are kept until the AV is destroyed.
//     2^16 addresses take 3.3 MiB in all, entries and reverse map (5.3 MiB with a 16-byte
//     slot of key and value; integration-rdm-av-memory).
//
// Control path (insert*, remove, lookup_address, bind_eq, progress_pending): any thread; calls
// serialise on a mutex, except that a synchronous insertion waiting for address resolution does
// not hold it.
//
// Named (shared) AVs. With a SharedAvTable (av_shared.h) given at construction, a writable table
// mirrors every reservation, publication and removal of this AV, and the AV takes at most the
// table's capacity of insertions (FI_ENOSPC beyond). A read-only table (FI_READ) makes a reader
// AV: insertions and removals are -FI_EOPNOTSUPP, lookup() reads the table's entries (the writer's
// fi_addr values), and reverse() refreshes its map from the table when the table changed.
//
// User IDs (FI_AV_USER_ID). An AV reports, as the source of a completion (completion_addr), an ID
// the application chose instead of the fi_addr: given per address through insert()'s fi_addr
// array with the FI_AV_USER_ID flag (addresses inserted without it keep their fi_addr), or, for an
// AV opened with Options::user_ids (API 1.20), set with set_user_id() (FI_ADDR_NOTAVAIL until
// then). The IDs live in chunks like the entries, made when the first ID of a chunk is set.
//
// Address resolution. An address whose MAC is zero (fi_getinfo's dest_addr for node/service,
// fi_av_insertsvc, fi_av_insertsym) needs the peer's MAC: the AV asks its Resolver (ARP in the
// port layer). Synchronous AVs wait for it, bounded by Options::resolve_timeout_ms, polling the
// resolver; an address that is not resolved by then, or that the resolver gives up on, fails with
// FI_EHOSTUNREACH. AVs opened with FI_EVENT return at once and finish such insertions in
// progress_pending(), which the progress step calls (see there).
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rte_ether.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "event/eq.h"
#include "proto/av_shared.h"
#include "proto/endpoint.h"
#include "wire/address.h"

namespace dpfab::proto {

/// One address of the AV, as the data path reads it. The MAC is resolved (non-zero) in every entry
/// lookup() returns.
struct AvEntry {
  wire::Address addr;
};

/// How an AV learns a peer's MAC when an address arrives without one (fi_av_insertsvc /
/// insertsym, or an address whose MAC is zero): implemented by the port layer with ARP.
///
/// Threads: every member may be called from any thread, concurrently (an FI_THREAD_SAFE
/// application may insert from several threads while another waits on the EQ).
class Resolver {
 public:
  virtual ~Resolver() = default;
  /// The MAC of ipv4_be if known now (neighbour cache), else nullopt and resolution starts: an ARP
  /// request is sent unless one for ipv4_be is already outstanding (the resolver paces its own
  /// retries, so calling this repeatedly while waiting sends no extra requests).
  virtual std::optional<rte_ether_addr> resolve(uint32_t ipv4_be) noexcept = 0;
  /// Runs the progress step that processes ARP replies and retries (called while waiting).
  virtual void poll() noexcept = 0;
  /// Whether resolution of ipv4_be has finally failed (retries exhausted).
  virtual bool failed(uint32_t ipv4_be) noexcept = 0;
};

/// A Resolver with a fixed table: it knows the addresses given to add() (this host's own port
/// addresses) and declares any other IPv4 failed `fail_after_ms` after it was first asked, as ARP
/// would after its retries. A placeholder until the port layer answers with ARP, and a test double.
class StaticResolver final : public Resolver {
 public:
  static constexpr int64_t kDefaultFailAfterMs = 1000;

  explicit StaticResolver(int64_t fail_after_ms = kDefaultFailAfterMs) noexcept
      : fail_after_ns_(fail_after_ms * 1'000'000) {}
  /// Adds (or replaces) a known address. May throw std::bad_alloc.
  void add(uint32_t ipv4_be, const rte_ether_addr& mac);

  std::optional<rte_ether_addr> resolve(uint32_t ipv4_be) noexcept override;
  void poll() noexcept override {}
  bool failed(uint32_t ipv4_be) noexcept override;

 private:
  const int64_t fail_after_ns_;
  std::mutex mutex_;
  std::map<uint32_t, rte_ether_addr> known_;  // under mutex_
  std::map<uint32_t, int64_t> asked_ns_;      // under mutex_: first resolve() of unknown IPs
};

enum class AvType : uint8_t {
  kMap,    ///< FI_AV_MAP
  kTable,  ///< FI_AV_TABLE
};

class AddressVector {
 public:
  static constexpr unsigned kChunkBits = 10;
  static constexpr size_t kChunkEntries = size_t{1} << kChunkBits;
  static constexpr size_t kMaxChunks = size_t{1} << 14;
  /// Insertions an AV takes over its lifetime (indices are not reused).
  static constexpr size_t kMaxEntries = kChunkEntries * kMaxChunks;
  /// Bound on the wait for an address's MAC (fi_av_insertsvc to a host that does not answer).
  static constexpr int64_t kDefaultResolveTimeoutMs = 3000;

  struct Options {
    AvType type = AvType::kMap;
    size_t count = 0;    ///< fi_av_attr::count: a sizing hint
    bool async = false;  ///< FI_EVENT: insertions complete through the bound EQ
    /// Learns MACs for addresses without one; nullptr: such addresses fail (FI_EHOSTUNREACH).
    /// Must outlive the AV.
    Resolver* resolver = nullptr;
    int64_t resolve_timeout_ms = kDefaultResolveTimeoutMs;
    fid_t fid = nullptr;  ///< reported as the fid of EQ events (the fid_av)
    /// The domain's addr_format: the form fi_av_lookup writes. Insertions accept both forms.
    wire::AddrFormat format = wire::AddrFormat::kNative;
    /// The domain's link: an inserted address of a node of this host starts its same-host link
    /// at once (Link::local_route), so that it is up by the first message. May be null.
    const Link* link = nullptr;
    /// Opened with FI_AV_USER_ID (API 1.20): user IDs come from set_user_id(); insert() refuses
    /// the FI_AV_USER_ID flag.
    bool user_ids = false;
  };

  /// May throw std::bad_alloc. `shared`: the table of a named AV (see the file comment).
  explicit AddressVector(const Options& opts, std::unique_ptr<SharedAvTable> shared = nullptr);
  /// Asynchronous insertions still waiting for resolution are cancelled: each of their waiting
  /// addresses gets fi_addr FI_ADDR_NOTAVAIL and an FI_ECANCELED error entry, then the insertion
  /// its completion (fi_av(3): "Addresses that are not inserted because they were aborted will
  /// fail with an error code of FI_ECANCELED"). No other thread may use the AV by then.
  ~AddressVector();
  AddressVector(const AddressVector&) = delete;
  AddressVector& operator=(const AddressVector&) = delete;

  // ---- data path: any thread, lock-free ----

  /// The entry of fi_addr `a`, or nullptr when `a` is not (or no longer) a valid address of this
  /// AV: never inserted, failed, still being resolved, removed, or FI_ADDR_NOTAVAIL. The entry
  /// stays readable, unchanged, until the AV is destroyed (even after its removal).
  const AvEntry* lookup(fi_addr_t a) const noexcept {
    if (a >= kMaxEntries) return nullptr;
    // Acquire: pairs with the release store of the chunk pointer in reserve_locked(), so the
    // chunk's slots are seen initialised.
    const Chunk* c = chunks_[a >> kChunkBits].load(std::memory_order_acquire);
    if (c) {
      const Slot& s = c->slots[a & (kChunkEntries - 1)];
      // Acquire: pairs with the release store of kValid in publish_locked(): the address written
      // before it is complete when we read it.
      if (s.state.load(std::memory_order_acquire) == kValid) return &s.entry;
    }
    // A reader AV has no entries of its own: the writer's, in the shared table.
    return reader_ ? reader_->lookup(a) : nullptr;
  }

  /// The fi_addr whose IPv4, UDP port and endpoint id (all network byte order) match, or
  /// FI_ADDR_NOTAVAIL. When the same address was inserted more than once (which fi_av(3) leaves
  /// undefined), the latest insertion is found. Any thread, lock-free.
  fi_addr_t reverse(uint32_t ipv4_be, uint16_t udp_port_be, uint16_t ep_id_be) const noexcept;

  /// What a completion from fi_addr `a` (reverse()'s answer) reports as its source: `a`, or its
  /// user ID when the AV has user IDs (see the file comment). Any thread, lock-free.
  fi_addr_t completion_addr(fi_addr_t a) const noexcept {
    // Acquire: pairs with the release store in user_id_slot_locked() (or the constructor): the
    // chunk array is seen made. An ID set concurrently with a completion may be missed by it.
    if (!has_user_ids_.load(std::memory_order_acquire) || a >= kMaxEntries) return a;
    return user_id_at(a);
  }

  // ---- control path: any thread ----

  /// fi_av_bind: the EQ that FI_AV_COMPLETE events and error entries go to (async AVs only).
  /// The caller keeps `eq` alive while the AV exists.
  /// @return FI_SUCCESS; -FI_EINVAL if `eq` is null, the AV was not opened with FI_EVENT, or an EQ
  ///         is bound already.
  int bind_eq(event::Eq* eq) noexcept;

  /// fi_av_insert: inserts `count` wire::Address structs (16 bytes each) at `addr`.
  /// Each address must be valid (wire::valid_address: version) with a non-zero IPv4; a zero MAC
  /// is resolved through the Resolver. fi_addr[i] (when `fi_addr` is not null) receives the index
  /// of address i, or FI_ADDR_NOTAVAIL when it failed.
  /// Synchronous AV: returns the number inserted. With FI_SYNC_ERR, `context` is an int array
  /// that receives 0 or the positive fabric errno of each address (FI_EINVAL: invalid address,
  /// FI_EHOSTUNREACH: MAC not resolved in time, FI_ENOSPC: AV exhausted).
  /// Asynchronous AV (FI_EVENT): returns 0 once started; the bound EQ then receives one error
  /// entry per failed address (fid = the AV, context, data = the address's position in this
  /// call, err = the errno) followed by one FI_AV_COMPLETE event (fid, context, data = number
  /// inserted). FI_SYNC_ERR is ignored there. Both may be written before this call returns.
  /// Flags: FI_MORE (a hint, ignored), FI_SYNC_ERR, FI_AV_USER_ID (fi_addr[i] holds, on input,
  /// the user ID of address i; on output its index as without the flag).
  /// @return as above; -FI_EINVAL if `addr` is null with count > 0, FI_SYNC_ERR is given without
  ///         a context array, or FI_AV_USER_ID without an fi_addr array or on an AV opened with
  ///         Options::user_ids; -FI_EBADFLAGS for other flags; -FI_ENOEQ for an async AV without
  ///         a bound EQ; -FI_ENOMEM.
  int insert(const void* addr, size_t count, fi_addr_t* fi_addr, uint64_t flags,
             void* context) noexcept;

  /// fi_av_insertsvc: `node` is an IPv4 address or a host name (resolved with getaddrinfo,
  /// AF_INET), `service` a decimal UDP port; endpoint id 0, MAC through the Resolver. `node` may
  /// instead be an FI_ADDR_STR address ("fi_dpdk://...", wire::parse_address) with `service`
  /// null. Returns and reports like insert() with one address; a host name without an IPv4
  /// address fails that address with FI_EADDRNOTAVAIL.
  /// @return as insert(); -FI_EINVAL if `node` is null, or `service` is null (except with an
  ///         FI_ADDR_STR node) or not a port number.
  int insert_svc(const char* node, const char* service, fi_addr_t* fi_addr, uint64_t flags,
                 void* context) noexcept;

  /// fi_av_insertsym: nodecnt x svccnt addresses, nodes {node .. node + nodecnt - 1} (an IPv4
  /// address counts up; a host name must end in a number when nodecnt > 1, which counts up
  /// keeping its width), services {service .. service + svccnt - 1}; all services of a node
  /// before the next node. Returns and reports like insert().
  /// @return as insert(); -FI_EINVAL for a null node or service, a port range past 65535, a host
  ///         name without a numeric suffix with nodecnt > 1, or an IPv4 range past 255.255.255.255.
  int insert_sym(const char* node, size_t nodecnt, const char* service, size_t svccnt,
                 fi_addr_t* fi_addr, uint64_t flags, void* context) noexcept;

  /// fi_av_set_user_id (API 1.20): `id` is what completions from the valid address `a` report
  /// as their source from now on.
  /// @return FI_SUCCESS; -FI_EINVAL if flags is not 0 or `a` is not a valid address of this AV;
  ///         -FI_ENOMEM.
  int set_user_id(fi_addr_t a, fi_addr_t id, uint64_t flags) noexcept;

  /// fi_av_remove: makes each of `count` fi_addrs invalid (for good: indices are not reused).
  /// All or nothing: nothing is removed unless every fi_addr is valid.
  /// @return FI_SUCCESS; -FI_EINVAL if flags is not 0, `fi_addr` is null with count > 0, or an
  ///         fi_addr is not a valid address of this AV.
  int remove(const fi_addr_t* fi_addr, size_t count, uint64_t flags) noexcept;

  /// fi_av_lookup: copies the address of `a` into `addr`, truncated to `*addrlen` bytes, and sets
  /// `*addrlen` to the address size (16), which may be larger than the input value.
  /// @return FI_SUCCESS; -FI_EINVAL if `addrlen` is null, `addr` is null with `*addrlen` > 0, or
  ///         `a` is not a valid address of this AV.
  int lookup_address(fi_addr_t a, void* addr, size_t* addrlen) const noexcept;

  /// fi_av_straddr: "fi_dpdk://aa:bb:cc:dd:ee:ff/10.0.0.1:9228/3" (or, for a sockaddr_in,
  /// "fi_sockaddr_in://10.0.0.1:9228") into `buf`, truncated to `*len` bytes (always
  /// NUL-terminated when `*len` > 0); sets `*len` to the size needed including the NUL. The
  /// address need not be in an AV.
  /// @return `buf`; nullptr if `len` is null or `addr` is not a valid address.
  static const char* straddr(const void* addr, char* buf, size_t* len) noexcept;

  /// Finishes asynchronous insertions whose addresses are now resolved or have failed (resolver
  /// gave up, or resolve_timeout_ms passed), writing their EQ entries. Does not call
  /// Resolver::poll(): the progress step that processes ARP replies calls this after it, and so
  /// does a waiter on the bound EQ (drivers/ofi/av.cc). Any thread; a call that finds another
  /// one running returns 0 at once. The caller keeps the AV alive for the call (an endpoint's
  /// bind reference does).
  /// @return how many insertion calls completed.
  size_t progress_pending() noexcept;
  /// Whether asynchronous insertions are waiting (a relaxed load: cheap on the progress path).
  bool has_pending() const noexcept {
    // Relaxed: a hint for skipping the call; the insertions themselves are read under
    // pending_mutex_, and one published concurrently is seen by a later call.
    return pending_count_.load(std::memory_order_relaxed) != 0;
  }

  // ---- state ----

  AvType type() const noexcept { return type_; }
  bool async() const noexcept { return async_; }
  /// The shared table of a named AV, or nullptr.
  const SharedAvTable* shared() const noexcept { return shared_.get(); }
  Resolver* resolver() const noexcept { return resolver_; }
  /// Valid entries now.
  size_t size() const noexcept;
  /// The index the next insertion gets.
  fi_addr_t next_index() const noexcept;

 private:
  static constexpr uint8_t kFree = 0;     // never published (reserved, pending or failed)
  static constexpr uint8_t kValid = 1;    // lookup() returns it
  static constexpr uint8_t kRemoved = 2;  // removed; the slot is never reused

  struct Slot {
    AvEntry entry;  // written once, before state becomes kValid
    std::atomic<uint8_t> state{kFree};
  };
  struct Chunk {
    Slot slots[kChunkEntries];
  };
  struct UserIdChunk {
    std::atomic<fi_addr_t> ids[kChunkEntries];
  };
  // The user ID of `a` (< kMaxEntries): the one set, else the default (see the file comment).
  fi_addr_t user_id_at(fi_addr_t a) const noexcept {
    // Acquire: pairs with the release store of the chunk pointer in user_id_slot_locked(), so the
    // chunk's defaults are seen.
    const UserIdChunk* c =
        user_ids_ ? user_ids_[a >> kChunkBits].load(std::memory_order_acquire) : nullptr;
    if (!c) return user_ids_open_ ? FI_ADDR_NOTAVAIL : a;
    return c->ids[a & (kChunkEntries - 1)].load(std::memory_order_relaxed);
  }
  // Under mutex_: the ID slot of `a`, its chunk made (filled with defaults) if need be; nullptr
  // when out of memory.
  std::atomic<fi_addr_t>* user_id_slot_locked(fi_addr_t a) noexcept;

  // Reverse map: key = ipv4 << 32 | port << 16 | ep id, hashed (rev_hash); the low bits of the
  // hash place a key, the high 32 are its tag. A slot's word is tag << 32 | (fi_addr + 1), or
  // kRevEmpty, or kRevTomb (fi_addr + 1 <= kMaxEntries < 2^32 - 1: neither is ever an fi_addr).
  static constexpr uint64_t kRevEmpty = 0;
  static constexpr uint64_t kRevTomb = 0xffffffff;
  static_assert(kMaxEntries < kRevTomb);
  struct RevTable {
    explicit RevTable(size_t capacity);
    size_t mask;
    std::unique_ptr<std::atomic<uint64_t>[]> slots;  // value-initialised: kRevEmpty
    size_t used = 0;  // non-empty slots (live + tombstones); writer only
    size_t live = 0;  // writer only
  };
  static uint64_t rev_word(uint64_t hash, fi_addr_t index) noexcept {
    return (hash >> 32) << 32 | (index + 1);
  }
  // Whether `word` names an fi_addr (not empty, not a tombstone) under the tag of `hash`.
  static bool rev_tag_is(uint64_t word, uint64_t hash) noexcept {
    const uint64_t low = word & 0xffffffff;
    return low != kRevEmpty && low != kRevTomb && (word >> 32) == (hash >> 32);
  }
  static fi_addr_t rev_index(uint64_t word) noexcept { return (word & 0xffffffff) - 1; }

  // One address of an insertion call that is not finished yet.
  struct Item {
    size_t pos = 0;       // position in the call (error entries' data)
    fi_addr_t index = 0;  // reserved index
    wire::Address addr;   // as given; MAC filled in when resolved
    int err = 0;          // positive errno once failed
    bool done = false;
  };
  // An asynchronous insertion call still waiting for resolution.
  struct Pending {
    void* context = nullptr;
    fi_addr_t* out = nullptr;  // the application's fi_addr array (may be null)
    std::vector<Item> waiting;
    uint64_t inserted = 0;
    int64_t deadline_ns = 0;
  };

  // Candidates of one insertion call: the address, or the errno it already failed with.
  struct Candidate {
    wire::Address addr;
    int err = 0;
  };
  int insert_batch(std::vector<Candidate>& cands, fi_addr_t* fi_addr, uint64_t flags,
                   void* context) noexcept;
  // Asks the resolver once (no waiting): publishes the item, or fails it when the resolver gave
  // up or `give_up` is set. Returns whether the item is done. Called without mutex_.
  bool try_resolve(Item& item, bool give_up) noexcept;
  // Under mutex_:
  int reserve_locked(size_t n, fi_addr_t* base) noexcept;
  void publish_locked(fi_addr_t index, const wire::Address& addr) noexcept;
  void rev_insert_locked(uint64_t key, fi_addr_t index) noexcept;
  void rev_remove_locked(uint64_t key, fi_addr_t index) noexcept;
  // Under mutex_: the reverse key of the entry at `index` (reserved, so its chunk exists).
  // A reader AV's entries are the shared table's (no slots of its own): false when the writer
  // removed that one since (its map slot is stale).
  bool rev_key_at(fi_addr_t index, uint64_t* key) const noexcept {
    const wire::Address* a;
    if (reader_) {
      const AvEntry* e = reader_->lookup(index);
      if (!e) return false;
      a = &e->addr;
    } else {
      a = &slot(index).entry.addr;  // reserved, so its chunk exists
    }
    *key = rev_key(a->ipv4_be, a->udp_port_be, a->ep_id_be);
    return true;
  }
  // A reader AV: adds the shared table's valid entries to the reverse map when the table changed
  // since the last call. Returns whether it did.
  bool sync_reverse_locked() noexcept;
  // reverse() in the map as it is.
  fi_addr_t probe(uint32_t ipv4_be, uint16_t udp_port_be, uint16_t ep_id_be) const noexcept;
  Slot& slot(fi_addr_t index) const noexcept {
    // Relaxed: under mutex_, which ordered the chunk's allocation (reserve_locked) before us.
    return chunks_[index >> kChunkBits]
        .load(std::memory_order_relaxed)
        ->slots[index & (kChunkEntries - 1)];
  }
  // EQ entries of an async call.
  void report_error(void* context, size_t pos, int err) noexcept;
  void report_complete(void* context, uint64_t inserted) noexcept;

  static uint64_t rev_key(uint32_t ipv4_be, uint16_t port_be, uint16_t ep_be) noexcept {
    return uint64_t{ipv4_be} << 32 | uint64_t{port_be} << 16 | ep_be;
  }

  const AvType type_;
  const bool async_;
  Resolver* const resolver_;
  const int64_t resolve_timeout_ns_;
  const fid_t fid_;
  const wire::AddrFormat format_;
  const Link* const link_;
  const std::unique_ptr<SharedAvTable> shared_;
  const SharedAvTable* const reader_;  // shared_ when it is read-only, else nullptr

  // Data path reads these without a lock.
  std::unique_ptr<std::atomic<Chunk*>[]> chunks_;  // kMaxChunks pointers, set once each
  std::atomic<const RevTable*> rev_{nullptr};
  const bool user_ids_open_;  // Options::user_ids
  // User IDs: kMaxChunks pointers (made with the AV when user_ids_open_, else with the first ID
  // inserted; set once, before has_user_ids_), each set once.
  std::unique_ptr<std::atomic<UserIdChunk*>[]> user_ids_;
  std::atomic<bool> has_user_ids_{false};

  mutable std::mutex mutex_;  // the control mutex: everything below, and publishing
  fi_addr_t next_ = 0;
  size_t valid_ = 0;
  uint64_t synced_generation_ = 0;  // reader: the table's generation the reverse map reflects
  std::vector<std::unique_ptr<RevTable>> rev_tables_;  // current one last; older ones retired
  std::atomic<event::Eq*> eq_{nullptr};                // set once by bind_eq

  std::mutex pending_mutex_;  // taken before mutex_ when both are held
  std::vector<Pending> pending_;
  std::atomic<size_t> pending_count_{0};
};

}  // namespace dpfab::proto
