// SPDX-License-Identifier: BSD-3-Clause
#include "proto/msg_passive.h"

#include <rdma/fi_errno.h>
#include <rte_byteorder.h>

#include <algorithm>

#include <new>

#include "common/clock.h"
#include "wire/cm.h"

namespace dpfab::proto {

namespace {
uint64_t now_ns() noexcept { return static_cast<uint64_t>(clock::mono_ns()); }
}  // namespace

// ---- PortShare ---------------------------------------------------------------------------------

PortShare::PortShare(Link* link, MsgPortStats* stats, Receiver* passive) noexcept
    : link_(link), stats_(stats) {
  slots_[0].store(passive, std::memory_order_relaxed);
}

uint16_t PortShare::add(Receiver* r, const msg::ListenTable::Key& req) noexcept {
  std::lock_guard lock(mu_);
  for (uint16_t i = 1; i < kMaxEndpoints; ++i) {
    if (slots_[i].load(std::memory_order_relaxed)) continue;
    reqs_[i] = req;
    // Release: the RX owner that finds the slot sees the endpoint's state written before.
    slots_[i].store(r, std::memory_order_release);
    if (used_.load(std::memory_order_relaxed) <= i)
      used_.store(static_cast<uint16_t>(i + 1), std::memory_order_release);
    return rte_cpu_to_be_16(i);
  }
  return 0;
}

void PortShare::remove(uint16_t ep_be) noexcept {
  const uint16_t i = rte_be_to_cpu_16(ep_be);
  if (i < kMaxEndpoints)
    link_->with_rx_owner([&] { slots_[i].store(nullptr, std::memory_order_release); });
}

bool PortShare::deliver(const wire::Frame& f, rte_mbuf* m) noexcept {
  Receiver* r = f.header.dst_ep < kMaxEndpoints
                    ? slots_[f.header.dst_ep].load(std::memory_order_acquire)
                    : nullptr;
  if (r) return r->deliver(f, m);
  if (f.header.type == wire::Type::kCm) answer_absent_cm(link_, f, stats_);
  return false;
}

bool PortShare::accepted(const msg::ListenTable::Key& req) const noexcept {
  const uint16_t used = used_.load(std::memory_order_acquire);
  for (uint16_t i = 1; i < used; ++i)
    if (slots_[i].load(std::memory_order_acquire) && reqs_[i] == req) return true;
  return false;
}

uint64_t PortShare::backlog_pass(size_t* done) noexcept {
  uint64_t due = UINT64_MAX;
  for_each_slot([&](Receiver* r) { due = std::min(due, r->backlog_pass(done)); });
  return due;
}

uint64_t PortShare::timer_due_ns() const noexcept {
  uint64_t due = UINT64_MAX;
  for_each_slot([&](const Receiver* r) { due = std::min(due, r->timer_due_ns()); });
  return due;
}

void PortShare::link_lost(uint32_t node_be, uint32_t nonce_be) noexcept {
  for_each_slot([&](Receiver* r) { r->link_lost(node_be, nonce_be); });
}

// ---- PassiveEndpoint
// -----------------------------------------------------------------------------

void PassiveEndpoint::set_address(uint16_t udp_port_be, uint16_t ep_id_be,
                                  const PortShare* share) noexcept {
  std::lock_guard lock(mu_);
  udp_port_be_ = udp_port_be;
  ep_id_be_ = ep_id_be;
  share_ = share;
}

bool PassiveEndpoint::send_reject(const wire::Address& to, uint32_t conn_id,
                                  std::span<const uint8_t> data) noexcept {
  wire::CmHeader h;
  h.kind = wire::CmKind::kReject;
  h.dst_id = conn_id;
  h.data_len = static_cast<uint16_t>(data.size());
  return send_cm_frame(link_, udp_port_be_, ep_id_be_, to, h, data, stats_);
}

int PassiveEndpoint::reject(const wire::Address& to, uint32_t conn_id,
                            std::span<const uint8_t> data) noexcept {
  if (data.size() > wire::kCmMaxData || conn_id == 0) return -FI_EINVAL;
  std::lock_guard lock(mu_);
  try {
    table_.rejected(key_of(to, conn_id), data, now_ns());
  } catch (const std::bad_alloc&) {
    // Not remembered: a repeat of the request is reported again. The reject still goes.
  }
  return send_reject(to, conn_id, data) ? 0 : -FI_EAGAIN;
}

void PassiveEndpoint::accepted(const wire::Address& from, uint32_t conn_id) noexcept {
  std::lock_guard lock(mu_);
  table_.accepted(key_of(from, conn_id));
}

bool PassiveEndpoint::deliver(const wire::Frame& f, rte_mbuf*) noexcept {
  if (f.header.type != wire::Type::kCm || !f.payload) return false;
  wire::CmHeader h;
  std::span<const uint8_t> data;
  wire::CmDecodeStats decode;  // counted in the port's MSG counters
  if (wire::decode_cm(f.header, {f.payload, f.payload_len}, &h, &data, decode) !=
      wire::CmVerdict::kOk) {
    stats_->cm_rejected.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  stats_->cm_rx.fetch_add(1, std::memory_order_relaxed);
  if (h.kind != wire::CmKind::kConnReq) {  // a passive endpoint has no connection
    stats_->stale_cm.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  const wire::Address from = frame_source(f);
  const msg::ListenTable::Key key = key_of(from, h.src_id);
  // The RX owner never waits for an application thread's fi_accept/fi_reject: the connector
  // repeats its request.
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) {
    stats_->cm_busy.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  if (share_ && share_->accepted(key)) {  // its accepting endpoint repeats its accept itself
    stats_->connreq_repeats.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  msg::ListenTable::Seen seen;
  try {
    seen = table_.on_request(key, now_ns());
  } catch (const std::bad_alloc&) {
    seen = msg::ListenTable::Seen::kFull;
  }
  switch (seen) {
    case msg::ListenTable::Seen::kNew:
      stats_->connreqs.fetch_add(1, std::memory_order_relaxed);
      sink_->connreq(from, h.src_id, data);
      break;
    case msg::ListenTable::Seen::kRejected:
      stats_->connreq_repeats.fetch_add(1, std::memory_order_relaxed);
      send_reject(from, h.src_id, table_.reject_data(key));
      break;
    case msg::ListenTable::Seen::kFull:
      stats_->connreq_full.fetch_add(1, std::memory_order_relaxed);
      break;
    default:
      stats_->connreq_repeats.fetch_add(1, std::memory_order_relaxed);
      break;
  }
  return false;
}

}  // namespace dpfab::proto
