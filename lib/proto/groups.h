// SPDX-License-Identifier: BSD-3-Clause
//
// GroupTable: which endpoints of a port receive an IPv4 multicast group. A membership is
// (group IPv4, UDP port, Receiver): a group frame is delivered to every receiver whose group and
// UDP port equal the frame's destination (fi_join: several endpoints, in one process or in
// several, may join one group; each gets its own copy). The endpoint's own UDP port plays no
// part: members of 239.1.2.3:9228 receive frames sent to 239.1.2.3:9228 whatever port they are
// bound to.
//
// Threads. add/remove are the control path (fi_join, fi_close on the group), serialised by a
// mutex. for_each_member is the receive path, called by the one thread that owns the port's
// receive side: no lock, two atomic loads per slot in use. remove() does not wait for a receive
// step that may still be delivering to the receiver it removed: the caller (the port engine)
// waits for the receive side to be free afterwards, as for an unbind.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "proto/endpoint.h"

namespace dpfab::proto {

struct GroupStats {
  std::atomic<uint64_t> delivered{0};  ///< copies handed to members
  std::atomic<uint64_t> no_member{0};  ///< group frames for a group/port nobody here joined
};

class GroupTable {
 public:
  /// Memberships per port (all endpoints together).
  static constexpr size_t kMaxMembers = 256;

  /// Adds a membership. Control path.
  /// @return 0; -FI_EALREADY when `r` is a member of this group and port already; -FI_ENOSPC
  ///         when kMaxMembers memberships exist; -FI_EINVAL when `r` is null.
  int add(uint32_t group_be, uint16_t udp_port_be, Receiver* r) noexcept;
  /// Removes a membership. Control path. On return no *new* delivery to `r` for it starts; one
  /// under way may still finish (see the header comment).
  /// @return 0; -FI_ENOENT when there is no such membership.
  int remove(uint32_t group_be, uint16_t udp_port_be, Receiver* r) noexcept;
  /// Memberships of group `group_be` on any UDP port (the port's interest in the group: its MAC
  /// filter and IGMP). Control path.
  size_t members_of(uint32_t group_be) const noexcept;
  /// Memberships now. Any thread.
  size_t size() const noexcept { return count_.load(std::memory_order_relaxed); }

  /// Calls fn(Receiver*) for each member of (group_be, udp_port_be); returns how many. Receive
  /// owner only.
  template <typename Fn>
  size_t for_each_member(uint32_t group_be, uint16_t udp_port_be, Fn&& fn) const noexcept {
    const uint64_t want = key(group_be, udp_port_be);
    size_t n = 0;
    // Acquire: pairs with the release in add(), so slots below the mark are seen initialised.
    const size_t used = used_.load(std::memory_order_acquire);
    for (size_t i = 0; i < used; ++i) {
      // Acquire: pairs with the release store of the key in add(): the receiver written before it
      // is the one seen.
      if (slots_[i].key.load(std::memory_order_acquire) != want) continue;
      // Acquire: pairs with the release store of the receiver in add(). A slot freed and reused
      // (another add) since the key was read shows its new key on the second read, so the
      // receiver read in between is used only if it is a member of this group and port.
      Receiver* r = slots_[i].receiver.load(std::memory_order_acquire);
      if (r && slots_[i].key.load(std::memory_order_relaxed) == want) fn(r), ++n;
    }
    return n;
  }

 private:
  // key: valid bit | group << 16 | port; 0 is a free slot.
  static constexpr uint64_t kValid = uint64_t{1} << 48;
  static constexpr uint64_t key(uint32_t group_be, uint16_t port_be) noexcept {
    return kValid | uint64_t{group_be} << 16 | port_be;
  }
  struct Slot {
    std::atomic<uint64_t> key{0};
    std::atomic<Receiver*> receiver{nullptr};
  };
  mutable std::mutex mutex_;  // add/remove/members_of
  Slot slots_[kMaxMembers];
  std::atomic<size_t> used_{0};  // slots ever used: the receive path scans only these
  std::atomic<size_t> count_{0};
};

}  // namespace dpfab::proto
