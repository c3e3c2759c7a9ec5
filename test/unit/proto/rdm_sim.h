// SPDX-License-Identifier: BSD-3-Clause
//
// A simulated network for the RDM core (lib/proto/rdm_core.h): N nodes, each an RdmCore whose
// frames go through a link with seeded loss, duplication, reordering (random delay) and bit
// corruption, on a simulated clock. Frames travel as the bytes a port sends: Ethernet, IPv4, UDP
// and dpfab headers from wire::encode_frame (checksums computed) around the RDM header
// (encode_rdm) and the data; the receiving side runs wire::decode_frame (a corrupted frame fails
// its IPv4 or UDP checksum there) and wire::decode_rdm, as the port path will. Deterministic: one
// seed, one run.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <queue>
#include <vector>

#include "proto/rdm_core.h"
#include "wire/decoder.h"
#include "wire/encoder.h"
#include "wire/format.h"
#include "wire/rdm.h"

namespace rdm_sim {

using namespace dpfab::proto::rdm;
using dpfab::wire::RdmHeader;

/// splitmix64: a small PRNG whose sequence is the same everywhere.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  bool chance(uint32_t ppm) { return below(1'000'000) < ppm; }
};

struct LinkModel {
  uint32_t loss_ppm = 0, dup_ppm = 0, corrupt_ppm = 0;
  uint32_t refuse_ppm = 0;  // the sender's port refuses the frame (TX queue full)
  uint64_t latency_ns = 10'000, jitter_ns = 0;  // jitter > 0 reorders
};

class Net;

class Node final : public CoreSink {
 public:
  Node(Net* net, int id) : net_(net), id_(id) {}
  bool transmit(fi_addr_t peer, const RdmHeader& h,
                std::span<const uint8_t> data) noexcept override;
  void complete(const Completion& c) noexcept override {
    if (c.cq) done.push_back(c);  // what a CQ would get (cq false: counters only)
    if (c.count) ++(c.err ? counted_err : counted);  // what a counter would get
  }

  std::unique_ptr<RdmCore> core;
  std::vector<Completion> done;
  uint64_t counted = 0, counted_err = 0;

 private:
  Net* net_;
  int id_;
};

class Net {
 public:
  Net(int n, const CoreConfig& cfg, uint64_t seed, LinkModel model = {})
      : rng_(seed), model_(model) {
    for (int i = 0; i < n; ++i) {
      auto node = std::make_unique<Node>(this, i);
      CoreConfig c = cfg;
      c.epoch = 0x1000 + i;
      auto r = RdmCore::create(c, node.get());
      EXPECT_TRUE(r.ok());
      node->core = std::move(r.value());
      nodes_.push_back(std::move(node));
    }
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (i != j) {
          EXPECT_EQ(nodes_[i]->core->add_peer(j), 0);
        }
  }

  Node& node(int i) { return *nodes_[i]; }
  RdmCore& core(int i) { return *nodes_[i]->core; }
  uint64_t now() const { return now_; }
  LinkModel& model() { return model_; }
  /// Frames from `from` to `to` vanish while set (a dead peer, a cut cable).
  void cut(int from, int to, bool down) { cut_[from * 64 + to] = down; }

  uint64_t frames_sent = 0, frames_dropped = 0, frames_corrupted = 0, frames_rejected = 0;
  uint64_t frames_refused = 0;
  /// FNV-1a over the bytes of every frame sent, in order: two runs that sent the same frames in
  /// the same order have the same hash.
  uint64_t wire_hash = 0xcbf29ce484222325ull;
  dpfab::wire::DecodeStats frame_stats;
  dpfab::wire::RdmDecodeStats decode_stats;

  /// Sees every frame a node hands to its port (before the link's faults), when set.
  std::function<void(int from, int to, const RdmHeader& h)> on_send;

