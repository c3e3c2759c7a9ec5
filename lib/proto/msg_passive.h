// SPDX-License-Identifier: BSD-3-Clause
//
// PassiveEndpoint: the receiving side of an FI_EP_MSG passive endpoint (fi_passive_ep,
// fi_listen) on a UDP port of its own. It takes kConnReq frames (wire/cm.h), reports each
// request once (Sink::connreq: the driver writes FI_CONNREQ with an fi_info whose handle names
// the request), drops the repeats its connector sends while the application decides, and answers
// the repeats of a rejected request with the same reject (msg_listen.h). fi_accept happens on the
// accepting endpoint (msg_endpoint.h), which answers from its own UDP port; fi_reject here.
//
// Threads: deliver runs on the port's RX owner, reject/accepted on application threads; they
// serialise on one mutex, which may be held while the sink writes an EQ and while a reject is
// transmitted, never while the port is polled.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>

#include "proto/endpoint.h"
#include "proto/msg_endpoint.h"
#include "proto/msg_listen.h"
#include "wire/address.h"

namespace dpfab::proto {

/// The UDP port of a passive endpoint, shared with the endpoints that accept its requests, as a
/// TCP listener's port is with its accepted sockets (fabtests fi_msg_sockets checks that
/// fi_getname of an accepted endpoint is the listener's address). The endpoint id in the dpfab
/// header tells them apart: 0 is the passive endpoint, each accepting endpoint takes another
/// (add). Bound to the port's engine in place of the passive endpoint; frames for an endpoint id
/// nobody holds are answered as for an unbound port (answer_absent_cm). Owned by the passive
/// endpoint and its accepted endpoints together (the last to close unbinds the UDP port).
class PortShare final : public Receiver {
 public:
  static constexpr uint16_t kMaxEndpoints = 4096;  ///< endpoint ids 0 .. kMaxEndpoints - 1

  PortShare(Link* link, MsgPortStats* stats, Receiver* passive) noexcept;
  /// An endpoint id for `r` (1 .. kMaxEndpoints - 1, network order), or 0 when all are taken,
  /// which accepts the request `req`. Frames for it go to `r` from now on. Control path, any
  /// thread.
  uint16_t add(Receiver* r, const msg::ListenTable::Key& req) noexcept;
  /// Whether an endpoint of this port accepted the request `req`: its connector's repeats are
  /// dropped. RX owner.
  bool accepted(const msg::ListenTable::Key& req) const noexcept;
  /// Frees endpoint id `ep_be` (network order; 0: the passive endpoint closed, requests are
  /// refused from now on). Owns the port's receive side meanwhile, so that on return no poll step
  /// is delivering to the endpoint. Not from inside a poll step.
  void remove(uint16_t ep_be) noexcept;

  bool deliver(const wire::Frame& f, rte_mbuf* m) noexcept override;
  /// Each slot's pass, in one scan; the earliest of their deadlines.
  uint64_t backlog_pass(size_t* done) noexcept override;
  /// The earliest of the slots' deadlines, nothing run (PortEngine::refresh_rx_deadline). RX
  /// owner: a slot's endpoint stays until remove() has the receive side.
  uint64_t timer_due_ns() const noexcept override;
  void link_lost(uint32_t node_be, uint32_t nonce_be) noexcept override;

 private:
  Link* link_;
  MsgPortStats* stats_;
  std::mutex mu_;                                     // add
  std::atomic<Receiver*> slots_[kMaxEndpoints] = {};  // by endpoint id (host order)
  msg::ListenTable::Key reqs_[kMaxEndpoints] = {};    // written before its slot (release)
  std::atomic<uint16_t> used_{1};                     // ids ever used: the slots scanned
  // fn(Receiver*) for each slot's endpoint (the RX owner's scans).
  template <typename Fn>
  void for_each_slot(Fn&& fn) const noexcept {
    const uint16_t used = used_.load(std::memory_order_acquire);
    for (uint16_t i = 0; i < used; ++i)
      if (Receiver* r = slots_[i].load(std::memory_order_acquire)) fn(r);
  }
};

class PassiveEndpoint final : public Receiver {
 public:
  /// Where requests are reported (the RX owner's thread, under the passive endpoint's lock).
  class Sink {
   public:
    virtual ~Sink() = default;
    /// A new connection request from `from` (the connector's address), connection id
    /// `conn_id`, with the connector's data.
    virtual void connreq(const wire::Address& from, uint32_t conn_id,
                         std::span<const uint8_t> data) noexcept = 0;
  };

  PassiveEndpoint(Link* link, MsgPortStats* stats, Sink* sink,
                  const msg::ListenTable::Config& cfg = {})
      : link_(link), stats_(stats), sink_(sink), table_(cfg) {}

  /// Our UDP port and endpoint id (network order), before the port is bound; `share`, when the
  /// port is shared with the endpoints that accept our requests.
  void set_address(uint16_t udp_port_be, uint16_t ep_id_be,
                   const PortShare* share = nullptr) noexcept;
  /// fi_reject of the request `conn_id` from `to`: sends a kReject with `data` (at most
  /// wire::kCmMaxData bytes), and again to each repeat of the request. 0; -FI_EINVAL for too
  /// much data; -FI_EAGAIN when the port took no frame (the connector's repeat gets it).
  int reject(const wire::Address& to, uint32_t conn_id, std::span<const uint8_t> data) noexcept;
  /// fi_accept of that request (on its endpoint): its record goes; repeats of it are dropped by
  /// the port share from now on (an accepting endpoint holds it).
  void accepted(const wire::Address& from, uint32_t conn_id) noexcept;

  bool deliver(const wire::Frame& f, rte_mbuf* m) noexcept override;

  /// A request's name: its connector's address and connection id.
  static msg::ListenTable::Key key_of(const wire::Address& a, uint32_t id) noexcept {
    return {a.ipv4_be, a.udp_port_be, a.ep_id_be, id};
  }

 private:
  bool send_reject(const wire::Address& to, uint32_t conn_id,
                   std::span<const uint8_t> data) noexcept;

  Link* link_;
  MsgPortStats* stats_;
  Sink* sink_;
  uint16_t udp_port_be_ = 0, ep_id_be_ = 0;
  const PortShare* share_ = nullptr;
  std::mutex mu_;
  msg::ListenTable table_;  // under mu_
};

}  // namespace dpfab::proto
