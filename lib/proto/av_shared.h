// SPDX-License-Identifier: BSD-3-Clause
//
// SharedAvTable: the storage behind a named address vector (fi_av_attr::name, FI_SHARED_AV), which
// processes of one node share: "Address vectors may be shared across multiple processes which
// access the same named domain on the same node" (fi_av(3)). One process opens the name for
// writing (it creates the table); others open it with FI_READ and use the fi_addr_t values the
// writer's insertions returned.
//
// A POSIX shared memory object, "/dpfab-av.<name>" ('/' in the name becomes '_'), of fixed size:
//   Header                       magic (set last, release), version, capacity, next index,
//                                valid count, a generation bumped by every publish and removal
//   fi_addr_t map[capacity]      map[i]: the fi_addr of the i-th address inserted, FI_ADDR_NOTAVAIL
//                                while it is not (failed, pending). fi_av_attr::map_addr points
//                                here, in every process ("The only requirement is that an
//                                fi_addr_t returned as part of an fi_av_insert call on one process
//                                is usable on another process which opens an AV of the same name").
//                                fi_addr values are insertion indices, so map[i] is i or NOTAVAIL.
//   Slot slots[capacity]         state (free, valid, removed) and the address, written once
//                                before the state becomes valid (release store).
// The capacity is the writer's fi_av_attr::count (kDefaultCapacity when 0): a shared table does not
// grow, and insertions beyond it fail with FI_ENOSPC.
//
// The writer creates the object anew (an object of the same name left by a process that died is
// replaced; processes that still map the old one keep it) and removes the name when it closes.
// Readers map it read-only: everything they read is an atomic or written before a release store
// they acquire. The atomics are lock-free and address-free (static_asserts), as sharing them
// across processes needs.
//
// Threads: the writer's calls are serialised by its AddressVector (under its control mutex);
// lookup() and the readers' accessors run on any thread, in any process, lock-free.
#pragma once

#include <rdma/fabric.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/fd.h"
#include "common/result.h"
#include "wire/address.h"

namespace dpfab::proto {

struct AvEntry;

class SharedAvTable {
 public:
  static constexpr size_t kDefaultCapacity = 1024;
  /// Bound on a table's size: 2^20 entries (32 MiB).
  static constexpr size_t kMaxCapacity = size_t{1} << 20;

  /// Creates the table `name` with `capacity` entries (0: kDefaultCapacity), replacing any object
  /// of that name. @return the table; -FI_EINVAL for an empty name or a capacity above
  /// kMaxCapacity, -FI_ENOMEM or the errno of shm_open/ftruncate/mmap otherwise.
  static Result<std::unique_ptr<SharedAvTable>> create(const std::string& name, size_t capacity);
  /// Opens the existing table `name` read-only ("the AV must exist").
  /// @return the table; -FI_ENOENT when no table of that name exists, -FI_EINVAL when the object
  ///         is not a table of this version, the errno of shm_open/mmap otherwise.
  static Result<std::unique_ptr<SharedAvTable>> open(const std::string& name);

  ~SharedAvTable();
  SharedAvTable(const SharedAvTable&) = delete;
  SharedAvTable& operator=(const SharedAvTable&) = delete;

  /// The shared memory object's name for an AV name.
  static std::string object_name(const std::string& name);

  // ---- any process, any thread, lock-free ----

  /// The entry of `a`, or nullptr when `a` is not a valid address of the table (never inserted,
  /// failed, pending, removed, beyond the capacity). The entry never changes once valid.
  const AvEntry* lookup(fi_addr_t a) const noexcept;
  /// fi_av_attr::map_addr: map[i] is the fi_addr of the i-th address inserted.
  const fi_addr_t* map() const noexcept { return map_; }
  size_t capacity() const noexcept { return capacity_; }
  /// The index the writer's next insertion gets.
  uint64_t next() const noexcept;
  /// Valid entries now.
  uint64_t valid() const noexcept;
  /// Changes with every publication and removal (readers refresh their reverse map on it).
  uint64_t generation() const noexcept;
  bool writable() const noexcept { return writable_; }

  // ---- the writer, serialised by its AddressVector ----

  /// Indices up to `next` are reserved.
  void set_next(uint64_t next) noexcept;
  /// Publishes `addr` at `index` (< capacity): the slot, then map[index].
  void publish(fi_addr_t index, const wire::Address& addr) noexcept;
  /// Makes `index` invalid for good.
  void remove(fi_addr_t index) noexcept;

 private:
  struct Header;
  struct Slot;
  SharedAvTable(UniqueFd fd, void* base, size_t bytes, bool writable, std::string object);
  static size_t bytes_for(size_t capacity) noexcept;
  Slot* slot(fi_addr_t index) const noexcept;

  UniqueFd fd_;
  void* base_;
  size_t bytes_;
  bool writable_;
  std::string object_;  // unlinked at close by the writer
  Header* header_;
  fi_addr_t* map_;
  size_t capacity_;
};

}  // namespace dpfab::proto
