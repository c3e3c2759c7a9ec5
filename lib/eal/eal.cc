// SPDX-License-Identifier: BSD-3-Clause
#include "eal.h"

#include <pthread.h>
#include <rdma/fi_errno.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/log.h"
#include "common/strings.h"
#include "eal_args.h"

namespace dpfab::eal {
namespace {

// Process-lifetime state, never destroyed (EAL outlives every destructor).
struct Once {
  std::mutex mutex;
  bool tried = false;
  std::unique_ptr<State> state;
  Error error;
  std::vector<std::string> argv_storage;  // EAL keeps pointers into argv
  std::string own_runtime_dir;            // removed at exit when plan() chose the prefix
};
Once& once() {
  static Once* o = new Once();
  return *o;
}
std::atomic<const State*> g_published{nullptr};

// fopencookie writer: DPDK writes one formatted message per call (possibly without a final
// newline); forward each line to the bridge at the level DPDK logged it.
ssize_t rte_log_writer(void*, const char* buf, size_t size) {
  int lvl = rte_log_cur_msg_loglevel();
  // DPDK's warnings are mostly start-up chatter (telemetry, memif without shared config): only
  // its errors are our warnings.
  fi_log_level level = lvl <= static_cast<int>(RTE_LOG_ERR)    ? FI_LOG_WARN
                       : lvl <= static_cast<int>(RTE_LOG_INFO) ? FI_LOG_INFO
                                                               : FI_LOG_DEBUG;
  if (log::enabled(level, FI_LOG_CORE)) {
    std::string_view s(buf, size);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
    if (!s.empty())
      log::write(level, FI_LOG_CORE, "rte_log", 0, "%.*s", static_cast<int>(s.size()), s.data());
  }
  return static_cast<ssize_t>(size);
}

std::string cpus_of(unsigned lcore) {
  rte_cpuset_t set = rte_lcore_cpuset(lcore);
  std::vector<unsigned> ids;
  for (unsigned i = 0; i < CPU_SETSIZE; ++i)
    if (CPU_ISSET(i, &set)) ids.push_back(i);
  return str::format_cpu_list(ids);
}

void describe_lcores(State& st, const config::Config& cfg) {
  st.main_lcore = rte_get_main_lcore();
  unsigned id;
  RTE_LCORE_FOREACH(id) {
    LcoreInfo li;
    li.id = id;
    li.cpus = cpus_of(id);
    li.cpu = static_cast<unsigned>(
        str::parse_int(li.cpus.substr(0, li.cpus.find_first_of(",-"))).value_or(0));
    li.role = id == st.main_lcore ? LcoreRole::kMain : LcoreRole::kWorker;
    if (li.role == LcoreRole::kWorker && rte_eal_get_lcore_state(id) != WAIT) {
      li.role = LcoreRole::kUnavailable;
      li.note = "busy: the application launched work on it";
    }
    st.lcores.push_back(li);
  }
  // A configured worker that the application's own EAL does not have.
  for (unsigned w : cfg.lcores) {
    if (rte_lcore_is_enabled(w)) continue;
    st.lcores.push_back({w, w, std::to_string(w), LcoreRole::kUnavailable,
                         "configured in FI_DPDK_LCORES but not enabled in the running EAL"});
  }
}

// Registered before rte_eal_init, so it runs after telemetry's own exit handler has unlinked its
// socket: the directory is empty by then (an rmdir that fails leaves it, harmlessly).
void remove_own_runtime_dir() { rmdir(once().own_runtime_dir.c_str()); }

}  // namespace

void route_rte_log() noexcept {
  static FILE* stream = [] {
    cookie_io_functions_t io{};
    io.write = rte_log_writer;
    FILE* f = fopencookie(nullptr, "w", io);
    if (f) setvbuf(f, nullptr, _IONBF, 0);
    return f;
  }();
  if (stream) rte_openlog_stream(stream);
}

const State* state() noexcept { return g_published.load(std::memory_order_acquire); }

Result<const State*> start(const config::Config& cfg) {
  Once& o = once();
  std::lock_guard lock(o.mutex);
  if (o.tried) {
    if (o.state) return static_cast<const State*>(o.state.get());
    return o.error;
  }
  o.tried = true;
  auto st = std::make_unique<State>();

  // rte_lcore_count() is 0 until some rte_eal_init succeeded in this process.
  if (rte_lcore_count() > 0) {
    st->owned = false;
    DPFAB_INFO(FI_LOG_CORE, "EAL already initialised by the application: attaching");
  } else {
    auto p = plan(cfg, current_cpus());
    if (!p) {
      o.error = p.error();
      return o.error;
    }
    st->owned = true;
    st->argv = p->argv;
    if (!p->own_prefix.empty()) {
      std::string base = runtime_base();
      if (int n = sweep_stale_runtime_dirs(base))
        DPFAB_INFO(FI_LOG_CORE, "removed %d runtime directories of exited processes in %s", n,
                   base.c_str());
      o.own_runtime_dir = base + "/" + p->own_prefix;
      std::atexit(remove_own_runtime_dir);
    }
    route_rte_log();
    // EAL keeps pointers into argv for some options: the strings live as long as the process.
    auto& storage = o.argv_storage;
    storage = p->argv;
    std::vector<char*> argv;
    for (auto& s : storage) argv.push_back(s.data());
    argv.push_back(nullptr);
    std::string joined;
    for (const auto& s : storage) joined += (joined.empty() ? "" : " ") + s;
    DPFAB_INFO(FI_LOG_CORE, "starting EAL: %s", joined.c_str());
    // rte_eal_init pins the calling thread to the main lcore's set, which plan() made the
    // thread's current set; restore it anyway in case EAL narrows it.
    cpu_set_t before;
    bool have_before = pthread_getaffinity_np(pthread_self(), sizeof(before), &before) == 0;
    int ret = rte_eal_init(static_cast<int>(storage.size()), argv.data());
    int err = rte_errno;
    if (have_before) pthread_setaffinity_np(pthread_self(), sizeof(before), &before);
    if (ret < 0) {
      o.error = make_error(err == EINVAL ? -FI_EINVAL : -FI_ENODEV,
                           "rte_eal_init(" + joined + ") failed: " + rte_strerror(err));
      DPFAB_WARN(FI_LOG_CORE, "%s", o.error.message.c_str());
      return o.error;
    }
  }
  describe_lcores(*st, cfg);
  o.state = std::move(st);
  g_published.store(o.state.get(), std::memory_order_release);
  return static_cast<const State*>(o.state.get());
}

}  // namespace dpfab::eal
