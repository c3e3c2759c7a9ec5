// SPDX-License-Identifier: BSD-3-Clause
#include "eal_args.h"

#include <dirent.h>
#include <pthread.h>
#include <rdma/fi_errno.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include <algorithm>
#include <regex>

#include "common/strings.h"

namespace dpfab::eal {

bool is_pci_address(const std::string& port) {
  static const std::regex pci(R"(^([0-9a-fA-F]{4,}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7](,.*)?$)");
  return std::regex_match(port, pci);
}

std::vector<unsigned> current_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<unsigned> cpus;
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0) return cpus;
  for (unsigned i = 0; i < CPU_SETSIZE; ++i)
    if (CPU_ISSET(i, &set)) cpus.push_back(i);
  return cpus;
}

Result<Plan> plan(const config::Config& cfg, const std::vector<unsigned>& main_cpus, int pid) {
  if (main_cpus.empty()) return make_error(-FI_EINVAL, "the calling thread has no CPU affinity");
  Plan p;
  p.argv.emplace_back("dpfab");
  bool no_pci = false, has_prefix = false, no_huge_files = false;
  for (const auto& a : cfg.eal_args) {
    for (const char* forbidden : {"-l", "-c", "--lcores", "--main-lcore", "--master-lcore"}) {
      std::string f(forbidden);
      if (a == f || a.rfind(f + "=", 0) == 0 || (f.size() == 2 && a.rfind(f, 0) == 0))
        return make_error(-FI_EINVAL, "FI_DPDK_EAL_ARGS: '" + a +
                                          "' chooses lcores; set them with FI_DPDK_LCORES instead");
    }
    no_pci |= (a == "--no-pci");
    has_prefix |= (a == "--file-prefix" || a.rfind("--file-prefix=", 0) == 0);
    no_huge_files |= (a == "--no-huge" || a == "--in-memory");
    p.argv.push_back(a);
  }
  if (!has_prefix && no_huge_files) {
    p.own_prefix = "dpfab-" + std::to_string(pid > 0 ? pid : static_cast<int>(getpid()));
    p.argv.push_back("--file-prefix=" + p.own_prefix);
  }

  p.workers = cfg.lcores;
  std::sort(p.workers.begin(), p.workers.end());
  // The main lcore takes the smallest id no worker uses; its CPU set is the caller's own.
  while (std::find(p.workers.begin(), p.workers.end(), p.main_lcore) != p.workers.end())
    ++p.main_lcore;
  p.main_cpus = main_cpus;
  std::string lcores = std::to_string(p.main_lcore) + "@(" + str::format_cpu_list(main_cpus) + ")";
  for (unsigned w : p.workers) lcores += "," + std::to_string(w) + "@" + std::to_string(w);
  p.argv.push_back("--lcores=" + lcores);
  p.argv.push_back("--main-lcore=" + std::to_string(p.main_lcore));

  for (const auto& port : cfg.ports) {
    if (!is_pci_address(port)) continue;
    if (no_pci)
      return make_error(-FI_EINVAL, "FI_DPDK_PORTS: PCI port '" + port +
                                        "' needs PCI, but FI_DPDK_EAL_ARGS has --no-pci");
    p.argv.push_back("-a");
    p.argv.push_back(port);
  }
  return p;
}

std::string runtime_base() {
  if (getuid() == 0) return "/var/run/dpdk";
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  return std::string(xdg && *xdg ? xdg : "/tmp") + "/dpdk";
}

int sweep_stale_runtime_dirs(const std::string& base) {
  DIR* d = opendir(base.c_str());
  if (!d) return 0;
  std::vector<std::string> stale;
  while (dirent* e = readdir(d)) {
    std::string_view name(e->d_name);
    if (name.rfind("dpfab-", 0) != 0) continue;
    auto pid = str::parse_int(name.substr(6));
    if (!pid || *pid <= 0) continue;
    if (kill(static_cast<pid_t>(*pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours
    stale.emplace_back(name);
  }
  closedir(d);
  int removed = 0;
  for (const auto& name : stale) {
    std::string dir = base + "/" + name;
    if (DIR* sub = opendir(dir.c_str())) {
      while (dirent* e = readdir(sub))
        if (e->d_name[0] != '.') unlink((dir + "/" + e->d_name).c_str());
      closedir(sub);
    }
    removed += rmdir(dir.c_str()) == 0;
  }
  return removed;
}

}  // namespace dpfab::eal
