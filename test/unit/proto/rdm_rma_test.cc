// SPDX-License-Identifier: BSD-3-Clause
//
// RMA and atomics in the RDM core (rdm_core.h, "RMA and atomics"), end to end over the simulated
// link of rdm_sim.h: writes and reads of every size class placed exactly and intact through loss,
// duplication, reordering and corruption; remote CQ data and remote events at the target; every
// protection failure (wrong key, closed region, out of bounds, missing right) reported at the
// initiator with nothing changed and nothing reported at the target; atomics from two initiators
// on one counter; read-then-write ordering (WAR); FI_FENCE; a peer lost during a read; bounded
// target resources (responders, stage copies) under load; several local buffers.
#include <rdma/fi_atomic.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <algorithm>
#include <deque>
#include <set>

#include "proto/mr_table.h"
#include "rdm_sim.h"

using namespace rdm_sim;
using dpfab::proto::MrTable;
using dpfab::wire::RdmKind;

namespace {

// memcmp, with zero-length ranges (an empty vector's null data()) equal, as memcmp may not be
// given null.
bool same_bytes(const void* a, const void* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n) == 0;
}

constexpr uint64_t kRw = FI_REMOTE_READ | FI_REMOTE_WRITE;

// A target buffer with guard bytes on both sides, registered in `table` (virtual addresses).
struct Region {
  static constexpr size_t kGuard = 64;
  std::vector<uint8_t> mem;
  uint32_t slot = MrTable::kNoSlot;
  uint64_t key = 0;
  Region(MrTable& t, size_t len, uint64_t access, uint8_t fill = 0x11)
      : mem(len + 2 * kGuard, fill) {
    iovec iov{mem.data() + kGuard, len};
    MrTable::Spec s;
    s.iov = &iov;
    s.count = 1;
    s.access = access;
    auto r = t.add(s);
    EXPECT_TRUE(r.ok());
    slot = r.value();
    key = t.key(slot);
  }
  uint8_t* data() { return mem.data() + kGuard; }
  size_t size() const { return mem.size() - 2 * kGuard; }
  uint64_t addr(size_t off = 0) { return reinterpret_cast<uintptr_t>(data()) + off; }
  bool guards_are(uint8_t v) const {
    for (size_t i = 0; i < kGuard; ++i)
      if (mem[i] != v || mem[mem.size() - 1 - i] != v) return false;
    return true;
  }
};

CoreConfig rma_config(MrTable* t) {
  CoreConfig c = test_config();
  c.mrs = t;
  c.write_counted = c.read_counted = true;
  c.inject_size = 1024;
  c.atomic_max = 512;
  return c;
}

SendOp write_op(int dest, const std::vector<uint8_t>& b, uint64_t key, uint64_t addr, void* ctx) {
  SendOp s;
  s.dest = dest;
  s.kind = OpKind::kWrite;
  s.buf = b.data();
  s.len = b.size();
  s.rkey = key;
  s.raddr = addr;
  s.context = ctx;
  return s;
}

SendOp read_op(int dest, std::vector<uint8_t>& b, uint64_t key, uint64_t addr, void* ctx) {
  SendOp s = write_op(dest, b, key, addr, ctx);
  s.kind = OpKind::kRead;
  s.buf = b.data();
  return s;
}

// The completions of `node` for `ctx`.
std::vector<Completion> of(Node& n, void* ctx) {
  std::vector<Completion> v;
  for (auto& c : n.done)
    if (c.context == ctx) v.push_back(c);
  return v;
}

size_t remote_events(Node& n) {
  size_t k = 0;
  for (auto& c : n.done) k += (c.flags & (FI_REMOTE_WRITE | FI_REMOTE_READ)) != 0;
  return k;
}

bool all_done(Net& net) {
  return net.core(0).tx_in_use() == 0 && net.core(1).tx_in_use() == 0 &&
         net.core(1).target_in_use() == 0 && net.core(0).target_in_use() == 0;
}

}  // namespace

