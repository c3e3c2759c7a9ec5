// SPDX-License-Identifier: BSD-3-Clause
//
// Fuzz target: the RMA and atomic target of the RDM core (lib/proto/rdm_core_rma.cc) and its
// memory regions (lib/proto/mr_table.h), against a hostile peer. The input is a script of commands
// run against one RdmCore with two peers and a table of up to 8 regions, each with guard bytes on
// both sides:
//   0  frame    peer(1) len(2) bytes: an RDM payload from that peer (through decode_rdm); the
//               bytes may name a region: a key byte k < 8 followed by the op is replaced by region
//               k's key, so that scripts reach past the key check
//   1  region   size(2) access(1): registers a region (access bit 0 FI_REMOTE_READ, bit 1
//               FI_REMOTE_WRITE)
//   2  close    which(1): closes a region
//   3  time     advance(2): progress after advance us
//   4  op       kind(1) region(1) off(2) len(2) dest(1): this core writes, reads or does an
//               atomic (kind % 3) at the peer, into region-sized local buffers
// Besides "no crash, no sanitizer report", it checks properties:
//   - no guard byte ever changes, nor any byte of a region that grants no FI_REMOTE_WRITE, nor
//     any byte of a region after it was closed;
//   - every frame the core sends passes rdm_validate;
//   - no hang: with the peers silent, time runs until nothing is scheduled, and then no operation,
//     read answer or stage copy is left in use.
// A violated property aborts (__builtin_trap), which libFuzzer reports as a crash.
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_errno.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "proto/mr_table.h"
#include "proto/rdm_core.h"
#include "wire/rdm.h"

using namespace dpfab::proto;
using namespace dpfab::proto::rdm;
using dpfab::wire::RdmHeader;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

constexpr size_t kGuard = 32;
constexpr size_t kMaxRegions = 8;

struct Region {
  std::vector<uint8_t> mem;  // guard, region, guard
  size_t len = 0;
  uint64_t access = 0;
  uint32_t slot = MrTable::kNoSlot;
  uint64_t key = 0;
  bool open = false;
  std::vector<uint8_t> frozen;  // a snapshot of what may not change any more
  uint8_t* data() { return mem.data() + kGuard; }
};

class Sink final : public CoreSink {
 public:
  bool transmit(fi_addr_t peer, const RdmHeader& h, std::span<const uint8_t> d) noexcept override {
    check(peer <= 1);
    check(dpfab::wire::rdm_validate(h, d.size()) == dpfab::wire::RdmVerdict::kOk);
    return true;
  }
  void complete(const Completion&) noexcept override {}
};

struct Reader {
  const uint8_t* p;
  size_t n;
  bool take(size_t k, uint64_t* v) {
    if (n < k) return false;
    *v = 0;
    for (size_t i = 0; i < k; ++i) *v = (*v << 8) | p[i];
    p += k;
    n -= k;
    return true;
  }
};

