// SPDX-License-Identifier: BSD-3-Clause
//
// hot-path: the provider's own cost per message, per endpoint type, without the link. Two
// endpoints of one process on a net_ring0 loopback port (what a port sends comes back on its
// receive queue) play a ping-pong through the libfabric API, as stock fi_pingpong does on each
// side (fi_send, fi_cq_read until the send completion, fi_cq_read until the receive completion,
// fi_recv to post the buffer again). Every call runs on one thread in a fixed order, so the work
// per message is deterministic: what instruction counters and cache simulators see is the
// provider's, plus net_ring's own burst functions (tell them apart by function).
//
// Two ways to run it (doc/performance.md, "Where the time goes", has the recipes):
//   - Google Benchmark (the default): wall time per round trip (two messages) per endpoint type,
//     and per empty fi_cq_read (the unit a spinning reader repeats while it waits). Noisy on a
//     shared machine; compare the types within one run.
//       hot-path [--benchmark_filter=...]
//   - Phases, for valgrind: `hot-path --phases EP [--iters N] [--size B] [--phase P] [--idle K]`
//     runs N round trips of endpoint type EP (dgram, rdm, msg) after a warm-up, each followed by
//     K empty reads, and reports nothing but its phase markers. Under callgrind
//     (--collect-atstart=no) only phase P is collected (all phases by default): send (fi_send),
//     rx (fi_cq_read of the receive completion: the poll step, decode, delivery, the CQ hand-off),
//     repost (fi_recv), txc (fi_cq_read of the send completion: an empty poll step, the CQ ring),
//     idle (the K empty fi_cq_read calls: what a spinning reader repeats). Divide by 2N messages
//     (idle: by the K x N calls). The protocols' timers run on the real clock, which valgrind
//     slows: this mode raises RDM's ack delay (FI_DPDK_RDM_ACK_DELAY_US=100000 unless set) so that
//     no ack goes alone; still check the call counts (one frame sent per message, no pure acks)
//     before trusting a figure. Under lackey (--trace-mem=yes) every phase begins with a call of
//     hot_path_mark<phase>() and ends with hot_path_mark_end(), whose addresses it prints with
//     the process's memory map, so that test/perf/linetrace.py can count the cache lines each
//     phase touches and the locked instructions it executes.
//
// Environment (meson sets it for the benchmark): FI_PROVIDER_PATH, FI_DPDK_CONFIG,
// FI_DPDK_PORTS=net_ring0.
#include <benchmark/benchmark.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <valgrind/callgrind.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---- phases and their markers -------------------------------------------------------------------

enum Phase : int { kSend, kTxc, kRx, kRepost, kIdle, kPhases };
constexpr const char* kPhaseNames[kPhases] = {"send", "txc", "rx", "repost", "idle"};

int g_collect = -1;  // the phase callgrind collects (-1: all); set by --phase

// Lackey sees these calls in its trace; callgrind collects between the toggles.
template <int P>
[[gnu::noinline]] void hot_path_mark() {
  asm volatile("" ::: "memory");
}
[[gnu::noinline]] void hot_path_mark_end() { asm volatile("" ::: "memory"); }

using MarkFn = void (*)();
constexpr MarkFn kMarks[kPhases] = {hot_path_mark<kSend>, hot_path_mark<kTxc>, hot_path_mark<kRx>,
                                    hot_path_mark<kRepost>, hot_path_mark<kIdle>};

bool g_marking = false;  // phase mode: markers and toggles on

struct Scope {
  Phase p;
  bool on;
  explicit Scope(Phase phase) : p(phase), on(g_marking) {
    if (!on) return;
    kMarks[p]();
    if (g_collect < 0 || g_collect == p) CALLGRIND_TOGGLE_COLLECT;
  }
  ~Scope() {
    if (!on) return;
    if (g_collect < 0 || g_collect == p) CALLGRIND_TOGGLE_COLLECT;
    hot_path_mark_end();
  }
};

