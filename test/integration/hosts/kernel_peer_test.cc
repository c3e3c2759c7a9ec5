// SPDX-License-Identifier: BSD-3-Clause
//
// The provider on a plain IP network: its peer is the Linux kernel of another host (network
// namespace) on the other end of a veth, with no dpfab in it.
//   - ARP: fi_av_insert of sockaddr_in addresses the kernel owns resolves each to the kernel
//     interface's MAC (the kernel answers our requests); an address nobody owns fails with
//     FI_EHOSTUNREACH within the bound (fabtests' fi_av_test inserts six consecutive addresses
//     the same way); fi_getinfo(node, service) gives a dest_addr that inserts the same way.
//   - IPv4/UDP: a datagram sent with fi_send reaches a kernel UDP socket (the kernel checks the
//     IPv4 header and UDP checksums and drops a bad one), and what the socket echoes back arrives
//     in our CQ with FI_SOURCE naming the kernel's address.
// The provider runs in host 0 (this binary re-executed there with --probe), on net_af_packet
// and on net_af_xdp; host 1 is the kernel with extra addresses and a UDP echo socket (python3).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "fixture.h"
#include "hosts.h"

using namespace dpfab::test;
using namespace dpfab::test::hosts;

namespace {

std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// ---- the probe: runs inside host 0, prints one line per finding, exits 0 when it could run ----

// Fabric, domain and table AV (native addresses: lookup shows the MAC) of the dpdk DGRAM entry
// with FI_SOURCE (fixture.h); probe_echo adds an endpoint.
struct Res : Domain {
  fid_av* av = nullptr;
  Endpoint e;
  ~Res() {
    e.close();
    close_fid(&av);
  }
};

int open_res(Res& r, const char* node, const char* service) {
  if (int ret = r.open(dpdk_hints(FI_EP_DGRAM, FI_MSG | FI_SOURCE).get(), node, service))
    return ret;
  return r.open_av(&r.av);
}

// The IPv4 addresses argv[0..argc) as sockaddr_in with UDP port 7 (the probes' peer service).
bool to_sockaddrs(int argc, char** argv, std::vector<sockaddr_in>* out) {
  out->assign(static_cast<size_t>(argc), sockaddr_in{});
  for (int i = 0; i < argc; ++i) {
    sockaddr_in& a = (*out)[static_cast<size_t>(i)];
    a.sin_family = AF_INET;
    a.sin_port = htons(7);
    if (inet_pton(AF_INET, argv[i], &a.sin_addr) != 1) return false;
  }
  return true;
}

std::string mac_of(const uint8_t* native) {  // bytes 2..7 of the native address
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%02x:%02x:%02x:%02x:%02x:%02x", native[2], native[3], native[4],
                native[5], native[6], native[7]);
  return buf;
}

// --probe resolve IP...: inserts each as a sockaddr_in, one call for all (FI_SYNC_ERR), prints
// "addr IP inserted MAC" or "addr IP error N", then the same for fi_getinfo(IP0, "7")'s dest_addr.
int probe_resolve(int argc, char** argv) {
  Res r;
  int ret = open_res(r, nullptr, nullptr);
  if (ret) return std::printf("open %d\n", ret), 2;
  const size_t n = static_cast<size_t>(argc);
  std::vector<sockaddr_in> addrs;
  if (!to_sockaddrs(argc, argv, &addrs)) return 2;
  std::vector<fi_addr_t> fa(n, FI_ADDR_NOTAVAIL);
  std::vector<int> errs(n, 0);
  const auto t0 = Clock::now();
  int inserted = fi_av_insert(r.av, addrs.data(), n, fa.data(), FI_SYNC_ERR, errs.data());
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  std::printf("inserted %d in %lld ms\n", inserted, static_cast<long long>(ms));
  for (size_t i = 0; i < n; ++i) {
    if (errs[i] || fa[i] == FI_ADDR_NOTAVAIL) {
      std::printf("addr %s error %d\n", argv[i], errs[i]);
      continue;
    }
    uint8_t native[16];
    size_t len = sizeof(native);
    if (fi_av_lookup(r.av, fa[i], native, &len)) return 2;
    std::printf("addr %s inserted %s\n", argv[i], mac_of(native).c_str());
  }
  // fi_getinfo(node, service): dest_addr without a MAC, learned when inserted.
  Res g;
  if ((ret = open_res(g, argv[0], "7"))) return std::printf("getinfo %d\n", ret), 2;
  fi_addr_t f = FI_ADDR_NOTAVAIL;
  if (fi_av_insert(g.av, g.info->dest_addr, 1, &f, 0, nullptr) != 1) {
    std::printf("dest_addr error\n");
  } else {
    uint8_t native[16];
    size_t len = sizeof(native);
    if (fi_av_lookup(g.av, f, native, &len)) return 2;
    std::printf("dest_addr inserted %s\n", mac_of(native).c_str());
  }
  return 0;
}

