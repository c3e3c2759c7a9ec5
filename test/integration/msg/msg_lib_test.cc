// SPDX-License-Identifier: BSD-3-Clause
//
// FI_EP_MSG below libfabric (lib/proto/msg_endpoint.h, msg_passive.h): EAL with one net_ring port
// (a loopback), its engine, a passive endpoint and connected endpoints on UDP ports of their own,
// and frames crafted and sent on the port as another process would: stale traffic of an earlier
// connection at the same addresses (its data, its shutdown, its keepalives, data from the right
// address with another epoch) is dropped and counted, never delivered, and the connection it
// lands on goes on; a connection request repeated is reported once and a rejected one is
// answered again.
#include <gtest/gtest.h>
#include <rte_byteorder.h>
#include <rte_mbuf.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <vector>

#include "event/cq.h"
#include "event/eq.h"
#include "progress/engine.h"
#include "proto/msg_endpoint.h"
#include "proto/msg_passive.h"
#include "ring_engine.h"
#include "wire/cm.h"
#include "wire/encoder.h"
#include "wire/rdm.h"

using namespace dpfab;
using test::make_data_cq;
using test::progress_until;
using test::ring_engine;

namespace {

// The passive side's sink: remembers the requests it is told of.
struct Requests final : proto::PassiveEndpoint::Sink {
  struct Req {
    wire::Address from;
    uint32_t id;
  };
  std::vector<Req> got;
  void connreq(const wire::Address& from, uint32_t id, std::span<const uint8_t>) noexcept override {
    got.push_back({from, id});
  }
};

// One MSG endpoint with its CQ and EQ, bound to `port` (0: ephemeral).
struct Side {
  std::unique_ptr<event::Cq> cq = make_data_cq();
  std::unique_ptr<event::Eq> eq = std::make_unique<event::Eq>(nullptr, event::Eq::Options{});
  std::unique_ptr<proto::MsgEndpoint> ep;
  uint16_t port = 0;
  explicit Side(uint16_t want = 0) {
    proto::MsgEndpoint::Config cfg;
    cfg.rdm.max_peers = 1;
    cfg.rdm.core.reorder_slots = 64;
    ep = std::move(
        proto::MsgEndpoint::create(ring_engine(), nullptr, &ring_engine()->msg_stats(), cfg)
            .value());
    ep->rdm().bind_cq(cq.get(), true, true, false);
    ep->bind_eq(eq.get(), nullptr, nullptr);
    EXPECT_EQ(ep->enable(), 0);
    if (want) {
      EXPECT_EQ(ring_engine()->bind(want, ep.get()), 0);
      port = want;
    } else {
      port = ring_engine()->bind_ephemeral(ep.get());
    }
    ep->set_address(port, 0);
  }
  ~Side() {
    ep->close();
    ring_engine()->unbind(port);
  }
  // The next event, progressing the port (bounded): FI_CONNECTED, FI_SHUTDOWN, or -FI_EAVAIL.
  int event() {
    uint32_t ev = 0;
    alignas(fi_eq_cm_entry) uint8_t buf[sizeof(fi_eq_cm_entry) + 256];
    ssize_t r = -FI_EAGAIN;
    progress_until([&] { return (r = eq->read(&ev, buf, sizeof(buf), 0)) != -FI_EAGAIN; });
    return r < 0 ? static_cast<int>(r) : static_cast<int>(ev);
  }
};

struct Listening {
  Requests reqs;
  proto::PassiveEndpoint pep{ring_engine(), &ring_engine()->msg_stats(), &reqs};
  uint16_t port = ring_engine()->bind_ephemeral(&pep);
  Listening() { pep.set_address(port, 0); }
  ~Listening() { ring_engine()->unbind(port); }
  wire::Address address() const {
    wire::Address a;
    std::memcpy(a.mac, ring_engine()->mac().addr_bytes, 6);
    a.ipv4_be = ring_engine()->ipv4_be();
    a.udp_port_be = port;
    return a;
  }
};

// a connects to the listener, b accepts its request.
void connect(Side& a, Side& b, Listening& l) {
  const size_t seen = l.reqs.got.size();
  ASSERT_EQ(a.ep->connect(l.address(), {}), 0);
  ASSERT_TRUE(progress_until([&] { return l.reqs.got.size() > seen; }));
  proto::MsgEndpoint::Request req{l.reqs.got.back().from, l.reqs.got.back().id};
  ASSERT_EQ(b.ep->accept(req, {}), 0);
  ASSERT_EQ(a.event(), FI_CONNECTED);
  ASSERT_EQ(b.event(), FI_CONNECTED);
}

// Sends an RDM eager message of `len` bytes, as the endpoint at UDP port `from_port` with stream
// epoch `epoch`, to `to` (crafted: what an earlier or forged endpoint would send).
void send_rdm(uint16_t from_port, uint32_t epoch, const wire::Address& to, uint32_t seq = 0) {
  rte_mbuf* m = rte_pktmbuf_alloc(ring_engine()->pool());
  ASSERT_NE(m, nullptr);
  wire::RdmHeader h;
  h.kind = wire::RdmKind::kEager;
  h.epoch = epoch;
  h.seq = seq;
  h.window = 64;
  h.msg_id = 1;
  h.length = 5;
  auto* b = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, wire::kRdmHeaderLen + 5));
  ASSERT_EQ(wire::encode_rdm({b, wire::kRdmHeaderLen}, h, 5), int(wire::kRdmHeaderLen));
  std::memcpy(b + wire::kRdmHeaderLen, "stale", 5);
  wire::Route r;
  r.src_mac = ring_engine()->mac();
  std::memcpy(r.dst_mac.addr_bytes, to.mac, 6);
  r.src_ip_be = ring_engine()->ipv4_be();
  r.dst_ip_be = to.ipv4_be;
  r.src_port_be = from_port;
  r.dst_port_be = to.udp_port_be;
  ASSERT_EQ(wire::encode_mbuf(m, r, wire::rdm_outer_header(0, 0, wire::kRdmHeaderLen + 5), 1,
                              ring_engine()->tx_caps()),
            0);
  ASSERT_EQ(ring_engine()->transmit(&m, 1), 1);
}

