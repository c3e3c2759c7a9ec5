// SPDX-License-Identifier: BSD-3-Clause
//
// dpfab-bench: the busy-poll versus blocking benchmark. A plain libfabric application: for each
// provider named on the command line it starts two processes of itself (a server and a client
// role, joined by a unix socket for out-of-band set-up), which measure ping-pong latency,
// windowed streaming and wake-up latency after an idle gap, for every endpoint type the provider
// offers and every waiting mode, and report one record per (workload, provider, endpoint type,
// mode, size). This process collects the records and writes the JSON, CSV, table and plots.
//
//   dpfab-bench [-p dpdk,shm,udp,tcp] [-m spin,sread,...] [-s 64,1024] ...   (--help for all)
#include <fcntl.h>
#include <poll.h>
#include <rdma/fabric.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common.h"
#include "peer.h"
#include "record.h"
#include "report.h"

using namespace dpfab::bench;

namespace {

// ---- command line -----------------------------------------------------------------------------

// "64", "4k", "1m", or a range "64-4096" (powers of two from the first to the last).
bool parse_sizes(const std::vector<std::string>& items, std::vector<uint64_t>* out,
                 std::string* err) {
  auto one = [](std::string s, uint64_t* v) {
    if (s.empty()) return false;
    uint64_t mult = 1;
    char last = static_cast<char>(std::tolower(static_cast<unsigned char>(s.back())));
    if (last == 'k') mult = 1024, s.pop_back();
    if (last == 'm') mult = 1024 * 1024, s.pop_back();
    char* end = nullptr;
    unsigned long long n = std::strtoull(s.c_str(), &end, 10);
    if (!end || *end || n == 0) return false;
    *v = n * mult;
    return true;
  };
  out->clear();
  for (const auto& it : items) {
    size_t dash = it.find('-');
    uint64_t a, b;
    if (dash == std::string::npos) {
      if (!one(it, &a)) return *err = "bad size '" + it + "'", false;
      out->push_back(a);
    } else {
      if (!one(it.substr(0, dash), &a) || !one(it.substr(dash + 1), &b) || a > b)
        return *err = "bad size range '" + it + "'", false;
      for (uint64_t v = a; v <= b; v *= 2) out->push_back(v);
    }
  }
  return !out->empty() || (*err = "no sizes", false);
}

std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  buf[n] = 0;
  return buf;
}

std::string iso_now() {
  char b[64];
  time_t t = time(nullptr);
  strftime(b, sizeof(b), "%Y-%m-%dT%H:%M:%S%z", localtime(&t));
  return b;
}

std::string stamp_now() {
  char b[64];
  time_t t = time(nullptr);
  strftime(b, sizeof(b), "%Y%m%d-%H%M%S", localtime(&t));
  return b;
}

// The 1-minute load average (other work on the machine skews every figure; the JSON keeps it).
double loadavg() {
  double l[1] = {0};
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

std::string fmt_secs(double s) {
  char b[32];
  int t = static_cast<int>(s + 0.5);
  if (t >= 60)
    std::snprintf(b, sizeof(b), "%dm%02ds", t / 60, t % 60);
  else
    std::snprintf(b, sizeof(b), "%ds", t);
  return b;
}

// ---- the two peer processes -------------------------------------------------------------------

// Starts exe with args (inside network namespace `netns` when not empty, through
// `ip netns exec`), with env added, stdout and stderr to log, and keep_fd inherited.
pid_t spawn(const std::string& exe, const std::vector<std::string>& args,
            const std::map<std::string, std::string>& env, const std::string& log, int keep_fd,
            const std::string& netns = "") {
  pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (!netns.empty()) {
    // af_xdp's UMEM is the whole mempool: more than the default 8 MiB of locked memory.
    rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
    setrlimit(RLIMIT_MEMLOCK, &unlimited);
  }
  for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
  }
  if (keep_fd >= 0) fcntl(keep_fd, F_SETFD, 0);
  std::vector<std::string> full;
  if (!netns.empty()) full = {"ip", "netns", "exec", netns};
  full.push_back(exe);
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : full) argv.push_back(a.data());
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  _exit(127);
}

// ---- two network namespaces joined by veth (--netns) ------------------------------------------

