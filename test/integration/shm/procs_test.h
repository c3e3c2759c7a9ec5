// SPDX-License-Identifier: BSD-3-Clause
//
// Driving shm-peer processes (shm_peer.cc) from a gtest: each one a child with its stdin and
// stdout on pipes (optionally inside a network namespace, `ip netns exec`), answering one line
// per command.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace dpfab::test::shm {

using namespace std::chrono_literals;

class PeerProc {
 public:
  PeerProc() = default;
  PeerProc(const PeerProc&) = delete;
  PeerProc& operator=(const PeerProc&) = delete;
  ~PeerProc() { kill_now(); }

  /// Starts `exe <index>` with `env` added to ours (in namespace `ns` when given); waits for its
  /// "ready" line (at most `wait`). False (and error()) when it did not come.
  bool start(const std::string& exe, unsigned index, const std::vector<std::string>& env,
             const std::string& ns = "", std::chrono::milliseconds wait = 60s) {
    return spawn(exe, index, env, ns) && ready(wait);
  }
  /// start() in two halves: the child runs (spawn), then its "ready" line is read (ready), so
  /// that many processes start at once.
  bool spawn(const std::string& exe, unsigned index, const std::vector<std::string>& env,
             const std::string& ns = "") {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return fail("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      for (const auto& e : env) putenv(strdup(e.c_str()));
      const std::string idx = std::to_string(index);
      if (ns.empty()) {
        execl(exe.c_str(), exe.c_str(), idx.c_str(), nullptr);
      } else {
        execlp("ip", "ip", "netns", "exec", ns.c_str(), exe.c_str(), idx.c_str(), nullptr);
      }
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_ = in[1];
    from_ = out[0];
    return true;
  }
  bool ready(std::chrono::milliseconds wait = 60s) {
    std::string l = line(wait);
    if (l.rfind("ready ", 0) != 0) return fail("no ready line: '" + l + "'");
    std::istringstream s(l.substr(6));
    std::string kv;
    while (s >> kv) {
      const auto eq = kv.find('=');
      if (eq != std::string::npos) fields_[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    return true;
  }

  pid_t pid() const { return pid_; }
  const std::string& name() { return fields_["name"]; }
  const std::string& domain() { return fields_["domain"]; }
  const std::string& error() const { return error_; }

  bool send(const std::string& cmd) {
    const std::string l = cmd + "\n";
    return to_ >= 0 && write(to_, l.data(), l.size()) == static_cast<ssize_t>(l.size());
  }
  /// The next line of its stdout ("" at the deadline or end of file). Lines starting with
  /// "fatal" end the wait too.
  std::string line(std::chrono::milliseconds wait = 60s) {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    for (;;) {
      if (const auto nl = buf_.find('\n'); nl != std::string::npos) {
        std::string l = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return l;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || from_ < 0) return "";
      pollfd p{from_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char tmp[4096];
      const ssize_t n = read(from_, tmp, sizeof(tmp));
      if (n <= 0) return "";
      buf_.append(tmp, static_cast<size_t>(n));
    }
  }
  /// Sends `cmd` and returns the answer line.
  std::string ask(const std::string& cmd, std::chrono::milliseconds wait = 60s) {
    return send(cmd) ? line(wait) : "";
  }

  /// SIGKILL, and reaps it.
  void kill_now() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
    close_fds();
  }
  /// "quit", then waits for it (at most `wait`). Its exit status (-1: killed at the deadline).
  int quit(std::chrono::milliseconds wait = 30s) {
    if (pid_ <= 0) return -1;
    send("quit");
    const auto deadline = std::chrono::steady_clock::now() + wait;
    int st = 0;
    while (waitpid(pid_, &st, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill_now();
        return -1;
      }
      usleep(10'000);
    }
    pid_ = -1;
    close_fds();
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }

 private:
  bool fail(const std::string& e) {
    error_ = e;
    return false;
  }
  void close_fds() {
    if (to_ >= 0) close(to_);
    if (from_ >= 0) close(from_);
    to_ = from_ = -1;
  }
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  std::string buf_, error_;
  std::map<std::string, std::string> fields_;
};

/// The value of `key=` in a "done" line ("" when absent).
inline std::string field(const std::string& line, const std::string& key) {
  std::istringstream s(line);
  std::string kv;
  while (s >> kv)
    if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
  return "";
}

/// Entries of /dev/shm whose name contains "dpfab" (what a process of ours could leave there).
inline std::vector<std::string> dev_shm_residue() {
  std::vector<std::string> v;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::strstr(e->d_name, "dpfab")) v.emplace_back(e->d_name);
    closedir(d);
  }
  return v;
}

/// Open fds of process `pid`.
inline size_t fd_count(pid_t pid) {
  size_t n = 0;
  if (DIR* d = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str())) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

/// What process `pid` has mapped of the same-host path's link segments (memfd "dpfab-shm-link"):
/// bytes mapped and its proportional share of their resident pages (smaps Pss), in bytes.
struct LinkMemory {
  size_t mappings = 0, bytes = 0, pss = 0;
};
inline LinkMemory link_memory(pid_t pid) {
  LinkMemory m;
  std::ifstream f("/proc/" + std::to_string(pid) + "/smaps");
  std::string l;
  bool in = false;
  while (std::getline(f, l)) {
    const bool header =
        !l.empty() && std::isxdigit(static_cast<unsigned char>(l[0])) && l.find('-') < l.find(' ');
    if (header) {
      in = l.find("dpfab-shm-link") != std::string::npos;
      if (in) {
        ++m.mappings;
        const auto dash = l.find('-'), sp = l.find(' ');
        m.bytes += std::stoull(l.substr(dash + 1, sp - dash - 1), nullptr, 16) -
                   std::stoull(l.substr(0, dash), nullptr, 16);
      }
    } else if (in && l.rfind("Pss:", 0) == 0) {
      m.pss += std::stoull(l.substr(4)) * 1024;
    }
  }
  return m;
}

}  // namespace dpfab::test::shm
