// SPDX-License-Identifier: BSD-3-Clause
//
// Micro-benchmarks of the completion and wakeup machinery (Google Benchmark; not tests: run them
// with scripts/bench-wait.sh or `meson test -C build --benchmark`). Everything is measured in the
// same run as its baseline, so compare the ratios:
//   - wake latency: producer event -> consumer blocked in the provider's wait (fi_eq_sread,
//     fi_cntr_wait, FD + fi_trywait + epoll_wait) versus a raw eventfd write -> epoll_wait;
//   - fi_trywait and empty reads, uncontended;
//   - fi_poll and fi_trywait over 1,000 idle members + 1 active versus 1 member.
// Through the real libfabric core (FI_PROVIDER_PATH, FI_DPDK_PORTS=net_null0 set by meson).
#include <benchmark/benchmark.h>
#include <pthread.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "event/cq.h"

namespace {

// ---- one fabric/domain for the whole run ------------------------------------------------------

struct Fabric {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  Fabric() {
    fi_info* hints = fi_allocinfo();
    hints->fabric_attr->prov_name = strdup("dpdk");
    fi_info* all = nullptr;
    if (fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &all) != 0) std::abort();
    for (fi_info* i = all; i; i = i->next)
      if (!std::strcmp(i->fabric_attr->prov_name, "dpdk")) {
        info = fi_dupinfo(i);
        break;
      }
    fi_freeinfo(all);
    fi_freeinfo(hints);
    if (!info || fi_fabric(info->fabric_attr, &fabric, nullptr) ||
        fi_domain(fabric, info, &domain, nullptr))
      std::abort();
  }
};
Fabric& fab() {
  static Fabric* f = new Fabric();
  return *f;
}

fid_eq* open_eq(fi_wait_obj w, fid_wait* set = nullptr) {
  fi_eq_attr a{};
  a.flags = FI_WRITE;
  a.wait_obj = w;
  a.wait_set = set;
  a.size = 4096;
  fid_eq* q = nullptr;
  if (fi_eq_open(fab().fabric, &a, &q, nullptr)) std::abort();
  return q;
}
fid_cntr* open_cntr(fi_wait_obj w) {
  fi_cntr_attr a{};
  a.events = FI_CNTR_EVENTS_COMP;
  a.wait_obj = w;
  fid_cntr* c = nullptr;
  if (fi_cntr_open(fab().domain, &a, &c, nullptr)) std::abort();
  return c;
}
void eq_write(fid_eq* q) {
  fi_eq_entry e{};
  if (fi_eq_write(q, FI_NOTIFY, &e, sizeof(e), 0) != sizeof(e)) std::abort();
}
bool eq_read(fid_eq* q) {
  fi_eq_entry e;
  uint32_t ev;
  return fi_eq_read(q, &ev, &e, sizeof(e), 0) > 0;
}

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu % std::max(1u, std::thread::hardware_concurrency()), &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

// ---- wake latency harness -------------------------------------------------------------------
//
// The consumer thread blocks in `block()`; the producer waits until the consumer has announced
// that it is about to block, gives it time to enter the kernel, stamps t0 and runs `produce()`.
// The consumer stamps t1 when `block()` returns, runs `drain()`, and reports t1 - t0.
struct WakeCase {
  std::function<void()> produce;
  std::function<void()> block;  // returns once the event is there
  std::function<void()> drain;
};

void run_wake(benchmark::State& state, const WakeCase& c) {
  // Round k: the consumer announces ready = k just before blocking; the producer waits for that,
  // gives it 50 us to reach the kernel, stamps t0 and produces; the consumer records the sample
  // and publishes done = k. Round 0 is the stop signal.
  std::atomic<uint64_t> ready{~0ull}, done{~0ull};
  std::atomic<int64_t> t0{0}, last{0};
  std::atomic<bool> stop{false};
  std::vector<double> samples;  // consumer-owned until join
  std::thread consumer([&] {
    pin(1);
    for (uint64_t k = 1;; ++k) {
      ready.store(k, std::memory_order_release);
      c.block();
      int64_t t1 = now_ns();
      if (stop.load(std::memory_order_acquire)) break;
      int64_t d = t1 - t0.load(std::memory_order_acquire);
      samples.push_back(static_cast<double>(d));
      last.store(d, std::memory_order_relaxed);
      c.drain();
      done.store(k, std::memory_order_release);
    }
  });
  pin(0);
  uint64_t k = 0;
  for (auto _ : state) {
    ++k;
    while (ready.load(std::memory_order_acquire) != k) {
    }
    for (int64_t until = now_ns() + 50'000; now_ns() < until;) {
    }
    t0.store(now_ns(), std::memory_order_release);
    c.produce();
    while (done.load(std::memory_order_acquire) != k) {
    }
    state.SetIterationTime(static_cast<double>(last.load(std::memory_order_relaxed)) / 1e9);
  }
  while (ready.load(std::memory_order_acquire) != k + 1) {
  }
  stop.store(true, std::memory_order_release);
  c.produce();
  consumer.join();
  c.drain();
  std::sort(samples.begin(), samples.end());
  if (!samples.empty()) {
    state.counters["p50_us"] = samples[samples.size() / 2] / 1000;
    state.counters["p99_us"] = samples[samples.size() * 99 / 100] / 1000;
  }
}