[[noreturn]] void die(const char* what, long r) {
  std::fprintf(stderr, "hot-path: %s: %ld (%s)\n", what, r, fi_strerror(static_cast<int>(-r)));
  std::exit(1);
}
#define CHECK(x)             \
  do {                       \
    const long r_ = (x);     \
    if (r_ < 0) die(#x, r_); \
  } while (0)

// ---- one side: an endpoint, its CQ, buffers
// ------------------------------------------------------

struct Side {
  fid_ep* ep = nullptr;
  fid_cq* cq = nullptr;
  fid_eq* eq = nullptr;  // MSG
  fi_addr_t peer = FI_ADDR_UNSPEC;
  std::vector<char> tx, rx;
  fi_context2 tx_ctx{}, rx_ctx{};

  void open_cq(fid_domain* d) {
    fi_cq_attr a{};
    a.size = 256;
    a.format = FI_CQ_FORMAT_MSG;
    a.wait_obj = FI_WAIT_NONE;
    CHECK(fi_cq_open(d, &a, &cq, nullptr));
  }
  void post_rx() { CHECK(fi_recv(ep, rx.data(), rx.size(), nullptr, FI_ADDR_UNSPEC, &rx_ctx)); }
  void send(size_t len) {
    for (;;) {
      const ssize_t r = fi_send(ep, tx.data(), len, nullptr, peer, &tx_ctx);
      if (r == 0) return;
      if (r != -FI_EAGAIN) die("fi_send", r);
      fi_cq_msg_entry e[4];
      (void)fi_cq_read(cq, e, 4);  // progress; completions other than ours are not expected
    }
  }
  // Reads the CQ until the completion of `ctx` comes (others are not expected).
  void wait(void* ctx) {
    for (long spins = 0;; ++spins) {
      fi_cq_msg_entry e;
      const ssize_t n = fi_cq_read(cq, &e, 1);
      if (n == 1 && e.op_context == ctx) return;
      if (n == 1) die("unexpected completion", 0);
      if (n != -FI_EAGAIN) {
        fi_cq_err_entry err{};
        fi_cq_readerr(cq, &err, 0);
        die("fi_cq_read", err.err ? -err.err : n);
      }
      if (spins > 100'000'000) die("no completion", 0);
    }
  }
};

// ---- a pair of endpoints of one type on the loopback port ---------------------------------------

struct Pair {
  fi_ep_type type;
  size_t size;
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  fid_pep* pep = nullptr;
  fid_eq* pep_eq = nullptr;
  Side a, b;

  Pair(fi_ep_type t, size_t sz) : type(t), size(sz) {
    fi_info* hints = fi_allocinfo();
    hints->fabric_attr->prov_name = strdup("dpdk");
    hints->ep_attr->type = t;
    hints->caps = FI_MSG;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    fi_info* all = nullptr;
    CHECK(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &all));
    for (fi_info* i = all; i; i = i->next)
      if (!std::strcmp(i->fabric_attr->prov_name, "dpdk")) {
        info = fi_dupinfo(i);
        break;
      }
    fi_freeinfo(all);
    fi_freeinfo(hints);
    if (!info) die("no dpdk entry", -FI_ENODATA);
    CHECK(fi_fabric(info->fabric_attr, &fabric, nullptr));
    CHECK(fi_domain(fabric, info, &domain, nullptr));
    for (Side* s : {&a, &b}) {
      s->tx.assign(size, 'x');
      s->rx.assign(size, 0);
      s->open_cq(domain);
    }
    if (t == FI_EP_MSG)
      connect();
    else
      address();
    a.post_rx();
    b.post_rx();
  }

  void open_ep(Side& s, fi_info* i) {
    CHECK(fi_endpoint(domain, i, &s.ep, nullptr));
    if (av) CHECK(fi_ep_bind(s.ep, &av->fid, 0));
    if (s.eq) CHECK(fi_ep_bind(s.ep, &s.eq->fid, 0));
    CHECK(fi_ep_bind(s.ep, &s.cq->fid, FI_TRANSMIT | FI_RECV));
    CHECK(fi_enable(s.ep));
  }

  void address() {
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    CHECK(fi_av_open(domain, &aa, &av, nullptr));
    for (Side* s : {&a, &b}) {
      open_ep(*s, info);
      CHECK(fi_enable(s->ep));
    }
    char name[2][64];
    size_t len[2] = {sizeof(name[0]), sizeof(name[1])};
    CHECK(fi_getname(&a.ep->fid, name[0], &len[0]));
    CHECK(fi_getname(&b.ep->fid, name[1], &len[1]));
    fi_addr_t addr[2];
    if (fi_av_insert(av, name[0], 1, &addr[0], 0, nullptr) != 1) die("fi_av_insert", -FI_EINVAL);
    if (fi_av_insert(av, name[1], 1, &addr[1], 0, nullptr) != 1) die("fi_av_insert", -FI_EINVAL);
    a.peer = addr[1];
    b.peer = addr[0];
  }

  // fi_listen, fi_connect and fi_accept on one thread: every EQ read progresses the port.
  void connect() {
    fi_eq_attr ea{};
    ea.size = 16;
    ea.wait_obj = FI_WAIT_NONE;
    CHECK(fi_eq_open(fabric, &ea, &pep_eq, nullptr));
    CHECK(fi_eq_open(fabric, &ea, &a.eq, nullptr));
    CHECK(fi_eq_open(fabric, &ea, &b.eq, nullptr));
    CHECK(fi_passive_ep(fabric, info, &pep, nullptr));
    CHECK(fi_pep_bind(pep, &pep_eq->fid, 0));
    CHECK(fi_listen(pep));
    char name[64];
    size_t len = sizeof(name);
    CHECK(fi_getname(&pep->fid, name, &len));
    open_ep(a, info);
    CHECK(fi_connect(a.ep, name, nullptr, 0));
    struct {  // an fi_eq_cm_entry with room for connection data (its data is flexible)
      alignas(fi_eq_cm_entry) unsigned char bytes[sizeof(fi_eq_cm_entry) + 256];
      fi_eq_cm_entry* operator->() { return reinterpret_cast<fi_eq_cm_entry*>(bytes); }
    } ev;
    uint32_t event = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0;; ++i) {
      const ssize_t n = fi_eq_read(pep_eq, &event, &ev, sizeof(ev), 0);
      if (n > 0 && event == FI_CONNREQ) break;
      if (n != -FI_EAGAIN) die("waiting for FI_CONNREQ", n);
      (void)fi_eq_read(a.eq, &event, &ev, sizeof(ev), 0);
      if ((i & 1023) == 0 && seconds_since(t0) > 5) die("no FI_CONNREQ in 5 s", 0);
    }
    open_ep(b, ev->info);
    fi_freeinfo(ev->info);
    CHECK(fi_accept(b.ep, nullptr, 0));
    bool up[2] = {false, false};
    t0 = std::chrono::steady_clock::now();
    for (long i = 0; !(up[0] && up[1]); ++i) {
      Side* s[2] = {&a, &b};
      for (int k = 0; k < 2; ++k) {
        if (up[k]) continue;
        const ssize_t n = fi_eq_read(s[k]->eq, &event, &ev, sizeof(ev), 0);
        if (n > 0 && event == FI_CONNECTED)
          up[k] = true;
        else if (n != -FI_EAGAIN)
          die("waiting for FI_CONNECTED", n);
      }
      if ((i & 1023) == 0 && seconds_since(t0) > 5) die("not connected in 5 s", 0);
    }
  }

  // One message from `from` to `to`, each side as fi_pingpong does it. The sender reads its send
  // completion after the receiver took the frame: every poll step takes whatever the loopback
  // port holds, and in a pair of processes the sender's read finds the port empty (the frame is
  // the other process's), so its poll step here must too.
  void hop(Side& from, Side& to) {
    {
      Scope s(kSend);
      from.send(size);
    }
    {
      Scope s(kRx);
      to.wait(&to.rx_ctx);
    }
    {
      Scope s(kRepost);
      to.post_rx();
    }
    {
      Scope s(kTxc);
      from.wait(&from.tx_ctx);
    }
  }
  void round_trip() {
    hop(a, b);
    hop(b, a);
  }
  void idle(int n) {
    Scope s(kIdle);
    for (int i = 0; i < n; ++i) {
      fi_cq_msg_entry e;
      if (fi_cq_read(a.cq, &e, 1) != -FI_EAGAIN) die("idle read found a completion", 0);
    }
  }
};