// What may change in a region: nothing in the guards; nothing at all unless it is open and grants
// FI_REMOTE_WRITE.
void check_regions(Region* regions, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    Region& r = regions[i];
    for (size_t k = 0; k < kGuard; ++k)
      check(r.mem[k] == 0xa5 && r.mem[kGuard + r.len + k] == 0xa5);
    if (!r.frozen.empty()) check(std::memcmp(r.frozen.data(), r.data(), r.len) == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  MrTable table({});
  Sink sink;
  CoreConfig cfg;
  cfg.rel.window = 8;
  cfg.rel.rto_init_ns = 10'000;
  cfg.rel.rto_min_ns = 5'000;
  cfg.rel.rto_max_ns = 80'000;
  cfg.rel.max_retries = 3;
  cfg.rel.ack_delay_ns = 1'000;
  cfg.rel.rnr_backoff_min_ns = 5'000;
  cfg.rel.rnr_backoff_max_ns = 40'000;
  cfg.rel.keepalive_ns = 50'000;
  cfg.rel.peer_timeout_ns = 0;
  cfg.seg_size = 512;
  cfg.eager_max = 4096;
  cfg.max_msg_size = 1 << 16;
  cfg.tx_ops = 16;
  cfg.rx_ops = 16;
  cfg.unexpected = 8;
  cfg.unexpected_slots = 4;
  cfg.reorder_slots = 16;
  cfg.inject_size = 256;
  cfg.atomic_max = 256;
  cfg.mrs = &table;
  cfg.stage_slots = 4;
  cfg.responders = 2;
  cfg.resp_queue = 8;
  cfg.epoch = 0x1234;
  auto made = RdmCore::create(cfg, &sink);
  check(made.ok());
  RdmCore& core = *made.value();
  check(core.add_peer(0) == 0 && core.add_peer(1) == 0);

  Region regions[kMaxRegions];
  size_t nregions = 0;
  std::vector<uint8_t> local(1 << 16);
  uint64_t results[64];
  uint64_t now = 1'000'000;
  dpfab::wire::RdmDecodeStats stats;
  std::vector<uint8_t> payload;
  Reader in{data, size};
  uint64_t cmd;
  while (in.take(1, &cmd)) {
    uint64_t a = 0, b = 0, c = 0, d = 0, e = 0;
    switch (cmd % 5) {
      case 0: {
        if (!in.take(1, &a) || !in.take(2, &b)) break;
        b = std::min<uint64_t>(b, in.n);
        payload.assign(in.p, in.p + b);
        in.p += b;
        in.n -= b;
        // Region keys and addresses: an RMA header's key field whose first byte is < 8 and the
        // others 0xee names region k; its address field likewise (offset in the low bytes).
        if (payload.size() >= dpfab::wire::kRdmRmaHeaderLen) {
          uint8_t* k = payload.data() + 64;
          uint8_t* ad = payload.data() + 72;
          if (k[0] < kMaxRegions && k[0] < nregions && k[1] == 0xee) {
            const uint64_t key = regions[k[0]].key;
            for (int i = 0; i < 8; ++i) k[i] = static_cast<uint8_t>(key >> (56 - 8 * i));
          }
          if (ad[0] < nregions && ad[1] == 0xee) {
            const uint64_t base = reinterpret_cast<uintptr_t>(regions[ad[0]].data());
            const uint64_t off = (uint64_t{ad[6]} << 8 | ad[7]) - 16;  // may start before it
            const uint64_t addr = base + off;
            for (int i = 0; i < 8; ++i) ad[i] = static_cast<uint8_t>(addr >> (56 - 8 * i));
          }
        }
        const auto outer = dpfab::wire::rdm_outer_header(1, 0, static_cast<uint32_t>(b));
        RdmHeader h;
        std::span<const uint8_t> d;
        if (dpfab::wire::decode_rdm(outer, payload, &h, &d, stats) == dpfab::wire::RdmVerdict::kOk)
          core.on_frame(a % 2, h, d, now);
        break;
      }
      case 1: {
        if (!in.take(2, &a) || !in.take(1, &b) || nregions == kMaxRegions) break;
        Region& r = regions[nregions];
        r.len = a % 4096 + 1;
        r.mem.assign(r.len + 2 * kGuard, 0xa5);
        for (size_t i = 0; i < r.len; ++i) r.data()[i] = static_cast<uint8_t>(i * 7);
        r.access = ((b & 1) ? FI_REMOTE_READ : 0) | ((b & 2) ? FI_REMOTE_WRITE : 0);
        iovec iov{r.data(), r.len};
        MrTable::Spec s;
        s.iov = &iov;
        s.count = 1;
        s.access = r.access;
        auto slot = table.add(s);
        check(slot.ok());
        r.slot = slot.value();
        r.key = table.key(r.slot);
        r.open = true;
        if (!(r.access & FI_REMOTE_WRITE)) r.frozen.assign(r.data(), r.data() + r.len);
        ++nregions;
        break;
      }
      case 2: {
        if (!in.take(1, &a) || nregions == 0) break;
        Region& r = regions[a % nregions];
        if (!r.open) break;
        table.remove(r.slot, nullptr, nullptr);
        r.open = false;
        r.frozen.assign(r.data(), r.data() + r.len);
        break;
      }
      case 3:
        if (!in.take(2, &a)) break;
        now += (a & 0x7fff) * 1000;
        core.progress(now);
        break;
      case 4: {
        if (!in.take(1, &a) || !in.take(1, &b) || !in.take(2, &c) || !in.take(2, &d) ||
            !in.take(1, &e))
          break;
        SendOp s;
        s.dest = e % 2;
        s.rkey = nregions ? regions[b % nregions].key : b;
        s.raddr = c;
        s.buf = local.data();
        s.len = d;
        s.context = &local;
        switch (a % 3) {
          case 0:
            s.kind = OpKind::kWrite;
            break;
          case 1:
            s.kind = OpKind::kRead;
            break;
          default:
            s.kind = OpKind::kAtomic;
            s.atomic_op = FI_SUM;
            s.datatype = FI_UINT64;
            s.fetch = a & 8;
            s.len = (d % 32 + 1) * 8;
            s.result_count = 1;
            s.result[0] = {results, sizeof(results)};
            break;
        }
        (void)core.send(s, now);
        break;
      }
    }
    check_regions(regions, nregions);
  }

  // No hang: the peers are silent from now on.
  for (int i = 0; i < 100000; ++i) {
    const uint64_t next = core.next_deadline();
    if (next == UINT64_MAX) break;
    now = std::max(now + 1, next);
    core.progress(now);
  }
  check(core.next_deadline() == UINT64_MAX);
  check(core.tx_in_use() == 0);
  check(core.target_in_use() == 0);
  check_regions(regions, nregions);
  for (size_t i = 0; i < nregions; ++i)
    if (regions[i].open) table.remove(regions[i].slot, nullptr, nullptr);
  return 0;
}
