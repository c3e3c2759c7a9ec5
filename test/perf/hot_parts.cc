// SPDX-License-Identifier: BSD-3-Clause
//
// hot-parts: the pieces of the per-message path, one at a time, without EAL (Google Benchmark;
// never a timed test). Each pairs what the data path does today with the cheaper variant a cut
// would use, measured in the same run, so that a cut can be proven piece by piece before the
// whole path is measured again (hot-path, dpfab-bench):
//   - frame headers: encode_frame (the full encoder: every field, both checksums), encode_mbuf
//     without the UDP checksum (what DGRAM sends do on memif and ring) against
//     HeaderTemplate::write (prepared headers, what RDM sends use there), for a 64-byte message
//     in a DGRAM and in an RDM frame;
//   - decoding a 64-byte RDM frame: decode_frame (Ethernet/IPv4/UDP/dpfab checks) and
//     decode_rdm (the RDM header), as a poll step does per frame;
//   - a completion through the CQ: write into the ring then read (what a send completion costs,
//     and a receive completion that another thread's poll step made) against the direct hand-off
//     of progress_and_read (a completion made by the reader's own poll step);
//   - the synchronisation on the path: a SpinLock lock/unlock (endpoint core, port TX, CQ
//     consumer: one xchg each), a locked add (fetch_add on a statistics counter) against
//     common/counter.h's bump (load and store), the producer's fence of Waitable::notify;
//   - the memif burst guard (port/burst_guard.h): a call run as a guarded burst against the
//     plain call, what every poll step and transmit on a memif port adds;
//   - the reliability core's 64-byte round trip (RdmCore: send, deliver, repost, each followed by
//     next_deadline as RdmEndpoint::finish reads it) while 0 to 255 other peers have a packet in
//     flight (an all-to-all's ranks): what the endpoint's own work per message costs with many
//     peers active, and that it does not grow with them.
// Instruction counts of the same loops: `valgrind --tool=callgrind build/test/perf/hot-parts
// --benchmark_filter=... --benchmark_min_time=0.01`.
#include <benchmark/benchmark.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/counter.h"
#include "common/fence.h"
#include "common/spinlock.h"
#include "event/cq.h"
#include "port/burst_guard.h"
#include "proto/rdm_core.h"
#include "shm/node.h"
#include "wait/waitable.h"
#include "wire/decoder.h"
#include "wire/encoder.h"
#include "wire/format.h"
#include "wire/rdm.h"