fi_ep_type type_of(std::string_view s) {
  if (s == "dgram") return FI_EP_DGRAM;
  if (s == "rdm") return FI_EP_RDM;
  if (s == "msg") return FI_EP_MSG;
  std::fprintf(stderr, "hot-path: unknown endpoint type %.*s\n", static_cast<int>(s.size()),
               s.data());
  std::exit(2);
}

// The markers' addresses (at start) and the memory map (once the pair is up), for
// test/perf/linetrace.py.
void print_markers() {
  for (int p = 0; p < kPhases; ++p)
    std::fprintf(stderr, "hot-path: marker %s %p\n", kPhaseNames[p],
                 reinterpret_cast<void*>(kMarks[p]));
  std::fprintf(stderr, "hot-path: marker end %p\n", reinterpret_cast<void*>(hot_path_mark_end));
  std::fflush(stderr);
}
void print_map() {
  if (FILE* m = std::fopen("/proc/self/maps", "re")) {
    char line[512];
    while (std::fgets(line, sizeof(line), m)) std::fprintf(stderr, "hot-path: map %s", line);
    std::fclose(m);
  }
}

int run_phases(int argc, char** argv) {
  std::string ep = argv[2];
  long iters = 1000, warmup = 200, idle = 4;
  size_t size = 64;
  for (int i = 3; i + 1 < argc; i += 2) {
    std::string_view k = argv[i];
    if (k == "--iters")
      iters = std::atol(argv[i + 1]);
    else if (k == "--warmup")
      warmup = std::atol(argv[i + 1]);
    else if (k == "--size")
      size = std::strtoul(argv[i + 1], nullptr, 10);
    else if (k == "--idle")
      idle = std::atol(argv[i + 1]);
    else if (k == "--phase") {
      for (int p = 0; p < kPhases; ++p)
        if (std::string_view(argv[i + 1]) == kPhaseNames[p]) g_collect = p;
    }
  }
  // Under valgrind the real clock runs past RDM's 20 us ack delay within every round trip, so
  // most messages would also cost an ack frame of their own, which a ping-pong at full speed never
  // sends (the reply carries the ack). The delay is raised here unless the caller set it.
  setenv("FI_DPDK_RDM_ACK_DELAY_US", "100000", 0);
  print_markers();
  Pair pair(type_of(ep), size);
  for (long i = 0; i < warmup; ++i) pair.round_trip(), pair.idle(idle);
  print_map();
  g_marking = true;
  for (long i = 0; i < iters; ++i) pair.round_trip(), pair.idle(idle);
  g_marking = false;
  std::fprintf(stderr, "hot-path: %s %zu B: %ld round trips (%ld messages), %ld idle reads\n",
               ep.c_str(), size, iters, 2 * iters, idle * iters);
  std::fflush(stderr);
  // Endpoints stay open: closing lingers for acks, which would add to what is measured.
  std::_Exit(0);
}

