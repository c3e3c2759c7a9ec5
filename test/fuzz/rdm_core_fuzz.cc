// SPDX-License-Identifier: BSD-3-Clause
//
// Fuzz target: the RDM protocol core (lib/proto/rdm_core.h, rdm_peer.h) against a hostile peer.
// The input is a script of commands run against one RdmCore with two peers:
//   0  frame    peer(1) len(2) bytes: an RDM payload from that peer, through decode_rdm
//   1  recv     flags(1) len(2) tag(1) ignore(1) src(1): a receive (tagged, PEEK, CLAIM, DISCARD,
//               MULTI_RECV chosen by flag bits)
//   2  send     dest(1) len(3) tag(1) bits(1): a send (tagged, inject, remote CQ data)
//   3  time     advance(2): progress after (advance & 0x7fff) us; bit 15: the port refuses frames
//               from now until the next time command
//   4  cancel   which(1): fi_cancel of an earlier receive
// Peer 0 reads our memory and we read its (set_peer_reads_us): sends to it of one buffer go as
// RTSs by reference, and an RTS by reference from it is copied out of a 64 KiB stand-in of its
// memory at kPeerMemory (an address outside it fails the copy, as process_vm_readv would).
// Besides "no crash, no sanitizer report", it checks properties:
//   - every frame the core sends passes rdm_validate (we never send what we would reject);
//   - no operation completes twice (a multi-recv buffer completes once per message), and only
//     operations that were posted complete;
//   - no hang: after the script, with the peers silent, time runs until nothing is scheduled:
//     every send has completed (the peer answered or was declared unreachable), and cancelling
//     every receive still posted leaves no receive in use.
// A violated property aborts (__builtin_trap), which libFuzzer reports as a crash.
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "proto/rdm_core.h"
#include "wire/rdm.h"

using namespace dpfab::proto::rdm;
using dpfab::wire::RdmHeader;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

constexpr size_t kMaxOps = 256;
constexpr size_t kBufBytes = 1 << 20;

struct Op {
  bool posted = false, done = false, multi = false, send = false;
  int err = 0;  // of the last completion
};

class Sink final : public CoreSink {
 public:
  explicit Sink(std::vector<Op>* ops) : ops_(ops) {}
  bool transmit(fi_addr_t peer, const RdmHeader& h, std::span<const uint8_t> d) noexcept override {
    check(peer <= 1);
    check(dpfab::wire::rdm_validate(h, d.size()) == dpfab::wire::RdmVerdict::kOk);
    return !refuse;
  }
  bool refuse = false;  // the port's TX queue is full (toggled by the script)
  static constexpr uint64_t kPeerMemory = 0x10000, kPeerMemoryLen = 0x10000;
  int read_peer(fi_addr_t peer, uint64_t addr, void* dst, size_t n) noexcept override {
    check(peer <= 1);
    if (addr < kPeerMemory || addr - kPeerMemory > kPeerMemoryLen ||
        n > kPeerMemoryLen - (addr - kPeerMemory))
      return FI_EIO;
    static const std::vector<uint8_t> memory(kPeerMemoryLen, 0xa5);
    std::memcpy(dst, memory.data() + (addr - kPeerMemory), n);
    return 0;
  }
  void complete(const Completion& c) noexcept override {
    if (!c.cq) return;  // counters only (inject): nothing a CQ would see
    const auto* base = ops_->data();
    const auto* op = static_cast<const Op*>(c.context);
    check(op >= base && op < base + ops_->size());
    Op& o = (*ops_)[static_cast<size_t>(op - base)];
    check(o.posted);
    check(!o.done || o.multi);
    if (!o.multi || (c.flags & FI_MULTI_RECV)) o.done = true;
    o.err = c.err;
  }

 private:
  std::vector<Op>* ops_;
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::vector<uint8_t> src(kBufBytes, 0x5a);
  static std::vector<uint8_t> dst(kBufBytes);
  std::vector<Op> ops(kMaxOps);
  size_t used = 0;
  Sink sink(&ops);
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
  cfg.rel.peer_timeout_ns = 0;  // retries alone decide
  cfg.seg_size = 512;
  cfg.eager_max = 4096;
  cfg.max_msg_size = kBufBytes;
  cfg.tx_ops = 16;
  cfg.rx_ops = 16;
  cfg.unexpected = 8;
  cfg.unexpected_slots = 4;
  cfg.reorder_slots = 16;
  cfg.min_multi_recv = 256;
  cfg.epoch = 0x1234;
  auto made = RdmCore::create(cfg, &sink);
  check(made.ok());
  RdmCore& core = *made.value();
  check(core.add_peer(0) == 0 && core.add_peer(1) == 0);
  core.set_peer_reads_us(0);

