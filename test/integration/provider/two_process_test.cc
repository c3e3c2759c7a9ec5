// SPDX-License-Identifier: BSD-3-Clause
//
// Two processes start EAL at the same moment (--no-shconf keeps them apart) and open fabric and
// domain on the two ends of one memif link (role=auto: one becomes server, the other client),
// over a stale socket file left by a dead server. Run it many times at once to shake out races.
//
// Without a --file-prefix of the user's, each process gets its own (dpfab-<pid>), hence its own
// telemetry socket, and removes the folder at exit; folders of killed processes are swept.
#include <gtest/gtest.h>
#include <rdma/fi_domain.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "fixture.h"
#include "process.h"
#include "test_util.h"

using namespace dpfab::test;

namespace {

// Runs in a child: everything through libfabric; returns the exit code. With `hold_fd`, it says
// "r" on `ready_fd` once the domain is open and keeps it open until `hold_fd` closes.
int child(int go_fd, int ready_fd = -1, int hold_fd = -1) {
  char c;
  if (read(go_fd, &c, 1) != 1) return 10;  // start together
  Domain d;
  if (d.open_fabric(dpdk_hints(FI_EP_UNSPEC).get()) != 0) return 11;  // getinfo, fi_fabric
  if (d.open_domain() != 0) return 13;
  if (hold_fd >= 0) {
    if (write(ready_fd, "r", 1) != 1) return 17;
    if (read(hold_fd, &c, 1) != 0) return 18;  // until the parent closes its end
  }
  if (d.close() != 0) return 14;  // fi_close of the domain, then of the fabric
  return 0;
}

bool exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

}  // namespace

TEST(TwoProcesses, StartEalAtOnceOnOneMemifLink) {
  std::string sock = "/tmp/dpfab-two-proc-" + std::to_string(getpid()) + ".sock";
  setenv("FI_DPDK_PORTS", ("net_memif0,role=auto,socket-abstract=no,socket=" + sock).c_str(), 1);
  {
    // A socket file left behind by a server that died: the new server must not trip over it.
    int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strncpy(sa.sun_path, sock.c_str(), sizeof(sa.sun_path) - 1);
    ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    close(s);
  }
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  pid_t pids[2];
  for (auto& pid : pids) {
    pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(go[1]);
      _exit(child(go[0]));
    }
  }
  close(go[0]);
  ASSERT_EQ(write(go[1], "gg", 2), 2);
  close(go[1]);
  for (pid_t pid : pids)
    EXPECT_EQ(wait_child(pid, std::chrono::seconds(30)), 0)
        << "child " << pid << " failed at that step (-1: a signal, or not done in 30 s)";
  unlink(sock.c_str());
}

TEST(TwoProcesses, EachHasItsOwnTelemetrySocketAndRemovesItsRuntimeFolder) {
  // EAL's runtime base folder, as DPDK 22.11 picks it.
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  const std::string base =
      getuid() == 0 ? "/var/run/dpdk" : std::string(xdg && *xdg ? xdg : "/tmp") + "/dpdk";
  std::string sock = "/tmp/dpfab-two-proc-tel-" + std::to_string(getpid()) + ".sock";
  setenv("FI_DPDK_PORTS", ("net_memif0,role=auto,socket-abstract=no,socket=" + sock).c_str(), 1);
  // What a killed process left: a folder named for a pid that no longer runs.
  pid_t dead = fork();
  ASSERT_GE(dead, 0);
  if (dead == 0) _exit(0);
  ASSERT_EQ(wait_child(dead, std::chrono::seconds(5)), 0);
  const std::string stale = base + "/dpfab-" + std::to_string(dead);
  mkdir(base.c_str(), 0700);
  ASSERT_EQ(mkdir(stale.c_str(), 0700), 0) << stale;
  std::ofstream(stale + "/dpdk_telemetry.v2") << "left over";

  int go[2], ready[2], hold[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(hold), 0);
  pid_t pids[2];
  for (auto& pid : pids) {
    pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(go[1]);
      close(ready[0]);
      close(hold[1]);
      std::exit(child(go[0], ready[1], hold[0]));  // exit, not _exit: exit handlers clean up
    }
  }
  close(go[0]);
  close(ready[1]);
  close(hold[0]);
  ASSERT_EQ(write(go[1], "gg", 2), 2);
  close(go[1]);
  int up = 0;
  for (char c; up < 2 && fd_readable(ready[0], 30'000) && read(ready[0], &c, 1) == 1;) ++up;
  EXPECT_EQ(up, 2) << "the children did not open their domains in 30 s";
  if (up == 2) {
    for (pid_t pid : pids) {
      std::string path = base + "/dpfab-" + std::to_string(pid) + "/dpdk_telemetry.v2";
      std::string reply = telemetry_query(path, "/dpfab/stats");
      EXPECT_NE(reply.find("\"/dpfab/stats\":{"), std::string::npos)
          << "process " << pid << " at " << path << " answered: '" << reply << "'";
    }
    EXPECT_FALSE(exists(stale)) << "the folder of an exited process was not swept";
  }
  close(hold[1]);
  close(ready[0]);
  for (pid_t pid : pids) {
    EXPECT_EQ(wait_child(pid, std::chrono::seconds(30)), 0) << "child " << pid;
    EXPECT_FALSE(exists(base + "/dpfab-" + std::to_string(pid)))
        << "process " << pid << " left its runtime folder behind";
  }
  unlink(sock.c_str());
  rmdir(stale.c_str());
}