// Two "hosts" made by test/integration/hosts/hosts.sh: namespaces with interface dp0 each, joined
// by a veth pair; removed at exit (and by hosts.sh's reaper if this process is killed).
struct Netns {
  std::string pmd;  // af_packet or af_xdp
  std::string hosts_sh;
  std::string ns[2], iface[2], ip[2];

  std::string create() {
    const char* env = std::getenv("DPFAB_HOSTS_SH");
    hosts_sh = env ? env : DPFAB_HOSTS_SH;
    if (access(hosts_sh.c_str(), R_OK) != 0) return "no " + hosts_sh + " (set DPFAB_HOSTS_SH)";
    std::string owner = std::to_string(getpid());
    // The reaper removes the namespaces when this process ends, however it ends.
    if (fork() == 0) {
      setsid();
      int null = open("/dev/null", O_RDWR);
      dup2(null, 0), dup2(null, 1), dup2(null, 2);
      execlp("bash", "bash", hosts_sh.c_str(), "reap", "--owner", owner.c_str(), nullptr);
      _exit(127);
    }
    std::string cmd = "bash '" + hosts_sh + "' create --owner " + owner + " -n 2 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return "cannot run " + hosts_sh;
    char line[512];
    std::string out;
    int found = 0;
    while (std::fgets(line, sizeof(line), p)) {
      out += line;
      int i;
      char n[128], f[64], a[64];
      if (std::sscanf(line, "host %d %127s %63s %63s", &i, n, f, a) == 4 && i >= 0 && i < 2) {
        ns[i] = n, iface[i] = f, ip[i] = a;
        found++;
      }
    }
    int rc = pclose(p);
    if (rc != 0 || found != 2) return "hosts.sh create failed: " + out;
    return "";
  }
  void destroy() {
    std::string cmd =
        "bash '" + hosts_sh + "' destroy --owner " + std::to_string(getpid()) + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0)
      std::fprintf(stderr, "dpfab-bench: hosts.sh destroy failed (hosts.sh cleanup-stale)\n");
  }
  std::map<std::string, std::string> dpdk_env(int host) const {
    std::string spec = pmd == "af_xdp"
                           ? "net_af_xdp0,iface=" + iface[host] + ",start_queue=0,queue_count=1"
                           : "net_af_packet0,iface=" + iface[host];
    return {{"FI_DPDK_PORTS", spec}, {"FI_DPDK_IPV4", ip[host] + "/24"}};
  }
};

// Waits for pid up to timeout_ms, then kills it. Returns a description of how it ended.
std::string reap(pid_t pid, int timeout_ms) {
  int status = 0;
  for (int waited = 0;; waited += 20) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0) return "lost";
    if (waited >= timeout_ms) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return "killed after a timeout";
    }
    usleep(20'000);
  }
  if (WIFEXITED(status))
    return WEXITSTATUS(status) == 0 ? "" : "exit status " + std::to_string(WEXITSTATUS(status));
  return std::string("killed by signal ") + strsignal(WTERMSIG(status));
}

std::string log_tail(const std::string& path, size_t lines) {
  std::ifstream f(path);
  std::vector<std::string> all;
  for (std::string l; std::getline(f, l);) all.push_back(l);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); i++)
    out += "    " + all[i] + "\n";
  return out;
}

// The progress line on stderr (only when stderr is a terminal).
struct Progress {
  bool tty = isatty(STDERR_FILENO) != 0;
  int64_t start_ns = now_ns();
  size_t done = 0;
  size_t planned = 0;         // cases planned by the providers seen so far
  size_t providers_seen = 0;  // providers whose plan arrived
  size_t providers_total = 0;

  void show(const std::string& what) {
    if (!tty) return;
    double elapsed = static_cast<double>(now_ns() - start_ns) * 1e-9;
    size_t total = planned;
    if (providers_seen > 0 && providers_seen < providers_total)
      total += planned / providers_seen * (providers_total - providers_seen);
    std::string left = "?";
    if (done > 0 && total >= done)
      left =
          "~" + fmt_secs(elapsed / static_cast<double>(done) * static_cast<double>(total - done));
    std::fprintf(stderr, "\r\033[K[%zu/%zu] %s | %s elapsed, %s left", done + 1,
                 std::max(total, done + 1), what.c_str(), fmt_secs(elapsed).c_str(), left.c_str());
    std::fflush(stderr);
  }
  void clear() {
    if (tty) std::fprintf(stderr, "\r\033[K");
  }
};

