// SPDX-License-Identifier: BSD-3-Clause
//
// Fault injection on a port's receive side, for testing what runs above the port (RDM's
// reliability, the decoder's checksums): each frame a poll step takes from the queue may be
// lost, corrupted, duplicated or held back behind later frames, at the rates of the fault_* keys
// (config::FaultConfig, fi_dpdk(7)). Off by default; a PortEngine with no injector pays one
// predictable branch per burst.
//
// Three layers, the first two free of DPDK so that they are unit-tested without EAL:
//   - FaultDice: the decisions, from a seeded splitmix64 generator (same seed, same frames:
//     same faults);
//   - Faulter<Frame>: a burst's faults over any frame handle, given by an Ops policy (what is
//     faultable, how to flip a bit, copy, free), with the small queue of held frames;
//   - FaultInjector: Faulter over rte_mbuf (faults.cc), what PortEngine calls.
//
// Which frames: IPv4/UDP only (dpfab's data, and anything else on UDP). ARP and IGMP pass
// untouched, so that neighbour resolution still works at any loss rate. Corruption flips one bit
// of the IPv4 packet (IPv4 header, UDP header or payload), never of the Ethernet header nor
// padding after the packet: those are covered by no checksum the decoder verifies (on a wire, the
// Ethernet FCS covers them), so every corrupted frame is one the decoder's IPv4 header or UDP
// checksum must reject (one exception, a flip that turns the UDP checksum into 0, "none
// computed", has odds of about 1 in 10^6 per corrupted frame).
//
// Threads: a Faulter/FaultInjector belongs to the port's RX owner (the _st calls); its counters
// (FaultStats) are read by any thread.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/config.h"
#include "common/counter.h"

struct rte_mbuf;
struct rte_mempool;

namespace dpfab::progress {

/// Per port; written by the RX owner only (bump), read relaxed by anyone (telemetry).
struct FaultStats {
  std::atomic<uint64_t> dropped{0};     ///< frames freed instead of handled
  std::atomic<uint64_t> reordered{0};   ///< frames held back behind later ones
  std::atomic<uint64_t> duplicated{0};  ///< copies made (each handled after its original)
  std::atomic<uint64_t> corrupted{0};   ///< frames with one bit flipped
};

/// The decisions for one frame, from a seeded generator. Deterministic: the same seed and the
/// same sequence of decide() calls give the same decisions.
class FaultDice {
 public:
  struct Decision {
    bool drop = false;     ///< lose it (then nothing else applies)
    bool corrupt = false;  ///< flip bit `bit` of byte `byte` (of the span given to decide)
    bool dup = false;      ///< handle a copy too
    bool hold = false;     ///< hold it back behind later frames
    uint32_t byte = 0;
    uint8_t bit = 0;
  };

  /// `f`'s rates are probabilities in [0, 1] (config::load checks them); `stream` tells apart
  /// the generators of one seed (PortEngine uses the port id).
  FaultDice(const config::FaultConfig& f, uint64_t stream) noexcept;
  /// Decides for a frame of which `span` bytes may be corrupted (span 0: no corruption). Draws
  /// the same number of values whatever the decision, so one frame's fate does not shift the
  /// next ones'.
  Decision decide(uint32_t span) noexcept;
  /// The next value of the generator (splitmix64).
  uint64_t next() noexcept;

 private:
  // A rate p as a threshold on 53-bit draws: an event when (next() >> 11) < threshold; p = 1 gives
  // 2^53 (always), p = 0 gives 0 (never).
  static uint64_t threshold(double p) noexcept;
  bool draw(uint64_t threshold) noexcept { return (next() >> 11) < threshold; }

  uint64_t state_;
  uint64_t loss_, corrupt_, dup_, reorder_;
};

/// A burst's faults over frames of type `Frame` (a pointer-like handle). `Ops` provides:
///   uint32_t span(Frame, uint32_t* first)  bytes that may be corrupted, from *first; 0 = not a
///                                          frame to fault (passed on untouched, no draw);
///   bool flip(Frame&, uint32_t offset, uint8_t bit)  may replace the frame by a private copy
///                                          first (one shared with a sender); false when it could
///                                          not (the frame is then left as it was);
///   Frame copy(Frame)                      a deep copy, or a null handle when none can be made;
///   void free(Frame).
template <typename Frame>
class Faulter {
 public:
  /// Frames held back for reordering at most (beyond: not reordered).
  static constexpr uint16_t kMaxReorder = 8;
  /// Frames kept for the next call at most: held back, or that did not fit in a burst (copies).
  static constexpr uint16_t kHeldCap = 64;
  /// The largest burst apply_burst_st takes.
  static constexpr uint16_t kMaxBurst = 64;

  Faulter(const config::FaultConfig& f, uint64_t stream, FaultStats* stats) noexcept
      : dice_(f, stream), stats_(stats) {}

