// SPDX-License-Identifier: BSD-3-Clause
//
// dpfab-info: what the provider sees on this machine. It reads the configuration exactly as the
// provider does (default < file < FI_DPDK_* environment), starts EAL and opens the ports the same
// way, and prints: the EAL arguments in force, the ports, the lcores and their roles, and the
// effective configuration with where each value came from.
//
// It also says, per port, how a sleeping consumer is woken (rx interrupt, or idle polls by the
// wakeup thread), and reads the statistics of running processes through DPDK telemetry.
//
//   dpfab-info [-v]                  -v: also show dpdk/EAL log lines at info level
//   dpfab-info --stats [<prefix>|<socket>]
//        the wakeup thread, port and lcore statistics (/dpfab/stats) of a running process: its
//        EAL --file-prefix (socket /run/dpdk/<prefix>/dpdk_telemetry.v2; dpfab gives each
//        process dpfab-<pid> unless told otherwise) or the socket path; without an argument,
//        of every process that answers under /run/dpdk.
#include <dirent.h>
#include <rte_ethdev.h>
#include <rte_version.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/config.h"
#include "common/log.h"
#include "dpfab_build_config.h"
#include "eal/eal.h"
#include "eal/eal_args.h"
#include "port/port.h"
#include "wire/format.h"

using namespace dpfab;

namespace {

const char* role_name(eal::LcoreRole r) {
  switch (r) {
    case eal::LcoreRole::kMain:
      return "main (application thread)";
    case eal::LcoreRole::kWorker:
      return "worker (progress)";
    case eal::LcoreRole::kUnavailable:
      return "unavailable";
  }
  return "?";
}

void print_config(const config::Config& cfg) {
  std::printf("configuration%s%s\n", cfg.file.empty() ? " (no file read)" : " file ",
              cfg.file.c_str());
  for (const auto& v : cfg.values) {
    std::string var = "FI_DPDK_";
    for (char c : v.key) var += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    std::string from = config::source_name(v.source);
    if (v.source != config::Source::kDefault) from += ": " + v.origin;
    std::printf("  %-21s = %-50s [%s]\n", var.c_str(), v.text.empty() ? "''" : v.text.c_str(),
                from.c_str());
  }
}

// A "Name:  123 kB" line of /proc/self/status, in KiB; -1 when absent.
long status_kib(const char* name) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  while (std::fgets(line, sizeof(line), f))
    if (std::strncmp(line, name, std::strlen(name)) == 0) v = std::atol(line + std::strlen(name));
  std::fclose(f);
  return v;
}

// One telemetry v2 query: the greeting ({"version":..,"pid":..,"max_output_len":..}) into
// *greeting, the reply to `cmd` returned; "" when the socket does not answer.
std::string telemetry(const std::string& path, const char* cmd, std::string* greeting) {
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path.c_str());
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::vector<char> buf(1 << 16);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n > 0) {
      greeting->assign(buf.data(), static_cast<size_t>(n));
      if (write(fd, cmd, std::strlen(cmd)) == static_cast<ssize_t>(std::strlen(cmd))) {
        n = read(fd, buf.data(), buf.size());
        if (n > 0) out.assign(buf.data(), static_cast<size_t>(n));
      }
    }
  }
  close(fd);
  return out;
}

// Prints {"/dpfab/stats":{"k":v,...}} as "  k = v" lines. Returns false when the process has no
// dpfab statistics (another DPDK application, or dpfab before the wakeup thread started).
bool print_stats(const std::string& json) {
  size_t open = json.find('{', 1);
  size_t close = json.rfind('}', json.size() - 2);
  if (open == std::string::npos || close == std::string::npos || close <= open + 1) return false;
  std::string body = json.substr(open + 1, close - open - 1);
  size_t start = 0;
  while (start < body.size()) {
    size_t comma = body.find(',', start);
    if (comma == std::string::npos) comma = body.size();
    std::string kv = body.substr(start, comma - start);
    size_t colon = kv.find("\":");
    if (colon != std::string::npos) {
      const std::string key = kv.substr(1, colon - 1), value = kv.substr(colon + 2);
      std::printf("  %-34s = %s\n", key.c_str(), value.c_str());
      if (key.ends_with("_rx_old_version") && value != "0")
        std::printf(
            "  %-34s   (a peer speaks dpfab wire version 1: it runs an older dpfab, and "
            "its frames are dropped)\n",
            "");
    }
    start = comma + 1;
  }
  return true;
}

