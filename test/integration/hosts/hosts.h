// SPDX-License-Identifier: BSD-3-Clause
//
// Several "hosts" on one box, for gtest integration tests of the data path: network namespaces
// joined by a veth pair (two hosts) or by a bridge in a namespace of its own (one, or more than
// two), each host with interface dp0, an address in 10.199.<set>.0/24 and a fixed MAC. hosts.sh
// makes and removes them (one implementation for bash and C++; its header says what af_packet,
// af_xdp and memif need on veth). This header runs it, describes the hosts, gives each host's
// DPDK port spec and FI_DPDK_* environment, and runs commands inside a host.
//
//   using namespace dpfab::test::hosts;
//   Hosts h;                                        // two hosts
//   ASSERT_TRUE(h.ok()) << h.error();
//   RunResult r = h.exec(0, {"ping", "-c1", "-W1", h[1].ip});
//   EXPECT_TRUE(r.ok()) << r.out << r.err;
//   Process server = h.spawn(1, {app, "-s"}, h.provider_env(1, Pmd::af_xdp), log_path);
//   RunResult client = h.exec(0, {app, h[1].ip}, h.provider_env(0, Pmd::af_xdp), 30s);
//
// Cleanup: ~Hosts (which also runs when an ASSERT_* returns early) ends the processes still
// running in the hosts and removes the namespaces. When the test process dies without running
// destructors (a crash, SIGKILL, meson's timeout), a reaper process started with the first set
// removes them within a second. With DPFAB_HOSTS_KEEP=1 a failed test keeps its hosts (and no
// reaper runs) for a look; `hosts.sh cleanup-stale` removes them afterwards.
//
// Thread use: a Hosts object from one thread at a time. Process objects own a child process:
// destroy them before forking threads that call waitpid(-1).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

namespace dpfab::test::hosts {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

/// How a command run to completion ended.
struct RunResult {
  int status = -1;         ///< exit status, 128 + signal when killed, -1 when it could not start
  bool timed_out = false;  ///< killed (SIGKILL to its process group) after the timeout
  std::string out;         ///< everything it wrote to stdout
  std::string err;         ///< everything it wrote to stderr
  bool ok() const { return !timed_out && status == 0; }
};

/// A whole file ("" when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

namespace detail {

/// The environment of a child: ours, with each KEY=VALUE of `extra` added or replacing ours.
inline std::vector<std::string> merged_env(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    std::string key = kv.substr(0, kv.find('='));
    bool replaced = false;
    for (const auto& x : extra) replaced |= x.compare(0, key.size() + 1, key + "=") == 0;
    if (!replaced) env.push_back(std::move(kv));
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

inline std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> p;
  for (auto& s : v) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

inline int decode_status(int w) {
  if (WIFEXITED(w)) return WEXITSTATUS(w);
  if (WIFSIGNALED(w)) return 128 + WTERMSIG(w);
  return -1;
}

/// Forks a child in its own process group running argv (PATH lookup) with environment env,
/// stdin from /dev/null, stdout to out_fd, stderr to err_fd and no other descriptor. Returns
/// its pid, or -1.
/// Everything the child touches is prepared before fork (no allocation after it).
inline pid_t start(std::vector<std::string> argv, std::vector<std::string> env, int out_fd,
                   int err_fd) {
  if (argv.empty()) return -1;
  auto args = c_strings(argv);
  auto envp = c_strings(env);
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    close_range(3, ~0U, 0);  // a descriptor the test left open (a pipe end) is not inherited
    execvpe(args[0], args.data(), envp.data());
    _exit(127);
  }
  if (pid > 0) setpgid(pid, pid);  // also in the parent: no race with a kill(-pid) below
  return pid;
}

/// Reaps pid, waiting until deadline; returns the raw wait status or nullopt.
inline std::optional<int> reap_until(pid_t pid, Clock::time_point deadline) {
  for (;;) {
    int w = 0;
    pid_t r = waitpid(pid, &w, WNOHANG);
    if (r == pid) return w;
    if (r < 0) return std::nullopt;
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(5ms);
  }
}

/// Start time of a process (field 22 of /proc/<pid>/stat, clock ticks since boot), "" if none.
inline std::string start_time(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto paren = stat.rfind(')');
  if (paren == std::string::npos) return "";
  std::istringstream rest(stat.substr(paren + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
  }
  return field;
}

}  // namespace detail

/// Runs argv to completion with `env` added to our environment, capturing stdout and stderr.
/// After `timeout` kills its process group (SIGKILL) and returns with timed_out set. status is
/// -1 (and err says why) when it could not be started.
inline RunResult run(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
                     std::chrono::milliseconds timeout = 30s) {
  RunResult r;
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    for (int fd : {out[0], out[1], err[0], err[1]})
      if (fd >= 0) close(fd);
    r.err = "pipe2 failed";
    return r;
  }
  pid_t pid = detail::start(argv, detail::merged_env(env), out[1], err[1]);
  close(out[1]);
  close(err[1]);
  if (pid < 0) {
    close(out[0]);
    close(err[0]);
    r.err = "fork failed";
    return r;
  }
  auto deadline = Clock::now() + timeout;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left <= 0ms) {
      if (!r.timed_out) {
        r.timed_out = true;
        kill(-pid, SIGKILL);
        deadline = Clock::now() + 2s;  // drain what is left; a stray holder of the pipe ends it
        continue;
      }
      break;
    }
    if (poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  auto w = detail::reap_until(pid, r.timed_out ? Clock::now() + 2s : deadline);
  if (!w) {
    r.timed_out = true;
    kill(-pid, SIGKILL);
    w = detail::reap_until(pid, Clock::now() + 5s);
  }
  r.status = w ? detail::decode_status(*w) : -1;
  return r;
}

/// A child process in its own process group, stopped when the object goes (move-only).
class Process {
 public:
  Process() = default;
  explicit Process(pid_t pid) : pid_(pid) {}
  Process(Process&& o) noexcept : pid_(std::exchange(o.pid_, -1)), status_(o.status_) {}
  Process& operator=(Process&& o) noexcept {
    if (this != &o) {
      stop();
      pid_ = std::exchange(o.pid_, -1);
      status_ = o.status_;
    }
    return *this;
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process() { stop(); }

  /// The child's pid (-1 when it could not be started).
  pid_t pid() const { return pid_; }

  /// Whether it still runs (reaps it, keeping its status, when it has ended).
  bool running() {
    if (pid_ < 0 || status_) return false;
    int w = 0;
    if (waitpid(pid_, &w, WNOHANG) == pid_) status_ = detail::decode_status(w);
    return !status_;
  }

  /// Waits up to `timeout` for it to end; returns its status (exit code or 128 + signal), or
  /// nullopt when it still runs (or never started).
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    if (pid_ < 0) return std::nullopt;
    if (status_) return status_;
    if (auto w = detail::reap_until(pid_, Clock::now() + timeout))
      status_ = detail::decode_status(*w);
    return status_;
  }