struct ProviderRun {
  json info = json::object();
  std::vector<json> records;
};

// Runs the server and client of one provider and collects the client's events. `exe` is this
// program (the libfabric peers), or for the raw-port floor the dpfab-bench-floor helper, which
// also gets `extra` arguments.
ProviderRun run_provider(const Options& o, const std::string& provider, const std::string& exe,
                         const std::string& rundir, const std::string& base, double stall_s,
                         const Netns* netns, Progress& progress,
                         const std::vector<std::string>& extra = {}) {
  ProviderRun run;
  Options po = o;
  po.providers = {provider};
  if (netns) po.iface = netns->iface[0];  // socket providers: the veth, not loopback
  std::string cfg = json(po).dump();
  std::string oob = rundir + "/" + provider + ".oob";
  std::map<std::string, std::string> env, server_env, client_env;
  const bool dpdk = fabric_provider(provider) == "dpdk";
  if (dpdk) {
    // The path between the pair: its port, or the same-host path (common.h).
    env["FI_DPDK_SHM"] = provider == kDpdkShm ? "on" : "off";
    run.info["FI_DPDK_SHM"] = env["FI_DPDK_SHM"];
    run.info["path"] = provider == kDpdkShm ? "same-host path (shared memory)" : "port";
  }
  if (dpdk && netns) {
    server_env = netns->dpdk_env(0);
    client_env = netns->dpdk_env(1);
    run.info["FI_DPDK_PORTS"] = {server_env["FI_DPDK_PORTS"], client_env["FI_DPDK_PORTS"]};
  } else if (dpdk) {
    if (!o.dpdk_ports.empty())
      env["FI_DPDK_PORTS"] = o.dpdk_ports;
    else if (!std::getenv("FI_DPDK_PORTS"))
      env["FI_DPDK_PORTS"] =
          "net_memif0,role=auto,socket-abstract=no,socket=" + rundir + "/memif.sock";
  }
  std::string slog = base + "-" + provider + "-server.log";
  std::string clog = base + "-" + provider + "-client.log";
  run.info["server_log"] = slog;
  run.info["client_log"] = clog;
  if (env.count("FI_DPDK_PORTS")) run.info["FI_DPDK_PORTS"] = env["FI_DPDK_PORTS"];
  if (dpdk && !netns && !o.dpdk_client_ports.empty()) {
    // Two ports of this machine (NICs cabled to each other): the client gets its own.
    client_env["FI_DPDK_PORTS"] = o.dpdk_client_ports;
    run.info["FI_DPDK_PORTS"] = {env["FI_DPDK_PORTS"], o.dpdk_client_ports};
  }
  if (netns) run.info["netns"] = {netns->ns[0], netns->ns[1]};
  if (dpdk && netns && provider == kDpdkShm) {
    // Two network namespaces are two hosts to the same-host path (its host identity includes the
    // namespace): it would carry nothing.
    run.info["error"] = "--netns puts the pair on two hosts: no same-host path (use dpdk-port)";
    return run;
  }
  server_env.insert(env.begin(), env.end());
  client_env.insert(env.begin(), env.end());
  int ev[2];
  if (pipe2(ev, O_CLOEXEC) != 0) {
    run.info["error"] = std::string("pipe: ") + std::strerror(errno);
    return run;
  }
  std::vector<std::string> sargs = {"--role", "server", "--oob", oob, "--peer-config", cfg};
  std::vector<std::string> cargs = {
      "--role", "client", "--oob", oob, "--peer-config", cfg, "--events-fd", std::to_string(ev[1])};
  sargs.insert(sargs.end(), extra.begin(), extra.end());
  cargs.insert(cargs.end(), extra.begin(), extra.end());
  pid_t server = spawn(exe, sargs, server_env, slog, -1, netns ? netns->ns[0] : "");
  pid_t client = spawn(exe, cargs, client_env, clog, ev[1], netns ? netns->ns[1] : "");
  close(ev[1]);
  std::string buf, error;
  int64_t last = now_ns();
  std::string current = provider + ": starting";
  progress.show(current);
  for (;;) {
    pollfd p{ev[0], POLLIN, 0};
    int r = poll(&p, 1, 250);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      progress.show(current);
      if (static_cast<double>(now_ns() - last) * 1e-9 > stall_s) {
        error = "no progress for " + fmt_secs(stall_s) + ": both processes killed";
        kill(client, SIGKILL);
        kill(server, SIGKILL);
        break;
      }
      continue;
    }
    char tmp[65536];
    ssize_t n = read(ev[0], tmp, sizeof(tmp));
    if (n <= 0) break;
    last = now_ns();
    buf.append(tmp, static_cast<size_t>(n));
    for (size_t nl; (nl = buf.find('\n')) != std::string::npos;) {
      json e = json::parse(buf.substr(0, nl), nullptr, false);
      buf.erase(0, nl + 1);
      if (e.is_discarded()) continue;
      std::string kind = e.value("event", "");
      if (kind == "plan") {
        run.info["offered"] = e["offered"];
        run.info["absent"] = e["absent"];
        progress.planned += e.value("cases", size_t{0});
        progress.providers_seen++;
        if (!progress.tty)
          std::fprintf(stderr, "dpfab-bench: %s: %zu cases (%s)\n", provider.c_str(),
                       e.value("cases", size_t{0}), e["offered"].dump().c_str());
      } else if (kind == "case") {
        current = provider + " " + e.value("ep_type", "") + " " + e.value("mode", "") + " " +
                  e.value("workload", "") + " " + std::to_string(e.value("size", 0)) + " B";
        progress.show(current);
      } else if (kind == "record") {
        run.records.push_back(e["record"]);
        progress.done++;
      } else if (kind == "provider_error") {
        error = e.value("error", "");
      }
    }
  }
  close(ev[0]);
  std::string cend = reap(client, 10'000), send = reap(server, 10'000);
  if (error.empty() && !cend.empty()) error = "client " + cend;
  if (error.empty() && !send.empty()) error = "server " + send;
  if (error.empty() && run.records.empty()) {
    error = "no records";
    if (run.info.contains("absent")) error += ": " + run.info["absent"].dump();
  }
  if (!error.empty()) {
    run.info["error"] = error;
    progress.clear();
    std::fprintf(stderr, "dpfab-bench: %s: %s\n  client log %s:\n%s  server log %s:\n%s",
                 provider.c_str(), error.c_str(), clog.c_str(), log_tail(clog, 5).c_str(),
                 slog.c_str(), log_tail(slog, 5).c_str());
  }
  return run;
}

