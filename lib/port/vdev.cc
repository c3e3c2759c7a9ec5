// SPDX-License-Identifier: BSD-3-Clause
#include "port/vdev.h"

#include <rdma/fi_errno.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ether.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "common/log.h"
#include "common/strings.h"

namespace dpfab::port::vdev {
namespace {

std::string err_text(int err) { return rte_strerror(err < 0 ? -err : err); }

}  // namespace

// Splits "net_memif0,role=auto,socket=/x" into the device name and its devargs.
std::pair<std::string, std::string> split_spec(const std::string& spec) {
  auto comma = spec.find(',');
  if (comma == std::string::npos) return {spec, ""};
  return {spec.substr(0, comma), spec.substr(comma + 1)};
}

std::string get_arg(const std::string& args, const std::string& key) {
  for (const auto& kv : str::split(args, ',')) {
    auto eq = kv.find('=');
    if (kv.substr(0, eq) == key) return eq == std::string::npos ? "" : kv.substr(eq + 1);
  }
  return {};
}

std::string set_arg(const std::string& args, const std::string& key, const std::string& value) {
  std::string out;
  bool done = false;
  for (const auto& kv : str::split(args, ',')) {
    std::string piece = kv;
    if (kv.substr(0, kv.find('=')) == key) piece = key + "=" + value, done = true;
    out += (out.empty() ? "" : ",") + piece;
  }
  if (!done) out += (out.empty() ? "" : ",") + key + "=" + value;
  return out;
}

namespace {

// memif role=auto: the first process on a socket is the server, the second its client; a memif
// socket is point to point, so a third is refused. The role is decided before probing (a memif
// probe that fails on a busy socket leaves DPDK's interrupt thread in a state where it panics):
// each role is a lock, an abstract unix socket named after the memif socket that the holder
// binds. Binding is atomic and the name disappears with the process (exited, crashed or killed),
// so a dead holder leaves nothing stale behind. Returns the lock (valid: the role is ours).
UniqueFd take_memif_role_lock(const std::string& role, const std::string& memif_socket) {
  UniqueFd fd(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return fd;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::string name = "dpfab-memif-" + role + ":" + memif_socket;
  size_t len = std::min(name.size(), sizeof(sa.sun_path) - 1);
  std::memcpy(sa.sun_path + 1, name.data(), len);  // sun_path[0] == 0: abstract namespace
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sa),
           static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + len)) != 0)
    fd.reset();
  return fd;
}

// Whether some process listens on memif socket `path` (a file, or with `abstract` a name in the
// abstract namespace), from /proc/net/unix: no connection is made, so no memif server sees one.
bool memif_listening(const std::string& path, bool abstract) {
  FILE* f = std::fopen("/proc/net/unix", "re");
  if (!f) return true;  // cannot tell: let the memif PMD find out
  char line[512];
  bool found = false;
  while (!found && std::fgets(line, sizeof(line), f)) {
    // Num RefCount Protocol Flags Type St Inode Path; Flags has __SO_ACCEPTCON when listening.
    unsigned long flags = 0;
    int path_at = 0;
    if (std::sscanf(line, "%*s %*s %*s %lx %*s %*s %*s %n", &flags, &path_at) < 1 || path_at == 0)
      continue;
    if (!(flags & 0x10000UL)) continue;
    std::string_view name(line + path_at);
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.remove_suffix(1);
    if (abstract) {  // shown as "@name", NUL padding shown as '@' too
      if (name.empty() || name[0] != '@') continue;
      name.remove_prefix(1);
      if (name.substr(0, path.size()) != path) continue;
      name.remove_prefix(path.size());
      found = name.find_first_not_of('@') == std::string_view::npos;
    } else {
      found = name == path;
    }
  }
  std::fclose(f);
  return found;
}

constexpr auto kAutoRoleWait = std::chrono::seconds(5);

