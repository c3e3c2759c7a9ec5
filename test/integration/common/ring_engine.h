// SPDX-License-Identifier: BSD-3-Clause
//
// The set-up of the integration tests below libfabric (dgram/, msg/, mcast/, port/ *_lib_test.cc):
// EAL and one net_ring0 port (a loopback: what is sent comes back) from the environment's
// configuration (FI_DPDK_*), once per process, and its port engine; progress steps until a
// condition holds; a DATA CQ. The tests through libfabric use fixture.h instead.
#pragma once

#include <rdma/fi_eq.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "common/config.h"
#include "eal/eal.h"
#include "event/cq.h"
#include "port/port.h"
#include "progress/engine.h"
#include "progress/lcores.h"

namespace dpfab::test {

/// How ring_engine() treats worker lcores.
enum class RingProgress {
  kConfigured,  ///< as configured: FI_DPDK_LCORES set, worker lcores poll the port (AUTO)
  kManual,      ///< none, whatever the environment says: only the test's progress() calls
};

/// The engine of the net_ring0 port, EAL started on the first call (the mode of that call counts).
/// Aborts when EAL or the port cannot start: no test of the binary could run.
inline progress::PortEngine* ring_engine(RingProgress mode = RingProgress::kConfigured) {
  static progress::PortEngine* engine = [mode] {
    auto cfg = config::load([mode](const config::KeyInfo& k) -> std::optional<std::string> {
      if (std::string(k.name) == "ports") return std::string("net_ring0");
      if (mode == RingProgress::kManual && std::string(k.name) == "lcores") return std::string();
      return config::getenv_lookup(k);
    });
    if (!cfg || !eal::start(*cfg)) std::abort();
    auto ports = port::open_all(*cfg);
    if (!ports || (*ports)->empty()) std::abort();
    auto e = progress::PortEngine::of((**ports)[0].get());
    if (!e) std::abort();
    if (!cfg->lcores.empty()) {
      if (!progress::start_lcores(cfg->lcores, {*e}) || !progress::lcores_running()) std::abort();
    }
    return *e;
  }();
  return engine;
}

/// Runs progress steps on ring_engine() until `done()`, at most `ms` milliseconds (under
/// automatic progress the lcore does the work and these calls mostly return at once).
template <typename Pred>
bool progress_until(Pred done, int ms = 5000) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    ring_engine()->progress();
  }
  return true;
}

/// A CQ of FI_CQ_FORMAT_DATA with `size` entries and no wait object.
inline std::unique_ptr<event::Cq> make_data_cq(size_t size = 64) {
  event::CqConfig c;
  c.format = FI_CQ_FORMAT_DATA;
  c.size = size;
  return std::move(event::Cq::create(c, nullptr).value());
}

}  // namespace dpfab::test
