// SPDX-License-Identifier: BSD-3-Clause
//
// The link between two test processes for the wakeup tests and measurements (wakeup_test.cc,
// test/perf/wake_latency.cc): FI_DPDK_* settings of each process per PMD, and the set-up and
// clean-up around them (root needed for tap and virtio):
//   tap     each process makes its own net_tap; join() puts the two kernel interfaces in a Linux
//           bridge of the test's own (as they are: the provider gives the kernel side of a tap
//           a MAC other than the port's, which a bridge would keep for the host);
//   virtio  net_vhost in process 0, net_virtio_user in process 1, over hugepages the link
//           reserves (/proc/sys/vm/nr_hugepages) and mounts (hugetlbfs), with
//           --single-file-segments; undone in the destructor;
//   memif   net_memif server (process 0) and client (process 1).
//   shm     no port at all: each process gets the placeholder domain "shm", and the two reach
//           each other through the same-host path only (fi_dpdk(7) "Same-host peers").
// The same-host path is off (FI_DPDK_SHM=off, meson's fi_env) but with "shm". Each process gets its
// own EAL --file-prefix, hence its own telemetry socket.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace dpfab::test {

inline bool write_file(const std::string& path, const std::string& v) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  bool ok = std::fputs(v.c_str(), f) >= 0;
  return std::fclose(f) == 0 && ok;
}
inline std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}
inline int sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

/// What a Link of a killed test process left in /tmp (its destructor never ran): the hugetlbfs
/// mount and files of a virtio link, with the 100 pages it reserved, and the link sockets. Only
/// leftovers over ten minutes old whose id names no live process (a link lasts seconds; the id is
/// the pid modulo 100000, so a live one may hide behind another: it is then left alone).
inline void reclaim_stale_links() {
  DIR* d = opendir("/tmp");
  if (!d) return;
  const time_t old = time(nullptr) - 600;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    const bool huge = name.rfind("dpfab-wk-huge-", 0) == 0;
    const bool sock =
        name.rfind("dpfab-wk-memif-", 0) == 0 || name.rfind("dpfab-wk-vhost-", 0) == 0;
    if (!huge && !sock) continue;
    const std::string path = "/tmp/" + name;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0 || st.st_mtime > old) continue;
    const long id = std::strtol(name.c_str() + name.find_first_of("0123456789"), nullptr, 10);
    if (id <= 0 || kill(static_cast<pid_t>(id), 0) == 0 || errno != ESRCH) continue;
    if (sock) {
      unlink(path.c_str());
      continue;
    }
    // Its files go with the mount (MNT_DETACH); then the pages it reserved.
    const bool was_mounted = umount2(path.c_str(), MNT_DETACH) == 0;
    if (rmdir(path.c_str()) != 0 || !was_mounted) continue;
    std::ifstream f("/proc/sys/vm/nr_hugepages");
    long pages = 0;
    f >> pages;
    f.close();
    FILE* w = std::fopen("/proc/sys/vm/nr_hugepages", "w");
    if (w) {
      std::fprintf(w, "%ld", pages >= 100 ? pages - 100 : 0);
      std::fclose(w);
    }
  }
  closedir(d);
}