// Chooses the role of a role=auto memif port on `sock` (link `link`, "socket#id"): server when
// nobody serves the socket; client when a server listens and has no client yet. A server whose
// lock is held while nobody listens is starting or exiting, and a client lock held beside a
// server may belong to a client on its way out: both are waited for, up to kAutoRoleWait.
// @return the lock of the role taken (*server says which); -FI_EBUSY when the socket already
//         joins two processes, -FI_EIO when its server never listens.
Result<UniqueFd> choose_memif_role(const std::string& port, const std::string& sock,
                                   const std::string& link, bool abstract, bool* server,
                                   bool wait_busy) {
  const auto deadline = std::chrono::steady_clock::now() + kAutoRoleWait;
  for (;;) {
    UniqueFd lock = take_memif_role_lock("server", sock);
    if (lock.valid()) {
      *server = true;
      return Result<UniqueFd>(std::move(lock));
    }
    lock = take_memif_role_lock("client", link);
    const bool busy = !lock.valid();
    if (!busy && memif_listening(sock, abstract)) {
      *server = false;
      return Result<UniqueFd>(std::move(lock));
    }
    if (std::chrono::steady_clock::now() >= deadline || (busy && !wait_busy)) {
      if (busy)
        return make_error(-FI_EBUSY,
                          "port '" + port + "': memif socket '" + sock +
                              "' already joins two processes (a server and its client), and a "
                              "memif link is point to point: give each pair of processes a "
                              "socket of its own");
      return make_error(-FI_EIO, "port '" + port + "': the server of memif socket '" + sock +
                                     "' holds its role (role=auto) but nobody listens on it");
    }
    lock.reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// A memif server on a file socket cannot start while the file exists, and a server that died
// leaves it behind. Removes `path` when it is a socket nobody accepts on (connect is refused);
// a live server's socket (ours or another program's) is left alone.
void remove_stale_memif_socket(const std::string& path) {
  UniqueFd fd(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd.valid() || path.size() >= sizeof(sockaddr_un::sun_path)) return;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path.data(), path.size());
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 &&
      errno == ECONNREFUSED) {
    DPFAB_INFO(FI_LOG_CORE, "memif: removing the stale socket %s (nobody listens on it)",
               path.c_str());
    unlink(path.c_str());
  }
}

constexpr uint16_t kMemifMtu = 9000;  // spec_mtu
constexpr uint16_t kMinMtu = 576;     // IPv4's minimum datagram a host must accept (RFC 791)
// memif buffers (bsize) for the largest frame of kMemifMtu, with an 802.1Q tag: 9018 -> 9216.
constexpr unsigned kMemifBufSize =
    RTE_ALIGN_CEIL(kMemifMtu + RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN, 512u);

std::string remove_arg(const std::string& args, const std::string& key) {
  std::string out;
  for (const auto& kv : str::split(args, ','))
    if (kv.substr(0, kv.find('=')) != key) out += (out.empty() ? "" : ",") + kv;
  return out;
}

}  // namespace

// The MTU a port spec asks for with dpfab's own `mtu=` key, which create_vdev takes out of the
// devargs before DPDK sees them. 0: none given. Created memif ports default to kMemifMtu: memif
// has no MTU of its own (DPDK 22.11's memif reports max_rx_pktlen 1518 but carries a frame of any
// size, chained over its buffers, and its receive chains mbufs as needed), and frames of 9000
// bytes take a sixth of the packets, acks and ring work that 1500 does for the same bytes.
Result<uint16_t> spec_mtu(const std::string& name, const std::string& args) {
  const std::string v = get_arg(args, "mtu");
  if (v.empty()) return name.rfind("net_memif", 0) == 0 ? kMemifMtu : uint16_t{0};
  char* end = nullptr;
  errno = 0;
  const unsigned long mtu = std::strtoul(v.c_str(), &end, 10);
  if (errno || *end || v[0] == '-' || mtu < kMinMtu || mtu > kMemifMtu)
    return make_error(-FI_EINVAL, "port '" + name + "': mtu=" + v + ": not a number from " +
                                      std::to_string(kMinMtu) + " to " + std::to_string(kMemifMtu));
  if (name.rfind("net_memif", 0) != 0)
    return make_error(-FI_EINVAL, "port '" + name +
                                      "': mtu= is for memif ports; on other devices set the "
                                      "MTU of the device itself (ip link set ... mtu)");
  return static_cast<uint16_t>(mtu);
}

