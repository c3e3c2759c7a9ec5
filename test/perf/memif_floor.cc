// SPDX-License-Identifier: BSD-3-Clause
//
// The floor under dpfab's latency on net_memif: a ping-pong of raw frames between two processes
// with nothing but rte_eth_rx_burst/rte_eth_tx_burst (no headers built or checked, no CQ, no
// libfabric). dpfab's one-way latency minus this is what the provider itself costs.
//   memif-floor server|client [iterations=20000] [frame bytes=126] [socket=/tmp/dpfab-floor.sock]
// Start the server first; it runs on CPU 0 and the client on CPU 1 (EAL pins them). The client
// prints one-way latency (half the round trip) p50/p99/mean in microseconds. 126 bytes = a 64-byte
// payload in a dpfab frame (62 bytes of headers, wire version 2; version 1 had 74).
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

int fail(const char* what, int r) {
  std::fprintf(stderr, "memif-floor: %s: %d\n", what, r);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || (std::strcmp(argv[1], "server") && std::strcmp(argv[1], "client"))) {
    std::fprintf(stderr, "usage: %s server|client [iterations] [frame bytes] [socket]\n", argv[0]);
    return 2;
  }
  const bool server = argv[1][0] == 's';
  const long iters = argc > 2 ? std::atol(argv[2]) : 20000;
  const uint16_t len = static_cast<uint16_t>(argc > 3 ? std::atoi(argv[3]) : 126);
  const std::string sock = argc > 4 ? argv[4] : "/tmp/dpfab-floor.sock";
  if (server) unlink(sock.c_str());
  const std::string vdev = "--vdev=net_memif0,role=" + std::string(server ? "server" : "client") +
                           ",socket-abstract=no,socket=" + sock;
  std::vector<std::string> args = {
      "memif-floor", "--no-huge", "--no-pci",         "--no-shconf",           "-m",
      "64",          "-l",        server ? "0" : "1", "--log-level=*:warning", vdev};
  std::vector<char*> av;
  for (auto& a : args) av.push_back(a.data());
  if (rte_eal_init(static_cast<int>(av.size()), av.data()) < 0) return fail("rte_eal_init", -1);
  rte_mempool* pool = rte_pktmbuf_pool_create("floor", 2047, 64, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
  if (!pool) return fail("mempool", -1);
  rte_eth_conf conf{};
  if (int r = rte_eth_dev_configure(0, 1, 1, &conf)) return fail("configure", r);
  if (int r = rte_eth_rx_queue_setup(0, 0, 512, 0, nullptr, pool)) return fail("rxq", r);
  if (int r = rte_eth_tx_queue_setup(0, 0, 512, 0, nullptr)) return fail("txq", r);
  if (int r = rte_eth_dev_start(0)) return fail("start", r);
  const auto give_up = Clock::now() + std::chrono::seconds(30);
  rte_eth_link link{};
  do {
    rte_eth_link_get_nowait(0, &link);
    if (Clock::now() > give_up) return fail("link did not come up", -1);
  } while (link.link_status != RTE_ETH_LINK_UP);

  rte_mbuf* pkts[32];
  if (server) {  // echo every frame until nothing has come for 5 s
    auto quiet_until = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < quiet_until) {
      uint16_t n = rte_eth_rx_burst(0, 0, pkts, 32);
      if (!n) continue;
      uint16_t sent = rte_eth_tx_burst(0, 0, pkts, n);
      if (sent < n) rte_pktmbuf_free_bulk(pkts + sent, n - sent);
      quiet_until = Clock::now() + std::chrono::seconds(5);
    }
  } else {
    std::vector<double> rtt_ns;
    rtt_ns.reserve(static_cast<size_t>(iters));
    const long warmup = iters / 10;
    for (long i = 0; i < iters + warmup; ++i) {
      rte_mbuf* m = rte_pktmbuf_alloc(pool);
      if (!m) return fail("alloc", -1);
      char* p = rte_pktmbuf_append(m, len);
      std::memset(p, static_cast<int>(i), len);
      const auto t0 = Clock::now();
      while (rte_eth_tx_burst(0, 0, &m, 1) == 0) {
      }
      uint16_t n = 0;
      const auto deadline = t0 + std::chrono::seconds(1);
      while ((n = rte_eth_rx_burst(0, 0, pkts, 32)) == 0 && Clock::now() < deadline) {
      }
      const auto t1 = Clock::now();
      if (!n) return fail("no echo within 1 s", static_cast<int>(i));
      rte_pktmbuf_free_bulk(pkts, n);
      if (i >= warmup) rtt_ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
    }
    std::sort(rtt_ns.begin(), rtt_ns.end());
    double sum = 0;
    for (double v : rtt_ns) sum += v;
    auto at = [&](double q) { return rtt_ns[static_cast<size_t>(q * (rtt_ns.size() - 1))] / 2e3; };
    std::printf(
        "memif raw one-way (%u-byte frames, %zu round trips): p50 %.2f us, p99 %.2f us, "
        "mean %.2f us\n",
        len, rtt_ns.size(), at(0.5), at(0.99), sum / rtt_ns.size() / 2e3);
  }
  rte_eth_dev_stop(0);
  rte_eal_cleanup();
  return 0;
}