TEST(RdmRma, WritesOfEverySizeArePlacedExactly) {
  MrTable table({});
  Net net(2, rma_config(&table), 1);
  Region r(table, 1 << 20, kRw);
  const size_t seg = test_config().seg_size - dpfab::wire::kRdmRmaLen;
  std::vector<size_t> sizes = {0, 1, seg - 1, seg, seg + 1, 3 * seg, 64 * seg + 7, 1 << 20};
  for (size_t i = 0; i < sizes.size(); ++i) {
    const auto data = pattern(i + 1, sizes[i]);
    std::fill(r.data(), r.data() + r.size(), 0x11);
    ASSERT_EQ(net.core(0).send(write_op(1, data, r.key, r.addr(), &sizes[i]), net.now()), 0);
    ASSERT_TRUE(net.run([&] { return !of(net.node(0), &sizes[i]).empty(); }));
    auto c = of(net.node(0), &sizes[i]);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].err, 0) << sizes[i];
    EXPECT_EQ(c[0].flags, FI_RMA | FI_WRITE);
    EXPECT_EQ(c[0].len, sizes[i]);
    EXPECT_TRUE(same_bytes(r.data(), data.data(), sizes[i])) << sizes[i];
    if (sizes[i] < r.size()) {
      EXPECT_EQ(r.data()[sizes[i]], 0x11);
    }
    EXPECT_TRUE(r.guards_are(0x11));
  }
  EXPECT_EQ(net.core(1).stats().target_writes, sizes.size());
  // The target counted each write once (no CQ entry without remote CQ data).
  EXPECT_EQ(remote_events(net.node(1)), 0u);
  EXPECT_EQ(net.node(1).counted, sizes.size());
  ASSERT_TRUE(net.run([&] { return all_done(net); }));
}

