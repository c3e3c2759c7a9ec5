// SPDX-License-Identifier: BSD-3-Clause
#include "progress/engine.h"

#include <rdma/fi_errno.h>
#include <rte_byteorder.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <sched.h>

#include <cstring>
#include <ctime>
#include <map>
#include <mutex>

#include "progress/wakeup.h"

namespace dpfab::progress {
namespace {

constexpr uint16_t kBurst = 32;
constexpr uint16_t kEphemeralFirst = 49152;

// Process-lifetime registry, never destroyed (see lib/port: libfabric's cleanup runs from a
// destructor).
struct Registry {
  std::mutex mutex;
  std::map<uint16_t, std::unique_ptr<PortEngine>> engines;  // by port id
};
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

}  // namespace

PortEngine::PortEngine(port::Port* p)
    : port_(p),
      port_id_(p->info().port_id),
      ipv4_be_(rte_cpu_to_be_32(p->info().ipv4)),
      tx_caps_(),  // ports are configured without TX offloads: checksums in software
      demux_(new std::atomic<proto::Receiver*>[65536]) {
  for (size_t i = 0; i < 65536; ++i) demux_[i].store(nullptr, std::memory_order_relaxed);
}

Result<PortEngine*> PortEngine::of(port::Port* p) {
  if (!p || !p->info().created || !p->mempool())
    return make_error(-FI_ENODEV, "port is owned by the application: no data path on it");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto& slot = r.engines[p->info().port_id];
  if (!slot) {
    slot.reset(new (std::nothrow) PortEngine(p));
    if (!slot) return make_error(-FI_ENOMEM, "port engine: out of memory");
  }
  return slot.get();
}

void PortEngine::close_all() noexcept {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.engines.clear();
}

int PortEngine::bind(uint16_t udp_port_be, proto::Receiver* r) noexcept {
  proto::Receiver* expected = nullptr;
  if (!demux_[rte_be_to_cpu_16(udp_port_be)].compare_exchange_strong(
          expected, r, std::memory_order_release, std::memory_order_relaxed))
    return -FI_EADDRINUSE;
  for (size_t i = 0; i < kMaxReceivers; ++i) {
    proto::Receiver* free_slot = nullptr;
    if (receivers_[i].compare_exchange_strong(free_slot, r, std::memory_order_release,
                                              std::memory_order_relaxed)) {
      size_t used = receivers_used_.load(std::memory_order_relaxed);
      while (used < i + 1 &&
             !receivers_used_.compare_exchange_weak(used, i + 1, std::memory_order_release)) {
      }
      return FI_SUCCESS;
    }
  }
  demux_[rte_be_to_cpu_16(udp_port_be)].store(nullptr, std::memory_order_release);
  return -FI_ENOSPC;  // more endpoints on one port than kMaxReceivers
}

uint16_t PortEngine::bind_ephemeral(proto::Receiver* r) noexcept {
  for (uint32_t port = kEphemeralFirst; port <= 65535; ++port)
    if (bind(rte_cpu_to_be_16(static_cast<uint16_t>(port)), r) == FI_SUCCESS)
      return rte_cpu_to_be_16(static_cast<uint16_t>(port));
  return 0;
}

void PortEngine::unbind(uint16_t udp_port_be) noexcept {
  proto::Receiver* r =
      demux_[rte_be_to_cpu_16(udp_port_be)].exchange(nullptr, std::memory_order_seq_cst);
  for (auto& slot : receivers_) {
    proto::Receiver* expected = r;
    if (r && slot.compare_exchange_strong(expected, nullptr, std::memory_order_seq_cst)) break;
  }
  // A poll step that loaded the old pointer holds rx_busy_ until it is done with it.
  while (rx_busy_.load(std::memory_order_seq_cst)) rx_wait();
}

void PortEngine::rx_wait() noexcept {
  for (int i = 0; i < 64; ++i) rte_pause();
  sched_yield();
}

uint16_t PortEngine::transmit(rte_mbuf** frames, uint16_t n) noexcept {
  while (tx_lock_.exchange(true, std::memory_order_acquire))
    while (tx_lock_.load(std::memory_order_relaxed)) rte_pause();
  uint16_t sent = rte_eth_tx_burst(port_id_, 0, frames, n);
  tx_lock_.store(false, std::memory_order_release);
  stats_.tx_frames.fetch_add(sent, std::memory_order_relaxed);
  if (sent != n) stats_.tx_full.fetch_add(1, std::memory_order_relaxed);
  on_transmit(port_id_);  // a parked lcore comes back: the answer is likely on its way
  return sent;
}

PortEngine::Handled PortEngine::handle(rte_mbuf* m) noexcept {
  wire::Frame f;
  switch (wire::decode_mbuf(m, &f, decode_)) {
    case wire::Verdict::kData: {
      proto::Receiver* r = demux_[rte_be_to_cpu_16(f.dst_port_be)].load(std::memory_order_acquire);
      if (!r) {
        stats_.no_listener.fetch_add(1, std::memory_order_relaxed);
        return Handled::kFree;
      }
      return r->deliver(f, m) ? Handled::kKept : Handled::kDelivered;
    }
    case wire::Verdict::kArp: {
      stats_.arp.fetch_add(1, std::memory_order_relaxed);
      wire::Local local{port_->info().mac, ipv4_be_};
      uint8_t reply[wire::kMinFrameLen];
      auto r = wire::handle_arp_st(std::span<const uint8_t>(f.payload, f.payload_len), local,
                                   neigh_, static_cast<uint64_t>(now_ns()), reply, arp_stats_);
      if (r.reply_len) send_raw(reply, r.reply_len);
      break;
    }
    default:
      break;  // rejected: counted by the decoder
  }
  return Handled::kFree;
}

size_t PortEngine::drain_backlogs() noexcept {
  size_t done = 0;
  const size_t used = receivers_used_.load(std::memory_order_acquire);
  for (size_t i = 0; i < used; ++i) {
    proto::Receiver* r = receivers_[i].load(std::memory_order_acquire);
    if (r && r->has_backlog()) done += r->drain_backlog();
  }
  return done;
}

size_t PortEngine::progress() noexcept {
  // One receive owner at a time; others return at once (they have nothing to wait for).
  if (rx_busy_.load(std::memory_order_relaxed) ||
      rx_busy_.exchange(true, std::memory_order_acquire))
    return 0;
  size_t delivered = drain_backlogs();  // frames held for receives posted since
  rte_mbuf* pkts[kBurst];
  uint16_t n = rte_eth_rx_burst(port_id_, 0, pkts, kBurst);
  uint16_t to_free = 0;
  for (uint16_t i = 0; i < n; ++i) {
    Handled h = handle(pkts[i]);
    delivered += h == Handled::kDelivered;
    if (h != Handled::kKept) pkts[to_free++] = pkts[i];
  }
  if ((++polls_ & 255) == 0 || (n == 0 && neigh_pending_.load(std::memory_order_relaxed)))
    tick_neighbours();
  rx_busy_.store(false, std::memory_order_release);
  if (n) {
    rte_pktmbuf_free_bulk(pkts, to_free);
    stats_.rx_frames.fetch_add(n, std::memory_order_relaxed);
  }
  return delivered;
}

int64_t PortEngine::now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void PortEngine::send_raw(const uint8_t* frame, size_t len) noexcept {
  rte_mbuf* m = rte_pktmbuf_alloc(port_->mempool());
  if (!m) return;
  char* p = rte_pktmbuf_append(m, static_cast<uint16_t>(len));
  if (!p) {
    rte_pktmbuf_free(m);
    return;
  }
  std::memcpy(p, frame, len);
  if (transmit(&m, 1) != 1)
    rte_pktmbuf_free(m);
  else
    stats_.arp_sent.fetch_add(1, std::memory_order_relaxed);
}

void PortEngine::tick_neighbours() noexcept {
  uint32_t want[16];
  size_t n = neigh_.tick_st(static_cast<uint64_t>(now_ns()), want);
  wire::Local local{port_->info().mac, ipv4_be_};
  for (size_t i = 0; i < n; ++i) {
    uint8_t frame[wire::kMinFrameLen];
    if (size_t len = wire::build_arp_request(frame, local, want[i])) send_raw(frame, len);
  }
  // Keep ticking on idle polls while a resolution is under way.
  neigh_pending_.store(n != 0 || neigh_.next_due_st() != UINT64_MAX, std::memory_order_relaxed);
  timer_due_ns_.store(neigh_.next_due_st(), std::memory_order_relaxed);
}

std::optional<rte_ether_addr> PortEngine::resolve(uint32_t ipv4_be) noexcept {
  if (ipv4_be == ipv4_be_) return port_->info().mac;  // ourselves: frames loop back on the port
  if (auto n = neigh_.lookup(ipv4_be); n && n->state == wire::NeighState::kReachable) return n->mac;
  neigh_.request_resolve(ipv4_be);
  neigh_pending_.store(true, std::memory_order_relaxed);
  timer_due_ns_.store(0, std::memory_order_relaxed);  // due now: the next poll step sends it
  return std::nullopt;
}

bool PortEngine::resolve_failed(uint32_t ipv4_be) const noexcept {
  auto n = neigh_.lookup(ipv4_be);
  return n && n->state == wire::NeighState::kFailed;
}

void PortEngine::announce() noexcept {
  uint8_t frame[wire::kMinFrameLen];
  wire::Local local{port_->info().mac, ipv4_be_};
  if (size_t len = wire::build_gratuitous_arp(frame, local)) send_raw(frame, len);
}

}  // namespace dpfab::progress
