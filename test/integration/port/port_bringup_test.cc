// SPDX-License-Identifier: BSD-3-Clause
//
// Ports coming up between processes, each process a child of this test (the parent never starts
// EAL) running a DGRAM endpoint through libfabric (wake_peer.h), driven over a socket pair:
//   - memif role=auto recovers from what an exited or killed server leaves: its socket file, and
//     its role lock while it exits (held, nobody listening); the next pair comes up;
//   - a memif socket joins two processes: a third one is refused with a FI_WARN line naming the
//     socket, within a bound, and the first two still exchange datagrams;
//   - a port that cannot come up says why in a FI_WARN line naming the port and the cause;
//   - two net_tap ports whose kernel interfaces are joined in a Linux bridge exchange datagrams
//     with no help (root needed; the bridge is the test's own and removed afterwards).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "process.h"
#include "wake_peer.h"

using namespace dpfab::test;

namespace {

int g_parent_only_fd = -1;  // closed in each child: a lock the parent holds for a dead server

// Child side. Says "name <hex>" once its endpoint is open (or "fail <what>"), then obeys:
// "peer <hex>" inserts the peer; "round" sends a datagram every 50 ms until one arrives, says
// "got", and keeps sending until "done"; "exit" closes and exits.
[[noreturn]] void child_main(int fd) {
  Peer p;
  std::string err = p.open();
  if (!err.empty()) {
    send_line(fd, "fail " + err);
    _exit(1);
  }
  send_line(fd, "name " + p.name());
  std::string cmd;
  uint64_t seq = 0;
  for (;;) {
    if (!read_line(fd, &cmd, 60'000)) _exit(2);
    if (cmd.rfind("peer ", 0) == 0) {
      send_line(fd, p.set_peer(cmd.substr(5)).empty() ? "ok" : "fail set_peer");
    } else if (cmd == "round") {
      // Peer::send drains the CQ while the TX queue is full, and a receive completion it meets
      // there is lost to us (with its posted buffer): keep several receives posted.
      for (int i = 0; i < 32; ++i)
        if (p.post_recv() != 0) _exit(3);
      bool got = false;
      for (;;) {
        p.send(++seq);
        if (p.wait_recv(Peer::Mode::kSpin, 50) == 1) {
          if (!got) send_line(fd, "got");
          got = true;
          if (p.post_recv() != 0) _exit(3);
        }
        if (read_line(fd, &cmd, 0)) {
          if (cmd == "done") break;
          _exit(4);
        }
      }
    } else if (cmd == "exit") {
      p.close();
      _exit(0);
    }
  }
}

// A child process with its own environment; its stderr goes to a file when `log` is given.
struct Child {
  pid_t pid = -1;
  int fd = -1;
  std::string name;  // its endpoint's, once up

  Child(const std::vector<std::string>& env, const std::string& log = "") {
    signal(SIGPIPE, SIG_IGN);  // a child that failed has closed its end
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return;
    pid = fork();
    if (pid == 0) {
      close(sv[0]);
      if (g_parent_only_fd >= 0) close(g_parent_only_fd);
      for (const auto& e : env) putenv(strdup(e.c_str()));
      if (!log.empty()) {  // stderr stays unbuffered: the child ends with _exit
        int f = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (f < 0 || dup2(f, 2) != 2) _exit(5);
        close(f);
      }
      child_main(sv[1]);
    }
    close(sv[1]);
    fd = sv[0];
  }
  ~Child() {
    if (pid > 0) {
      send_line(fd, "exit");
      if (!reap(10'000)) kill(pid, SIGKILL), waitpid(pid, nullptr, 0);
    }
    if (fd >= 0) close(fd);
  }
  // "name ..." within `ms`: true and the name kept, or false with what it said in *said.
  bool up(int ms, std::string* said) {
    if (!read_line(fd, said, ms)) return false;
    if (said->rfind("name ", 0) != 0) return false;
    name = said->substr(5);
    return true;
  }
  bool ask(const std::string& line, const std::string& want, int ms) {
    std::string got;
    return send_line(fd, line) && read_line(fd, &got, ms) && got == want;
  }
  bool reap(int ms) {
    for (int i = 0; i < ms / 10; ++i) {
      if (waitpid(pid, nullptr, WNOHANG) == pid) {
        pid = -1;
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
};

// Introduces the two to each other and has them exchange a datagram both ways within `ms`.
void exchange(Child& a, Child& b, int ms) {
  ASSERT_TRUE(a.ask("peer " + b.name, "ok", 5000));
  ASSERT_TRUE(b.ask("peer " + a.name, "ok", 5000));
  ASSERT_TRUE(send_line(a.fd, "round"));
  ASSERT_TRUE(send_line(b.fd, "round"));
  std::string ga, gb;
  EXPECT_TRUE(read_line(a.fd, &ga, ms) && ga == "got") << "first process received nothing";
  EXPECT_TRUE(read_line(b.fd, &gb, ms) && gb == "got") << "second process received nothing";
  send_line(a.fd, "done");
  send_line(b.fd, "done");
}

std::string slurp(const std::string& path) {
  std::stringstream ss;
  ss << std::ifstream(path).rdbuf();
  return ss.str();
}

std::string tag() { return std::to_string(getpid()); }

// Removes a file when the test ends, however it ends (declared before the children, so after them).
struct RemoveAtEnd {
  std::string path;
  ~RemoveAtEnd() { unlink(path.c_str()); }
};

std::vector<std::string> memif_env(const std::string& sock, const std::string& role = "auto") {
  return {"FI_DPDK_PORTS=net_memif0,role=" + role + ",socket-abstract=no,socket=" + sock,
          "FI_LOG_LEVEL=warn"};
}

// A socket file as a dead server leaves it: bound, nobody listening.
void leave_stale_socket(const std::string& path) {
  int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, path.c_str(), sizeof(sa.sun_path) - 1);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  close(s);
}

}  // namespace

TEST(MemifAuto, NextPairComesUpAfterAServerWasKilled) {
  const std::string sock = "/tmp/dpfab-bringup-killed-" + tag() + ".sock";
  RemoveAtEnd remove_sock{sock};
  {
    Child old(memif_env(sock));
    std::string said;
    ASSERT_TRUE(old.up(30'000, &said)) << said;
    kill(old.pid, SIGKILL);
    ASSERT_TRUE(old.reap(10'000));
  }
  Child a(memif_env(sock)), b(memif_env(sock));
  std::string said;
  ASSERT_TRUE(a.up(30'000, &said)) << said;
  ASSERT_TRUE(b.up(30'000, &said)) << said;
  exchange(a, b, 20'000);
  unlink(sock.c_str());
}

TEST(MemifAuto, NextPairComesUpWhileTheOldServerStillHoldsItsRole) {
  // What an exiting (or SIGKILLed, not yet reaped by the kernel) server leaves for a moment: its
  // socket file, nobody listening, and its role=auto lock (the abstract socket the provider binds
  // while it serves: "dpfab-memif-server:<socket>") still held. It goes with the process.
  const std::string sock = "/tmp/dpfab-bringup-exiting-" + tag() + ".sock";
  RemoveAtEnd remove_sock{sock};
  leave_stale_socket(sock);
  int lock = socket(AF_UNIX, SOCK_DGRAM, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::string name = "dpfab-memif-server:" + sock;
  std::memcpy(sa.sun_path + 1, name.data(), name.size());
  ASSERT_EQ(bind(lock, reinterpret_cast<sockaddr*>(&sa),
                 static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size())),
            0);
  g_parent_only_fd = lock;
  Child a(memif_env(sock)), b(memif_env(sock));
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  close(lock);  // the old server is gone
  g_parent_only_fd = -1;
  std::string said;
  ASSERT_TRUE(a.up(30'000, &said)) << said;
  ASSERT_TRUE(b.up(30'000, &said)) << said;
  exchange(a, b, 20'000);
  unlink(sock.c_str());
}

TEST(MemifAuto, ThirdProcessOnOneSocketIsRefusedAndTheFirstTwoStillWork) {
  const std::string sock = "/tmp/dpfab-bringup-three-" + tag() + ".sock";
  RemoveAtEnd remove_sock{sock};
  const std::string log = "/tmp/dpfab-bringup-three-" + tag() + ".log";
  RemoveAtEnd remove_log{log};
  Child a(memif_env(sock)), b(memif_env(sock));
  std::string said;
  ASSERT_TRUE(a.up(30'000, &said)) << said;
  ASSERT_TRUE(b.up(30'000, &said)) << said;
  exchange(a, b, 20'000);
  {
    auto t0 = std::chrono::steady_clock::now();
    Child c(memif_env(sock), log);
    EXPECT_FALSE(c.up(20'000, &said)) << "a third process came up on one memif socket";
    auto s =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - t0);
    EXPECT_EQ(said.rfind("fail fi_getinfo", 0), 0u)
        << "it said '" << said << "' in " << s.count() << " s";
    EXPECT_TRUE(c.reap(10'000));
    std::string err = slurp(log);
    EXPECT_NE(err.find(":dpdk:"), std::string::npos) << err;
    EXPECT_NE(err.find("<warn>"), std::string::npos) << err;
    EXPECT_NE(err.find("memif socket '" + sock + "' already joins two processes"),
              std::string::npos)
        << err;
    unlink(log.c_str());
  }
  exchange(a, b, 20'000);
  unlink(sock.c_str());
}

TEST(PortDown, FiGetinfoWarnsNamingThePortAndTheCause) {
  const std::string sock = "/tmp/dpfab-bringup-noserver-" + tag() + ".sock";
  RemoveAtEnd remove_sock{sock};
  const std::string log = "/tmp/dpfab-bringup-noserver-" + tag() + ".log";
  RemoveAtEnd remove_log{log};
  leave_stale_socket(sock);
  Child c(memif_env(sock, "client"), log);
  std::string said;
  EXPECT_FALSE(c.up(30'000, &said));
  EXPECT_EQ(said.rfind("fail fi_getinfo", 0), 0u) << said;
  EXPECT_TRUE(c.reap(10'000));
  std::string err = slurp(log);
  bool found = false;
  for (std::istringstream in(err); std::getline(in, said);)
    found |= said.find(":dpdk:") != std::string::npos && said.find("<warn>") != std::string::npos &&
             said.find("port 'net_memif0'") != std::string::npos &&
             said.find("no memif server listens on socket '" + sock + "'") != std::string::npos;
  EXPECT_TRUE(found) << err;
  unlink(log.c_str());
  unlink(sock.c_str());
}

TEST(TapBridge, TwoTapsJoinedInABridgeExchangeDatagrams) {
  if (getuid() != 0) GTEST_SKIP() << "net_tap and bridges need root";
  const std::string id = std::to_string(getpid() % 100000);
  const std::string tap[2] = {"dpbr" + id + "a", "dpbr" + id + "b"};
  const std::string bridge = "dpbr" + id + "br";
  const std::string net = "10.215." + std::to_string(getpid() % 250) + ".";
  auto env = [&](int i) {
    return std::vector<std::string>{
        "FI_DPDK_PORTS=net_tap" + std::to_string(i) + ",iface=" + tap[i],
        "FI_DPDK_IPV4=" + net + std::to_string(i + 1) + "/24", "FI_LOG_LEVEL=warn"};
  };
  auto sh = [](const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); };
  Child a(env(0)), b(env(1));
  std::string said;
  ASSERT_TRUE(a.up(30'000, &said)) << said;
  ASSERT_TRUE(b.up(30'000, &said)) << said;
  ASSERT_EQ(sh("ip link add name " + bridge + " type bridge"), 0);
  bool ok = true;
  for (const auto& t : tap) {
    std::ofstream("/proc/sys/net/ipv6/conf/" + t + "/disable_ipv6") << "1";
    ok &= sh("ip link set dev " + t + " master " + bridge) == 0;
    ok &= sh("ip link set dev " + t + " up") == 0;
  }
  ok &= sh("ip link set dev " + bridge + " up") == 0;
  EXPECT_TRUE(ok) << "setting up bridge " << bridge;
  if (ok) exchange(a, b, 15'000);
  sh("ip link del " + bridge);
}