  uint64_t now = 1'000'000;
  std::vector<size_t> recvs;    // ops posted as receives, for cancel
  std::vector<size_t> claimed;  // PEEK|CLAIM ops that claimed a message
  dpfab::wire::RdmDecodeStats stats;
  Reader in{data, size};
  uint64_t cmd;
  while (in.take(1, &cmd)) {
    uint64_t a = 0, b = 0, c = 0, d = 0, e = 0;
    switch (cmd % 5) {
      case 0: {  // a frame from a peer
        if (!in.take(1, &a) || !in.take(2, &b)) break;
        b = std::min<uint64_t>(b, in.n);
        const auto outer = dpfab::wire::rdm_outer_header(1, 0, static_cast<uint32_t>(b));
        RdmHeader h;
        std::span<const uint8_t> payload;
        if (dpfab::wire::decode_rdm(outer, {in.p, b}, &h, &payload, stats) ==
            dpfab::wire::RdmVerdict::kOk)
          core.on_frame(a % 3, h, payload, now);  // fi_addr 2 is not a peer
        in.p += b;
        in.n -= b;
        break;
      }
      case 1: {  // a receive
        if (!in.take(1, &a) || !in.take(2, &b) || !in.take(1, &c) || !in.take(1, &d) ||
            !in.take(1, &e) || used == kMaxOps)
          break;
        RecvOp r;
        r.len = b * 16;
        r.buf = dst.data() + (kBufBytes - r.len);
        r.match.tagged = a & 1;
        r.match.tag = c;
        r.match.ignore = d;
        r.match.src = (e & 3) == 3 ? FI_ADDR_UNSPEC : (e & 3);
        r.flags = ((a & 2) ? FI_PEEK : 0) | ((a & 4) ? FI_CLAIM : 0) | ((a & 8) ? FI_DISCARD : 0) |
                  ((a & 16) ? FI_MULTI_RECV : 0);
        if ((a & 32) && (r.flags & FI_CLAIM) && !(r.flags & FI_PEEK) && !claimed.empty()) {
          // FI_CLAIM with the context of a PEEK|CLAIM that found a message: it completes again.
          Op& prev = ops[claimed.back()];
          r.context = &prev;
          r.flags &= ~FI_MULTI_RECV;
          r.match.tagged = true;
          prev.done = false;
          const ssize_t rc = core.recv(r, now);
          if (rc == -FI_EAGAIN) {  // every receive op in use: try again later
            prev.done = true;
            break;
          }
          check(rc == 0);  // the claimed message is there for this context
          claimed.pop_back();
          break;
        }
        Op& o = ops[used];
        r.context = &o;
        o.posted = true;
        o.multi = r.flags & FI_MULTI_RECV;
        if (core.recv(r, now) != 0) {
          o = Op{};  // refused: the slot is free again
          break;
        }
        recvs.push_back(used);
        if ((r.flags & (FI_PEEK | FI_CLAIM | FI_DISCARD)) == (FI_PEEK | FI_CLAIM) && o.done &&
            o.err == 0)
          claimed.push_back(used);
        ++used;
        break;
      }
      case 2: {  // a send
        if (!in.take(1, &a) || !in.take(3, &b) || !in.take(1, &c) || !in.take(1, &d) ||
            used == kMaxOps)
          break;
        SendOp s;
        s.dest = a % 3;
        s.len = std::min<uint64_t>(b, kBufBytes);
        s.buf = src.data();
        s.tag = c;
        s.tagged = d & 1;
        s.inject = d & 2;
        s.completion = !s.inject;  // fi_inject
        s.has_data = d & 4;
        s.data = d;
        Op& o = ops[used];
        o.posted = true;
        o.send = true;
        s.context = &o;
        if (core.send(s, now) != 0 || s.inject) {
          o.posted = s.inject && o.posted;
          o.done = true;  // refused, or an inject: no completion expected
        }
        ++used;
        break;
      }
      case 3:
        if (!in.take(2, &a)) break;
        sink.refuse = a & 0x8000;  // the port refuses frames until the next time command
        now += (a & 0x7fff) * 1000;
        core.progress(now);
        break;
      case 4:
        if (!in.take(1, &a) || recvs.empty()) break;
        (void)core.cancel(&ops[recvs[a % recvs.size()]]);
        break;
    }
  }

  // No hang: the peers are silent from now on (and the port takes frames again).
  sink.refuse = false;
  for (int i = 0; i < 100000; ++i) {
    const uint64_t next = core.next_deadline();
    if (next == UINT64_MAX) break;
    now = std::max(now + 1, next);
    core.progress(now);
  }
  check(core.next_deadline() == UINT64_MAX);
  check(core.tx_in_use() == 0);
  for (size_t i = 0; i < used; ++i)
    if (ops[i].send) check(ops[i].done);
  for (size_t i : recvs) (void)core.cancel(&ops[i]);
  check(core.rx_in_use() == 0);
  return 0;
}