void BM_Wake_RawEventfdEpoll(benchmark::State& state) {
  int efd = eventfd(0, EFD_NONBLOCK);
  int ep = epoll_create1(0);
  epoll_event ev{EPOLLIN, {}};
  epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev);
  run_wake(state, {[&] { eventfd_write(efd, 1); },
                   [&] {
                     epoll_event out;
                     epoll_wait(ep, &out, 1, -1);
                   },
                   [&] {
                     eventfd_t v;
                     eventfd_read(efd, &v);
                   }});
  close(ep);
  close(efd);
}
BENCHMARK(BM_Wake_RawEventfdEpoll)->UseManualTime()->Iterations(3000);

void BM_Wake_FiEqSread(benchmark::State& state) {
  fid_eq* q = open_eq(FI_WAIT_FD);
  run_wake(state, {[&] { eq_write(q); },
                   [&] {
                     fi_eq_entry e;
                     uint32_t ev;
                     fi_eq_sread(q, &ev, &e, sizeof(e), -1, FI_PEEK);
                   },
                   [&] { eq_read(q); }});
  fi_close(&q->fid);
}
BENCHMARK(BM_Wake_FiEqSread)->UseManualTime()->Iterations(3000);

void BM_Wake_FiCntrWait(benchmark::State& state) {
  fid_cntr* c = open_cntr(FI_WAIT_FD);
  uint64_t target = 0;
  run_wake(state, {[&] { fi_cntr_add(c, 1); }, [&] { fi_cntr_wait(c, ++target, -1); }, [] {}});
  fi_close(&c->fid);
}
BENCHMARK(BM_Wake_FiCntrWait)->UseManualTime()->Iterations(3000);

void BM_Wake_FdTrywaitEpoll(benchmark::State& state) {
  fid_eq* q = open_eq(FI_WAIT_FD);
  int fd = -1;
  fi_control(&q->fid, FI_GETWAIT, &fd);
  int ep = epoll_create1(0);
  epoll_event ev{EPOLLIN, {}};
  epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  fid* fids[] = {&q->fid};
  run_wake(state, {[&] { eq_write(q); },
                   [&] {
                     while (fi_trywait(fab().fabric, fids, 1) == FI_SUCCESS) {
                       epoll_event out;
                       epoll_wait(ep, &out, 1, -1);
                     }
                   },
                   [&] { eq_read(q); }});
  close(ep);
  fi_close(&q->fid);
}
BENCHMARK(BM_Wake_FdTrywaitEpoll)->UseManualTime()->Iterations(3000);

// The CQ's producer side is not reachable through libfabric (completions come from the data
// path), so the CQ cases drive event::Cq -- the object behind fid_cq -- directly.
std::unique_ptr<dpfab::event::Cq> make_cq(bool with_fd) {
  std::unique_ptr<dpfab::wait::Signal> sig;
  if (with_fd)
    sig = std::move(dpfab::wait::Signal::create(dpfab::wait::SignalKind::kEventFd).value());
  dpfab::event::CqConfig cfg;
  cfg.size = 4096;
  auto cq = dpfab::event::Cq::create(cfg, std::move(sig));
  if (!cq) std::abort();
  return std::move(cq.value());
}

void BM_Wake_CqSread(benchmark::State& state) {
  auto cq = make_cq(true);
  fi_cq_entry e;
  run_wake(state, {[&] { cq->write(&e, FI_SEND); },
                   [&] { cq->sread(&e, 1, nullptr, 1, dpfab::wait::Deadline::never()); }, [] {}});
}
BENCHMARK(BM_Wake_CqSread)->UseManualTime()->Iterations(3000);

void BM_Wake_CqFdEpoll(benchmark::State& state) {
  auto cq = make_cq(true);
  int fd = cq->signal()->export_fd();
  int ep = epoll_create1(0);
  epoll_event ev{EPOLLIN, {}};
  epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  fi_cq_entry e;
  run_wake(state, {[&] { cq->write(&e, FI_SEND); },
                   [&] {
                     while (cq->try_arm() == FI_SUCCESS) {
                       epoll_event out;
                       epoll_wait(ep, &out, 1, -1);
                     }
                   },
                   [&] { cq->read(&e, 1, nullptr); }});
  close(ep);
}
BENCHMARK(BM_Wake_CqFdEpoll)->UseManualTime()->Iterations(3000);