  /// Sends `sig` to its process group, then SIGKILL after `grace`; returns its status.
  std::optional<int> stop(int sig = SIGTERM, std::chrono::milliseconds grace = 2s) {
    if (pid_ < 0 || !running()) return status_;
    kill(-pid_, sig);
    if (wait(grace)) return status_;
    kill(-pid_, SIGKILL);
    return wait(5s);
  }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

/// Starts argv in the background with `env` added to our environment, stdout and stderr to
/// `log` (truncated). Process::pid() is -1 when it could not be started.
inline Process spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
                     const std::string& log = "/dev/null") {
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Process();
  pid_t pid = detail::start(argv, detail::merged_env(env), fd, fd);
  close(fd);
  return Process(pid);
}

/// hosts.sh: $DPFAB_HOSTS_SH, else the path meson compiled in.
inline std::string hosts_sh() {
  if (const char* p = std::getenv("DPFAB_HOSTS_SH"); p && *p) return p;
#ifdef DPFAB_HOSTS_SH
  return DPFAB_HOSTS_SH;
#else
  return "hosts.sh";  // not built by meson: set DPFAB_HOSTS_SH
#endif
}

/// The names `ip netns list` shows (first word of each line); empty when it fails.
inline std::vector<std::string> list_netns() {
  std::vector<std::string> names;
  RunResult r = run({"ip", "netns", "list"}, {}, 10s);
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (auto name = line.substr(0, line.find(' ')); !name.empty()) names.push_back(name);
  return names;
}

/// The namespaces this tool made for owner `pid` (any set), from `ip netns list`.
inline std::vector<std::string> namespaces_of(pid_t pid) {
  std::vector<std::string> ours;
  std::string prefix = "dpfab-" + std::to_string(pid) + "-";
  for (auto& n : list_netns())
    if (n.compare(0, prefix.size(), prefix) == 0) ours.push_back(n);
  return ours;
}

/// This process's temporary folder (memif sockets): ${TMPDIR:-/tmp}/dpfab-<pid>-<start>.
inline std::string owner_dir() {
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/dpfab-" + std::to_string(getpid()) + "-" +
         detail::start_time(getpid());
}

/// Starts, once per process, the reaper that removes this process's hosts and folder when it
/// ends: `hosts.sh reap` in a session of its own (a process-group kill of the test does not
/// reach it), with no inherited descriptors (it holds no pipe of meson's open), and not our
/// child (double fork). Skipped with DPFAB_HOSTS_KEEP set.
inline void ensure_reaper() {
  static std::atomic<pid_t> started_for{0};
  pid_t self = getpid();
  if (started_for.load(std::memory_order_relaxed) == self) return;  // one thread uses Hosts
  started_for.store(self, std::memory_order_relaxed);
  if (const char* keep = std::getenv("DPFAB_HOSTS_KEEP"); keep && *keep) return;
  std::vector<std::string> argv = {"bash",
                                   hosts_sh(),
                                   "reap",
                                   "--owner",
                                   std::to_string(self),
                                   "--start",
                                   detail::start_time(self)};
  auto args = detail::c_strings(argv);
  pid_t child = fork();
  if (child == 0) {
    if (fork() != 0) _exit(0);
    setsid();
    int null_fd = open("/dev/null", O_RDWR);
    dup2(null_fd, 0);
    dup2(null_fd, 1);
    dup2(null_fd, 2);
    close_range(3, ~0U, 0);
    execvp(args[0], args.data());
    _exit(127);
  }
  if (child > 0) waitpid(child, nullptr, 0);
}

/// The DPDK poll-mode drivers a host's port can use (on its veth, dp0).
enum class Pmd { af_packet, af_xdp };

inline const char* name(Pmd p) { return p == Pmd::af_packet ? "af_packet" : "af_xdp"; }

/// What to make. Defaults: two hosts, kernel MTU, one queue per veth, addresses on the kernel
/// interfaces, IPv6 off.
struct Options {
  int hosts = 2;            ///< 2: veth pair; 1 or more than 2: veths to a bridge
  int mtu = 0;              ///< 0: the kernel's (1500); af_xdp on veth refuses more than 3498
  int queues = 1;           ///< tx and rx queues per veth end (af_xdp: keep 1)
  bool kernel_ip = true;    ///< give the kernel interface the host's address (for ping)
  bool ipv6 = false;        ///< keep IPv6 (off: no neighbour discovery or MLD frames)
  std::string subnet = "";  ///< "A.B.C" of A.B.C.0/24; "" = 10.199.<set>
};

/// One host.
struct Host {
  int index = 0;
  std::string ns;     ///< network namespace: dpfab-<pid>-<start>-<set>-h<index>
  std::string iface;  ///< its interface, dp0
  std::string ip;     ///< e.g. 10.199.0.1 (on the kernel interface unless !kernel_ip)
  int prefix_len = 24;
  std::string mac;  ///< 02:64:68:<set>:00:<index + 1> (dpfab's memif MACs are 02:64:70:...)
  std::string cidr() const { return ip + "/" + std::to_string(prefix_len); }
};

/// A set of hosts, removed with the object.
class Hosts {
 public:
  /// Makes the hosts; on failure ok() is false, error() says why, and nothing is left behind.
  explicit Hosts(const Options& opt = {}) {
    static std::atomic<int> next_set{0};
    set_ = next_set.fetch_add(1, std::memory_order_relaxed);  // unique within this process
    ensure_reaper();
    std::vector<std::string> argv = {"bash",
                                     hosts_sh(),
                                     "create",
                                     "--owner",
                                     std::to_string(getpid()),
                                     "--set",
                                     std::to_string(set_),
                                     "-n",
                                     std::to_string(opt.hosts),
                                     "--mtu",
                                     std::to_string(opt.mtu),
                                     "--queues",
                                     std::to_string(opt.queues)};
    if (!opt.subnet.empty()) argv.insert(argv.end(), {"--subnet", opt.subnet});
    if (!opt.kernel_ip) argv.push_back("--no-kernel-ip");
    if (opt.ipv6) argv.push_back("--ipv6");
    RunResult r = run(argv, {}, 60s);
    if (!r.ok()) {
      error_ = "hosts.sh create failed (status " + std::to_string(r.status) +
               (r.timed_out ? ", timed out" : "") + "): " + r.err;
      destroy();
      return;
    }
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream w(line);
      std::string kind;
      w >> kind;
      if (kind == "host") {
        Host h;
        w >> h.index >> h.ns >> h.iface >> h.ip >> h.prefix_len >> h.mac;
        hosts_.push_back(h);
      } else if (kind == "bridge") {
        w >> bridge_ns_;
      }
    }
    if (static_cast<int>(hosts_.size()) != opt.hosts) {
      error_ = "hosts.sh create printed " + std::to_string(hosts_.size()) + " hosts: " + r.out;
      destroy();
    }
  }

