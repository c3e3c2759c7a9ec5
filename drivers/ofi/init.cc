// SPDX-License-Identifier: BSD-3-Clause
//
// Plugin entry: fi_prov_ini, the provider struct, parameters, logging bridge, runtime start.
#include <cstdio>
#include <mutex>
#include <set>

#include "dpdk.h"
#include "dpfab_build_config.h"
#include "eal/eal.h"
#include "progress/lcores.h"
#include "progress/wakeup.h"

namespace dpfab::ofi {
namespace {

void cleanup() noexcept;

bool log_filter(fi_log_level level, fi_log_subsys subsys) {
  return fi_log_enabled(&g_provider, level, subsys) != 0;
}

void log_sink(fi_log_level level, fi_log_subsys subsys, const char* func, int line,
              const char* msg) {
  fi_log(&g_provider, level, subsys, func, line, "%s\n", msg);
}

// Process-lifetime state, never destroyed: libfabric calls cleanup() from its own destructor.
struct Runtime {
  std::mutex mutex;
  std::optional<config::Config> cfg;
  std::mutex shown_mutex;
  std::set<std::string> shown;  // configuration errors already printed to stderr
};
Runtime& runtime() {
  static Runtime* r = new Runtime();
  return *r;
}
std::atomic<const config::Config*> g_runtime_published{nullptr};

void report_error(const Error& e) {
  DPFAB_WARN(FI_LOG_CORE, "%s", e.message.c_str());
  if (fi_log_enabled(&g_provider, FI_LOG_WARN, FI_LOG_CORE)) return;
  Runtime& r = runtime();
  std::lock_guard lock(r.shown_mutex);
  if (r.shown.insert(e.message).second)
    std::fprintf(stderr, "libfabric:dpdk: %s (provider disabled)\n", e.message.c_str());
}

void cleanup() noexcept {
  // EAL stays: it cannot be initialised twice in a process, and libfabric may load us again.
  progress::stop_lcores();
  progress::stop_wakeup();
  progress::PortEngine::close_all();
  port::close_all();
  Runtime& r = runtime();
  std::lock_guard lock(r.mutex);
  g_runtime_published.store(nullptr, std::memory_order_release);
  r.cfg.reset();
}

}  // namespace

fi_provider g_provider = {
    .version = kProviderVersion,
    .fi_version = kApiVersion,
    .context = {},
    .name = "dpdk",
    .getinfo = getinfo,
    .fabric = fabric_open,
    .cleanup = cleanup,
};

Result<config::Config> load_config() {
  auto env = [](const config::KeyInfo& key) -> std::optional<std::string> {
    char* value = nullptr;
    if (fi_param_get_str(&g_provider, key.name, &value) == FI_SUCCESS && value)
      return std::string(value);
    return std::nullopt;
  };
  auto cfg = config::load(env, DPFAB_DEFAULT_CONFIG);
  if (!cfg) report_error(cfg.error());
  return cfg;
}

Result<const config::Config*> start_runtime() {
  Runtime& r = runtime();
  std::lock_guard lock(r.mutex);
  if (r.cfg) return &*r.cfg;
  config::Config cfg;
  if (auto loaded = load_config())
    cfg = std::move(loaded.value());
  else
    return loaded.error();
  auto st = eal::start(cfg);
  if (!st) {
    report_error(st.error());
    return st.error();
  }
  auto ports = port::open_all(cfg);
  if (!ports) {
    report_error(ports.error());
    return ports.error();
  }
  std::vector<progress::PortEngine*> engines;
  for (const auto& p : **ports)
    if (auto e = progress::PortEngine::of(p.get())) engines.push_back(*e);
  for (progress::PortEngine* e : engines) {
    if (cfg.udp_checksum_always) e->set_udp_checksum_always();
    e->set_tx_extbuf_min(cfg.tx_extbuf_min);
  }
  // The same-host path (fi_dpdk(7), "Same-host peers"): a node per port, before any endpoint.
  if (cfg.shm) {
    shm::NodeConfig ncfg;
    ncfg.dir = cfg.shm_dir;
    ncfg.ring_bytes = cfg.shm_ring_kb * 1024;
    ncfg.cma = cfg.shm_cma;
    for (progress::PortEngine* e : engines)
      if (int rc = e->attach_local(ncfg, e->port()->info().placeholder);
          rc != 0 && e->port()->info().placeholder) {
        Error err{rc, "the same-host path cannot start, and this process has no port"};
        report_error(err);
        return err;
      }
  }
  // Fault injection (testing): on every port, before anything polls them.
  if (cfg.faults.any()) {
    DPFAB_WARN(FI_LOG_CORE,
               "fault injection on every port: loss %g, reorder %g, dup %g, corrupt %g, seed %llu",
               cfg.faults.loss, cfg.faults.reorder, cfg.faults.dup, cfg.faults.corrupt,
               static_cast<unsigned long long>(cfg.faults.seed));
    for (progress::PortEngine* e : engines)
      if (int rc = e->set_faults(cfg.faults); rc != 0) {
        Error err{rc, "fault injection: out of memory"};
        report_error(err);
        return err;
      }
  }
  // The wakeup thread watches the ports while consumers sleep or lcores are parked. Without it
  // everything still works: waits poll in slices, lcores never park.
  progress::WakeupConfig wcfg;
  wcfg.spin_auto = cfg.lcore_spin_auto;
  wcfg.spin_ns = cfg.lcore_spin_us < 0 ? -1 : cfg.lcore_spin_us * 1000;
  wcfg.spin_max_ns = cfg.spin_max_us * 1000;
  wcfg.idle_poll_max_ns = cfg.idle_poll_us * 1000;
  if (auto s = progress::start_wakeup(engines, wcfg); !s)
    DPFAB_WARN(FI_LOG_CORE, "%s: blocked waits poll, lcores never park", s.error().message.c_str());
  // Automatic progress: the worker lcores poll every port we created.
  if (!cfg.lcores.empty())
    if (auto s = progress::start_lcores(cfg.lcores, engines); !s) report_error(s.error());
  r.cfg = std::move(cfg);
  g_runtime_published.store(&*r.cfg, std::memory_order_release);
  return &*r.cfg;
}

const config::Config* runtime_config() noexcept {
  return g_runtime_published.load(std::memory_order_acquire);
}

port::Port* find_domain_port(const char* want) noexcept {
  const auto& open = port::ports();
  for (const auto& p : open)
    if (!want || p->info().name == want) return p.get();
  const config::Config* cfg = runtime_config();
  if (!cfg) return nullptr;
  bool configured = false;
  for (const auto& spec : cfg->ports)
    if (spec.substr(0, spec.find(',')) == want) configured = true;
  if (!configured) return nullptr;
  for (const auto& p : open)
    if (p->info().placeholder) return p.get();
  return nullptr;
}

}  // namespace dpfab::ofi

extern "C" __attribute__((visibility("default"))) fi_provider* fi_prov_ini(void) {
  using namespace dpfab;
  for (const auto& k : config::keys())
    fi_param_define(&ofi::g_provider, k.name, FI_PARAM_STRING, "%s (default: '%s')", k.help,
                    k.default_value);
  log::set_sink(ofi::log_sink, ofi::log_filter);
  DPFAB_INFO(FI_LOG_CORE, "dpdk provider %s loaded", DPFAB_VERSION);
  return &ofi::g_provider;
}