// ---- Google Benchmark --------------------------------------------------------------------------

Pair& pair_of(fi_ep_type t) {
  static Pair* pairs[3] = {};
  const int k = t == FI_EP_DGRAM ? 0 : t == FI_EP_RDM ? 1 : 2;
  if (!pairs[k]) pairs[k] = new Pair(t, 64);
  return *pairs[k];
}

void BM_RoundTrip(benchmark::State& st, fi_ep_type t) {
  Pair& p = pair_of(t);
  for (auto _ : st) p.round_trip();
  st.SetItemsProcessed(2 * st.iterations());  // messages
  st.counters["ns_per_msg"] =
      benchmark::Counter(2 * static_cast<double>(st.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
void BM_EmptyRead(benchmark::State& st, fi_ep_type t) {
  Pair& p = pair_of(t);
  p.round_trip();  // the timers a conversation leaves
  for (auto _ : st) {
    fi_cq_msg_entry e;
    benchmark::DoNotOptimize(fi_cq_read(p.a.cq, &e, 1));
  }
}
BENCHMARK_CAPTURE(BM_RoundTrip, dgram, FI_EP_DGRAM);
BENCHMARK_CAPTURE(BM_RoundTrip, rdm, FI_EP_RDM);
BENCHMARK_CAPTURE(BM_RoundTrip, msg, FI_EP_MSG);
BENCHMARK_CAPTURE(BM_EmptyRead, dgram, FI_EP_DGRAM);
BENCHMARK_CAPTURE(BM_EmptyRead, rdm, FI_EP_RDM);
BENCHMARK_CAPTURE(BM_EmptyRead, msg, FI_EP_MSG);

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string_view(argv[1]) == "--phases") return run_phases(argc, argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  std::_Exit(0);  // as run_phases: no linger at close
}
