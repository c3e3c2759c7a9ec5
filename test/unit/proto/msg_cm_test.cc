// SPDX-License-Identifier: BSD-3-Clause
//
// The FI_EP_MSG connection state machine (lib/proto/msg_cm.h) and the passive endpoint's request
// table (msg_listen.h), without EAL: two CmConnections and a passive side played by the test,
// joined by a simulated link (latency, seeded loss) on a simulated clock. Every frame goes through
// encode_cm/decode_cm, as on a port.
#include <gtest/gtest.h>
#include <rdma/fi_errno.h>

#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "proto/msg_cm.h"
#include "proto/msg_listen.h"
#include "wire/cm.h"

using namespace dpfab::proto::msg;
using dpfab::wire::CmHeader;
using dpfab::wire::CmKind;

namespace {

constexpr uint64_t kMs = 1'000'000;

struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  bool chance(uint32_t ppm) { return next() % 1'000'000 < ppm; }
};

// Node 0 and 1 are endpoints; node 2 is the passive side (the test answers its requests).
enum Node { kA = 0, kB = 1, kPassive = 2 };

struct Frame {
  int from, to;
  uint64_t at;
  std::vector<uint8_t> bytes;  // CM header + data, as encoded
};

class Sim;

struct End final : CmSink {
  Sim* sim;
  int id;
  CmConnection cm;
  int to = kPassive;  // where this end's frames go (the passive side until it has a peer)
  std::vector<std::string> events;
  std::vector<uint8_t> event_data;
  int last_err = 0;
  std::vector<CmKind> sent;

  End(Sim* s, int i, const CmConfig& cfg) : sim(s), id(i), cm(cfg, this) {}
  bool send_cm(const CmHeader& h, std::span<const uint8_t> data) noexcept override;
  void connected(std::span<const uint8_t> data) noexcept override {
    events.push_back("connected");
    event_data.assign(data.begin(), data.end());
  }
  void failed(int err, std::span<const uint8_t> data) noexcept override {
    events.push_back("failed");
    last_err = err;
    event_data.assign(data.begin(), data.end());
  }
  void disconnected(int err) noexcept override {
    events.push_back("disconnected");
    last_err = err;
  }
  size_t count(CmKind k) const { return std::count(sent.begin(), sent.end(), k); }
};

class Sim {
 public:
  explicit Sim(CmConfig cfg = {}, uint32_t loss_ppm = 0, uint64_t seed = 1)
      : a(this, kA, cfg), b(this, kB, cfg), loss_ppm_(loss_ppm), rng_{seed} {}

  End a, b;
  uint64_t now = 1'000'000'000;  // any start: the clock is the caller's
  // The passive side: answers each new request by accepting (b accepts) or rejecting.
  bool reject = false;
  std::vector<uint8_t> reject_data, accept_data;
  int connreqs = 0;
  bool passive_alive = true;
  bool drop_all_from[3] = {false, false, false};
  int drop_next_kind = 0;  // drop the next frame of this kind (1..7), once