// Creates a vdev. memif gets three conveniences: role=auto (choose_memif_role), buffers that hold
// a frame of the port's MTU (`mtu`: spec_mtu's, 0 for none), and a random locally administered
// MAC when none is given, so two processes on one box do not share memif's fixed default MAC.
Result<std::string> create_vdev(const std::string& spec, uint16_t mtu, UniqueFd* role_lock,
                                bool wait_busy) {
  auto [name, args] = split_spec(spec);
  args = remove_arg(args, "mtu");  // dpfab's own (spec_mtu)
  if (name.rfind("net_memif", 0) == 0 && mtu) {
    // Each frame in one memif buffer: DPDK 22.11's memif mishandles frames chained over several
    // descriptors. Its transmit never clears the "next" flag of a packet's first descriptor, and
    // its receive follows that flag past the last descriptor the sender published, wrapping its
    // slot count: one stale flag replays the whole ring as millions of duplicates (seen: RDM over
    // 9000-byte frames in 2048-byte buffers declared its peer unreachable). The client's bsize
    // sizes the buffers of both directions, so every dpfab memif port offers buffers for the
    // largest MTU (kMemifBufSize), whatever its own: a peer at mtu=9000 is then safe with one at
    // 1500, either being the client. Ring bytes stay near memif's default (1024 x 2 KiB) with
    // half the ring.
    const std::string bsize = get_arg(args, "bsize");
    if (bsize.empty()) {
      args = set_arg(args, "bsize", std::to_string(kMemifBufSize));
      if (get_arg(args, "rsize").empty()) args = set_arg(args, "rsize", "9");
    } else if (std::strtoul(bsize.c_str(), nullptr, 10) <
               unsigned{mtu} + RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN) {
      return make_error(-FI_EINVAL, "port '" + spec + "': bsize=" + bsize +
                                        " cannot hold a frame of mtu=" + std::to_string(mtu) +
                                        " (DPDK's memif mishandles frames over several buffers): "
                                        "give a larger bsize or a smaller mtu");
    }
  }
  if (name.rfind("net_memif", 0) == 0) {
    if (get_arg(args, "mac").empty()) {
      std::random_device rd;
      char mac[32];
      std::snprintf(mac, sizeof(mac), "02:64:70:%02x:%02x:%02x", rd() & 0xff, rd() & 0xff,
                    rd() & 0xff);
      args = set_arg(args, "mac", mac);
    }
    if (get_arg(args, "role") == "auto") {
      std::string sock = get_arg(args, "socket");
      if (sock.empty()) sock = "/run/memif.sock";  // memif's default
      bool server = false;
      std::string id = get_arg(args, "id");
      auto lock = choose_memif_role(name, sock, sock + "#" + (id.empty() ? "0" : id),
                                    get_arg(args, "socket-abstract") != "no", &server, wait_busy);
      if (!lock) return lock.error();
      *role_lock = std::move(lock.value());
      // As the server of a file socket, a file left by a dead server is ours to remove (nobody
      // else can hold the lock).
      if (server && get_arg(args, "socket-abstract") == "no") unlink(sock.c_str());
      args = set_arg(args, "role", server ? "server" : "client");
    } else if (get_arg(args, "role") == "server" && get_arg(args, "socket-abstract") == "no") {
      // An explicit server holds no lock: a file is stale only if nobody accepts on it.
      std::string sock = get_arg(args, "socket");
      remove_stale_memif_socket(sock.empty() ? "/run/memif.sock" : sock);
    }
  }
  // rte_dev_probe finds the vdev bus from the driver name; no link to the vdev bus library.
  std::string devargs = name + (args.empty() ? "" : "," + args);
  int ret = rte_dev_probe(devargs.c_str());
  if (ret == 0) return devargs;
  std::string why = "rte_dev_probe: " + err_text(ret);
  if (name.rfind("net_memif", 0) == 0 && get_arg(args, "role") == "server") {
    std::string sock = get_arg(args, "socket");
    if (sock.empty()) sock = "/run/memif.sock";
    if (memif_listening(sock, get_arg(args, "socket-abstract") != "no"))
      why = "another process serves memif socket '" + sock + "'";
  }
  return make_error(ret == -EINVAL ? -FI_EINVAL : -FI_ENODEV,
                    "port '" + spec + "': cannot create the device: " + why);
}

// What keeps a port dpfab created from starting, when DPDK's error says little: a memif client
// whose server does not listen (the memif PMD returns -1 then).
bool memif_server_gone(const std::string& name, const std::string& args) {
  if (name.rfind("net_memif", 0) != 0 || get_arg(args, "role") != "client") return false;
  std::string sock = get_arg(args, "socket");
  if (sock.empty()) sock = "/run/memif.sock";
  return !memif_listening(sock, get_arg(args, "socket-abstract") != "no");
}

std::string start_failure_cause(const std::string& name, const std::string& args, int ret) {
  if (memif_server_gone(name, args)) {
    std::string sock = get_arg(args, "socket");
    return "no memif server listens on socket '" + (sock.empty() ? "/run/memif.sock" : sock) +
           "' (start the server first, or give both processes role=auto)";
  }
  return err_text(ret);
}

}  // namespace dpfab::port::vdev