  /// One frame from `from` to `to`; false when the (simulated) port refused it.
  bool send(int from, int to, const RdmHeader& h, std::span<const uint8_t> data) {
    if (on_send) on_send(from, to, h);
    if (rng_.chance(model_.refuse_ppm)) {
      ++frames_refused;
      return false;
    }
    ++frames_sent;
    namespace w = dpfab::wire;
    const size_t hl = w::rdm_header_len(h.kind);
    Frame f;
    f.from = from;
    f.to = to;
    f.bytes.resize(w::kOverhead + hl + data.size());
    const int n = w::encode_rdm({f.bytes.data() + w::kPayloadOffset, hl}, h, data.size());
    EXPECT_EQ(n, static_cast<int>(hl));
    if (!data.empty())
      std::memcpy(f.bytes.data() + w::kPayloadOffset + hl, data.data(), data.size());
    const auto outer = w::rdm_outer_header(static_cast<uint16_t>(from), static_cast<uint16_t>(to),
                                           static_cast<uint32_t>(hl + data.size()));
    w::Route route;
    route.src_mac.addr_bytes[0] = route.dst_mac.addr_bytes[0] = 2;
    route.src_mac.addr_bytes[5] = static_cast<uint8_t>(from + 1);
    route.dst_mac.addr_bytes[5] = static_cast<uint8_t>(to + 1);
    route.src_ip_be = __builtin_bswap32(0x0a000001u + static_cast<uint32_t>(from));
    route.dst_ip_be = __builtin_bswap32(0x0a000001u + static_cast<uint32_t>(to));
    route.src_port_be = route.dst_port_be = __builtin_bswap16(9228);
    EXPECT_EQ(w::encode_frame(f.bytes, route, outer, static_cast<uint16_t>(frames_sent)), 0);
    for (uint8_t b : f.bytes) wire_hash = (wire_hash ^ b) * 0x100000001b3ull;
    if (cut_[from * 64 + to] || rng_.chance(model_.loss_ppm)) {
      ++frames_dropped;
      return true;
    }
    if (rng_.chance(model_.corrupt_ppm)) {
      ++frames_corrupted;
      const uint64_t bit = rng_.below(f.bytes.size() * 8);
      f.bytes[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    }
    const int copies = rng_.chance(model_.dup_ppm) ? 2 : 1;
    for (int c = 0; c < copies; ++c) {
      f.at = now_ + model_.latency_ns + rng_.below(model_.jitter_ns + 1);
      f.order = order_++;
      q_.push(f);
    }
    return true;
  }

  /// Runs until `done()` holds or nothing is left to happen or `limit_ns` of simulated time
  /// passed. Returns whether done() held.
  template <class Done>
  bool run(Done&& done, uint64_t limit_ns = 60'000'000'000ull) {
    const uint64_t end = now_ + limit_ns;
    for (;;) {
      if (done()) return true;
      while (!q_.empty() && q_.top().at <= now_) {
        Frame f = q_.top();
        q_.pop();
        arrive(f);
      }
      for (auto& n : nodes_) {
        EXPECT_TRUE(n->core->timers_consistent()) << "before progress, node " << n.get();
        n->core->progress(now_);
        EXPECT_TRUE(n->core->timers_consistent()) << "after progress, node " << n.get();
      }
      if (done()) return true;
      uint64_t next = q_.empty() ? UINT64_MAX : q_.top().at;
      for (auto& n : nodes_) next = std::min(next, n->core->next_deadline());
      if (next == UINT64_MAX || next > end) return done();
      now_ = std::max(now_ + 1, next);
    }
  }

 private:
  struct Frame {
    uint64_t at = 0, order = 0;
    int from = 0, to = 0;
    std::vector<uint8_t> bytes;
    bool operator>(const Frame& o) const { return at != o.at ? at > o.at : order > o.order; }
  };

  void arrive(const Frame& f) {
    dpfab::wire::Frame fr;
    if (dpfab::wire::decode_frame(f.bytes, &fr, frame_stats) != dpfab::wire::Verdict::kData) {
      ++frames_rejected;  // corrupted: a checksum or a header check caught it
      return;
    }
    RdmHeader h;
    std::span<const uint8_t> data;
    if (dpfab::wire::decode_rdm(fr.header, {fr.payload, fr.payload_len}, &h, &data, decode_stats) !=
        dpfab::wire::RdmVerdict::kOk) {
      ADD_FAILURE() << "a frame we sent did not decode";
      return;
    }
    nodes_[f.to]->core->on_frame(static_cast<fi_addr_t>(f.from), h, data, now_);
  }

  std::vector<std::unique_ptr<Node>> nodes_;
  std::priority_queue<Frame, std::vector<Frame>, std::greater<Frame>> q_;
  Rng rng_;
  LinkModel model_;
  uint64_t now_ = 1'000'000;
  uint64_t order_ = 0;
  bool cut_[64 * 64] = {};
};

inline bool Node::transmit(fi_addr_t peer, const RdmHeader& h,
                           std::span<const uint8_t> data) noexcept {
  return net_->send(id_, static_cast<int>(peer), h, data);
}

/// A config with simulated-time parameters that keep tests short.
inline CoreConfig test_config() {
  CoreConfig c;
  c.rel.rto_init_ns = 200'000;
  c.rel.rto_min_ns = 50'000;
  c.rel.rto_max_ns = 20'000'000;
  c.rel.max_retries = 8;
  c.rel.peer_timeout_ns = 0;  // retries alone decide
  c.rel.ack_delay_ns = 5'000;
  c.rel.rnr_backoff_min_ns = 20'000;
  c.rel.rnr_backoff_max_ns = 2'000'000;
  c.rel.keepalive_ns = 2'000'000;
  c.seg_size = 1024;
  c.eager_max = 8192;
  c.max_msg_size = 64ull << 20;
  c.unexpected_slots = 16;
  c.unexpected = 64;
  c.reorder_slots = 256;
  c.timer_heap_from = 0;  // every active peer's timers in the heap, checked every step (run)
  return c;
}

/// Bytes of message `id`: a pattern that differs per message and per byte.
inline std::vector<uint8_t> pattern(uint64_t id, size_t len) {
  std::vector<uint8_t> v(len);
  Rng r(id * 7919 + 1);
  for (size_t i = 0; i < len; i += 8) {
    uint64_t x = r.next();
    std::memcpy(v.data() + i, &x, std::min<size_t>(8, len - i));
  }
  return v;
}

}  // namespace rdm_sim