  void send(int from, int to, const CmHeader& h, std::span<const uint8_t> data) {
    std::vector<uint8_t> bytes(dpfab::wire::kCmHeaderLen + data.size());
    EXPECT_EQ(dpfab::wire::encode_cm(bytes, h), int(dpfab::wire::kCmHeaderLen));
    if (!data.empty())
      std::memcpy(bytes.data() + dpfab::wire::kCmHeaderLen, data.data(), data.size());
    if (drop_all_from[from]) return;
    if (drop_next_kind == static_cast<int>(h.kind)) {
      drop_next_kind = 0;
      return;
    }
    if (loss_ppm_ && rng_.chance(loss_ppm_)) return;
    q_.push_back({from, to, now + 50'000, std::move(bytes)});
  }

  // Runs the clock to `until`, delivering frames and running timers.
  void run_until(uint64_t until) {
    while (now < until) {
      uint64_t next = until;
      for (const Frame& f : q_) next = std::min(next, f.at);
      next = std::min({next, a.cm.next_deadline(), b.cm.next_deadline()});
      now = std::max(now, next);
      for (size_t i = 0; i < q_.size();) {
        if (q_[i].at <= now) {
          Frame f = std::move(q_[i]);
          q_.erase(q_.begin() + static_cast<long>(i));
          deliver(f);
        } else {
          ++i;
        }
      }
      if (a.cm.next_deadline() <= now) a.cm.poll(now);
      if (b.cm.next_deadline() <= now) b.cm.poll(now);
      if (next == until && q_.empty() && now >= until) break;
    }
  }
  void run_for(uint64_t ns) { run_until(now + ns); }

  // a connects to the passive side; b accepts (the test's passive side calls b.cm.accept).
  void connect(std::span<const uint8_t> data = {}) { ASSERT_EQ(a.cm.connect(0xa1, data, now), 0); }

 private:
  void deliver(const Frame& f) {
    CmHeader h;
    std::span<const uint8_t> data;
    dpfab::wire::CmDecodeStats st;
    dpfab::wire::Header outer = dpfab::wire::cm_outer_header(0, 0, uint32_t(f.bytes.size()));
    ASSERT_EQ(dpfab::wire::decode_cm(outer, f.bytes, &h, &data, st), dpfab::wire::CmVerdict::kOk);
    if (f.to == kPassive) {
      if (!passive_alive || h.kind != CmKind::kConnReq) return;
      if (connreqs++ > 0) return;  // a repeat (the passive side's table drops it)
      if (reject) {
        CmHeader r;
        r.kind = CmKind::kReject;
        r.dst_id = h.src_id;
        r.data_len = uint16_t(reject_data.size());
        send(kPassive, f.from, r, reject_data);
      } else {
        b.to = f.from;
        EXPECT_EQ(b.cm.accept(0xb2, h.src_id, accept_data, now), 0);
      }
      return;
    }
    End& e = f.to == kA ? a : b;
    // The connector learns its peer from the accept's source.
    if (h.kind == CmKind::kAccept && e.cm.state() == CmState::kConnecting) e.to = f.from;
    last_taken = e.cm.on_cm(h, data, now);
  }

 public:
  CmConnection::Taken last_taken = CmConnection::Taken::kTaken;

 private:
  std::deque<Frame> q_;
  uint32_t loss_ppm_;
  Rng rng_;
};

bool End::send_cm(const CmHeader& h, std::span<const uint8_t> data) noexcept {
  sent.push_back(h.kind);
  sim->send(id, to, h, data);
  return true;
}

std::vector<uint8_t> bytes(const char* s) { return {s, s + std::strlen(s)}; }

}  // namespace

TEST(MsgCm, ConnectAcceptGivesBothSidesConnectedWithTheAcceptorsData) {
  Sim sim;
  sim.accept_data = bytes("welcome");
  sim.connect(bytes("hello"));
  sim.run_for(10 * kMs);
  EXPECT_EQ(sim.a.cm.state(), CmState::kConnected);
  EXPECT_EQ(sim.b.cm.state(), CmState::kConnected);
  EXPECT_EQ(sim.a.events, std::vector<std::string>{"connected"});
  EXPECT_EQ(sim.b.events, std::vector<std::string>{"connected"});
  EXPECT_EQ(sim.a.event_data, bytes("welcome"));
  EXPECT_TRUE(sim.b.event_data.empty());  // no data on the listening side's FI_CONNECTED
  EXPECT_EQ(sim.a.cm.peer_id(), 0xb2u);
  EXPECT_EQ(sim.a.count(CmKind::kConnReq), 1u);
  EXPECT_EQ(sim.a.count(CmKind::kEstablished), 1u);
}

TEST(MsgCm, RejectEndsTheConnectWithTheRejectingSidesData) {
  Sim sim;
  sim.reject = true;
  sim.reject_data = bytes("go away");
  sim.connect();
  sim.run_for(10 * kMs);
  EXPECT_EQ(sim.a.cm.state(), CmState::kFailed);
  EXPECT_EQ(sim.a.events, std::vector<std::string>{"failed"});
  EXPECT_EQ(sim.a.last_err, FI_ECONNREFUSED);
  EXPECT_EQ(sim.a.event_data, bytes("go away"));
  // Nothing more is sent once refused.
  const size_t sent = sim.a.sent.size();
  sim.run_for(20'000 * kMs);
  EXPECT_EQ(sim.a.sent.size(), sent);
}

TEST(MsgCm, UnansweredConnectRepeatsWithBackoffThenTimesOutOnce) {
  CmConfig cfg;
  cfg.connect_timeout_ns = 3000 * kMs;
  Sim sim(cfg);
  sim.passive_alive = false;
  sim.connect();
  const uint64_t start = sim.now;
  sim.run_for(10'000 * kMs);
  EXPECT_EQ(sim.a.events, std::vector<std::string>{"failed"});
  EXPECT_EQ(sim.a.last_err, FI_ETIMEDOUT);
  // 100, 200, 400, 800, 1000, 1000 ms...: sent at 0, .1, .3, .7, 1.5, 2.5 s; failed at 3 s.
  EXPECT_EQ(sim.a.count(CmKind::kConnReq), 6u);
  EXPECT_EQ(sim.a.cm.next_deadline(), UINT64_MAX);
  (void)start;
}

TEST(MsgCm, ConnectWaitsForItsRouteAndFailsWhenThereIsNone) {
  Sim sim;
  ASSERT_EQ(sim.a.cm.connect(0xa1, {}, sim.now, /*routed=*/false), 0);
  EXPECT_TRUE(sim.a.cm.routing());
  sim.run_for(50 * kMs);
  EXPECT_TRUE(sim.a.sent.empty());  // nothing goes before the address is resolved
  sim.a.cm.routed(sim.now);
  sim.run_for(10 * kMs);
  EXPECT_EQ(sim.a.cm.state(), CmState::kConnected);

  Sim none;
  ASSERT_EQ(none.a.cm.connect(0xa1, {}, none.now, false), 0);
  none.a.cm.unroutable();
  EXPECT_EQ(none.a.events, std::vector<std::string>{"failed"});
  EXPECT_EQ(none.a.last_err, FI_EHOSTUNREACH);

  CmConfig cfg;
  cfg.connect_timeout_ns = 500 * kMs;
  Sim slow(cfg);
  ASSERT_EQ(slow.a.cm.connect(0xa1, {}, slow.now, false), 0);
  slow.run_for(1000 * kMs);
  EXPECT_EQ(slow.a.last_err, FI_ETIMEDOUT);
  EXPECT_TRUE(slow.a.sent.empty());
}

TEST(MsgCm, LostEstablishedIsRecoveredFromTheAcceptorsRepeat) {
  Sim sim;
  sim.drop_next_kind = static_cast<int>(CmKind::kEstablished);
  sim.connect();
  sim.run_for(5 * kMs);
  EXPECT_EQ(sim.a.cm.state(), CmState::kConnected);
  EXPECT_EQ(sim.b.cm.state(), CmState::kAccepting);
  sim.run_for(500 * kMs);
  EXPECT_EQ(sim.b.cm.state(), CmState::kConnected);
  EXPECT_EQ(sim.a.count(CmKind::kEstablished), 2u);  // answered the repeated accept
  EXPECT_EQ(sim.a.events.size(), 1u);                // one FI_CONNECTED each
  EXPECT_EQ(sim.b.events.size(), 1u);
}

// Liveness from data (heard) never makes an accepting endpoint connected, nor moves the clock of
// a connected one back: the endpoint feeds it the time of its last data frame, 0 before any.
TEST(MsgCm, HeardIsLivenessOnly) {
  Sim sim;
  sim.drop_next_kind = static_cast<int>(CmKind::kEstablished);
  sim.connect();
  sim.run_for(5 * kMs);
  ASSERT_EQ(sim.b.cm.state(), CmState::kAccepting);
  sim.b.cm.heard(0);
  sim.b.cm.heard(sim.now);
  EXPECT_EQ(sim.b.cm.state(), CmState::kAccepting);
  EXPECT_TRUE(sim.b.events.empty());
  sim.run_for(500 * kMs);
  ASSERT_EQ(sim.b.cm.state(), CmState::kConnected);
  sim.b.cm.heard(0);  // no data yet: must not make the peer look silent since time 0
  sim.b.cm.poll(sim.now);
  EXPECT_EQ(sim.b.cm.state(), CmState::kConnected);
}

TEST(MsgCm, ConnectorsDataEstablishesTheAcceptor) {
  Sim sim;
  sim.drop_next_kind = static_cast<int>(CmKind::kEstablished);
  sim.connect();
  sim.run_for(5 * kMs);
  ASSERT_EQ(sim.b.cm.state(), CmState::kAccepting);
  sim.b.cm.on_data(sim.now);
  EXPECT_EQ(sim.b.cm.state(), CmState::kConnected);
  EXPECT_EQ(sim.b.events, std::vector<std::string>{"connected"});
}

TEST(MsgCm, ShutdownEndsBothSidesOnceAndIsAcknowledged) {
  Sim sim;
  sim.connect();
  sim.run_for(5 * kMs);
  ASSERT_EQ(sim.a.cm.shutdown(sim.now), 0);
  EXPECT_EQ(sim.a.cm.state(), CmState::kShutdown);
  EXPECT_TRUE(sim.a.cm.shutdown_pending());
  sim.run_for(5 * kMs);
  EXPECT_FALSE(sim.a.cm.shutdown_pending());  // acknowledged
  EXPECT_EQ(sim.b.cm.state(), CmState::kShutdown);
  EXPECT_EQ(sim.a.events, (std::vector<std::string>{"connected", "disconnected"}));
  EXPECT_EQ(sim.b.events, (std::vector<std::string>{"connected", "disconnected"}));
  EXPECT_EQ(sim.a.last_err, FI_ECANCELED);
  EXPECT_EQ(sim.b.last_err, FI_ECANCELED);
  // A second shutdown, on either side, changes nothing.
  EXPECT_EQ(sim.a.cm.shutdown(sim.now), 0);
  EXPECT_EQ(sim.b.cm.shutdown(sim.now), 0);
  sim.run_for(30'000 * kMs);
  EXPECT_EQ(sim.a.events.size(), 2u);
  EXPECT_EQ(sim.b.events.size(), 2u);
  EXPECT_EQ(sim.a.count(CmKind::kShutdown), 1u);
  EXPECT_EQ(sim.b.count(CmKind::kShutdown), 0u);
}

TEST(MsgCm, ShutdownsThatCrossAreBothAcknowledged) {
  Sim sim;
  sim.connect();
  sim.run_for(5 * kMs);
  ASSERT_EQ(sim.a.cm.shutdown(sim.now), 0);
  ASSERT_EQ(sim.b.cm.shutdown(sim.now), 0);
  sim.run_for(5 * kMs);
  EXPECT_FALSE(sim.a.cm.shutdown_pending());
  EXPECT_FALSE(sim.b.cm.shutdown_pending());
  EXPECT_EQ(sim.a.events.size(), 2u);
  EXPECT_EQ(sim.b.events.size(), 2u);
}

TEST(MsgCm, UnacknowledgedShutdownIsGivenUpAfterItsBound) {
  CmConfig cfg;
  cfg.shutdown_ns = 1000 * kMs;
  Sim sim(cfg);
  sim.connect();
  sim.run_for(5 * kMs);
  sim.drop_all_from[kB] = true;  // b's acks never arrive
  ASSERT_EQ(sim.a.cm.shutdown(sim.now), 0);
  sim.run_for(999 * kMs);
  EXPECT_TRUE(sim.a.cm.shutdown_pending());
  sim.run_for(2 * kMs);
  EXPECT_FALSE(sim.a.cm.shutdown_pending());
  EXPECT_EQ(sim.a.cm.next_deadline(), UINT64_MAX);
}

TEST(MsgCm, KeepalivesKeepAnIdleConnectionUpAndASilentPeerIsLost) {
  CmConfig cfg;
  cfg.keepalive_ns = 1000 * kMs;
  cfg.peer_timeout_ns = 4000 * kMs;
  Sim sim(cfg);
  sim.connect();
  sim.run_for(5 * kMs);
  sim.run_for(60'000 * kMs);  // a minute without data
  EXPECT_EQ(sim.a.cm.state(), CmState::kConnected);
  EXPECT_EQ(sim.b.cm.state(), CmState::kConnected);
  EXPECT_GE(sim.a.count(CmKind::kKeepalive), 59u);
  // b dies: a notices within the peer timeout (plus a keepalive interval).
  sim.drop_all_from[kB] = true;
  const uint64_t died = sim.now;
  while (sim.a.cm.state() == CmState::kConnected && sim.now < died + 10'000 * kMs)
    sim.run_for(10 * kMs);
  EXPECT_EQ(sim.a.cm.state(), CmState::kShutdown);
  EXPECT_EQ(sim.a.last_err, FI_EHOSTUNREACH);
  EXPECT_LE(sim.now - died, 5000 * kMs);
  EXPECT_EQ(sim.a.events, (std::vector<std::string>{"connected", "disconnected"}));
}

TEST(MsgCm, PeerKnownGoneEndsTheConnectionAtOnceSendingNothing) {
  // A same-host peer whose process ended (MsgEndpoint::link_lost): no silence to wait out.
  Sim sim;
  sim.connect();
  sim.run_for(5 * kMs);
  ASSERT_EQ(sim.a.cm.state(), CmState::kConnected);
  const size_t sent = sim.a.sent.size();
  sim.a.cm.lost();
  EXPECT_EQ(sim.a.cm.state(), CmState::kShutdown);
  EXPECT_EQ(sim.a.last_err, FI_EHOSTUNREACH);
  EXPECT_EQ(sim.a.events, (std::vector<std::string>{"connected", "disconnected"}));
  EXPECT_EQ(sim.a.sent.size(), sent) << "nothing is sent to a peer that is gone";
  EXPECT_EQ(sim.a.cm.next_deadline(), UINT64_MAX) << "no keepalives after the end";
  sim.a.cm.lost();  // reported once
  EXPECT_EQ(sim.a.events.size(), 2u);
  // An accepting side whose connector went: the accept fails, once.
  Sim s2;
  s2.drop_next_kind = static_cast<int>(CmKind::kEstablished);
  s2.connect();
  s2.run_for(5 * kMs);
  ASSERT_EQ(s2.b.cm.state(), CmState::kAccepting);
  s2.b.cm.lost();
  EXPECT_EQ(s2.b.cm.state(), CmState::kFailed);
  EXPECT_EQ(s2.b.last_err, FI_EHOSTUNREACH);
  EXPECT_EQ(s2.b.events, std::vector<std::string>{"failed"});
  // Idle: nothing to end.
  Sim s3;
  s3.a.cm.lost();
  EXPECT_EQ(s3.a.cm.state(), CmState::kIdle);
  EXPECT_TRUE(s3.a.events.empty());
}

TEST(MsgCm, FramesOfAnotherConnectionAreStale) {
  Sim sim;
  sim.connect();
  sim.run_for(5 * kMs);
  CmHeader h;
  h.kind = CmKind::kShutdown;
  h.src_id = 0xb2;
  h.dst_id = 0xdead;  // not a's id: an earlier connection at the same address
  EXPECT_EQ(sim.a.cm.on_cm(h, {}, sim.now), CmConnection::Taken::kStale);
  h.dst_id = 0xa1;
  h.src_id = 0xbeef;  // not a's peer: a peer that crashed and came back
  EXPECT_EQ(sim.a.cm.on_cm(h, {}, sim.now), CmConnection::Taken::kStale);
  CmHeader acc;
  acc.kind = CmKind::kAccept;
  acc.src_id = 0xbeef;
  acc.dst_id = 0xa1;  // a replayed accept from someone else
  EXPECT_EQ(sim.a.cm.on_cm(acc, {}, sim.now), CmConnection::Taken::kStale);
  EXPECT_EQ(sim.a.cm.state(), CmState::kConnected);
  EXPECT_EQ(sim.a.events.size(), 1u);
  // A reject for someone else does not end a connect either.
  Sim other;
  other.passive_alive = false;
  other.connect();
  CmHeader rej;
  rej.kind = CmKind::kReject;
  rej.dst_id = 0x1234;
  EXPECT_EQ(other.a.cm.on_cm(rej, {}, other.now), CmConnection::Taken::kStale);
  EXPECT_EQ(other.a.cm.state(), CmState::kConnecting);
}

TEST(MsgCm, ApiRefusesCallsOutOfState) {
  Sim sim;
  std::vector<uint8_t> big(dpfab::wire::kCmMaxData + 1);
  EXPECT_EQ(sim.a.cm.connect(0xa1, big, sim.now), -FI_EINVAL);
  EXPECT_EQ(sim.a.cm.connect(0, {}, sim.now), -FI_EINVAL);
  EXPECT_EQ(sim.a.cm.shutdown(sim.now), -FI_ENOTCONN);  // never connected
  sim.connect();
  EXPECT_EQ(sim.a.cm.connect(0xa1, {}, sim.now), -FI_EOPBADSTATE);
  EXPECT_EQ(sim.a.cm.accept(0xa1, 5, {}, sim.now), -FI_EOPBADSTATE);
  EXPECT_EQ(sim.b.cm.accept(0xb2, 0, {}, sim.now), -FI_EINVAL);
  // Giving up a connect in progress: one disconnected event, and a late accept is stale.
  EXPECT_EQ(sim.a.cm.shutdown(sim.now), 0);
  EXPECT_EQ(sim.a.events, std::vector<std::string>{"disconnected"});
  sim.run_for(500 * kMs);
  EXPECT_EQ(sim.a.events, std::vector<std::string>{"disconnected"});
}

// Set-up and teardown over a link that loses 10% of the frames (any seed): either both sides
// connect and end exactly once each, or the connect fails cleanly; nothing is left pending.
TEST(MsgCm, TenPercentLossConnectsAndShutsDownOrFailsCleanly) {
  int connected = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Sim sim({}, 100'000, seed);
    sim.connect(bytes("x"));
    sim.run_for(12'000 * kMs);
    const CmState a = sim.a.cm.state();
    ASSERT_TRUE(a == CmState::kConnected || a == CmState::kFailed) << seed;
    if (a != CmState::kConnected) continue;
    ASSERT_EQ(sim.b.cm.state(), CmState::kConnected) << seed;
    ++connected;
    ASSERT_EQ(sim.a.cm.shutdown(sim.now), 0);
    sim.run_for(15'000 * kMs);
    EXPECT_EQ(sim.a.cm.state(), CmState::kShutdown) << seed;
    EXPECT_EQ(sim.b.cm.state(), CmState::kShutdown) << seed;
    EXPECT_EQ(sim.a.events, (std::vector<std::string>{"connected", "disconnected"})) << seed;
    EXPECT_EQ(sim.b.events, (std::vector<std::string>{"connected", "disconnected"})) << seed;
    EXPECT_EQ(sim.a.cm.next_deadline(), UINT64_MAX) << seed;
    EXPECT_EQ(sim.b.cm.next_deadline(), UINT64_MAX) << seed;
  }
  EXPECT_GE(connected, 195);  // 10% loss costs a repeat now and then, not the connection
}

TEST(MsgListen, RequestsAreReportedOnceAndRejectsRepeated) {
  ListenTable t({.max = 3, .linger_ns = 1000});
  const ListenTable::Key k{1, 2, 0, 7}, k2{1, 2, 0, 8}, k3{9, 2, 0, 7}, k4{9, 9, 9, 9};
  EXPECT_EQ(t.on_request(k, 0), ListenTable::Seen::kNew);
  EXPECT_EQ(t.on_request(k, 1), ListenTable::Seen::kPending);
  EXPECT_EQ(t.on_request(k2, 1), ListenTable::Seen::kNew);  // same address, new connection id
  EXPECT_EQ(t.on_request(k3, 1), ListenTable::Seen::kNew);
  EXPECT_EQ(t.on_request(k4, 2), ListenTable::Seen::kFull);
  const uint8_t why[] = {1, 2, 3};
  t.rejected(k, why, 10);
  EXPECT_EQ(t.on_request(k, 11), ListenTable::Seen::kRejected);
  EXPECT_EQ(t.reject_data(k).size(), 3u);
  t.accepted(k2);  // forgotten: the accepting endpoint recognises the repeats from now on
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.on_request(k4, 12), ListenTable::Seen::kNew);
  // After the linger the records go: room again, and a request seen again is new.
  EXPECT_EQ(t.on_request(k2, 1002), ListenTable::Seen::kNew);  // k3 expired (made at 1)
  EXPECT_EQ(t.on_request(k, 1011), ListenTable::Seen::kNew);
  t.expire(5000);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_TRUE(t.reject_data(k).empty());
}