  Hosts(const Hosts&) = delete;
  Hosts& operator=(const Hosts&) = delete;

  ~Hosts() {
    const char* keep = std::getenv("DPFAB_HOSTS_KEEP");
    if (keep && *keep && ::testing::Test::HasFailure()) {
      std::fprintf(stderr, "DPFAB_HOSTS_KEEP: keeping");
      for (auto& n : namespaces()) std::fprintf(stderr, " %s", n.c_str());
      std::fprintf(stderr, " (hosts.sh cleanup-stale removes them)\n");
      return;
    }
    destroy();
  }

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  int set() const { return set_; }
  size_t size() const { return hosts_.size(); }
  const Host& operator[](size_t i) const { return hosts_.at(i); }
  /// The bridge's namespace; empty for two hosts (a veth pair).
  const std::string& bridge_ns() const { return bridge_ns_; }

  /// Every namespace of the set, the bridge's last.
  std::vector<std::string> namespaces() const {
    std::vector<std::string> v;
    for (auto& h : hosts_) v.push_back(h.ns);
    if (!bridge_ns_.empty()) v.push_back(bridge_ns_);
    return v;
  }

  /// Host i's port spec for FI_DPDK_PORTS (device index `index`, 0 unless a process opens
  /// several ports of one driver).
  std::string port_spec(size_t i, Pmd pmd, int index = 0) const {
    const Host& h = hosts_.at(i);
    std::string dev = std::to_string(index) + ",iface=" + h.iface;
    return pmd == Pmd::af_packet ? "net_af_packet" + dev
                                 : "net_af_xdp" + dev + ",start_queue=0,queue_count=1";
  }