TEST(RdmRma, WriteDataCompletesAtTheTarget) {
  MrTable table({});
  Net net(2, rma_config(&table), 2);
  Region r(table, 4096, kRw);
  const auto data = pattern(7, 3000);
  SendOp s = write_op(1, data, r.key, r.addr(100), &r);
  s.has_data = true;
  s.data = 0xfeedface;
  ASSERT_EQ(net.core(0).send(s, net.now()), 0);
  ASSERT_TRUE(net.run([&] { return !of(net.node(0), &r).empty() && remote_events(net.node(1)); }));
  ASSERT_EQ(net.node(1).done.size(), 1u);
  const Completion& t = net.node(1).done[0];
  EXPECT_EQ(t.flags, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
  EXPECT_EQ(t.data, 0xfeedfaceu);
  EXPECT_EQ(t.len, 3000u);
  EXPECT_EQ(t.src, 0u);
  EXPECT_TRUE(same_bytes(r.data() + 100, data.data(), data.size()));
}

TEST(RdmRma, ReadsOfEverySizeReturnTheTargetsBytes) {
  MrTable table({});
  Net net(2, rma_config(&table), 3);
  Region r(table, 1 << 20, FI_REMOTE_READ);
  const auto src = pattern(99, r.size());
  std::memcpy(r.data(), src.data(), src.size());
  const size_t lens[] = {0, 1, 1000, 1024, 1025, 70000, size_t{1} << 20};
  for (const size_t& len : lens) {  // each length's address is the read's context
    std::vector<uint8_t> buf(len, 0xee);
    const size_t off = len == r.size() ? 0 : 5;
    ASSERT_EQ(net.core(0).send(read_op(1, buf, r.key, r.addr(off), (void*)&len), net.now()), 0);
    ASSERT_TRUE(net.run([&] { return !of(net.node(0), (void*)&len).empty(); })) << len;
    auto c = of(net.node(0), (void*)&len);
    EXPECT_EQ(c[0].err, 0) << len;
    EXPECT_EQ(c[0].flags, FI_RMA | FI_READ);
    EXPECT_EQ(c[0].len, len);
    EXPECT_TRUE(same_bytes(buf.data(), src.data() + off, len)) << len;
  }
  ASSERT_TRUE(net.run([&] { return all_done(net); }));
  EXPECT_EQ(net.node(1).counted, 7u);  // remote reads counted at the target
}

// Many writes and reads of mixed sizes under loss, duplication, reordering, corruption and a
// port that refuses frames now and then: each completes once, and the bytes are right.
TEST(RdmRma, LossyLinkKeepsEveryByte) {
  MrTable table({});
  LinkModel lossy;
  lossy.loss_ppm = 30'000;
  lossy.dup_ppm = 20'000;
  lossy.corrupt_ppm = 10'000;
  lossy.refuse_ppm = 5'000;
  lossy.jitter_ns = 30'000;
  CoreConfig cfg = rma_config(&table);
  cfg.stage_slots = 16;  // few copies: reads wait for acks
  Net net(2, cfg, 4, lossy);
  constexpr size_t kSlice = 40960;  // each write its own slice: none overlaps another
  Region dst(table, 100 * kSlice, kRw);
  Region src(table, 256 << 10, kRw);
  const auto content = pattern(5, src.size());
  std::memcpy(src.data(), content.data(), content.size());
  Rng rng(44);
  struct Op {
    bool write;
    size_t off, len;
    std::vector<uint8_t> buf;
  };
  std::deque<Op> ops;
  for (int i = 0; i < 200; ++i) {
    Op o;
    o.write = i % 2;
    o.len = rng.below(5) == 0 ? rng.below(kSlice) : rng.below(3000);
    o.off = o.write ? (i / 2) * kSlice : rng.below(src.size() - o.len);
    o.buf = o.write ? pattern(1000 + i, o.len) : std::vector<uint8_t>(o.len, 0);
    ops.push_back(std::move(o));
  }
  size_t next = 0;
  auto post = [&] {
    while (next < ops.size()) {
      Op& o = ops[next];
      SendOp s = o.write ? write_op(1, o.buf, dst.key, dst.addr(o.off), &o)
                         : read_op(1, o.buf, src.key, src.addr(o.off), &o);
      const ssize_t rc = net.core(0).send(s, net.now());
      if (rc == -FI_EAGAIN) return;
      ASSERT_EQ(rc, 0);
      ++next;
    }
  };
  ASSERT_TRUE(net.run([&] {
    post();
    return net.node(0).done.size() == ops.size();
  }));
  for (size_t k = 0; k < ops.size(); ++k) {
    Op& o = ops[k];
    auto c = of(net.node(0), &o);
    ASSERT_EQ(c.size(), 1u) << k;
    ASSERT_EQ(c[0].err, 0) << k;
    if (o.write)
      ASSERT_TRUE(same_bytes(dst.data() + o.off, o.buf.data(), o.len)) << k;
    else
      ASSERT_TRUE(same_bytes(o.buf.data(), content.data() + o.off, o.len)) << k;
  }
  ASSERT_TRUE(net.run([&] { return all_done(net); }));
  EXPECT_TRUE(dst.guards_are(0x11));
  EXPECT_GT(net.frames_dropped, 0u);
  EXPECT_GT(net.frames_rejected, 0u);
}

// Each protection failure: the initiator's error, no byte changed, nothing at the target.
TEST(RdmRma, ProtectionFailuresChangeNothing) {
  MrTable table({});
  Net net(2, rma_config(&table), 5);
  Region rw(table, 8192, kRw, 0x33);
  Region ro(table, 8192, FI_REMOTE_READ, 0x44);
  Region wo(table, 8192, FI_REMOTE_WRITE, 0x55);
  Region closed(table, 8192, kRw, 0x66);
  const uint64_t closed_key = closed.key;
  table.remove(closed.slot, nullptr, nullptr);
  const auto data = pattern(3, 5000);  // several segments
  std::vector<uint8_t> buf(5000, 0xee);
  struct Case {
    const char* what;
    SendOp op;
    int err;
  };
  std::vector<Case> cases = {
      {"wrong key", write_op(1, data, rw.key ^ 0x100000000ull, rw.addr(), nullptr),
       FI_EKEYREJECTED},
      {"closed region", write_op(1, data, closed_key, closed.addr(), nullptr), FI_EKEYREJECTED},
      {"past the end", write_op(1, data, rw.key, rw.addr(8192 - 4999), nullptr), FI_EACCES},
      {"before the start", write_op(1, data, rw.key, rw.addr() - 1, nullptr), FI_EACCES},
      {"read-only region", write_op(1, data, ro.key, ro.addr(), nullptr), FI_EACCES},
      {"read of a write-only region", read_op(1, buf, wo.key, wo.addr(), nullptr), FI_EACCES},
      {"read past the end", read_op(1, buf, rw.key, rw.addr(4000), nullptr), FI_EACCES},
      {"read with a wrong key", read_op(1, buf, 12345, rw.addr(), nullptr), FI_EKEYREJECTED},
  };
  for (auto& c : cases) {
    c.op.context = &c;
    ASSERT_EQ(net.core(0).send(c.op, net.now()), 0) << c.what;
    ASSERT_TRUE(net.run([&] { return !of(net.node(0), &c).empty(); })) << c.what;
    auto got = of(net.node(0), &c);
    EXPECT_EQ(got[0].err, c.err) << c.what;
    EXPECT_EQ(got[0].len, 0u) << c.what;
  }
  for (Region* r : {&rw, &ro, &wo}) {
    const uint8_t fill = r->mem[0];
    EXPECT_TRUE(std::all_of(r->mem.begin(), r->mem.end(), [&](uint8_t b) { return b == fill; }));
  }
  EXPECT_TRUE(std::all_of(buf.begin(), buf.end(), [](uint8_t b) { return b == 0xee; }));
  EXPECT_EQ(remote_events(net.node(1)), 0u);
  EXPECT_EQ(net.node(1).counted, 0u);
  EXPECT_EQ(net.node(0).counted_err, cases.size());
  EXPECT_EQ(net.core(1).stats().target_refused, cases.size());
  ASSERT_TRUE(net.run([&] { return all_done(net); }));
}

// A region closed in the middle of a write: what arrives after the close is not placed, and the
// write fails.
TEST(RdmRma, RegionClosedDuringAWrite) {
  MrTable table({});
  Net net(2, rma_config(&table), 6);
  Region r(table, 200000, kRw, 0x77);
  const auto data = pattern(8, 200000);
  ASSERT_EQ(net.core(0).send(write_op(1, data, r.key, r.addr(), &r), net.now()), 0);
  // Run until part of it has landed, then close.
  ASSERT_TRUE(net.run([&] { return r.data()[20000] != 0x77; }));
  table.remove(r.slot, nullptr, nullptr);
  ASSERT_TRUE(net.run([&] { return !of(net.node(0), &r).empty(); }));
  EXPECT_EQ(of(net.node(0), &r)[0].err, FI_EKEYREJECTED);
  EXPECT_EQ(r.data()[199999], 0x77);  // the tail never landed
  EXPECT_EQ(remote_events(net.node(1)), 0u);
  ASSERT_TRUE(net.run([&] { return all_done(net); }));
}

// Fetch-and-add from two initiators on one counter: every old value comes back exactly once.
TEST(RdmRma, AtomicsFromTwoPeersAreAtomic) {
  MrTable table({});
  LinkModel lossy;
  lossy.loss_ppm = 20'000;
  lossy.jitter_ns = 20'000;
  Net net(3, rma_config(&table), 7, lossy);
  Region r(table, 64, kRw, 0);
  constexpr int kPerPeer = 200;
  std::vector<uint64_t> got[2];
  std::deque<uint64_t> results[2];
  const uint64_t one = 1;
  int posted[2] = {0, 0};
  auto post = [&](int who) {
    while (posted[who] < kPerPeer) {
      results[who].push_back(~0ull);
      SendOp s;
      s.dest = 2;
      s.kind = OpKind::kAtomic;
      s.atomic_op = FI_SUM;
      s.datatype = FI_UINT64;
      s.fetch = true;
      s.buf = &one;
      s.len = 8;
      s.rkey = r.key;
      s.raddr = r.addr(8);
      s.result_count = 1;
      s.result[0] = {&results[who].back(), 8};
      s.context = &results[who].back();
      const ssize_t rc = net.core(who).send(s, net.now());
      if (rc == -FI_EAGAIN) {
        results[who].pop_back();
        return;
      }
      ASSERT_EQ(rc, 0);
      ++posted[who];
    }
  };
  const bool ok = net.run([&] {
    post(0);
    post(1);
    return net.node(0).done.size() == kPerPeer && net.node(1).done.size() == kPerPeer;
  });
  ASSERT_TRUE(ok);
  uint64_t v;
  std::memcpy(&v, r.data() + 8, 8);
  EXPECT_EQ(v, 2u * kPerPeer);
  std::set<uint64_t> olds;
  for (auto& q : results)
    for (uint64_t x : q) EXPECT_TRUE(olds.insert(x).second) << x;
  EXPECT_EQ(olds.size(), 2u * kPerPeer);
  EXPECT_EQ(*olds.rbegin(), 2u * kPerPeer - 1);
  for (int who = 0; who < 2; ++who)
    for (auto& c : net.node(who).done) EXPECT_EQ(c.flags, FI_ATOMIC | FI_READ);
}

TEST(RdmRma, CompareAndSwapAndAtomicErrors) {
  MrTable table({});
  Net net(2, rma_config(&table), 8);
  Region r(table, 64, kRw, 0);
  Region ro(table, 64, FI_REMOTE_READ, 0);
  uint64_t init = 5;
  std::memcpy(r.data(), &init, 8);
  uint64_t swap = 9, cmp = 5, old = 0;
  SendOp s;
  s.dest = 1;
  s.kind = OpKind::kAtomic;
  s.atomic_op = FI_CSWAP;
  s.datatype = FI_UINT64;
  s.compare_op = true;
  s.buf = &swap;
  s.len = 8;
  s.compare = &cmp;
  s.rkey = r.key;
  s.raddr = r.addr();
  s.result_count = 1;
  s.result[0] = {&old, 8};
  s.context = &old;
  ASSERT_EQ(net.core(0).send(s, net.now()), 0);
  ASSERT_TRUE(net.run([&] { return net.node(0).done.size() == 1; }));
  uint64_t now_v;
  std::memcpy(&now_v, r.data(), 8);
  EXPECT_EQ(old, 5u);
  EXPECT_EQ(now_v, 9u);
  // A compare that fails changes nothing and returns the value.
  ASSERT_EQ(net.core(0).send(s, net.now()), 0);
  ASSERT_TRUE(net.run([&] { return net.node(0).done.size() == 2; }));
  EXPECT_EQ(old, 9u);
  std::memcpy(&now_v, r.data(), 8);
  EXPECT_EQ(now_v, 9u);
  // Out of bounds, a read-only region, a wrong key: errors, nothing changes.
  for (auto [key, addr, err] : {std::tuple<uint64_t, uint64_t, int>{r.key, r.addr(60), FI_EACCES},
                                {ro.key, ro.addr(), FI_EACCES},
                                {r.key + 1, r.addr(), FI_EKEYREJECTED}}) {
    s.rkey = key;
    s.raddr = addr;
    const size_t before = net.node(0).done.size();
    ASSERT_EQ(net.core(0).send(s, net.now()), 0);
    ASSERT_TRUE(net.run([&] { return net.node(0).done.size() == before + 1; }));
    EXPECT_EQ(net.node(0).done.back().err, err);
  }
  EXPECT_TRUE(r.guards_are(0));
  EXPECT_TRUE(std::all_of(ro.mem.begin(), ro.mem.end(), [](uint8_t b) { return b == 0; }));
  // What the core refuses at once: a combination fi_atomic(3) does not define, partial elements,
  // more than atomic_max bytes.
  s.rkey = r.key;
  s.raddr = r.addr();
  s.atomic_op = FI_BOR;
  s.datatype = FI_DOUBLE;
  EXPECT_EQ(net.core(0).send(s, net.now()), -FI_EINVAL);
  s.atomic_op = FI_CSWAP;
  s.datatype = FI_UINT64;
  s.len = 7;
  EXPECT_EQ(net.core(0).send(s, net.now()), -FI_EINVAL);
  std::vector<uint8_t> big(512);
  s.buf = big.data();
  s.len = 512;  // with the compare values, 1024 > atomic_max
  EXPECT_EQ(net.core(0).send(s, net.now()), -FI_EMSGSIZE);
}

// FI_ATOMIC_READ takes no operands: no buffer, the length only counts the elements; the target's
// values come back and nothing changes there.
TEST(RdmRma, AtomicReadNeedsNoOperands) {
  MrTable table({});
  Net net(2, rma_config(&table), 8);
  Region r(table, 32, FI_REMOTE_READ, 0);
  const uint32_t v[4] = {7, 8, 9, 10};
  std::memcpy(r.data(), v, sizeof(v));
  uint32_t got[4] = {};
  SendOp s;
  s.dest = 1;
  s.kind = OpKind::kAtomic;
  s.atomic_op = FI_ATOMIC_READ;
  s.datatype = FI_UINT32;
  s.fetch = true;
  s.buf = nullptr;
  s.len = sizeof(got);
  s.rkey = r.key;
  s.raddr = r.addr();
  s.result_count = 1;
  s.result[0] = {got, sizeof(got)};
  s.context = got;
  ASSERT_EQ(net.core(0).send(s, net.now()), 0);
  ASSERT_TRUE(net.run([&] { return net.node(0).done.size() == 1; }));
  EXPECT_EQ(net.node(0).done[0].err, 0);
  EXPECT_TRUE(same_bytes(got, v, sizeof(v)));
  EXPECT_TRUE(same_bytes(r.data(), v, sizeof(v)));
  EXPECT_TRUE(r.guards_are(0));
}

// A write posted after a read never changes what the read returns (WAR): the target holds it
// until the read's data is all copied out.
TEST(RdmRma, WriteAfterReadWaitsForTheRead) {
  MrTable table({});
  CoreConfig cfg = rma_config(&table);
  cfg.stage_slots = 4;  // the read's answer goes out a few segments at a time
  Net net(2, cfg, 9);
  Region r(table, 100000, kRw, 0x12);
  std::vector<uint8_t> got(100000, 0);
  const auto data = pattern(4, 100000);
  ASSERT_EQ(net.core(0).send(read_op(1, got, r.key, r.addr(), &got), net.now()), 0);
  ASSERT_EQ(net.core(0).send(write_op(1, data, r.key, r.addr(), &r), net.now()), 0);
  ASSERT_TRUE(net.run([&] { return of(net.node(0), &r).size() == 1; }));
  ASSERT_EQ(of(net.node(0), &got).size(), 1u);
  EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](uint8_t b) { return b == 0x12; }));
  EXPECT_TRUE(same_bytes(r.data(), data.data(), data.size()));
  EXPECT_GT(net.core(1).stats().target_gated, 0u);
}