void send_cm(uint16_t from_port, const wire::Address& to, wire::CmKind kind, uint32_t src,
             uint32_t dst) {
  wire::CmHeader h;
  h.kind = kind;
  h.src_id = src;
  h.dst_id = dst;
  ASSERT_TRUE(proto::send_cm_frame(ring_engine(), from_port, 0, to, h, {}, nullptr));
}

uint64_t stat(std::atomic<uint64_t>& c) { return c.load(); }

}  // namespace

TEST(MsgLib, TrafficOfAnEarlierConnectionIsDroppedAndCounted) {
  Listening l;
  uint16_t port_a, port_b;
  uint32_t old_a, old_b;
  {
    Side a, b;
    connect(a, b, l);
    port_a = a.port;
    port_b = b.port;
    old_a = a.ep->local_id();
    old_b = b.ep->local_id();
  }  // closed (a shutdown each way)
  // A new connection between the same UDP ports.
  Side a(port_a), b(port_b);
  connect(a, b, l);
  ASSERT_NE(a.ep->local_id(), old_a);
  char buf[16] = {};
  proto::rdm::RecvOp r;
  r.buf = buf;
  r.len = sizeof(buf);
  r.context = buf;
  ASSERT_EQ(b.ep->recv(r), 0);
  auto& st = ring_engine()->msg_stats();
  const uint64_t data0 = stat(st.stale_data), cm0 = stat(st.stale_cm);
  const wire::Address to_b = b.ep->address();
  send_rdm(port_a, old_a, to_b);                          // data of the earlier connection
  send_rdm(port_a, 0x5eed, to_b);                         // a forged or restarted peer's stream
  send_rdm(rte_cpu_to_be_16(1), a.ep->local_id(), to_b);  // the right epoch, another port
  send_cm(port_a, to_b, wire::CmKind::kShutdown, old_a, old_b);  // its shutdown
  send_cm(port_a, to_b, wire::CmKind::kKeepalive, old_a, b.ep->local_id());
  send_cm(port_a, to_b, wire::CmKind::kShutdown, a.ep->local_id(), old_b);
  ASSERT_TRUE(progress_until([&] { return stat(st.stale_data) >= data0 + 3; }));
  ASSERT_TRUE(progress_until([&] { return stat(st.stale_cm) >= cm0 + 3; }));
  EXPECT_EQ(stat(st.stale_data), data0 + 3);
  EXPECT_EQ(stat(st.stale_cm), cm0 + 3);
  // Nothing was delivered, the connection is up, and it still carries data.
  fi_cq_data_entry e{};
  EXPECT_EQ(b.cq->read(&e, 1, nullptr), -FI_EAGAIN);
  EXPECT_EQ(b.ep->state(), proto::msg::CmState::kConnected);
  proto::rdm::SendOp s;
  s.buf = "fresh";
  s.len = 6;
  s.inject = s.complete_now = true;
  s.completion = false;
  ASSERT_EQ(a.ep->send(s), 0);
  ssize_t got = -FI_EAGAIN;
  ASSERT_TRUE(progress_until([&] { return (got = b.cq->read(&e, 1, nullptr)) != -FI_EAGAIN; }));
  ASSERT_EQ(got, 1);
  EXPECT_STREQ(buf, "fresh");
}