// ---- the raw-port floor (dpfab-bench-floor) -----------------------------------------------------

// The floor's provider name in records: raw frames over a memif link of its own, measured next to
// the dpdk pair (doc/benchmark.md, "The raw-port floor").
constexpr const char* kFloor = "memif-floor";

// How this run measures the floor: over a memif link of its own when the dpdk pair runs over one
// (with the dpdk link's MTU), or why not (its records are then `unsupported` with that reason).
struct FloorPlan {
  bool run = false;
  std::string why_not;
  std::string exe;      // dpfab-bench-floor, next to this program
  std::string devargs;  // the helper's memif devargs (its role aside)
  unsigned mtu = 9000;  // dpfab's default for memif ports (fi_dpdk(7), mtu=)
};

// The value of `key` in a "name,key=value,..." port spec ("" when absent).
std::string spec_arg(const std::string& spec, const std::string& key) {
  size_t at = 0;
  while ((at = spec.find(key + "=", at)) != std::string::npos) {
    if (at > 0 && spec[at - 1] == ',') {
      size_t start = at + key.size() + 1;
      return spec.substr(start, spec.find(',', start) - start);
    }
    at += key.size();
  }
  return "";
}

FloorPlan plan_floor(const Options& o, const std::string& exe_dir, const std::string& rundir,
                     const std::string& netns_pmd) {
  FloorPlan f;
  const char* env = std::getenv("FI_DPDK_PORTS");
  const std::string spec = !o.dpdk_ports.empty() ? o.dpdk_ports : env ? env : "";
  if (!netns_pmd.empty()) {
    f.why_not = "dpdk runs on net_" + netns_pmd +
                " in two network namespaces (--netns): the raw floor is measured on a memif link";
  } else if (!o.dpdk_client_ports.empty()) {
    f.why_not =
        "dpdk runs on two ports of this machine (--dpdk-client-ports): the raw floor is "
        "measured on a memif link";
  } else if (!spec.empty() &&
             (spec.rfind("net_memif", 0) != 0 || spec.find(';') != std::string::npos)) {
    f.why_not = "dpdk runs on " + spec +
                ", not on one memif link: the raw floor is measured on a memif link";
  } else {
    f.exe = exe_dir + "/dpfab-bench-floor";
    if (access(f.exe.c_str(), X_OK) != 0) {
      f.why_not = "no dpfab-bench-floor next to dpfab-bench (" + f.exe + ")";
    } else {
      f.run = true;
      f.devargs = "socket-abstract=no,socket=" + rundir + "/floor.sock";
      if (std::string m = spec_arg(spec, "mtu"); !m.empty()) {
        f.mtu = static_cast<unsigned>(std::strtoul(m.c_str(), nullptr, 10));
        if (f.mtu < 576 || f.mtu > 9000)
          f.run = false, f.why_not = "dpdk's mtu=" + m + " is not valid";
      }
    }
  }
  return f;
}

