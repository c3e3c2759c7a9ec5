// SPDX-License-Identifier: BSD-3-Clause
#include "progress/engine.h"

#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/fi_errno.h>
#include <rte_byteorder.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_pause.h>
#include <sched.h>
#include <signal.h>

#include <cstring>
#include <ctime>
#include <map>
#include <mutex>

#include "common/clock.h"
#include "common/counter.h"
#include "common/lockcheck.h"
#include "common/log.h"
#include "port/burst_guard.h"
#include "wait/wake_batch.h"
#include "wire/multicast.h"
#include "wire/rdm.h"

namespace dpfab::progress {
namespace {

constexpr uint16_t kBurst = PortEngine::kRxBurst;
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
  wake_.init(port_id_, p->info().rx_interrupt);
  if (p->info().placeholder) wake_.set_no_rx();  // nothing arrives on it: nothing to poll
  // Receivers' backlogs may hold at most half the pool; the other half is left to the PMD's
  // receive ring and to transmit (fi_dpdk(7), FI_DPDK_MBUFS).
  set_held_limit(p->mempool()->size / 2);
  memif_ = p->info().driver == "net_memif";
  // A memif peer's exit unmaps the rings under a burst (port/burst_guard.h): memif's bursts run
  // guarded. Without the handler (sigaction failed) they run as before.
  if (memif_ && !port::install_burst_guard())
    DPFAB_INFO(FI_LOG_CORE,
               "port %s: no SIGSEGV handler for memif's bursts: a peer that exits "
               "while this process polls may crash it",
               p->info().name.c_str());
  stopped_ = p->info().created && !p->device_started();  // no bursts until a restart succeeds
  // udp_checksum = auto (set_udp_checksum): none on links that stay in this host's memory.
  tx_caps_.udp_none = memif_ || p->info().driver == "net_ring" || p->info().placeholder;
  loopback_alias_ = memif_ || p->info().driver == "net_ring";
  shared_link_ = p->info().driver == "net_af_packet" || p->info().driver == "net_af_xdp";
  prefault_pending_ = memif_;
  // Their tx bursts copy every segment of every frame they take and free it before returning
  // (checked with chained frames: test/integration/rdm, fi_pingpong -c over af_packet). memif's
  // zero-copy mode instead hands the peer the mbufs' own memory, af_xdp copies only a frame's
  // first segment, a NIC reads the frame by DMA after the burst returns; net_tap's writev would
  // do, but is not checked yet.
  tx_copies_ = (memif_ && p->info().spec.find("zero-copy=yes") == std::string::npos) ||
               p->info().driver == "net_af_packet";
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

void PortEngine::for_each(void (*fn)(const PortEngine&, void*), void* arg) noexcept {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const auto& [id, e] : r.engines)
    if (e) fn(*e, arg);
}

void PortEngine::close_all() noexcept {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.engines.clear();
}

int PortEngine::bind(uint16_t udp_port_be, proto::Receiver* r) noexcept {
  // The application's choice: claimed when no other process holds it, bound either way.
  return bind_claimed(udp_port_be, r,
                      shared_link_ ? claims_.try_claim(mac(), ipv4_be_, udp_port_be) : UniqueFd());
}

int PortEngine::bind_claimed(uint16_t udp_port_be, proto::Receiver* r, UniqueFd claim) noexcept {
  if (int rc = bind_demux(udp_port_be, r); rc != FI_SUCCESS) return rc;
  if (claim.valid()) {
    std::lock_guard lock(claims_mutex_);
    try {
      held_claims_[udp_port_be] = std::move(claim);
    } catch (const std::bad_alloc&) {
      // Unrecorded: the claim is dropped (other processes may choose the port), the bind stands.
    }
  }
  return FI_SUCCESS;
}

int PortEngine::bind_demux(uint16_t udp_port_be, proto::Receiver* r) noexcept {
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
  for (uint32_t port = kEphemeralFirst; port <= 65535; ++port) {
    const uint16_t port_be = rte_cpu_to_be_16(static_cast<uint16_t>(port));
    if (demux_[port].load(std::memory_order_relaxed)) continue;  // ours already
    // Another process of this host with our address holds it (udp_claims.h): not ours to take.
    // Without the claims folder, nothing is known about other processes: first free port here.
    bool held = false;
    UniqueFd claim;
    if (shared_link_) claim = claims_.try_claim(mac(), ipv4_be_, port_be, &held);
    if (held) continue;
    if (bind_claimed(port_be, r, std::move(claim)) == FI_SUCCESS) return port_be;
  }
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
  std::lock_guard lock(claims_mutex_);
  held_claims_.erase(udp_port_be);  // closes the claim's fd: the lock goes
}

void PortEngine::rx_wait() noexcept {
  for (int i = 0; i < 64; ++i) rte_pause();
  sched_yield();
}

int64_t PortEngine::link_down_for_ns(int64_t now) noexcept {
  if (port_->link_up_now()) {
    if (link_down_since_ns_.load(std::memory_order_relaxed) != 0)
      link_down_since_ns_.store(0, std::memory_order_relaxed);
    return 0;
  }
  int64_t since = 0;
  // The first to see it down starts the clock; `since` is then 0 (just started) or the start.
  link_down_since_ns_.compare_exchange_strong(since, now, std::memory_order_relaxed);
  return since == 0 ? 0 : now - since;
}

bool PortEngine::try_lock_tx_for(int64_t ns) noexcept {
  int64_t deadline = 0;
  while (!tx_lock_.try_lock()) {
    const int64_t now = now_ns();
    if (deadline == 0) deadline = now + ns;
    if (now >= deadline) return false;
    for (int i = 0; i < 64 && tx_lock_.is_locked(); ++i) rte_pause();
  }
  return true;
}

bool PortEngine::set_kick_peer(KickChannel::Peer p) noexcept {
  if (!try_lock_tx_for(kKickLockWaitNs)) return false;
  kick_peer_ = p;
  tx_lock_.unlock();
  // A kick decided on before the swap writes the old peer's fd after the lock: the channel may
  // close that fd only once it is written. Acquire: pairs with the release in kick_deferred.
  const int64_t deadline = now_ns() + kKickLockWaitNs;
  while (kicks_in_flight_.load(std::memory_order_acquire) != 0) {
    if (now_ns() >= deadline) return false;
    rx_wait();
  }
  return true;
}

void PortEngine::kick_deferred(void* engine, uint64_t fd) noexcept {
  KickChannel::kick_fd(static_cast<int>(fd));
  // Release: the write is done before set_kick_peer sees the count drop.
  static_cast<PortEngine*>(engine)->kicks_in_flight_.fetch_sub(1, std::memory_order_release);
}

void PortEngine::burst_fault() noexcept {
  stats_.burst_faults.fetch_add(1, std::memory_order_relaxed);
  static std::atomic<bool> warned{false};
  if (!warned.load(std::memory_order_relaxed) && !warned.exchange(true, std::memory_order_relaxed))
    wait::WakeBatch::defer(&PortEngine::warn_burst_fault, this);
}

void PortEngine::warn_burst_fault(void* engine, uint64_t) noexcept {
  const auto* e = static_cast<const PortEngine*>(engine);
  DPFAB_INFO(FI_LOG_CORE,
             "port %s: the memif peer disconnected during a burst (its shared memory went away "
             "under it; port/burst_guard.h): the burst ended empty. Counted in telemetry "
             "port%u_burst_faults; said once per process.",
             e->port_->info().name.c_str(), e->port_->info().port_id);
}

void PortEngine::warn_link_down(void* engine, uint64_t) noexcept {
  DPFAB_WARN(FI_LOG_EP_DATA, "port %s: link down, datagrams are dropped",
             static_cast<PortEngine*>(engine)->port_->info().name.c_str());
}

void PortEngine::run_as_rx_owner(void (*fn)(void*), void* arg) noexcept {
  while (!try_take_rx()) rx_wait();
  fn(arg);
  release_rx();
}

uint16_t PortEngine::transmit(rte_mbuf** frames, uint16_t n) noexcept {
  tx_lock_.lock();
  uint16_t sent = 0;
  if (likely(!stopped_)) {
    // af_packet and af_xdp kick the kernel (sendto), tap writes its fd: the port's own syscalls.
    lockcheck::Exempt pmd("PMD tx burst");
    if (memif_) {
      bool faulted = false;
      sent = port::guarded_tx_burst(port_id_, frames, n, &faulted);
      // Cut short by the peer's disconnect: memif may have freed some of the frames already,
      // so none is freed here (a burst's worth at most, counted); they are lost with the link.
      if (unlikely(faulted)) {
        burst_fault();
        sent = n;
      }
    } else {
      sent = rte_eth_tx_burst(port_id_, 0, frames, n);
    }
  }
  // S1-S2 (memif_kick.h) under the lock, which keeps the peer's half valid; the write after it.
  int kick_fd = -1;
  if (kick_peer_.flag && sent && KickChannel::take_kick(kick_peer_)) {
    kick_fd = kick_peer_.wake_fd;
    kicks_in_flight_.fetch_add(1, std::memory_order_relaxed);  // ordered by the unlock below
  }
  bump(stats_.tx_frames, sent);  // under the TX lock: one writer
  tx_lock_.unlock();
  if (kick_fd >= 0) wait::WakeBatch::defer(&PortEngine::kick_deferred, this, kick_fd);
  if (sent != n) {
    // A full queue on a live link is back-pressure (the caller sees -FI_EAGAIN), and so is a link
    // that is not up yet (a memif just connecting). A link down for longer than kLinkGraceNs (a
    // memif whose peer died) would be back-pressure for ever: its frames are dropped.
    if (unlikely(link_down_for_ns(now_ns()) > kLinkGraceNs)) {
      rte_pktmbuf_free_bulk(frames + sent, n - sent);
      stats_.tx_link_down.fetch_add(n - sent, std::memory_order_relaxed);
      // Once per process, and written after the caller's locks (a log line is a syscall).
      static std::atomic<bool> warned{false};
      if (!warned.load(std::memory_order_relaxed) &&
          !warned.exchange(true, std::memory_order_relaxed))
        wait::WakeBatch::defer(&PortEngine::warn_link_down, this);
      return n;
    }
    stats_.tx_full.fetch_add(1, std::memory_order_relaxed);
  }
  // A parked lcore comes back: the answer is likely on its way (relaxed check; no barrier).
  if (Parker* o = owner_.load(std::memory_order_relaxed); o && o->parked())
    o->unpark(Cause::kDoorbell);
  return sent;
}

PortEngine::Handled PortEngine::handle(rte_mbuf* m, const shm::Conn* from) noexcept {
  wire::Frame f;
  switch (wire::decode_mbuf(m, &f, decode_)) {
    case wire::Verdict::kData: {
      if (from) {  // through the same-host path: replies go back the same way
        f.src_host_be = local_host_be_;
        f.src_node_be = rte_cpu_to_be_32(from->node());
        f.src_nonce_be = rte_cpu_to_be_32(from->nonce());
      }
      if (unlikely(wire::is_multicast_ipv4(f.dst_ip_be))) return deliver_group(f, m);
      if (unlikely((f.dst_ip_be != ipv4_be_ &&
                    !(loopback_alias_ && wire::is_loopback_ipv4(f.dst_ip_be))) ||
                   !rte_is_same_ether_addr(&f.dst_mac, &port_->info().mac))) {
        bump(stats_.not_ours);
        return Handled::kFree;
      }
      proto::Receiver* r = demux_[rte_be_to_cpu_16(f.dst_port_be)].load(std::memory_order_acquire);
      if (!r) {
        bump(stats_.no_listener);
        if (f.header.type == wire::Type::kCm) proto::answer_absent_cm(this, f, &msg_stats_);
        return Handled::kFree;
      }
      return r->deliver(f, m) ? Handled::kKept : Handled::kDelivered;
    }
    case wire::Verdict::kArp: {
      bump(stats_.arp);
      wire::Local local{port_->info().mac, ipv4_be_};
      // A request for a loopback address on a port inside this host is answered as ours, in
      // that address's name (loopback_alias()).
      wire::ArpMessage msg;
      if (loopback_alias_ &&
          wire::parse_arp(std::span<const uint8_t>(f.payload, f.payload_len), &msg) ==
              wire::ArpVerdict::kRequest &&
          wire::is_loopback_ipv4(msg.tpa_be))
        local.ip_be = msg.tpa_be;
      uint8_t reply[wire::kMinFrameLen];
      auto r = wire::handle_arp_st(std::span<const uint8_t>(f.payload, f.payload_len), local,
                                   neigh_, static_cast<uint64_t>(now_ns()), reply, arp_stats_);
      if (r.reply_len) send_raw(reply, r.reply_len);
      break;
    }
    case wire::Verdict::kOldVersion:
      // Counted by the decoder; said once per port (the RX owner is the counter's one writer, so
      // exactly one poll step sees it become 1), once the step has let go of the receive side: a
      // log line is a syscall (common/lockcheck.h), so it goes through the step's WakeBatch.
      if (decode_.get(wire::Verdict::kOldVersion) == 1)
        wait::WakeBatch::defer(&PortEngine::warn_old_version, this,
                               uint64_t{f.src_ip_be} << 16 | f.src_port_be);
      break;
    default:
      break;  // rejected: counted by the decoder
  }
  return Handled::kFree;
}

void PortEngine::warn_old_version(void* engine, uint64_t src) noexcept {
  const auto* e = static_cast<const PortEngine*>(engine);
  const auto ip_be = static_cast<uint32_t>(src >> 16);
  const auto port_be = static_cast<uint16_t>(src);
  char ip[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &ip_be, ip, sizeof(ip));
  DPFAB_WARN(FI_LOG_EP_DATA,
             "port %s: a frame from %s UDP port %u is in dpfab wire format version %u, which this "
             "dpfab (wire version %u) no longer speaks: that peer runs an older dpfab. Its frames "
             "are dropped and counted (telemetry port%u_rx_old_version; dpfab-info --stats); "
             "upgrade it. Said once per port.",
             e->port_->info().name.c_str(), ip, rte_be_to_cpu_16(port_be), wire::v1::kVersion,
             wire::kVersion, e->port_->info().port_id);
}

size_t PortEngine::drain_backlogs() noexcept {
  size_t done = 0;
  uint64_t due = UINT64_MAX;
  for_each_receiver([&](proto::Receiver* r) { due = std::min(due, r->backlog_pass(&done)); });
  rx_timer_due_ns_.store(due, std::memory_order_relaxed);
  return done;
}

void PortEngine::refresh_rx_deadline() noexcept {
  // A thread that holds the receive side now began its step with a backlog pass, after our
  // frames: its deadline counts them.
  if (!try_take_rx()) return;
  uint64_t due = UINT64_MAX;
  for_each_receiver([&](const proto::Receiver* r) { due = std::min(due, r->timer_due_ns()); });
  rx_timer_due_ns_.store(due, std::memory_order_relaxed);
  release_rx();
}

size_t PortEngine::progress() noexcept {
  uint16_t received;
  long n = poll_step(&received);
  return n < 0 ? 0 : static_cast<size_t>(n);
}

long PortEngine::poll_step(uint16_t* received, uint16_t* local_received) noexcept {
  // Wake-ups the step decides on (CQ raises, kicks of the replies it sends) are made at its end
  // (wait/wake_batch.h): opened first. A poll step is never run inside another batch (a core
  // lock's), whose calls would wait for that batch's end.
  wait::WakeBatch wakes;
  // One receive owner at a time; others return at once (they have nothing to wait for).
  if (!try_take_rx()) return -1;
  begin_poll_step();
  // The last step's frames: freed now rather than between their delivery and the return to the
  // application thread that polled (fi_cq_read), which waits for the completion they made.
  if (const uint16_t done = done_n_.load(std::memory_order_relaxed)) {
    rte_pktmbuf_free_bulk(done_, done);
    done_n_.store(0, std::memory_order_relaxed);
  }
  if (unlikely(prefault_pending_)) prefault_at_link_up();
  size_t delivered = drain_backlogs();  // frames held for receives posted since
  rte_mbuf* pkts[kBurst];
  uint16_t n = 0;
  if (likely(!stopped_)) {
    lockcheck::Exempt pmd("PMD rx burst");  // af_xdp may wake the kernel's fill queue
    if (memif_) {
      bool faulted = false;
      n = port::guarded_rx_burst(port_id_, pkts, kBurst, &faulted);
      if (unlikely(faulted)) burst_fault();
    } else {
      n = rte_eth_rx_burst(port_id_, 0, pkts, kBurst);
    }
  }
  *received = n;
  if (unlikely(faults_ != nullptr)) n = faults_->apply_burst_st(pkts, n, kBurst, received);
  uint16_t done = 0;
  for (uint16_t i = 0; i < n; ++i) {
    Handled h = handle(pkts[i]);
    delivered += h == Handled::kDelivered;
    if (h != Handled::kKept) done_[done++] = pkts[i];
  }
  if (done) done_n_.store(done, std::memory_order_relaxed);
  // The same-host path (shm/node.h): what peers of this host sent through shared memory.
  const auto local = static_cast<uint16_t>(local_node_ ? poll_local(&delivered) : 0);
  *received += local;
  if (local_received) *local_received = local;
  if ((++polls_ & 255) == 0 || (n == 0 && neigh_pending_.load(std::memory_order_relaxed))) {
    tick_neighbours();
    check_link();
    // A memif link that went down comes back with new regions: fault those in too.
    if (memif_ && !prefault_pending_ && !port_->link_up_now()) prefault_pending_ = true;
  }
  if (n) bump(stats_.rx_frames, n);
  // The step's wake-ups are made before the receive side is released, though outside the lock
  // check's section: unbinding an endpoint waits for the receive side, so a raise deferred here
  // never outlives the CQ, EQ or counter it names (they close after their endpoints). Nobody
  // spins on the receive side on the data path: others try it and return.
  lockcheck::leave();
  wakes.flush_now();
  rx_busy_.store(false, std::memory_order_release);
  return static_cast<long>(delivered);
}

// ---- the same-host path ------------------------------------------------------------------------

int PortEngine::attach_local(const shm::NodeConfig& cfg, bool derive_address) noexcept {
  if (local_node_) return 0;
  auto n = shm::Node::open(cfg, port_->info().mac.addr_bytes, ipv4_be_, derive_address);
  if (!n) {
    DPFAB_WARN(FI_LOG_CORE, "port %s: no same-host path: %s", port_->info().name.c_str(),
               n.error().message.c_str());
    return n.code();
  }
  local_node_ = std::move(n.value());
  if (derive_address) {
    // The placeholder port takes the node's address: unique on this host.
    rte_ether_addr mac;
    std::memcpy(mac.addr_bytes, local_node_->mac(), 6);
    port_->set_address(mac, rte_be_to_cpu_32(local_node_->ipv4_be()));
    ipv4_be_ = local_node_->ipv4_be();
  }
  local_host_be_ = rte_cpu_to_be_64(local_node_->host());
  set_local(local_node_.get());
  wake_.attach_local(local_node_.get());
  return 0;
}

size_t PortEngine::poll_local(size_t* delivered) noexcept {
  return local_node_->poll(
      kBurst,
      [&](const shm::Conn& c, const shm::RecordHeader& h, const uint8_t* p) {
        *delivered += handle_record(c, h, p) == Handled::kDelivered;
      },
      [&](const shm::Conn& c) { local_lost(c); });
}

PortEngine::Handled PortEngine::handle_record(const shm::Conn& c, const shm::RecordHeader& h,
                                              const uint8_t* payload) noexcept {
  switch (h.kind) {
    case shm::RecordKind::kFrame: {
      // A frame as the port would carry it: copied into an mbuf (a receiver may hold it, and the
      // peer may rewrite its ring meanwhile), then decoded and delivered as the port's are.
      bump(stats_.local_frames);
      rte_mbuf* m = rte_pktmbuf_alloc(port_->mempool());
      if (!m) {
        bump(stats_.local_no_mbuf);
        return Handled::kFree;
      }
      char* d = h.len <= rte_pktmbuf_tailroom(m)
                    ? rte_pktmbuf_append(m, static_cast<uint16_t>(h.len))
                    : nullptr;
      if (!d) {
        rte_pktmbuf_free(m);
        bump(stats_.local_rejected);
        return Handled::kFree;
      }
      std::memcpy(d, payload, h.len);
      const Handled r = handle(m, &c);
      if (r != Handled::kKept) rte_pktmbuf_free(m);
      return r;
    }
    case shm::RecordKind::kRdm:
    case shm::RecordKind::kRdmIndirect: {
      // An RDM packet: the frame it stands for, without Ethernet, IPv4 and UDP; the receiver
      // decodes the RDM header (wire::decode_rdm, which rejects what is malformed) and copies
      // what it keeps before the ring slot is released.
      bump(stats_.local_rdm);
      proto::Receiver* r = demux_[rte_be_to_cpu_16(h.dst_port_be)].load(std::memory_order_acquire);
      if (!r) {
        bump(stats_.local_no_listener);
        return Handled::kFree;
      }
      wire::Frame f;
      f.dst_mac = port_->info().mac;
      std::memcpy(f.src_mac.addr_bytes, c.mac(), 6);
      f.src_ip_be = c.ipv4_be();
      f.dst_ip_be = ipv4_be_;
      f.src_port_be = h.src_port_be;
      f.dst_port_be = h.dst_port_be;
      f.header = wire::rdm_outer_header(h.src_ep, h.dst_ep, h.len);
      f.payload_len = h.len;
      f.payload = payload;
      f.src_host_be = local_host_be_;
      f.src_node_be = rte_cpu_to_be_32(c.node());
      f.src_nonce_be = rte_cpu_to_be_32(c.nonce());
      f.src_link = &c;
      f.indirect = h.kind == shm::RecordKind::kRdmIndirect;
      r->deliver(f, nullptr);  // without an mbuf nothing is kept
      return Handled::kDelivered;
    }
    default:
      bump(stats_.local_rejected);
      return Handled::kFree;
  }
}

void PortEngine::local_lost(const shm::Conn& c) noexcept {
  bump(stats_.local_lost);
  const uint32_t node_be = rte_cpu_to_be_32(c.node()), nonce_be = rte_cpu_to_be_32(c.nonce());
  for_each_receiver([&](proto::Receiver* r) { r->link_lost(node_be, nonce_be); });
}

bool PortEngine::prepare_sleep() noexcept {
  wake_.arm();  // A1-A2
  // A3: until the queue is empty. A full burst may have left frames whose kick or interrupt
  // fired before A2 (and was drained): they must not wait for the next one. When another thread
  // owns the receive side, wait it out and poll ourselves: a frame that came after its burst may
  // be the one whose kick A1 drained, and that thread may not poll again
  // (test/model/sleep_on_port.pml, variant A3_GIVES_UP). A poll step is short and bounded.
  // A port its fds do not cover (no interrupt, no kick: the wakeup thread watches it for
  // sleepers, PortConsumer::prepare_sleep) is armed here for its same-host path only: the rings
  // must be empty, the port's own queue need not (net_null's never is).
  const bool port_covered = wake_.covered();
  constexpr int kMaxBursts = 64;
  bool empty = false;
  uint16_t last = 0;  // frames the last step took (both paths)
  for (int i = 0; i < kMaxBursts && !empty;) {
    uint16_t received = 0, local = 0;
    if (poll_step(&received, &local) < 0) {
      wake_.stats().not_safe.fetch_add(1, std::memory_order_relaxed);
      while (rx_busy_.load(std::memory_order_acquire)) rx_wait();
      continue;
    }
    empty = (port_covered ? received : local) < kBurst;
    last = received;
    ++i;
  }
  if (!empty) {
    wake_.rekick();  // frames left behind: sleepers must look again, as must we
    return false;
  }
  // The step's backlog pass came before its frames, whose work may be due sooner (a delayed ack):
  // the deadline the sleeper arms its timer with must count it.
  if (last != 0) refresh_rx_deadline();
  if (int qfd = wake_.queue_fd(); qfd >= 0) {
    // net_tap reads only after its SIGIO handler bumped a trigger; the frame may be readable on
    // the fd before that handler ran (on some other thread). Run it here and read once more,
    // rather than wake at once for ever on a level-triggered fd.
    pollfd pf{qfd, POLLIN, 0};
    if (poll(&pf, 1, 0) == 1 && tap_sigio_handler_installed()) {
      wake_.stats().sigio_runs.fetch_add(1, std::memory_order_relaxed);
      pthread_kill(pthread_self(), SIGIO);
      uint16_t received = 0;
      if (poll_step(&received) < 0 || received == kBurst) {
        wake_.rekick();
        return false;
      }
    }
  }
  return true;
}

void PortEngine::arm_deadline() noexcept { wake_.arm_timer(timer_due_ns()); }

PortEngine::~PortEngine() {
  // Destroyed by close_all, after every endpoint and before the ports (and their mempools). The
  // node goes first: its control thread stops and every peer sees us gone.
  local_node_.reset();
  if (const uint16_t done = done_n_.load(std::memory_order_relaxed))
    rte_pktmbuf_free_bulk(done_, done);
}

int PortEngine::set_faults(const config::FaultConfig& f) noexcept {
  std::unique_ptr<FaultInjector> faults;
  if (f.any()) {
    faults.reset(new (std::nothrow) FaultInjector(f, port_id_, pool(), &stats_.faults));
    if (!faults) return -FI_ENOMEM;
  }
  with_rx_owner([&] { faults_.swap(faults); });  // proto::Link::with_rx_owner
  return 0;  // the injector replaced, if any, frees the frames it held
}

bool PortEngine::tap_sigio_handler_installed() noexcept {
  struct sigaction sa {};
  return sigaction(SIGIO, nullptr, &sa) == 0 && !(sa.sa_flags & SA_SIGINFO) &&
         sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN;
}

int64_t PortEngine::now_ns() noexcept { return clock::mono_ns(); }

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

void PortEngine::prefault_at_link_up() noexcept {
  // Until the link is up this costs one rte_eth_link_get_nowait per poll step; nothing flows
  // then anyway. Once: one read of /proc/self/maps and an madvise per region (about a
  // millisecond for memif's 4 MiB), instead of a minor fault per page on the first messages.
  if (!port_->link_up_now()) return;
  prefault_pending_ = false;
  lockcheck::Exempt once("memif prefault at link up");  // once per connection, before traffic
  (void)port_->prefault_shared_memory();
}

void PortEngine::check_link() noexcept {
  if (!port_->info().reconnect_by_restart) return;
  const int64_t now = now_ns();
  if (now < next_link_check_ns_) return;
  next_link_check_ns_ = now + 250'000'000;
  // Restart only a link down for longer than kLinkGraceNs (a memif handshake after start must
  // not be cut short), and at most once per kLinkGraceNs.
  if (link_down_for_ns(now) <= kLinkGraceNs || now - last_restart_ns_ < kLinkGraceNs) return;
  last_restart_ns_ = now;
  // The RX side is ours (RX owner); take the TX side too, then restart: a memif client connects
  // at start only. Frames sent meanwhile are dropped by transmit() (link down).
  tx_lock_.lock();
  {
    lockcheck::Exempt restart("port restart");  // a link down for a second: no traffic flows
    stopped_ = port_->restart() != 0;
  }
  tx_lock_.unlock();
  stats_.restarts.fetch_add(1, std::memory_order_relaxed);
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

// ---- multicast ----------------------------------------------------------------------------

int PortEngine::join_group(uint32_t group_be, uint16_t udp_port_be, proto::Receiver* r) noexcept {
  if (!wire::is_multicast_ipv4(group_be)) return -FI_EINVAL;
  if (int rc = groups_.add(group_be, udp_port_be, r); rc != 0) return rc;
  if (int rc = port_->join_multicast(wire::multicast_mac(group_be)); rc != 0) {
    // Undo the membership only: the MAC was not counted (leave_group would uncount it).
    (void)groups_.remove(group_be, udp_port_be, r);
    while (rx_busy_.load(std::memory_order_seq_cst)) rx_wait();
    return rc;
  }
  if (groups_.members_of(group_be) == 1) {  // the port's first member: tell snooping switches
    uint8_t frame[wire::kMinFrameLen];
    wire::Local local{port_->info().mac, ipv4_be_};
    if (size_t len = wire::build_igmp_v2(frame, local, wire::IgmpType::kReportV2, group_be))
      send_raw(frame, len);
  }
  return 0;
}

void PortEngine::leave_group(uint32_t group_be, uint16_t udp_port_be, proto::Receiver* r) noexcept {
  if (groups_.remove(group_be, udp_port_be, r) != 0) return;
  // A poll step that read the membership holds rx_busy_ until it is done delivering (as unbind).
  while (rx_busy_.load(std::memory_order_seq_cst)) rx_wait();
  port_->leave_multicast(wire::multicast_mac(group_be));
  if (groups_.members_of(group_be) == 0) {
    uint8_t frame[wire::kMinFrameLen];
    wire::Local local{port_->info().mac, ipv4_be_};
    if (size_t len = wire::build_igmp_v2(frame, local, wire::IgmpType::kLeave, group_be))
      send_raw(frame, len);
  }
}

// A group frame: one reference of `m` per member, each member keeps or releases its own; the
// caller releases the reference it holds (so the result is never kKept).
PortEngine::Handled PortEngine::deliver_group(const wire::Frame& f, rte_mbuf* m) noexcept {
  size_t n = groups_.for_each_member(f.dst_ip_be, f.dst_port_be, [&](proto::Receiver* r) {
    for (rte_mbuf* seg = m; seg; seg = seg->next) rte_mbuf_refcnt_update(seg, 1);
    if (!r->deliver(f, m)) rte_pktmbuf_free(m);  // drops the member's reference only
  });
  if (n == 0) {
    bump(group_stats_.no_member);
    return Handled::kFree;
  }
  bump(group_stats_.delivered, n);
  return Handled::kDelivered;
}

}  // namespace dpfab::progress