// --probe resolve-async IP...: the same through an FI_EVENT AV, the application blocked in
// fi_eq_sread while the ARP replies come in (nobody else polls the port: manual progress).
// Prints "complete N in MS ms" and one "error POS ERR" per error entry.
int probe_resolve_async(int argc, char** argv) {
  Res r;
  int ret = open_res(r, nullptr, nullptr);
  if (ret) return std::printf("open %d\n", ret), 2;
  fi_close(&r.av->fid);
  r.av = nullptr;
  fi_eq_attr eq_attr{};
  eq_attr.wait_obj = FI_WAIT_UNSPEC;
  fid_eq* eq = nullptr;
  if (fi_eq_open(r.fabric, &eq_attr, &eq, nullptr)) return 2;
  fi_av_attr attr{};
  attr.type = FI_AV_MAP;
  attr.flags = FI_EVENT;
  if (fi_av_open(r.domain, &attr, &r.av, nullptr) || fi_av_bind(r.av, &eq->fid, 0)) return 2;
  const size_t n = static_cast<size_t>(argc);
  std::vector<sockaddr_in> addrs;
  if (!to_sockaddrs(argc, argv, &addrs)) return 2;
  std::vector<fi_addr_t> fa(n, FI_ADDR_NOTAVAIL);
  int ctx = 0;
  const auto t0 = Clock::now();
  if ((ret = fi_av_insert(r.av, addrs.data(), n, fa.data(), 0, &ctx)) != 0)
    return std::printf("insert %d\n", ret), 2;
  for (;;) {
    uint32_t event = 0;
    fi_eq_entry e{};
    ssize_t got = fi_eq_sread(eq, &event, &e, sizeof(e), 10000, 0);
    if (got == -FI_EAVAIL) {
      fi_eq_err_entry err{};
      fi_eq_readerr(eq, &err, 0);
      std::printf("error %llu %d\n", static_cast<unsigned long long>(err.data), err.err);
      continue;
    }
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    if (got != static_cast<ssize_t>(sizeof(e)) || event != FI_AV_COMPLETE)
      std::printf("sread %zd after %lld ms\n", got, static_cast<long long>(ms));
    else
      std::printf("complete %llu in %lld ms\n", static_cast<unsigned long long>(e.data),
                  static_cast<long long>(ms));
    break;
  }
  fi_close(&r.av->fid);
  r.av = nullptr;
  fi_close(&eq->fid);
  return 0;
}