// FI_FENCE: nothing of a fenced operation goes out before the operations posted before it to
// that peer completed.
TEST(RdmRma, FenceHoldsAnOperationUntilEarlierOnesComplete) {
  MrTable table({});
  Net net(2, rma_config(&table), 10);
  Region r(table, 300000, kRw, 0);
  const auto big = pattern(1, 300000);
  std::vector<uint8_t> small(64, 1);
  bool fenced_sent_early = false;
  uint32_t fenced_msg = 0;
  net.on_send = [&](int from, int, const dpfab::wire::RdmHeader& h) {
    // The write's completion is recorded before anything its completion lets go is sent.
    if (from == 0 && h.kind == RdmKind::kReadReq && of(net.node(0), &r).empty())
      fenced_sent_early = true;
    if (from == 0 && h.kind == RdmKind::kReadReq) fenced_msg = h.msg_id;
  };
  ASSERT_EQ(net.core(0).send(write_op(1, big, r.key, r.addr(), &r), net.now()), 0);
  SendOp f = read_op(1, small, r.key, r.addr(1000), &small);
  f.fence = true;
  ASSERT_EQ(net.core(0).send(f, net.now()), 0);
  ASSERT_TRUE(net.run([&] { return !of(net.node(0), &small).empty(); }));
  EXPECT_FALSE(fenced_sent_early);
  EXPECT_NE(fenced_msg, 0u);
  EXPECT_TRUE(same_bytes(small.data(), big.data() + 1000, 64));
}