namespace {

using namespace dpfab;

// ---- frame headers
// --------------------------------------------------------------------------------

wire::Route route() {
  wire::Route r;
  const uint8_t a[6] = {0x02, 0x64, 0x70, 1, 2, 3}, b[6] = {0x02, 0x64, 0x70, 4, 5, 6};
  std::memcpy(r.src_mac.addr_bytes, a, 6);
  std::memcpy(r.dst_mac.addr_bytes, b, 6);
  r.src_ip_be = __builtin_bswap32(0x0a000001);
  r.dst_ip_be = __builtin_bswap32(0x0a000002);
  r.src_port_be = __builtin_bswap16(49152);
  r.dst_port_be = __builtin_bswap16(49153);
  return r;
}

wire::RdmHeader eager_header(uint32_t seq) {
  wire::RdmHeader h;
  h.kind = wire::RdmKind::kEager;
  h.epoch = 7;
  h.seq = seq;
  h.ack = seq;
  h.window = 64;
  h.msg_id = 1;
  h.length = 64;
  return h;
}

constexpr size_t kMsg = 64;

// A DGRAM frame of a 64-byte message, headers by the full encoder (DgramEndpoint::send).
void BM_Encode_Dgram_Full(benchmark::State& st) {
  alignas(64) std::array<uint8_t, wire::kOverhead + kMsg> f{};
  const wire::Route r = route();
  wire::Header h;
  h.type = wire::Type::kData;
  uint16_t id = 0;
  for (auto _ : st) {
    benchmark::DoNotOptimize(wire::encode_frame(f, r, h, id++));
    benchmark::ClobberMemory();
  }
}
// The same frame from prepared headers (no UDP checksum: memif and ring ports).
void BM_Encode_Dgram_Template(benchmark::State& st) {
  alignas(64) std::array<uint8_t, wire::kOverhead + kMsg> f{};
  const wire::Route r = route();
  wire::Header h;
  h.type = wire::Type::kData;
  wire::HeaderTemplate t;
  if (t.init(r, h) != 0) st.SkipWithError("HeaderTemplate::init");
  uint16_t id = 0;
  for (auto _ : st) {
    t.write(f.data(), r.dst_mac.addr_bytes, kMsg, id++);
    benchmark::ClobberMemory();
  }
}
// What DgramEndpoint::send does on memif and ring today: encode_mbuf with no UDP checksum (every
// header field written, the IPv4 checksum computed), on an mbuf that lives on the stack (no EAL:
// prepend touches only the mbuf's own fields).
void BM_Encode_Dgram_Mbuf(benchmark::State& st) {
  alignas(64) uint8_t buf[RTE_PKTMBUF_HEADROOM + wire::kOverhead + kMsg] = {};
  rte_mbuf m{};
  m.buf_addr = buf;
  m.buf_len = sizeof(buf);
  m.nb_segs = 1;
  const wire::Route r = route();
  wire::Header h;
  h.type = wire::Type::kData;
  wire::TxChecksumCaps caps;
  caps.udp_none = true;
  uint16_t id = 0;
  for (auto _ : st) {
    m.data_off = RTE_PKTMBUF_HEADROOM;
    m.data_len = kMsg;
    m.pkt_len = kMsg;
    benchmark::DoNotOptimize(wire::encode_mbuf(&m, r, h, id++, caps));
    benchmark::ClobberMemory();
  }
}
// An RDM frame of a 64-byte eager message as RdmEndpoint::transmit writes it on memif: template
// headers, the 64-byte RDM header, the data.
void BM_Encode_Rdm_Template(benchmark::State& st) {
  alignas(64) std::array<uint8_t, wire::kOverhead + wire::kRdmHeaderLen + kMsg> f{};
  const uint8_t data[kMsg] = {1};
  const wire::Route r = route();
  wire::HeaderTemplate t;
  if (t.init(r, wire::rdm_outer_header(0, 0, 0)) != 0) st.SkipWithError("HeaderTemplate::init");
  uint32_t seq = 0;
  for (auto _ : st) {
    const wire::RdmHeader h = eager_header(seq++);
    t.write(f.data(), r.dst_mac.addr_bytes, wire::kRdmHeaderLen + kMsg, static_cast<uint16_t>(seq));
    wire::write_rdm_header(f.data() + wire::kOverhead, h);
    std::memcpy(f.data() + wire::kOverhead + wire::kRdmHeaderLen, data, kMsg);
    benchmark::ClobberMemory();
  }
}

// ---- decoding
// ---------------------------------------------------------------------------------------

void BM_Decode_Rdm(benchmark::State& st) {
  alignas(64) std::array<uint8_t, wire::kOverhead + wire::kRdmHeaderLen + kMsg> f{};
  const wire::Route r = route();
  if (wire::encode_rdm({f.data() + wire::kOverhead, wire::kRdmHeaderLen + kMsg}, eager_header(1),
                       kMsg) < 0 ||
      wire::encode_frame(f, r, wire::rdm_outer_header(0, 0, 0), 1) != 0)
    st.SkipWithError("encode");
  // As memif frames: no UDP checksum (the decoder skips a zero one).
  f[wire::kUdpOffset + 6] = f[wire::kUdpOffset + 7] = 0;
  wire::DecodeStats ds;
  wire::RdmDecodeStats rs;
  for (auto _ : st) {
    wire::Frame fr;
    if (wire::decode_frame(f, &fr, ds) != wire::Verdict::kData) st.SkipWithError("decode_frame");
    wire::RdmHeader h;
    std::span<const uint8_t> data;
    benchmark::DoNotOptimize(
        wire::decode_rdm(fr.header, {fr.payload, fr.payload_len}, &h, &data, rs));
    benchmark::DoNotOptimize(h);
  }
}

// ---- a completion through the CQ ----------------------------------------------------------------

std::unique_ptr<event::Cq> make_cq() {
  event::CqConfig cfg;
  cfg.size = 256;
  cfg.format = FI_CQ_FORMAT_MSG;
  auto cq = event::Cq::create(cfg, nullptr);
  if (!cq) std::abort();
  return std::move(cq.value());
}

// write (the ring: RTS enqueue, notify's fence) then read (zero-copy dequeue under the consumer
// SpinLock): every send completion, and receive completions another thread's step made.
void BM_Cq_RingWriteRead(benchmark::State& st) {
  auto cq = make_cq();
  int ctx;
  for (auto _ : st) {
    cq->write(&ctx, FI_SEND | FI_MSG, kMsg);
    fi_cq_msg_entry e;
    benchmark::DoNotOptimize(cq->read(&e, 1, nullptr));
  }
}

// The reader's own poll step completes an operation: progress_and_read takes it straight into
// the caller's buffer (no ring, no notify).
struct WritingSource final : wait::ProgressSource {
  event::Cq* cq = nullptr;
  int ctx = 0;
  size_t progress() noexcept override {
    cq->write(&ctx, FI_RECV | FI_MSG, kMsg);
    return 1;
  }
};
void BM_Cq_DirectHandoff(benchmark::State& st) {
  auto cq = make_cq();
  WritingSource src;
  src.cq = cq.get();
  cq->set_progress(&src);
  for (auto _ : st) {
    fi_cq_msg_entry e;
    benchmark::DoNotOptimize(cq->progress_and_read(&e, 1, nullptr));
  }
}
// An empty read (a spinning reader's unit, without the poll step).
void BM_Cq_EmptyRead(benchmark::State& st) {
  auto cq = make_cq();
  for (auto _ : st) {
    fi_cq_msg_entry e;
    benchmark::DoNotOptimize(cq->read(&e, 1, nullptr));
  }
}

// ---- synchronisation
// ------------------------------------------------------------------------------

void BM_SpinLock(benchmark::State& st) {
  SpinLock l("bench");
  for (auto _ : st) {
    l.lock();
    benchmark::ClobberMemory();
    l.unlock();
  }
}
void BM_Counter_LockedAdd(benchmark::State& st) {
  std::atomic<uint64_t> c{0};
  for (auto _ : st) c.fetch_add(1, std::memory_order_relaxed);
  benchmark::DoNotOptimize(c.load());
}
void BM_Counter_Bump(benchmark::State& st) {
  std::atomic<uint64_t> c{0};
  for (auto _ : st) bump(c);
  benchmark::DoNotOptimize(c.load());
}
void BM_FullFence(benchmark::State& st) {
  for (auto _ : st) full_fence();
}

// ---- the memif burst guard
// ----------------------------------------------------------------------------------------------

[[gnu::noinline]] void burst_stand_in(void* p) { benchmark::DoNotOptimize(p); }

void BM_Burst_Plain(benchmark::State& st) {
  for (auto _ : st) burst_stand_in(&st);
}
void BM_Burst_Guarded(benchmark::State& st) {
  if (!dpfab::port::install_burst_guard()) st.SkipWithError("no guard in this build");
  for (auto _ : st)
    benchmark::DoNotOptimize(dpfab::port::detail::run_guarded(0, burst_stand_in, &st));
}

// ---- the reliability core with other peers in flight
// ----------------------------------------------------------------------------------------------

namespace rdmb {

using dpfab::proto::rdm::Completion;
using dpfab::proto::rdm::CoreConfig;
using dpfab::proto::rdm::CoreSink;
using dpfab::proto::rdm::RdmCore;
using dpfab::proto::rdm::RecvOp;
using dpfab::proto::rdm::SendOp;

// Holds the one frame a core sends to peer 0 (the other core) until the loop hands it over;
// frames to any other peer vanish (peers that never answer: their packets stay in flight).
struct Sink final : CoreSink {
  bool transmit(fi_addr_t peer, const dpfab::wire::RdmHeader& h,
                std::span<const uint8_t> data) noexcept override {
    if (peer != 0) return true;
    held = true;
    hdr = h;
    len = std::min(data.size(), bytes.size());
    std::memcpy(bytes.data(), data.data(), len);
    return true;
  }
  void complete(const Completion& c) noexcept override { completions += c.cq; }
  bool held = false;
  dpfab::wire::RdmHeader hdr;
  std::array<uint8_t, 64> bytes{};
  size_t len = 0;
  uint64_t completions = 0;
};

struct Side {
  Sink sink;
  std::unique_ptr<RdmCore> core;
  std::array<uint8_t, 64> tx{}, rx{};
  uint64_t due = 0;  // what RdmEndpoint::finish would store
};

// Two cores, each the other's peer 0. @return false (the benchmark skipped) when one cannot be
// made.
bool make_pair(benchmark::State& st, const CoreConfig& cfg, Side& a, Side& b) {
  for (Side* x : {&a, &b}) {
    auto made = RdmCore::create(cfg, &x->sink);
    if (!made.ok()) {
      st.SkipWithError("RdmCore::create");
      return false;
    }
    x->core = std::move(made.value());
    x->core->add_peer(0);
  }
  return true;
}

// Posts a receive of `x`'s 64-byte buffer.
void post_recv(Side& x, uint64_t now) {
  RecvOp r;
  r.buf = x.rx.data();
  r.len = x.rx.size();
  benchmark::DoNotOptimize(x.core->recv(r, now));
}

// Peers 1..others of `x`: one packet each, never acknowledged (its RTO runs: the peer stays
// active).
void load_peers(Side& x, fi_addr_t others) {
  for (fi_addr_t p = 1; p <= others; ++p) {
    x.core->add_peer(p);
    SendOp s;
    s.dest = p;
    s.buf = x.tx.data();
    s.len = x.tx.size();
    s.inject = s.complete_now = true;
    x.core->send(s, p, 0);
  }
}

// `from` sends 64 bytes to peer 0 (`to`), which takes it into its posted receive and posts the
// next one: the calls a one-way trip makes into the cores, each followed by next_deadline.
void hop(Side& from, Side& to, uint64_t now) {
  SendOp s;
  s.buf = from.tx.data();
  s.len = from.tx.size();
  s.inject = s.complete_now = true;  // a small fi_send: complete once copied
  benchmark::DoNotOptimize(from.core->send(s, 0, now));
  from.due = from.core->next_deadline();
  from.sink.held = false;
  to.core->on_frame(0, from.sink.hdr, {from.sink.bytes.data(), from.sink.len}, now);
  to.due = to.core->next_deadline();
  post_recv(to, now);
  to.due = to.core->next_deadline();
  benchmark::DoNotOptimize(from.due + to.due);
}

void BM_RdmCore_RoundTrip_PeersInFlight(benchmark::State& st) {
  Side a, b;
  if (!make_pair(st, CoreConfig{}, a, b)) return;
  post_recv(a, 0);
  post_recv(b, 0);
  load_peers(a, static_cast<fi_addr_t>(st.range(0)));
  uint64_t now = 1;
  for (auto _ : st) {
    hop(a, b, now);
    hop(b, a, now);
    ++now;  // no timer comes due: the loop never calls progress()
  }
  st.counters["completions"] = static_cast<double>(a.sink.completions + b.sink.completions);
}

// Hands the frame `from` holds for peer 0 (if any) to `to`.
void pass_held(Side& from, Side& to, uint64_t now) {
  if (!from.sink.held) return;
  from.sink.held = false;
  to.core->on_frame(0, from.sink.hdr, {from.sink.bytes.data(), from.sink.len}, now);
  to.due = to.core->next_deadline();
}

// A one-way message a -> b whose ack b delays, then b's timer pass, as an endpoint runs it when
// its next deadline comes due (RdmEndpoint::drain_backlog), sends that ack, while b has N other
// peers with a packet in flight (their RTOs far off): the pass an all-to-all's receiver runs
// as the delayed acks of its many peers come due.
void BM_RdmCore_AckPass_PeersInFlight(benchmark::State& st) {
  Side a, b;
  CoreConfig cfg;
  cfg.rel.rto_init_ns = cfg.rel.rto_max_ns = 1'000'000'000'000;  // the others' RTOs never fire
  if (!make_pair(st, cfg, a, b)) return;
  load_peers(b, static_cast<fi_addr_t>(st.range(0)));
  post_recv(b, 0);
  uint64_t now = 1;
  uint64_t passes = 0;
  for (auto _ : st) {
    SendOp s;
    s.buf = a.tx.data();
    s.len = a.tx.size();
    s.inject = s.complete_now = true;
    benchmark::DoNotOptimize(a.core->send(s, 0, now));
    a.due = a.core->next_deadline();
    pass_held(a, b, now);
    post_recv(b, now);
    b.due = b.core->next_deadline();
    pass_held(b, a, now);  // an immediate ack (every ack_every packets)
    now += cfg.rel.ack_delay_ns + 1;
    if (now >= b.due) {
      b.core->progress(now);
      b.due = b.core->next_deadline();
      ++passes;
    }
    pass_held(b, a, now);
  }
  st.counters["passes"] = static_cast<double>(passes);
  st.counters["completions"] = static_cast<double>(a.sink.completions + b.sink.completions);
}

}  // namespace rdmb

// ---- the same-host path's receive side with many links
// ----------------------------------------------------------------------------------------------

namespace shmb {

using dpfab::shm::Conn;
using dpfab::shm::LinkState;
using dpfab::shm::Node;
using dpfab::shm::RecordHeader;

// Node `rx` linked to N other nodes of this process (real links: sockets, hellos, segments), as a
// process of a host with N + 1 dpfab processes that all talk to each other.
struct Star {
  std::vector<std::unique_ptr<Node>> nodes;  // [0] the receiver
  std::vector<Conn*> to_rx;                  // node i's link to [0]
  bool ok = false;
  explicit Star(size_t links) {
    dpfab::shm::NodeConfig c;
    c.prefix = "dpfab-shm-bench-" + std::to_string(getpid());
    c.ring_bytes = 16 << 10;
    c.handshake_timeout_ns = 5'000'000'000;
    for (size_t i = 0; i <= links; ++i) {
      const uint8_t mac[6] = {2, 0, 0, 0, static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i)};
      auto n = Node::open(c, mac, 0x0a000000u + static_cast<uint32_t>(i));
      if (!n) return;
      nodes.push_back(std::move(n.value()));
    }
    for (size_t i = 1; i <= links; ++i) {
      if (nodes[i]->connect(nodes[0]->id(), nodes[0]->nonce()) != LinkState::kUp) return;
      to_rx.push_back(nodes[i]->find(nodes[0]->id()));
    }
    // The receiver's side of each link is in its poll list once the control thread saw it up.
    for (int k = 0; k < 5000 && nodes[0]->links_up() < links; ++k)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ok = nodes[0]->links_up() == links;
  }
  size_t poll() {
    return nodes[0]->poll(
        32, [](Conn&, const RecordHeader& h, const uint8_t*) { benchmark::DoNotOptimize(h.len); },
        [](Conn&) {});
  }
};

// A poll of the receive side that finds nothing (what a spinning receiver repeats), with N links.
void BM_ShmNode_EmptyPoll(benchmark::State& st) {
  Star s(static_cast<size_t>(st.range(0)));
  if (!s.ok) {
    st.SkipWithError("links not up");
    return;
  }
  for (auto _ : st) benchmark::DoNotOptimize(s.poll());
}

// One 64-byte record from one of the N peers (each in turn), taken by the next poll.
void BM_ShmNode_OneRecord(benchmark::State& st) {
  Star s(static_cast<size_t>(st.range(0)));
  if (!s.ok) {
    st.SkipWithError("links not up");
    return;
  }
  const RecordHeader h{64, dpfab::shm::RecordKind::kRdm, 0, 1, 2, 3, 4, 0};
  std::array<uint8_t, 64> data{};
  size_t i = 0;
  for (auto _ : st) {
    if (s.to_rx[i]->send(h, data) != 0) st.SkipWithError("send");
    if (++i == s.to_rx.size()) i = 0;
    if (s.poll() != 1) st.SkipWithError("poll");
  }
}

}  // namespace shmb