  /// Applies faults to the `n` frames of `frames` (a burst just received; room for `cap`,
  /// n <= cap <= kMaxBurst), in place: returns how many frames `frames` now holds, in the order to
  /// handle them. Lost frames are freed; a copy follows its original; a frame held back comes out
  /// of the next call, after the first frame of that call (or alone, on a call with no frames: an
  /// idle poll releases everything held). A copy is made only while the frames kept for the next
  /// call stay within kHeldCap. RX owner.
  template <typename Ops>
  uint16_t apply_burst_st(Frame* frames, uint16_t n, uint16_t cap, Ops& ops) noexcept;
  /// Frames kept for the next call.
  uint16_t held() const noexcept { return nheld_; }
  /// Frees the frames kept (close).
  template <typename Ops>
  void free_held(Ops& ops) noexcept {
    for (uint16_t i = 0; i < nheld_; ++i) ops.free(held_[i]);
    nheld_ = 0;
  }

 private:
  FaultDice dice_;
  FaultStats* stats_;
  Frame held_[kHeldCap] = {};
  uint16_t nheld_ = 0;
};

template <typename Frame>
template <typename Ops>
uint16_t Faulter<Frame>::apply_burst_st(Frame* frames, uint16_t n, uint16_t cap,
                                        Ops& ops) noexcept {
  // n <= cap <= kMaxBurst (PortEngine: n <= cap = kBurst = 32).
  Frame in[kMaxBurst], late[kHeldCap];
  for (uint16_t i = 0; i < n; ++i) in[i] = frames[i];
  const uint16_t nlate = nheld_;  // held by the previous call: out after this call's first frame
  for (uint16_t i = 0; i < nlate; ++i) late[i] = held_[i];
  nheld_ = 0;
  // The output goes to `frames` while there is room, then to held_ (for the next call).
  uint16_t out = 0, late_out = 0;
  auto emit = [&](Frame f) {
    if (out < cap)
      frames[out++] = f;
    else
      held_[nheld_++] = f;  // room: see the copy rule below
  };
  auto emit_late = [&] {
    while (late_out < nlate) emit(late[late_out++]);
  };
  for (uint16_t i = 0; i < n; ++i) {
    Frame f = in[i];
    uint32_t first = 0;
    const uint32_t span = ops.span(f, &first);
    if (span == 0) {
      emit(f);
    } else {
      FaultDice::Decision d = dice_.decide(span);
      if (d.drop) {
        ops.free(f);
        bump(stats_->dropped);
        continue;
      }
      if (d.corrupt && ops.flip(f, first + d.byte, d.bit)) bump(stats_->corrupted);
      if (d.hold && nheld_ + (nlate - late_out) < kMaxReorder) {
        held_[nheld_++] = f;
        bump(stats_->reordered);
        continue;  // a copy of it is not made: the frame is late, not doubled
      }
      emit(f);
      // A copy only when everything still to come fits in this burst and kHeldCap: this frame's
      // copy, the frames after it, the late ones not out yet.
      const uint32_t to_come = 1u + (n - i - 1u) + (nlate - late_out);
      if (d.dup && out + nheld_ + to_come <= static_cast<uint32_t>(cap) + kHeldCap) {
        if (Frame c = ops.copy(f)) {
          emit(c);
          bump(stats_->duplicated);
        }
      }
    }
    emit_late();  // the late frames follow the first frame out
  }
  emit_late();
  return out;
}

/// Faulter over rte_mbuf: a port's receive side. Copies come from `pool`. RX owner.
class FaultInjector {
 public:
  FaultInjector(const config::FaultConfig& f, uint16_t port_id, rte_mempool* pool,
                FaultStats* stats) noexcept;
  /// Frees the frames it holds.
  ~FaultInjector();
  FaultInjector(const FaultInjector&) = delete;
  FaultInjector& operator=(const FaultInjector&) = delete;

  /// Faulter::apply_burst_st on a burst just received (`n` mbufs, room for `cap`). `*received`
  /// (the frames taken from the queue, for "is the queue empty?") is raised to `cap` while frames
  /// are held: the caller must poll again before it sleeps, and that poll releases them.
  uint16_t apply_burst_st(rte_mbuf** pkts, uint16_t n, uint16_t cap, uint16_t* received) noexcept;

 private:
  struct Ops {
    rte_mempool* pool;
    uint32_t span(rte_mbuf* m, uint32_t* first) noexcept;
    bool flip(rte_mbuf*& m, uint32_t offset, uint8_t bit) noexcept;
    rte_mbuf* copy(rte_mbuf* m) noexcept;
    void free(rte_mbuf* m) noexcept;
  };
  Ops ops_;
  Faulter<rte_mbuf*> faulter_;
};

}  // namespace dpfab::progress