// --probe echo IP PORT: sends "dpfab says hello" to IP:PORT (a kernel UDP echo socket) and waits
// up to 5 s for the echo; prints "echo <text> from <source ip:port>".
int probe_echo(char* ip, char* port) {
  Res r;
  int ret = open_res(r, nullptr, nullptr);
  if (ret) return std::printf("open %d\n", ret), 2;
  EpOptions o;
  o.cq_size = 0;  // the provider's default
  o.av = r.av;
  if (r.e.open(r, o)) return 2;
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(static_cast<uint16_t>(std::stoi(port)));
  if (inet_pton(AF_INET, ip, &peer.sin_addr) != 1) return 2;
  fi_addr_t dest = FI_ADDR_NOTAVAIL;
  if (fi_av_insert(r.av, &peer, 1, &dest, 0, nullptr) != 1) return std::printf("insert\n"), 2;
  char rx[256] = {};
  static const char kHello[] = "dpfab says hello";
  if (fi_recv(r.e.ep, rx, sizeof(rx), nullptr, FI_ADDR_UNSPEC, rx)) return 2;
  const auto until = Clock::now() + 5s;
  ssize_t s;
  while ((s = fi_send(r.e.ep, kHello, sizeof(kHello), nullptr, dest, nullptr)) == -FI_EAGAIN &&
         Clock::now() < until) {
    fi_cq_entry e;
    fi_cq_read(r.e.cq, &e, 0);
  }
  if (s) return std::printf("send %zd\n", s), 2;
  while (Clock::now() < until) {
    fi_cq_data_entry e{};
    fi_addr_t src = FI_ADDR_NOTAVAIL;
    ssize_t n = fi_cq_readfrom(r.e.cq, &e, 1, &src);
    if (n == 1 && e.op_context == rx) {
      sockaddr_in from{};
      uint8_t native[16];
      size_t len = sizeof(native);
      if (src == FI_ADDR_NOTAVAIL || fi_av_lookup(r.av, src, native, &len))
        return std::printf("echo %.*s from unknown\n", static_cast<int>(e.len), rx), 0;
      std::memcpy(&from.sin_addr, native + 8, 4);
      std::memcpy(&from.sin_port, native + 12, 2);
      char buf[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &from.sin_addr, buf, sizeof(buf));
      std::printf("echo %.*s from %s:%u\n", static_cast<int>(e.len), rx, buf, ntohs(from.sin_port));
      return 0;
    }
    if (n < 0 && n != -FI_EAGAIN) {
      fi_cq_err_entry err{};
      fi_cq_readerr(r.e.cq, &err, 0);
      std::printf("cq error %d\n", err.err);
      return 2;
    }
  }
  std::printf("no echo\n");
  return 0;
}

// ---- the tests -----------------------------------------------------------------------------

class KernelPeer : public ::testing::TestWithParam<Pmd> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(h_.ok()) << h_.error();
    subnet_ = h_[1].ip.substr(0, h_[1].ip.rfind('.') + 1);
  }
  RunResult probe(std::vector<std::string> args) {
    args.insert(args.begin(), {self_exe(), "--probe"});
    auto env = h_.provider_env(0, GetParam());
    env.push_back("FI_DPDK_MBUFS=4095");  // af_xdp: more than its 2048-buffer fill ring
    return h_.exec(0, args, env, 60s);
  }
  Hosts h_;
  std::string subnet_;  // "10.199.<set>."
};

// fi_av(3): the kernel's six addresses are inserted with its interface's MAC; 99 fails.
TEST_P(KernelPeer, SockaddrInsertResolvesTheKernelsAddressesByArp) {
  std::vector<std::string> args = {"resolve"};
  for (int i = 10; i < 16; ++i) {
    const std::string ip = subnet_ + std::to_string(i);
    RunResult add = h_.exec(1, {"ip", "addr", "add", ip + "/24", "dev", h_[1].iface});
    ASSERT_TRUE(add.ok()) << add.err;
    args.push_back(ip);
  }
  args.push_back(subnet_ + "99");  // nobody
  RunResult r = probe(args);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("inserted 6 in"), std::string::npos) << r.out;
  for (int i = 10; i < 16; ++i)
    EXPECT_NE(r.out.find("addr " + subnet_ + std::to_string(i) + " inserted " + h_[1].mac),
              std::string::npos)
        << r.out;
  EXPECT_NE(r.out.find("addr " + subnet_ + "99 error " + std::to_string(FI_EHOSTUNREACH)),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("dest_addr inserted " + h_[1].mac), std::string::npos) << r.out;
}