BENCHMARK(shmb::BM_ShmNode_EmptyPoll)->Arg(1)->Arg(8)->Arg(63);
BENCHMARK(shmb::BM_ShmNode_OneRecord)->Arg(1)->Arg(8)->Arg(63);
BENCHMARK(rdmb::BM_RdmCore_RoundTrip_PeersInFlight)->Arg(0)->Arg(16)->Arg(64)->Arg(255);
BENCHMARK(rdmb::BM_RdmCore_AckPass_PeersInFlight)->Arg(0)->Arg(16)->Arg(64)->Arg(255);
BENCHMARK(BM_Encode_Dgram_Full);
BENCHMARK(BM_Encode_Dgram_Mbuf);
BENCHMARK(BM_Encode_Dgram_Template);
BENCHMARK(BM_Encode_Rdm_Template);
BENCHMARK(BM_Decode_Rdm);
BENCHMARK(BM_Cq_RingWriteRead);
BENCHMARK(BM_Cq_DirectHandoff);
BENCHMARK(BM_Cq_EmptyRead);
BENCHMARK(BM_SpinLock);
BENCHMARK(BM_Counter_LockedAdd);
BENCHMARK(BM_Counter_Bump);
BENCHMARK(BM_FullFence);
BENCHMARK(BM_Burst_Plain);
BENCHMARK(BM_Burst_Guarded);

}  // namespace

BENCHMARK_MAIN();
