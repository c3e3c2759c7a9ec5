// SPDX-License-Identifier: BSD-3-Clause
//
// shm-floor: the cost of the same-host path's pieces, between two processes (fork) sharing two
// shm::Ring directions in a memfd, busy-polling, one-way = half the round trip:
//   raw   64-byte records through the rings, nothing else: the transport's floor;
//   rdm   the RDM protocol core (proto/rdm_core.h, the one FI_EP_RDM endpoints run) on both
//         sides, its packets carried as kRdm records (RDM header + data): what a same-host RDM
//         message costs without the libfabric entry points, CQ and endpoint locks.
// Run it next to stock fi_pingpong -p shm on the same machine (test/perf/pingpong_ratio.sh does
// both in one run) and compare ratios: the prototype measurement of doc/design.md "Same-host
// peers".
//   shm-floor [raw|rdm] [size] [iterations] [rounds]
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "proto/rdm_core.h"
#include "shm/ring.h"
#include "wire/rdm.h"

using namespace dpfab;

namespace {

constexpr uint64_t kRingBytes = 128 * 1024;
constexpr size_t kArea = shm::kRingControlBytes + kRingBytes;

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + ts.tv_nsec;
}

struct Side {
  shm::RingWriter tx;
  shm::RingReader rx;
};

// ---- raw ----------------------------------------------------------------------------------------

void raw_send(Side& s, const uint8_t* buf, size_t len) {
  shm::RecordHeader* h;
  while (!(h = s.tx.reserve(len))) {
  }
  *h = shm::RecordHeader{static_cast<uint32_t>(len), shm::RecordKind::kFrame, 0, 0, 0, 0, 0, 0};
  std::memcpy(reinterpret_cast<uint8_t*>(h) + shm::kRecordHeaderBytes, buf, len);
  s.tx.commit();
}

void raw_recv(Side& s, uint8_t* buf) {
  shm::RecordHeader h;
  const uint8_t* p;
  while (s.rx.next(&h, &p) != shm::RingReader::Status::kRecord) {
  }
  std::memcpy(buf, p, h.len);
  s.rx.release();
}

// ---- rdm ----------------------------------------------------------------------------------------

class Sink final : public proto::rdm::CoreSink {
 public:
  explicit Sink(Side* s) : s_(s) {}
  bool transmit(fi_addr_t, const wire::RdmHeader& h,
                std::span<const uint8_t> data) noexcept override {
    const size_t hl = wire::rdm_header_len(h.kind);
    shm::RecordHeader* r = s_->tx.reserve(hl + data.size());
    if (!r) return false;
    *r = shm::RecordHeader{
        static_cast<uint32_t>(hl + data.size()), shm::RecordKind::kRdm, 0, 0, 0, 0, 0, 0};
    uint8_t* p = reinterpret_cast<uint8_t*>(r) + shm::kRecordHeaderBytes;
    wire::write_rdm_header(p, h);
    if (!data.empty()) std::memcpy(p + hl, data.data(), data.size());
    s_->tx.commit();
    return true;
  }
  void complete(const proto::rdm::Completion& c) noexcept override {
    if (c.flags & FI_RECV)
      ++recvs;
    else
      ++sends;
  }
  uint64_t sends = 0, recvs = 0;

 private:
  Side* s_;
};

struct Rdm {
  Side* side;
  Sink sink;
  std::unique_ptr<proto::rdm::RdmCore> core;
  wire::RdmDecodeStats stats;
  explicit Rdm(Side* s) : side(s), sink(s) {
    proto::rdm::CoreConfig cfg;
    cfg.seg_size = 8876;
    cfg.inject_size = 1376;
    auto c = proto::rdm::RdmCore::create(cfg, &sink);
    if (!c) std::abort();
    core = std::move(c.value());
    (void)core->add_peer(0);
  }
  void poll() {
    shm::RecordHeader h;
    const uint8_t* p;
    bool any = false;
    while (side->rx.next(&h, &p) == shm::RingReader::Status::kRecord) {
      any = true;
      wire::Header outer = wire::rdm_outer_header(0, 0, h.len);
      wire::RdmHeader rh;
      std::span<const uint8_t> data;
      if (wire::decode_rdm(outer, {p, h.len}, &rh, &data, stats) == wire::RdmVerdict::kOk)
        core->on_frame(0, rh, data, now_ns());
    }
    if (any) side->rx.release();
  }
};

double run(const std::string& mode, size_t size, int iters, Side& me, bool client) {
  std::vector<uint8_t> buf(size, 0x5a), in(size);
  if (mode == "raw") {
    uint64_t t0 = now_ns();
    for (int i = 0; i < iters; ++i) {
      if (client) {
        raw_send(me, buf.data(), size);
        raw_recv(me, in.data());
      } else {
        raw_recv(me, in.data());
        raw_send(me, buf.data(), size);
      }
    }
    return (now_ns() - t0) / 2.0 / iters;
  }
  Rdm r(&me);
  uint64_t t0 = 0;
  for (int i = -100; i < iters; ++i) {
    if (i == 0) t0 = now_ns();
    proto::rdm::RecvOp ro;
    ro.buf = in.data();
    ro.len = size;
    ro.match.src = FI_ADDR_UNSPEC;
    const uint64_t want = r.sink.recvs + 1;
    (void)r.core->recv(ro, now_ns());
    proto::rdm::SendOp so;
    so.dest = 0;
    so.buf = buf.data();
    so.len = size;
    so.inject = size <= 1376;
    so.complete_now = so.inject;
    if (client) (void)r.core->send(so, now_ns());
    while (r.sink.recvs < want) r.poll();
    if (!client) (void)r.core->send(so, now_ns());
  }
  return (now_ns() - t0) / 2.0 / iters;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "rdm";
  size_t size = argc > 2 ? std::strtoul(argv[2], nullptr, 0) : 64;
  int iters = argc > 3 ? std::atoi(argv[3]) : 100000;
  int rounds = argc > 4 ? std::atoi(argv[4]) : 5;
  void* mem = mmap(nullptr, 2 * kArea, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 1;
  auto* a = static_cast<uint8_t*>(mem);
  std::vector<double> results;
  for (int r = 0; r < rounds; ++r) {
    std::memset(mem, 0, 2 * kArea);
    int pipefd[2];
    if (pipe(pipefd) != 0) return 1;
    pid_t pid = fork();
    if (pid == 0) {
      Side s{shm::RingWriter(a + kArea, kRingBytes), shm::RingReader(a, kRingBytes)};
      run(mode, size, iters, s, false);
      _exit(0);
    }
    Side s{shm::RingWriter(a, kRingBytes), shm::RingReader(a + kArea, kRingBytes)};
    results.push_back(run(mode, size, iters, s, true));
    waitpid(pid, nullptr, 0);
    close(pipefd[0]);
    close(pipefd[1]);
  }
  std::sort(results.begin(), results.end());
  std::printf("shm-floor %s %zu B: one-way median %.3f us (min %.3f, max %.3f, %d rounds of %d)\n",
              mode.c_str(), size, results[results.size() / 2] / 1000.0, results.front() / 1000.0,
              results.back() / 1000.0, rounds, iters);
  return 0;
}