// fi_av(3) FI_EVENT: the insertion completes on the EQ while the application sleeps in
// fi_eq_sread (the EQ's wait polls the port for the ARP replies); the unowned address is an error
// entry with its position, then FI_AV_COMPLETE counts the six inserted.
TEST_P(KernelPeer, AsyncInsertCompletesWhileTheApplicationSleepsOnTheEq) {
  std::vector<std::string> args = {"resolve-async"};
  for (int i = 20; i < 26; ++i) {
    const std::string ip = subnet_ + std::to_string(i);
    RunResult add = h_.exec(1, {"ip", "addr", "add", ip + "/24", "dev", h_[1].iface});
    ASSERT_TRUE(add.ok()) << add.err;
    args.push_back(ip);
  }
  args.push_back(subnet_ + "99");  // nobody: position 6
  RunResult r = probe(args);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("error 6 " + std::to_string(FI_EHOSTUNREACH)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("complete 6 in"), std::string::npos) << r.out;
}

// A kernel UDP socket receives our datagram (checksums verified by the kernel) and its echo
// comes back to our endpoint with FI_SOURCE naming the kernel socket.
TEST_P(KernelPeer, KernelUdpSocketEchoesOurDatagram) {
  const std::string script =
      "import socket\n"
      "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
      "s.bind(('" +
      h_[1].ip +
      "', 7007))\n"
      "s.settimeout(30)\n"
      "print('ready', flush=True)\n"
      "data, peer = s.recvfrom(2048)\n"
      "s.sendto(data, peer)\n"
      "print('echoed', len(data), flush=True)\n";
  const std::string log = "/tmp/dpfab-kernel-echo-" + std::to_string(getpid()) + ".log";
  // A veth hands the kernel's frames over with the UDP checksum left to an offload that never
  // happens (CHECKSUM_PARTIAL: only the pseudo-header sum is in the field); af_packet and af_xdp
  // pass that on as it is, and our decoder rightly counts it as a bad checksum. A NIC would fill
  // it in; here the kernel must: transmit checksum offload off on host 1's end.
  RunResult off = h_.exec(1, {"ethtool", "-K", h_[1].iface, "tx", "off"});
  ASSERT_TRUE(off.ok()) << off.out << off.err;
  Process echo = h_.spawn(1, {"python3", "-c", script}, {}, log);
  ASSERT_GT(echo.pid(), 0);
  for (int i = 0; i < 100 && read_file(log).find("ready") == std::string::npos; ++i)
    std::this_thread::sleep_for(50ms);
  RunResult r = probe({"echo", h_[1].ip, "7007"});
  auto status = echo.wait(10s);
  const std::string echoed = read_file(log);
  unlink(log.c_str());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("echo dpfab says hello"), std::string::npos) << r.out << echoed;
  EXPECT_NE(r.out.find("from " + h_[1].ip + ":7007"), std::string::npos) << r.out;
  ASSERT_TRUE(status.has_value()) << echoed;
  EXPECT_EQ(*status, 0) << echoed;
}

INSTANTIATE_TEST_SUITE_P(Pmds, KernelPeer, ::testing::Values(Pmd::af_packet, Pmd::af_xdp),
                         [](const auto& info) { return std::string(name(info.param)); });

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "--probe") == 0) {
    if (std::strcmp(argv[2], "resolve") == 0 && argc >= 4) return probe_resolve(argc - 3, argv + 3);
    if (std::strcmp(argv[2], "resolve-async") == 0 && argc >= 4)
      return probe_resolve_async(argc - 3, argv + 3);
    if (std::strcmp(argv[2], "echo") == 0 && argc == 5) return probe_echo(argv[3], argv[4]);
    return 2;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