// Producer thread writes completions as fast as the CQ takes them, the benchmark thread reads
// them in bursts of 16: the cross-core cost of one completion.
void BM_CqWriteRead_TwoThreads(benchmark::State& state) {
  auto cq = make_cq(false);
  std::atomic<bool> stop{false};
  std::thread producer([&] {
    pin(1);
    dpfab::event::CqEntry batch[16];
    while (!stop.load(std::memory_order_relaxed)) cq->write_burst(batch, 16);
  });
  pin(0);
  fi_cq_entry out[16];
  int64_t n = 0;
  for (auto _ : state) {
    ssize_t r;
    while ((r = cq->read(out, 16, nullptr)) <= 0) {
    }
    n += r;
  }
  stop = true;
  producer.join();
  state.SetItemsProcessed(n);
}
BENCHMARK(BM_CqWriteRead_TwoThreads);

// ---- uncontended costs ----------------------------------------------------------------------

fid_cq* open_cq(fi_wait_obj w) {
  fi_cq_attr a{};
  a.format = FI_CQ_FORMAT_CONTEXT;
  a.wait_obj = w;
  fid_cq* q = nullptr;
  if (fi_cq_open(fab().domain, &a, &q, nullptr)) std::abort();
  return q;
}

void BM_Trywait_EmptyFdCq(benchmark::State& state) {
  fid_cq* q = open_cq(FI_WAIT_FD);
  fid* fids[] = {&q->fid};
  for (auto _ : state) benchmark::DoNotOptimize(fi_trywait(fab().fabric, fids, 1));
  fi_close(&q->fid);
}
BENCHMARK(BM_Trywait_EmptyFdCq);

void BM_Read_EmptyCq(benchmark::State& state) {
  fid_cq* q = open_cq(FI_WAIT_NONE);
  fi_cq_entry e;
  for (auto _ : state) benchmark::DoNotOptimize(fi_cq_read(q, &e, 1));
  fi_close(&q->fid);
}
BENCHMARK(BM_Read_EmptyCq);

void BM_Trywait_EmptyFdEq(benchmark::State& state) {
  fid_eq* q = open_eq(FI_WAIT_FD);
  fid* fids[] = {&q->fid};
  for (auto _ : state) benchmark::DoNotOptimize(fi_trywait(fab().fabric, fids, 1));
  fi_close(&q->fid);
}
BENCHMARK(BM_Trywait_EmptyFdEq);

void BM_Trywait_EmptyFdCntr(benchmark::State& state) {
  fid_cntr* c = open_cntr(FI_WAIT_FD);
  fid* fids[] = {&c->fid};
  for (auto _ : state) benchmark::DoNotOptimize(fi_trywait(fab().fabric, fids, 1));
  fi_close(&c->fid);
}
BENCHMARK(BM_Trywait_EmptyFdCntr);

void BM_Read_EmptyEq(benchmark::State& state) {
  fid_eq* q = open_eq(FI_WAIT_NONE);
  for (auto _ : state) benchmark::DoNotOptimize(eq_read(q));
  fi_close(&q->fid);
}
BENCHMARK(BM_Read_EmptyEq);

// ---- scaling with idle members ----------------------------------------------------------------

// fi_poll over `members` EQs of which one has an event (kept, so it is reported every call).
void BM_FiPoll_OneActive(benchmark::State& state) {
  const int members = static_cast<int>(state.range(0));
  fid_poll* ps = nullptr;
  if (fi_poll_open(fab().domain, nullptr, &ps)) std::abort();
  std::vector<fid_eq*> eqs;
  for (int i = 0; i < members; ++i) {
    eqs.push_back(open_eq(FI_WAIT_NONE));
    fi_poll_add(ps, &eqs.back()->fid, 0);
  }
  eq_write(eqs[members / 2]);
  void* ctx[4];
  for (auto _ : state)
    if (fi_poll(ps, ctx, 4) != 1) std::abort();
  for (auto* q : eqs) fi_close(&q->fid);
  fi_close(&ps->fid);
}
BENCHMARK(BM_FiPoll_OneActive)->Arg(1)->Arg(1001);

// fi_trywait on an FD wait set of `members` EQs: with one active member (-FI_EAGAIN) or none
// (FI_SUCCESS).
void BM_FiTrywaitWaitSet(benchmark::State& state) {
  const int members = static_cast<int>(state.range(0));
  const bool active = state.range(1) != 0;
  fi_wait_attr wa{};
  wa.wait_obj = FI_WAIT_FD;
  fid_wait* ws = nullptr;
  if (fi_wait_open(fab().fabric, &wa, &ws)) std::abort();
  std::vector<fid_eq*> eqs;
  for (int i = 0; i < members; ++i) eqs.push_back(open_eq(FI_WAIT_SET, ws));
  if (active) eq_write(eqs[members / 2]);
  fid* fids[] = {&ws->fid};
  const int want = active ? -FI_EAGAIN : FI_SUCCESS;
  for (auto _ : state)
    if (fi_trywait(fab().fabric, fids, 1) != want) std::abort();
  for (auto* q : eqs) fi_close(&q->fid);
  fi_close(&ws->fid);
}
BENCHMARK(BM_FiTrywaitWaitSet)->Args({1, 1})->Args({1001, 1})->Args({1, 0})->Args({1001, 0});

}  // namespace

BENCHMARK_MAIN();