  /// The environment of a provider process in host i: FI_DPDK_PORTS and FI_DPDK_IPV4.
  std::vector<std::string> provider_env(size_t i, Pmd pmd) const {
    return {"FI_DPDK_PORTS=" + port_spec(i, pmd), "FI_DPDK_IPV4=" + hosts_.at(i).cidr()};
  }

  /// Runs argv inside host i (`ip netns exec`) to completion; see run().
  RunResult exec(size_t i, std::vector<std::string> argv, const std::vector<std::string>& env = {},
                 std::chrono::milliseconds timeout = 30s) const {
    return run(in_ns(i, std::move(argv)), env, timeout);
  }

  /// Starts argv inside host i in the background; see spawn(). `ip netns exec` execs the
  /// command, so Process::pid() is the command's own pid; it enters the namespace a moment
  /// after this returns (`ip netns pids` lists it from then on).
  Process spawn(size_t i, std::vector<std::string> argv, const std::vector<std::string>& env = {},
                const std::string& log = "/dev/null") const {
    return hosts::spawn(in_ns(i, std::move(argv)), env, log);
  }

  /// Ends the processes left in the hosts and removes the namespaces (idempotent). Returns
  /// false, with error() set, when hosts.sh destroy failed.
  bool destroy() {
    if (destroyed_) return true;
    destroyed_ = true;
    RunResult r = run({"bash", hosts_sh(), "destroy", "--owner", std::to_string(getpid()), "--set",
                       std::to_string(set_)},
                      {}, 60s);
    if (!r.ok() && error_.empty()) error_ = "hosts.sh destroy failed: " + r.err;
    return r.ok();
  }

 private:
  std::vector<std::string> in_ns(size_t i, std::vector<std::string> argv) const {
    argv.insert(argv.begin(), {"ip", "netns", "exec", hosts_.at(i).ns});
    return argv;
  }

  int set_ = 0;
  std::vector<Host> hosts_;
  std::string bridge_ns_;
  std::string error_;
  bool destroyed_ = false;
};

/// A unique socket path for one memif link between two processes (in any namespaces: the
/// specs use socket-abstract=no). Start the server first (a DPDK 22.11 client fails to start
/// without the socket), or give both dpfab's role=auto. The socket file is removed with the
/// object, and with this process's folder by the reaper.
class MemifPair {
 public:
  MemifPair() {
    static std::atomic<int> next{0};
    ensure_reaper();
    std::string dir = owner_dir();
    mkdir(dir.c_str(), 0700);
    socket_ =
        dir + "/memif-c" + std::to_string(next.fetch_add(1, std::memory_order_relaxed)) + ".sock";
  }
  MemifPair(const MemifPair&) = delete;
  MemifPair& operator=(const MemifPair&) = delete;
  ~MemifPair() { unlink(socket_.c_str()); }

  const std::string& socket() const { return socket_; }
  std::string server_spec(int index = 0) const { return spec(index, "server"); }
  std::string client_spec(int index = 0) const { return spec(index, "client"); }
  /// dpfab's own role=auto: the first process on the socket serves (not for dpdk-testpmd).
  std::string auto_spec(int index = 0) const { return spec(index, "auto"); }

 private:
  std::string spec(int index, const char* role) const {
    return "net_memif" + std::to_string(index) + ",role=" + role +
           ",socket-abstract=no,socket=" + socket_;
  }
  std::string socket_;
};

}  // namespace dpfab::test::hosts