// The target dies during a large read: the read fails, nothing hangs, nothing leaks.
TEST(RdmRma, PeerLostDuringARead) {
  MrTable table({});
  Net net(2, rma_config(&table), 11);
  Region r(table, 1 << 20, kRw, 1);
  std::vector<uint8_t> got(1 << 20);
  ASSERT_EQ(net.core(0).send(read_op(1, got, r.key, r.addr(), &got), net.now()), 0);
  ASSERT_TRUE(net.run([&] { return got[100000] == 1; }));
  net.cut(1, 0, true);
  net.cut(0, 1, true);
  ASSERT_TRUE(net.run([&] { return !of(net.node(0), &got).empty(); }, 120'000'000'000ull));
  EXPECT_EQ(of(net.node(0), &got)[0].err, FI_EHOSTUNREACH);
  ASSERT_TRUE(net.run([&] { return net.core(1).target_in_use() == 0; }, 120'000'000'000ull));
  EXPECT_EQ(net.core(0).tx_in_use(), 0u);
}

// More reads than responders and stage copies, from two peers: back-pressure, then all done.
TEST(RdmRma, TargetResourcesAreBounded) {
  MrTable table({});
  CoreConfig cfg = rma_config(&table);
  cfg.responders = 2;
  cfg.stage_slots = 3;
  cfg.resp_queue = 4;
  Net net(3, cfg, 12);
  Region r(table, 1 << 16, kRw, 0);
  const auto content = pattern(2, r.size());
  std::memcpy(r.data(), content.data(), content.size());
  std::vector<std::vector<uint8_t>> bufs(60, std::vector<uint8_t>(5000));
  int posted = 0;
  auto post = [&] {
    while (posted < 60) {
      const int who = posted % 2;
      SendOp s = read_op(2, bufs[posted], r.key, r.addr(posted * 100), &bufs[posted]);
      if (posted % 3 == 0) {  // and some writes of the same bytes back
        s.kind = OpKind::kWrite;
        s.buf = content.data() + posted * 100;
      }
      const ssize_t rc = net.core(who).send(s, net.now());
      if (rc == -FI_EAGAIN) return;
      ASSERT_EQ(rc, 0);
      ++posted;
    }
  };
  ASSERT_TRUE(net.run([&] {
    post();
    return net.node(0).done.size() + net.node(1).done.size() == 60;
  }));
  for (int i = 0; i < 60; ++i) {
    auto c = of(net.node(i % 2), &bufs[i]);
    ASSERT_EQ(c.size(), 1u) << i;
    EXPECT_EQ(c[0].err, 0) << i;
    if (i % 3) {
      EXPECT_TRUE(same_bytes(bufs[i].data(), content.data() + i * 100, 5000)) << i;
    }
  }
  EXPECT_GT(net.core(2).reliability_stats().rx_refused, 0u);
  ASSERT_TRUE(net.run([&] { return net.core(2).target_in_use() == 0; }));
}

// Several local buffers: writes gather, reads scatter, messages too.
TEST(RdmRma, SeveralLocalBuffers) {
  MrTable table({});
  Net net(2, rma_config(&table), 13);
  Region r(table, 10000, kRw, 0);
  std::vector<uint8_t> a = pattern(1, 3000), b = pattern(2, 10), c = pattern(3, 4000);
  SendOp w;
  w.dest = 1;
  w.kind = OpKind::kWrite;
  w.iov_count = 3;
  w.iov[0] = {a.data(), a.size()};
  w.iov[1] = {b.data(), b.size()};
  w.iov[2] = {c.data(), c.size()};
  w.len = 7010;
  w.rkey = r.key;
  w.raddr = r.addr(7);
  w.context = &w;
  ASSERT_EQ(net.core(0).send(w, net.now()), 0);
  ASSERT_TRUE(net.run([&] { return !of(net.node(0), &w).empty(); }));
  EXPECT_TRUE(same_bytes(r.data() + 7, a.data(), 3000));
  EXPECT_TRUE(same_bytes(r.data() + 3007, b.data(), 10));
  EXPECT_TRUE(same_bytes(r.data() + 3017, c.data(), 4000));
  std::vector<uint8_t> x(5), y(7000), z(5);
  SendOp rd = w;
  rd.kind = OpKind::kRead;
  rd.iov[0] = {x.data(), 5};
  rd.iov[1] = {y.data(), 7000};
  rd.iov[2] = {z.data(), 5};
  rd.context = &rd;
  ASSERT_EQ(net.core(0).send(rd, net.now()), 0);
  ASSERT_TRUE(net.run([&] { return !of(net.node(0), &rd).empty(); }));
  EXPECT_TRUE(same_bytes(x.data(), r.data() + 7, 5));
  EXPECT_TRUE(same_bytes(y.data(), r.data() + 12, 7000));
  EXPECT_TRUE(same_bytes(z.data(), r.data() + 7012, 5));
  // A message gathered from three buffers into a receive of two.
  std::vector<uint8_t> r1(4000), r2(4000);
  RecvOp rv;
  rv.iov_count = 2;
  rv.iov[0] = {r1.data(), r1.size()};
  rv.iov[1] = {r2.data(), r2.size()};
  rv.len = 8000;
  rv.context = &rv;
  ASSERT_EQ(net.core(1).recv(rv, net.now()), 0);
  SendOp m = w;
  m.kind = OpKind::kMsg;
  m.context = &m;
  ASSERT_EQ(net.core(0).send(m, net.now()), 0);
  ASSERT_TRUE(net.run([&] { return !of(net.node(1), &rv).empty(); }));
  EXPECT_EQ(of(net.node(1), &rv)[0].len, 7010u);
  EXPECT_TRUE(same_bytes(r1.data(), a.data(), 3000));
  EXPECT_TRUE(same_bytes(r1.data() + 3000, b.data(), 10));
  EXPECT_TRUE(same_bytes(r1.data() + 3010, c.data(), 990));
  EXPECT_TRUE(same_bytes(r2.data(), c.data() + 990, 3010));
}

// An endpoint that is no target (no regions) refuses every request.
TEST(RdmRma, NoTargetRefuses) {
  MrTable table({});
  CoreConfig cfg = rma_config(nullptr);
  Net net(2, cfg, 14);
  Region r(table, 64, kRw, 0);
  std::vector<uint8_t> d(8, 1);
  ASSERT_EQ(net.core(0).send(write_op(1, d, r.key, r.addr(), &r), net.now()), 0);
  ASSERT_TRUE(net.run([&] { return !of(net.node(0), &r).empty(); }));
  EXPECT_EQ(of(net.node(0), &r)[0].err, FI_EKEYREJECTED);
  EXPECT_TRUE(std::all_of(r.mem.begin(), r.mem.end(), [](uint8_t b) { return b == 0; }));
}