// Records of a floor that does not run: one per workload and size, `unsupported` with the reason.
std::vector<json> floor_unsupported(const Options& o, const std::string& why) {
  std::vector<json> out;
  for (const auto& w : o.workloads)
    for (auto size : o.sizes)
      out.push_back(
          failed_record(CaseKey{w, kFloor, "net_memif", "", "", "raw", "spin", "none", size},
                        "unsupported", why));
  return out;
}

// over_floor_us of every dpdk record that has a floor record of the same workload and size in
// the run: its p50 latency minus the floor's ("floor + provider").
void add_over_floor(json& records) {
  std::map<std::pair<std::string, uint64_t>, double> floor;
  for (const auto& r : records)
    if (r.value("provider", "") == kFloor && r.value("status", "") == "ok" &&
        r["lat_p50_us"].is_number())
      floor[{r.value("workload", ""), r.value("size", uint64_t{0})}] =
          r["lat_p50_us"].get<double>();
  for (auto& r : records) {
    if (r.value("provider", "") != kDpdkPort || !r.contains("lat_p50_us") ||
        !r["lat_p50_us"].is_number())
      continue;
    auto it = floor.find({r.value("workload", ""), r.value("size", uint64_t{0})});
    if (it != floor.end()) r["over_floor_us"] = r["lat_p50_us"].get<double>() - it->second;
  }
}

int report(const json& doc, const std::string& base, const std::string& plot, bool table,
           bool write_json);

