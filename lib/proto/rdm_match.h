// SPDX-License-Identifier: BSD-3-Clause
//
// Tagged matching for FI_EP_RDM (fi_tagged(3)): the match rule and the index-linked FIFO queues
// the RDM core keeps its posted receives and unexpected messages in (rdm_core.h).
//
// Match rule. A receive posted with (src, tag, ignore) takes a message from `from` with tag `t`
// when both are tagged or both untagged (FI_TAGGED receives never take fi_send messages and
// fi_recv never takes fi_tsend ones), the source agrees (src == FI_ADDR_UNSPEC, or FI_DIRECTED_RECV
// with src == from), and, tagged, ((t ^ tag) & ~ignore) == 0. Among the receives a message could
// take, the one posted first wins; among the messages a receive could take, the one that arrived
// first (its first packet, in the per-peer order) wins: that is FI_ORDER_SAS for matching.
//
// Threading: plain data, owned by whoever owns the RDM core (one thread at a time).
#pragma once

#include <rdma/fabric.h>

#include <cstdint>
#include <vector>

namespace dpfab::proto::rdm {

/// What a posted receive accepts.
struct RecvMatch {
  fi_addr_t src = FI_ADDR_UNSPEC;  ///< FI_ADDR_UNSPEC: any source
  uint64_t tag = 0;
  uint64_t ignore = 0;  ///< tag bits that do not take part in matching
  bool tagged = false;
};

/// Whether a receive with `r` takes a message from `from` with tag `tag` (`tagged`: sent with
/// fi_tsend*).
constexpr bool matches(const RecvMatch& r, fi_addr_t from, uint64_t tag, bool tagged) noexcept {
  if (r.tagged != tagged) return false;
  if (r.src != FI_ADDR_UNSPEC && r.src != from) return false;
  return !tagged || ((tag ^ r.tag) & ~r.ignore) == 0;
}

inline constexpr uint32_t kNone = UINT32_MAX;

/// A FIFO of indices into a pool whose elements have a `uint32_t next` link (one list at a time
/// per link). O(1) push/pop; removal in the middle takes the predecessor found while searching.
template <class Pool>
class IndexFifo {
 public:
  bool empty() const noexcept { return head_ == kNone; }
  uint32_t front() const noexcept { return head_; }
  void push_back(Pool& pool, uint32_t i) noexcept {
    pool[i].next = kNone;
    if (tail_ == kNone) {
      head_ = i;
    } else {
      pool[tail_].next = i;
    }
    tail_ = i;
  }
  uint32_t pop_front(Pool& pool) noexcept {
    uint32_t i = head_;
    if (i == kNone) return kNone;
    head_ = pool[i].next;
    if (head_ == kNone) tail_ = kNone;
    pool[i].next = kNone;
    return i;
  }
  /// Removes `i`, whose predecessor in the list is `prev` (kNone: `i` is the head).
  void remove(Pool& pool, uint32_t i, uint32_t prev) noexcept {
    if (prev == kNone) {
      head_ = pool[i].next;
    } else {
      pool[prev].next = pool[i].next;
    }
    if (tail_ == i) tail_ = prev;
    pool[i].next = kNone;
  }
  /// The first element for which `pred(i)` holds, and its predecessor; {kNone, ...} if none.
  template <class Pred>
  std::pair<uint32_t, uint32_t> find(Pool& pool, Pred&& pred) const noexcept {
    uint32_t prev = kNone;
    for (uint32_t i = head_; i != kNone; prev = i, i = pool[i].next)
      if (pred(i)) return {i, prev};
    return {kNone, kNone};
  }
  template <class F>
  void for_each(Pool& pool, F&& f) const noexcept {
    for (uint32_t i = head_, n; i != kNone; i = n) {
      n = pool[i].next;
      f(i);
    }
  }

 private:
  uint32_t head_ = kNone, tail_ = kNone;
};

/// A free list of pool indices, filled once: get/put never allocate.
class FreeList {
 public:
  explicit FreeList(uint32_t n) : size_(n) {
    free_.reserve(n);
    for (uint32_t i = n; i-- > 0;) free_.push_back(i);
  }
  uint32_t get() noexcept {
    if (free_.empty()) return kNone;
    uint32_t i = free_.back();
    free_.pop_back();
    return i;
  }
  void put(uint32_t i) noexcept { free_.push_back(i); }  // capacity reserved: cannot throw
  size_t available() const noexcept { return free_.size(); }
  size_t in_use() const noexcept { return size_ - free_.size(); }  // of the n indices

 private:
  size_t size_;
  std::vector<uint32_t> free_;
};

}  // namespace dpfab::proto::rdm
