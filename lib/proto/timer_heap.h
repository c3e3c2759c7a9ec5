// SPDX-License-Identifier: BSD-3-Clause
//
// TimerHeap: the earliest of many timers in O(1), a timer moved in O(log n). An intrusive binary
// min-heap of owners (`T`): each owner keeps its index in the heap (`uint32_t`, kNone outside
// it, reached through `Index`), which the heap updates as entries move, so that set() finds the
// entry without a search. Entries are a key and the owner's address (16 bytes).
//
// The RDM core keeps its peers' timers here (RdmShared::timers): the endpoint reads the
// earliest after every call into the core (RdmEndpoint::finish), which visited every active peer
// before (an all-to-all of 64 ranks: 63 per message), and the timer pass takes the due ones out
// (take_due) where it visited them all.
//
// set() never allocates: reserve() room for every owner first (it may throw). Not thread-safe (the
// RDM core runs under its endpoint's lock).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dpfab::proto {

inline constexpr uint32_t kTimerNone = UINT32_MAX;

template <class T, uint32_t& (*Index)(T&) noexcept>
class TimerHeap {
 public:
  static constexpr uint32_t kNone = kTimerNone;

  /// Room for `n` timers (call as owners are added: set() then never allocates).
  void reserve(size_t n) { v_.reserve(n); }
  size_t capacity() const noexcept { return v_.capacity(); }
  size_t size() const noexcept { return v_.size(); }
  /// The earliest key, or UINT64_MAX when no timer is set.
  uint64_t earliest() const noexcept { return v_.empty() ? UINT64_MAX : v_[0].key; }

  /// Takes the earliest timer out if it is due at `now` (key <= now): @return its owner, or null
  /// when none is due.
  T* take_due(uint64_t now) noexcept {
    if (v_.empty() || v_[0].key > now) return nullptr;
    T* owner = v_[0].owner;
    remove(0);
    return owner;
  }

  /// Takes every timer out.
  void clear() noexcept {
    for (const Entry& e : v_) Index(*e.owner) = kNone;
    v_.clear();
  }

  /// `owner`'s timer is due at `key` now; UINT64_MAX takes it out.
  void set(T* owner, uint64_t key) noexcept {
    const uint32_t at = Index(*owner);
    if (at == kNone) {
      if (key == UINT64_MAX) return;
      v_.push_back({key, owner});  // reserved: no allocation
      up(v_.size() - 1);
      return;
    }
    const size_t i = at;
    const uint64_t old = v_[i].key;
    if (key == old) return;
    if (key == UINT64_MAX) {
      remove(i);
      return;
    }
    v_[i].key = key;
    if (key < old)
      up(i);
    else
      down(i);
  }

 private:
  struct Entry {
    uint64_t key;
    T* owner;
  };

  void put(size_t i, Entry e) noexcept {
    v_[i] = e;
    Index(*e.owner) = static_cast<uint32_t>(i);
  }
  void up(size_t i) noexcept {
    const Entry e = v_[i];
    while (i > 0) {
      const size_t parent = (i - 1) / 2;
      if (v_[parent].key <= e.key) break;
      put(i, v_[parent]);
      i = parent;
    }
    put(i, e);
  }
  void down(size_t i) noexcept {
    const Entry e = v_[i];
    const size_t n = v_.size();
    for (;;) {
      size_t c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && v_[c + 1].key < v_[c].key) ++c;
      if (e.key <= v_[c].key) break;
      put(i, v_[c]);
      i = c;
    }
    put(i, e);
  }
  void remove(size_t i) noexcept {
    Index(*v_[i].owner) = kNone;
    const Entry last = v_.back();
    v_.pop_back();
    if (i == v_.size()) return;  // it was the last
    put(i, last);
    if (i > 0 && last.key < v_[(i - 1) / 2].key)
      up(i);
    else
      down(i);
  }

  std::vector<Entry> v_;
};

}  // namespace dpfab::proto