int orchestrate(const Options& o, const std::string& out_dir, std::string name,
                const std::string& plot, double stall_s, bool table, const std::string& netns_pmd,
                bool floor_on) {
  std::string exe = self_exe();
  std::string exe_dir = exe.substr(0, exe.rfind('/'));
  if (!std::getenv("FI_PROVIDER_PATH")) {
    std::string plugin_dir = exe_dir + "/../../drivers/ofi";
    if (access((plugin_dir + "/libdpdk-fi.so").c_str(), R_OK) == 0) {
      char real[4096];
      if (realpath(plugin_dir.c_str(), real)) plugin_dir = real;
      setenv("FI_PROVIDER_PATH", plugin_dir.c_str(), 1);
      std::fprintf(stderr, "dpfab-bench: FI_PROVIDER_PATH=%s (the build tree's plugin)\n",
                   plugin_dir.c_str());
    }
  }
  if (mkdir(out_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "dpfab-bench: cannot create %s: %s\n", out_dir.c_str(),
                 std::strerror(errno));
    return 1;
  }
  if (name.empty()) name = "dpfab-bench-" + stamp_now();
  char real_out[PATH_MAX];
  std::string base =
      (realpath(out_dir.c_str(), real_out) ? std::string(real_out) : out_dir) + "/" + name;
  char tmpl[] = "/tmp/dpfab-bench.XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::fprintf(stderr, "dpfab-bench: mkdtemp: %s\n", std::strerror(errno));
    return 1;
  }
  std::string rundir = tmpl;
  std::optional<Netns> netns;
  if (!netns_pmd.empty()) {
    netns.emplace();
    netns->pmd = netns_pmd;
    if (std::string e = netns->create(); !e.empty()) {
      std::fprintf(stderr, "dpfab-bench: --netns: %s\n", e.c_str());
      rmdir(rundir.c_str());
      return 1;
    }
    std::fprintf(stderr, "dpfab-bench: hosts %s (%s) and %s (%s) joined by veth; dpdk on %s\n",
                 netns->ns[0].c_str(), netns->ip[0].c_str(), netns->ns[1].c_str(),
                 netns->ip[1].c_str(), netns_pmd.c_str());
  }

  json doc;
  doc["tool"] = "dpfab-bench";
  doc["schema_version"] = 2;
  doc["started"] = iso_now();
  utsname u{};
  uname(&u);
  uint32_t v = fi_version();
  doc["host"] = {
      {"hostname", u.nodename},
      {"kernel", std::string(u.sysname) + " " + u.release},
      {"cpus", std::thread::hardware_concurrency()},
      {"libfabric", std::to_string(FI_MAJOR(v)) + "." + std::to_string(FI_MINOR(v))},
      {"FI_PROVIDER_PATH", std::getenv("FI_PROVIDER_PATH") ? std::getenv("FI_PROVIDER_PATH") : ""}};
  doc["host"]["loadavg_start"] = loadavg();
  doc["options"] = o;
  doc["options"]["netns"] = netns_pmd;
  doc["options"]["floor"] = floor_on;
  doc["providers"] = json::object();
  json records = json::array();
  // The floor is what dpdk over its port runs on (dpdk-shm does not touch the port).
  const bool with_dpdk = std::find(o.providers.begin(), o.providers.end(),
                                   std::string(kDpdkPort)) != o.providers.end();
  // Only two-sided message workloads have a raw-frame equivalent: a one-sided run has no floor.
  const bool two_sided = std::any_of(o.workloads.begin(), o.workloads.end(), [](const auto& w) {
    return w == "pingpong" || w == "stream" || w == "wakeup";
  });
  floor_on = floor_on && with_dpdk && two_sided;
  FloorPlan floor;
  if (floor_on) floor = plan_floor(o, exe_dir, rundir, netns_pmd);
  Progress progress;
  progress.providers_total = o.providers.size() + (floor.run ? 1 : 0);
  int64_t t0 = now_ns();
  for (const auto& p : o.providers) {
    if (p == kDpdkPort && floor_on) {
      // The raw-port floor, just before the dpdk pair: the same link type, the same sizes.
      if (floor.run) {
        ProviderRun fr =
            run_provider(o, kFloor, floor.exe, rundir, base, stall_s, nullptr, progress,
                         {"--memif", floor.devargs, "--mtu", std::to_string(floor.mtu)});
        fr.info["memif"] = floor.devargs;
        fr.info["mtu"] = floor.mtu;
        doc["providers"][kFloor] = fr.info;
        for (auto& r : fr.records) records.push_back(std::move(r));
      } else {
        doc["providers"][kFloor] = {{"skipped", floor.why_not}};
        for (auto& r : floor_unsupported(o, floor.why_not)) records.push_back(std::move(r));
      }
    }
    ProviderRun run =
        run_provider(o, p, exe, rundir, base, stall_s, netns ? &*netns : nullptr, progress);
    doc["providers"][p] = run.info;
    for (auto& r : run.records) records.push_back(std::move(r));
  }
  progress.clear();
  if (netns) netns->destroy();
  rmdir(rundir.c_str());
  doc["elapsed_s"] = static_cast<double>(now_ns() - t0) * 1e-9;
  doc["host"]["loadavg_end"] = loadavg();
  add_over_floor(records);
  doc["records"] = records;
  return report(doc, base, plot, table, true);
}