class Link {
 public:
  Link(const std::string& pmd, bool lcores) {
    reclaim_stale_links();
    const std::string id = std::to_string(getpid() % 100000);
    base_eal_ = "--no-huge --no-shconf --no-pci -m 48 --log-level=*:warning";
    if (pmd == "tap") {
      tap_[0] = "dpwk" + id + "a";
      tap_[1] = "dpwk" + id + "b";
      bridge_ = "dpwk" + id + "br";
      sequential_ = true;
      for (int i = 0; i < 2; ++i) {
        env_[i].push_back("FI_DPDK_PORTS=net_tap" + std::to_string(i) + ",iface=" + tap_[i]);
        env_[i].push_back("FI_DPDK_IPV4=10.213." + std::to_string(getpid() % 250) + "." +
                          std::to_string(i + 1) + "/24");
        env_[i].push_back("FI_DPDK_EAL_ARGS=" + base_eal_ + " --file-prefix=" + prefix(i));
      }
    } else if (pmd == "virtio") {
      sequential_ = true;
      huge_dir_ = "/tmp/dpfab-wk-huge-" + id;
      sock_ = "/tmp/dpfab-wk-vhost-" + id + ".sock";
      old_pages_ = read_file("/proc/sys/vm/nr_hugepages");
      long want = std::stol(old_pages_.empty() ? "0" : old_pages_) + 100;
      if (!write_file("/proc/sys/vm/nr_hugepages", std::to_string(want))) {
        error_ = "cannot reserve hugepages (root needed)";
        return;
      }
      raised_pages_ = true;
      mkdir(huge_dir_.c_str(), 0700);
      if (mount("nodev", huge_dir_.c_str(), "hugetlbfs", 0, nullptr) != 0) {
        error_ = "cannot mount hugetlbfs on " + huge_dir_ + ": " + std::strerror(errno);
        return;
      }
      mounted_ = true;
      const char* spec[2] = {"net_vhost0,iface=", "net_virtio_user0,queues=1,path="};
      for (int i = 0; i < 2; ++i) {
        env_[i].push_back(std::string("FI_DPDK_PORTS=") + spec[i] + sock_ +
                          (i == 0 ? ",queues=1" : ""));
        env_[i].push_back("FI_DPDK_EAL_ARGS=--huge-dir=" + huge_dir_ +
                          " --single-file-segments -m 64 --no-pci --file-prefix=" + prefix(i) +
                          " --log-level=*:warning");
      }
    } else if (pmd == "shm") {
      for (int i = 0; i < 2; ++i) {
        env_[i].push_back("FI_DPDK_SHM=on");
        env_[i].push_back("FI_DPDK_PORTS=");
        env_[i].push_back("FI_DPDK_EAL_ARGS=" + base_eal_ + " --file-prefix=" + prefix(i));
      }
    } else {
      sock_ = "/tmp/dpfab-wk-memif-" + id + ".sock";
      const char* role[2] = {"server", "client"};
      for (int i = 0; i < 2; ++i) {
        env_[i].push_back(std::string("FI_DPDK_PORTS=net_memif0,role=") + role[i] +
                          ",socket-abstract=no,socket=" + sock_);
        env_[i].push_back("FI_DPDK_EAL_ARGS=" + base_eal_ + " --file-prefix=" + prefix(i));
      }
      sequential_ = true;
    }
    if (lcores) {
      env_[0].push_back("FI_DPDK_LCORES=1");
      env_[1].push_back("FI_DPDK_LCORES=0");
    }
  }
  ~Link() {
    if (!bridge_.empty()) sh("ip link del " + bridge_);
    if (mounted_) {
      // The children are gone; their hugepage files go with the mount.
      umount2(huge_dir_.c_str(), MNT_DETACH);
    }
    if (!huge_dir_.empty()) rmdir(huge_dir_.c_str());
    if (raised_pages_) write_file("/proc/sys/vm/nr_hugepages", old_pages_);
    if (!sock_.empty()) unlink(sock_.c_str());
    for (int i = 0; i < 2; ++i) sh("rm -rf /run/dpdk/" + prefix(i));  // EAL's runtime folders
  }
  /// Each process's EAL file prefix: its own runtime folder and telemetry socket.
  static std::string prefix(int i) {
    return "dpwk" + std::to_string(getpid() % 100000) + (i == 0 ? "a" : "b");
  }
  static std::string telemetry_socket(int i) {
    return "/run/dpdk/" + prefix(i) + "/dpdk_telemetry.v2";
  }
  const std::string& error() const { return error_; }
  const std::vector<std::string>& env(int i) const { return env_[i]; }
  bool sequential() const { return sequential_; }
  void add_env(const std::string& e) {
    for (auto& v : env_) v.push_back(e);
  }
  /// Called once both processes have their ports: joins the taps.
  std::string join() {
    if (bridge_.empty()) return "";
    if (sh("ip link add name " + bridge_ + " type bridge") != 0) return "ip link add bridge failed";
    write_file("/proc/sys/net/ipv6/conf/" + bridge_ + "/disable_ipv6", "1");
    for (int i = 0; i < 2; ++i) {
      const std::string& t = tap_[i];
      write_file("/proc/sys/net/ipv6/conf/" + t + "/disable_ipv6", "1");
      // The provider gives the kernel side of each tap a MAC of its own: no set-up here.
      if (sh("ip link set dev " + t + " master " + bridge_) != 0) return "enslaving " + t;
      sh("ip link set dev " + t + " up");
    }
    if (sh("ip link set dev " + bridge_ + " up") != 0) return "bridge up failed";
    return "";
  }

 private:
  std::string base_eal_, error_, bridge_, tap_[2], sock_, huge_dir_, old_pages_;
  std::vector<std::string> env_[2];
  bool sequential_ = false, raised_pages_ = false, mounted_ = false;
};

}  // namespace dpfab::test