int stats_main(const char* target) {
  const std::string base = eal::runtime_base();
  std::vector<std::string> sockets;
  if (target && std::strchr(target, '/')) {
    sockets.push_back(target);
  } else if (target) {
    sockets.push_back(base + "/" + target + "/dpdk_telemetry.v2");
  } else if (DIR* d = opendir(base.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') sockets.push_back(base + "/" + e->d_name + "/dpdk_telemetry.v2");
    closedir(d);
  }
  int shown = 0;
  for (const auto& s : sockets) {
    std::string greeting;
    std::string reply = telemetry(s, "/dpfab/stats", &greeting);
    if (reply.empty()) continue;
    std::printf("%s %s\n", s.c_str(), greeting.c_str());
    if (!print_stats(reply)) std::printf("  (no dpfab statistics in this process)\n");
    ++shown;
  }
  if (!shown) {
    std::fprintf(stderr,
                 "dpfab-info: no running process answered %s%s. Each process needs telemetry (no "
                 "--no-telemetry) and, when several run at once, its own --file-prefix in "
                 "FI_DPDK_EAL_ARGS (dpfab-<pid> is the default without hugepage files; with "
                 "them the first process of a prefix holds its telemetry socket).\n",
                 target ? "at " : "under ", target ? target : base.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--stats") == 0)
    return stats_main(argc > 2 ? argv[2] : nullptr);
  bool verbose = argc > 1 && std::strcmp(argv[1], "-v") == 0;
  if (argc > 1 && !verbose) {
    std::fprintf(stderr, "usage: %s [-v] | --stats [<file-prefix>|<telemetry socket>]\n", argv[0]);
    return 2;
  }
  log::use_stderr(verbose ? FI_LOG_INFO : FI_LOG_WARN);
  std::printf("dpfab %s (wire version %u), %s\n\n", DPFAB_VERSION, wire::kVersion, rte_version());

  auto cfg = config::load(config::getenv_lookup, DPFAB_DEFAULT_CONFIG);
  if (!cfg) {
    std::fprintf(stderr, "dpfab-info: configuration error: %s\n", cfg.error().message.c_str());
    return 1;
  }
  print_config(*cfg);

  auto st = eal::start(*cfg);
  if (!st) {
    std::fprintf(stderr, "dpfab-info: EAL: %s\n", st.error().message.c_str());
    return 1;
  }
  std::printf("\nEAL %s\n  arguments:", (*st)->owned ? "started by dpfab" : "attached");
  for (const auto& a : (*st)->argv) std::printf(" %s", a.c_str());
  std::printf("\n\nlcores\n");
  for (const auto& l : (*st)->lcores)
    std::printf("  lcore %-3u cpus %-8s %s%s%s\n", l.id, l.cpus.c_str(), role_name(l.role),
                l.note.empty() ? "" : ": ", l.note.c_str());
  if ((*st)->lcores.size() == 1)
    std::printf("  (no worker lcores: data progress is manual, inside the application's calls)\n");

  auto ports = port::open_all(*cfg);
  if (!ports) {
    std::fprintf(stderr, "dpfab-info: ports: %s\n", ports.error().message.c_str());
    return 1;
  }
  std::printf("\nports\n");
  for (const auto& p : **ports) {
    const auto& i = p->info();
    std::printf("  port %u: %s\n", i.port_id, i.name.c_str());
    std::printf("    spec          %s\n", i.spec.c_str());
    std::printf("    driver        %s%s\n", i.driver.c_str(),
                i.created ? "" : " (created by the application)");
    std::printf("    mac           %s\n", port::format_mac(i.mac).c_str());
    std::printf("    ipv4          %s/%u%s\n", config::format_ipv4(i.ipv4).c_str(), i.ipv4_prefix,
                i.ipv4_auto ? " (auto)" : "");
    std::printf("    link          %s", i.link_up ? "up" : "down");
    if (i.link_up) std::printf(", %u Mb/s", i.link_speed_mbps);
    std::printf(", mtu %u (%zu bytes of payload per frame)\n", i.mtu, wire::max_payload(i.mtu));
    std::printf("    rx queues     %u of %u, %u descriptors\n", i.rx_queues, i.max_rx_queues,
                i.rx_desc);
    std::printf("    tx queues     %u of %u, %u descriptors\n", i.tx_queues, i.max_tx_queues,
                i.tx_desc);
    std::printf("    rx interrupt  %s\n", port::rx_interrupt_name(i.rx_interrupt));
    if (i.rx_interrupt == port::RxInterrupt::kNone && !i.memif_link.empty())
      std::printf(
          "    idle wakeup   sleepers sleep on the port: kicked by the peer when it is dpfab "
          "(memif kick, @dpfab-kick:%s), one OS wakeup per message; else polled by the wakeup "
          "thread every 20-%lld us while its consumers sleep or its lcore is parked "
          "(FI_DPDK_IDLE_POLL_US)\n",
          i.memif_link.c_str(), static_cast<long long>(cfg->idle_poll_us));
    else if (i.rx_interrupt == port::RxInterrupt::kNone)
      std::printf(
          "    idle wakeup   polled by the wakeup thread every 20-%lld us while its "
          "consumers sleep or its lcore is parked (FI_DPDK_IDLE_POLL_US)\n",
          static_cast<long long>(cfg->idle_poll_us));
    else
      std::printf(
          "    idle wakeup   sleepers sleep on the port's %s (in the FI_GETWAIT fd): one OS "
          "wakeup per message, no CPU while idle\n",
          i.rx_interrupt == port::RxInterrupt::kEnable ? "rx interrupt fd"
                                                       : "queue fd (level-triggered)");
    std::printf("    checksum offload  rx %s, tx %s\n",
                (i.rx_offloads & (RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM))
                    ? "yes"
                    : "no (software)",
                (i.tx_offloads & (RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM))
                    ? "yes"
                    : "no (software)");
  }
  if ((*ports)->empty()) std::printf("  (none configured: set FI_DPDK_PORTS)\n");
  std::printf("\nresident memory  %ld KiB now, %ld KiB peak\n", status_kib("VmRSS:"),
              status_kib("VmHWM:"));
  port::close_all();
  return 0;
}
