// SPDX-License-Identifier: BSD-3-Clause
//
// Two processes start EAL at the same moment (--no-shconf keeps them apart) and open fabric and
// domain on the two ends of one memif link (role=auto: one becomes server, the other client),
// over a stale socket file left by a dead server. Run it many times at once to shake out races.
#include <gtest/gtest.h>
#include <rdma/fi_domain.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "fi_helpers.h"

using namespace dpfab::test;

namespace {

// Runs in a child: everything through libfabric; returns the exit code.
int child(int go_fd) {
  char c;
  if (read(go_fd, &c, 1) != 1) return 10;  // start together
  InfoPtr info;
  if (getinfo(dpdk_hints().get(), &info) != 0) return 11;
  fi_info* e = first_dpdk(info.get());
  if (!e) return 16;
  fid_fabric* fabric = nullptr;
  if (fi_fabric(e->fabric_attr, &fabric, nullptr) != 0) return 12;
  fid_domain* domain = nullptr;
  if (fi_domain(fabric, e, &domain, nullptr) != 0) return 13;
  if (fi_close(&domain->fid) != 0) return 14;
  if (fi_close(&fabric->fid) != 0) return 15;
  return 0;
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
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (pid_t pid : pids) {
    int status = 0;
    pid_t r = 0;
    while ((r = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (r == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "child " << pid << " did not finish in 30 s";
      continue;
    }
    ASSERT_TRUE(WIFEXITED(status)) << "child " << pid << " died with signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 0)
        << "child " << pid << " failed at step " << WEXITSTATUS(status);
  }
  unlink(sock.c_str());
}