TEST(MsgLib, ARepeatedRequestIsReportedOnceAndARejectIsRepeated) {
  Listening l;
  Side a;
  ASSERT_EQ(a.ep->connect(l.address(), {}), 0);
  ASSERT_TRUE(progress_until([&] { return !l.reqs.got.empty(); }));
  auto& st = ring_engine()->msg_stats();
  const uint64_t rep0 = stat(st.connreq_repeats);
  // The connector's request again, twice (as its repeats would be): no new report.
  for (int i = 0; i < 2; ++i) {
    wire::CmHeader h;
    h.kind = wire::CmKind::kConnReq;
    h.src_id = a.ep->local_id();
    ASSERT_TRUE(proto::send_cm_frame(ring_engine(), a.port, 0, l.address(), h, {}, nullptr));
  }
  ASSERT_TRUE(progress_until([&] { return stat(st.connreq_repeats) >= rep0 + 2; }));
  EXPECT_EQ(l.reqs.got.size(), 1u);
  const uint8_t why[] = {'n', 'o'};
  ASSERT_EQ(l.pep.reject(l.reqs.got[0].from, l.reqs.got[0].id, why), 0);
  EXPECT_EQ(a.event(), -FI_EAVAIL);
  fi_eq_err_entry err{};
  uint8_t data[8];
  err.err_data = data;
  err.err_data_size = sizeof(data);
  ASSERT_GT(a.eq->readerr(&err, 0), 0);
  EXPECT_EQ(err.err, FI_ECONNREFUSED);
  ASSERT_EQ(err.err_data_size, 2u);
  EXPECT_EQ(std::memcmp(data, why, 2), 0);
  // A repeat of the rejected request (its reject was lost, say) gets the reject again.
  const uint64_t tx0 = stat(st.cm_tx);
  wire::CmHeader h;
  h.kind = wire::CmKind::kConnReq;
  h.src_id = a.ep->local_id();
  ASSERT_TRUE(proto::send_cm_frame(ring_engine(), a.port, 0, l.address(), h, {}, nullptr));
  ASSERT_TRUE(progress_until([&] { return stat(st.connreq_repeats) >= rep0 + 3; }));
  EXPECT_EQ(stat(st.cm_tx), tx0 + 1);  // the reject again (ours was sent uncounted)
  EXPECT_EQ(l.reqs.got.size(), 1u);
  EXPECT_EQ(a.event(), -FI_EAGAIN);  // the connector failed once; the repeat is stale to it
}
