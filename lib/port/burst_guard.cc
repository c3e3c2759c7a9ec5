// SPDX-License-Identifier: BSD-3-Clause
#include "port/burst_guard.h"

#include <rte_ethdev.h>
#include <signal.h>

#include <atomic>
#include <mutex>

namespace dpfab::port {
namespace {

struct Guard {
  sigjmp_buf env;
  uint16_t port_id;
};

// The burst this thread runs under the guard, or null.
constinit thread_local Guard* t_guard [[gnu::tls_model("initial-exec")]] = nullptr;

std::atomic<bool> g_installed{false};
struct sigaction g_old[2];  // what SIGSEGV and SIGBUS had before us

// memif_disconnect sets the link down before it unmaps (burst_guard.h). For memif,
// rte_eth_link_get_nowait reads the device's link word and takes no lock: fit for the handler.
bool link_down(uint16_t port_id) noexcept {
  rte_eth_link link{};
  return rte_eth_link_get_nowait(port_id, &link) != 0 || link.link_status == RTE_ETH_LINK_DOWN;
}

void on_fault(int sig, siginfo_t* info, void* uctx) {
  if (Guard* g = t_guard; g && link_down(g->port_id)) {
    t_guard = nullptr;
    siglongjmp(g->env, 1);
  }
  const struct sigaction& old = g_old[sig == SIGBUS ? 1 : 0];
  if (old.sa_flags & SA_SIGINFO) {
    if (old.sa_sigaction) {
      old.sa_sigaction(sig, info, uctx);
      return;
    }
  } else if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) {
    old.sa_handler(sig);
    return;
  }
  // No handler before us: the default action, when the faulting instruction runs again on return.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
}

}  // namespace

bool install_burst_guard() noexcept {
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer runs a program's signal handlers from its own, and a siglongjmp out of one
  // taken on a synchronous SIGSEGV kills the process there: no guard in such builds.
  return false;
#endif
  static std::mutex mu;
  std::lock_guard lock(mu);
  if (g_installed.load(std::memory_order_relaxed)) return true;
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  // SA_NODEFER: the jump out of the handler leaves the signal unblocked (sigsetjmp does not save
  // the mask: that would cost a system call per burst). SA_ONSTACK: a thread's alternate stack,
  // where it has one (sanitizers set one up).
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  struct sigaction old[2];
  if (sigaction(SIGSEGV, &sa, &old[0]) != 0) return false;
  if (sigaction(SIGBUS, &sa, &old[1]) != 0) {
    sigaction(SIGSEGV, &old[0], nullptr);
    return false;
  }
  g_old[0] = old[0];
  g_old[1] = old[1];
  g_installed.store(true, std::memory_order_release);
  return true;
}

// sigsetjmp returns twice: each burst in a function of its own, whose frame the jump returns to.
// Written out three times on purpose: a template or helper holding the sigsetjmp cannot be
// inlined (GCC never inlines a function that calls setjmp), and the call level it adds cost 2 ns
// more per guarded burst in hot-parts (8.1 against 6.0 ns).
[[gnu::noinline]] uint16_t guarded_rx_burst(uint16_t port_id, rte_mbuf** pkts, uint16_t n,
                                            bool* faulted) noexcept {
  if (!g_installed.load(std::memory_order_relaxed)) return rte_eth_rx_burst(port_id, 0, pkts, n);
  Guard g;
  g.port_id = port_id;
  if (sigsetjmp(g.env, 0) != 0) {
    *faulted = true;
    return 0;
  }
  t_guard = &g;
  const uint16_t r = rte_eth_rx_burst(port_id, 0, pkts, n);
  t_guard = nullptr;
  return r;
}

[[gnu::noinline]] uint16_t guarded_tx_burst(uint16_t port_id, rte_mbuf** pkts, uint16_t n,
                                            bool* faulted) noexcept {
  if (!g_installed.load(std::memory_order_relaxed)) return rte_eth_tx_burst(port_id, 0, pkts, n);
  Guard g;
  g.port_id = port_id;
  if (sigsetjmp(g.env, 0) != 0) {
    *faulted = true;
    return 0;
  }
  t_guard = &g;
  const uint16_t r = rte_eth_tx_burst(port_id, 0, pkts, n);
  t_guard = nullptr;
  return r;
}

namespace detail {

[[gnu::noinline]] bool run_guarded(uint16_t port_id, void (*fn)(void*), void* arg) noexcept {
  Guard g;
  g.port_id = port_id;
  if (sigsetjmp(g.env, 0) != 0) return true;
  t_guard = &g;
  fn(arg);
  t_guard = nullptr;
  return false;
}

}  // namespace detail
}  // namespace dpfab::port