// Writes the JSON (when write_json), the CSV and the plots of doc next to `base`, prints the
// table, the comparison and where everything went. Returns the exit code: 0 when some record is
// ok.
int report(const json& doc, const std::string& base, const std::string& plot, bool table,
           bool write_json) {
  const json& records = doc["records"];
  std::vector<std::string> written;
  if (write_json) {
    std::ofstream f(base + ".json");
    f << doc.dump(1) << "\n";
    if (!f) {
      std::fprintf(stderr, "dpfab-bench: cannot write %s.json\n", base.c_str());
      return 1;
    }
    written.push_back(base + ".json");
  }
  if (std::string e = write_csv(base + ".csv", records); !e.empty())
    std::fprintf(stderr, "dpfab-bench: %s\n", e.c_str());
  else
    written.push_back(base + ".csv");
  if (table) {
    print_table(stdout, records);
    print_comparison(stdout, records);
  }
  std::string plot_error;
  if (plot != "none") {
    std::vector<std::string> files;
    plot_error = write_plots(base, plot, records, &files);
    written.insert(written.end(), files.begin(), files.end());
  }
  size_t ok = 0, unsupported = 0, errors = 0;
  for (const auto& r : records) {
    std::string s = r.value("status", "");
    (s == "ok" ? ok : s == "unsupported" ? unsupported : errors)++;
  }
  std::printf("\n%zu records (%zu ok, %zu unsupported, %zu errors) in %s\n", records.size(), ok,
              unsupported, errors, fmt_secs(doc.value("elapsed_s", 0.0)).c_str());
  if (!plot_error.empty()) std::printf("plot: %s\n", plot_error.c_str());
  for (const auto& w : written) {
    const char* what = w.ends_with(".json")                   ? "JSON"
                       : w.ends_with(".csv")                  ? "CSV"
                       : w.ends_with(".gp")                   ? "gnuplot script"
                       : w.find("-cdf.") != std::string::npos ? "plot (latency CDF)"
                                                              : "plot (CPU vs latency)";
    std::printf("%-22s %s\n", what, w.c_str());
  }
  return ok > 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "dpfab-bench: busy-poll versus blocking, per provider, endpoint type, waiting mode and "
      "message size. Starts two processes of itself per provider (one command runs it all) and "
      "writes JSON, CSV, a table and plots."};
  Options o;
  std::vector<std::string> sizes{"64", "1024"};
  std::string out_dir = "dpfab-bench-results", name, plot = "svg";
  std::string role, oob, peer_config;
  int events_fd = -1;
  double stall_s = 60;
  bool no_table = false, no_floor = false;
  std::string netns, from_json;
  app.add_option("-p,--providers", o.providers,
                 "providers to compare; dpdk = dpdk-port (over its port, same-host path off) "
                 "and dpdk-shm (over the same-host path)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("-m,--modes", o.modes,
                 "waiting modes: spin sread fd pollfd waitset pollset cond yield worker")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("-w,--workloads", o.workloads,
                 "pingpong stream wakeup; one-sided (spin mode): rma-write rma-read rma-bw atomic")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("-e,--ep-types", o.ep_types, "endpoint types tried (those offered are used)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--wait-on", o.wait_on,
                 "what the modes wait on: cq, cntr (a completion counter bound to the endpoint; "
                 "the CQ is then only read)")
      ->delimiter(',')
      ->check(CLI::IsMember({"cq", "cntr"}))
      ->capture_default_str();
  app.add_option("-s,--sizes", sizes, "message sizes: 64,1k or ranges 64-4k (powers of two)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("-n,--iterations", o.iterations,
                 "timed iterations per case at most (stream: messages)")
      ->capture_default_str();
  app.add_option("-d,--duration", o.duration_s, "seconds of timed window per case at most")
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "warm-up iterations (at most a quarter of --duration)")
      ->capture_default_str();
  app.add_option("--window", o.window, "stream: messages per credit")->capture_default_str();
  app.add_option("--gap-us", o.gap_us, "wakeup: idle gap before each message")
      ->capture_default_str();
  app.add_option("--timeout-ms", o.timeout_ms, "one wait for a reply (a loss after that)")
      ->capture_default_str();
  app.add_option("--max-lost", o.max_lost, "losses after which a case is an error")
      ->capture_default_str();
  app.add_option("--iface", o.iface, "preferred domain of socket providers")->capture_default_str();
  app.add_option("--layered", o.layered,
                 "utility-provider layers accepted: none, rxm (<prov>;ofi_rxm), all")
      ->check(CLI::IsMember({"none", "rxm", "all"}))
      ->capture_default_str();
  app.add_option("--dpdk-ports", o.dpdk_ports,
                 "FI_DPDK_PORTS of the dpdk pair (default: a net_memif link of its own)");
  app.add_option("--dpdk-client-ports", o.dpdk_client_ports,
                 "FI_DPDK_PORTS of the dpdk client when it differs from the server's (two NICs "
                 "of this machine cabled together; --dpdk-ports is then the server's)");
  app.add_option("-o,--out-dir", out_dir, "where the JSON, CSV and plots go")
      ->capture_default_str();
  app.add_option("--name", name, "base name of the files (default dpfab-bench-<time>)");
  app.add_option("--plot", plot, "plot format")
      ->check(CLI::IsMember({"svg", "png", "none"}))
      ->capture_default_str();
  app.add_option("--stall-s", stall_s, "kill a provider's pair after this long without progress")
      ->capture_default_str();
  app.add_flag("--no-table", no_table, "do not print the table");
  app.add_flag("--no-floor", no_floor,
               "do not measure the raw-port floor (raw memif frames, next to the dpdk pair)");
  app.add_option("--from-json", from_json,
                 "measure nothing: print the table of a run's JSON file and write its CSV and "
                 "plots next to it")
      ->check(CLI::ExistingFile);
  app.add_option("--netns", netns,
                 "run each pair in two network namespaces joined by veth (root), dpdk on this "
                 "PMD; socket providers use the veth too")
      ->check(CLI::IsMember({"af_packet", "af_xdp"}));
  app.add_option("--role", role, "internal: server or client")
      ->check(CLI::IsMember({"server", "client"}))
      ->group("");
  app.add_option("--oob", oob, "internal: out-of-band socket path")->group("");
  app.add_option("--peer-config", peer_config, "internal: options as JSON")->group("");
  app.add_option("--events-fd", events_fd, "internal: fd for the client's events")->group("");
  CLI11_PARSE(app, argc, argv);

  if (!role.empty()) {
    json j = json::parse(peer_config, nullptr, false);
    if (j.is_discarded()) return 2;
    Options po = j.get<Options>();
    return role == "server" ? run_server(po, oob) : run_client(po, oob, events_fd);
  }
  if (!from_json.empty()) {
    std::ifstream f(from_json);
    json doc = json::parse(f, nullptr, false);
    if (doc.is_discarded() || !doc.contains("records")) {
      std::fprintf(stderr, "dpfab-bench: %s is not a dpfab-bench JSON file\n", from_json.c_str());
      return 2;
    }
    std::string base =
        from_json.ends_with(".json") ? from_json.substr(0, from_json.size() - 5) : from_json;
    return report(doc, base, plot, !no_table, false);
  }
  std::string err;
  if (!parse_sizes(sizes, &o.sizes, &err)) {
    std::fprintf(stderr, "dpfab-bench: %s\n", err.c_str());
    return 2;
  }
  for (const auto& m : o.modes)
    if (!parse_mode(m)) return std::fprintf(stderr, "dpfab-bench: unknown mode %s\n", m.c_str()), 2;
  for (const auto& w : o.workloads)
    if (!parse_workload(w))
      return std::fprintf(stderr, "dpfab-bench: unknown workload %s\n", w.c_str()), 2;
  for (const auto& t : o.ep_types)
    if (t != "dgram" && t != "rdm" && t != "msg")
      return std::fprintf(stderr, "dpfab-bench: unknown endpoint type %s\n", t.c_str()), 2;
  if (o.duration_s <= 0 || o.iterations == 0 || o.timeout_ms <= 0)
    return std::fprintf(stderr, "dpfab-bench: duration, iterations and timeout must be > 0\n"), 2;
  o.providers = expand_providers(o.providers);
  if (!netns.empty()) {  // two namespaces are two hosts: no same-host path between the pair
    auto& p = o.providers;
    p.erase(std::remove(p.begin(), p.end(), std::string(kDpdkShm)), p.end());
  }
  signal(SIGPIPE, SIG_IGN);
  return orchestrate(o, out_dir, name, plot, stall_s, !no_table, netns, !no_floor);
}
