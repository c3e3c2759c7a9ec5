// SPDX-License-Identifier: BSD-3-Clause
//
// dpfab-bench: what every part of the benchmark shares. The options (parsed by main.cc, handed to
// the two peer processes as JSON), the waiting modes and workloads, the header every benchmark
// message carries, clocks and resource-usage snapshots.
#pragma once

#include <sys/resource.h>

#include <array>
#include <cstdint>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dpfab::bench {

using nlohmann::json;

// ---- waiting modes and workloads --------------------------------------------------------------

/// How a process waits for its completion queue (doc/benchmark.md, "Waiting modes": the calls).
enum class Mode { kSpin, kSread, kFd, kPollfd, kWaitset, kPollset, kCond, kYield, kWorker };
inline constexpr std::array<std::string_view, 9> kModeNames = {
    "spin", "sread", "fd", "pollfd", "waitset", "pollset", "cond", "yield", "worker"};

/// What the two processes do with each other: messages (pingpong, stream, wakeup), or one-sided
/// operations (rma.h: rma-write, rma-read, rma-bw, atomic; spin mode only).
enum class Workload { kPingpong, kStream, kWakeup, kRmaWrite, kRmaRead, kRmaBw, kAtomic };
inline constexpr std::array<std::string_view, 7> kWorkloadNames = {
    "pingpong", "stream", "wakeup", "rma-write", "rma-read", "rma-bw", "atomic"};

inline constexpr std::array<std::string_view, 3> kEpTypeNames = {"dgram", "rdm", "msg"};

/// Parses a mode/workload name; nullopt when unknown.
std::optional<Mode> parse_mode(std::string_view name);
std::optional<Workload> parse_workload(std::string_view name);
inline std::string mode_name(Mode m) { return std::string(kModeNames[static_cast<int>(m)]); }
inline std::string workload_name(Workload w) {
  return std::string(kWorkloadNames[static_cast<int>(w)]);
}

// ---- providers and their labels ---------------------------------------------------------------

/// The dpdk provider runs as two labelled pairs, one per path between two processes of one host
/// (README, "dpfab-bench"): "dpdk-port" over its port (a memif link of its own unless
/// --dpdk-ports says otherwise), with the same-host path off (FI_DPDK_SHM=off): what the DPDK data
/// path costs; "dpdk-shm" over the same-host path (shared memory, FI_DPDK_SHM=on). "dpdk" in -p
/// stands for both. Every other label is the libfabric provider of that name.
inline constexpr std::string_view kDpdkPort = "dpdk-port", kDpdkShm = "dpdk-shm";
/// The libfabric provider a label runs ("dpdk" for both dpdk labels).
inline std::string fabric_provider(const std::string& label) {
  return label == kDpdkPort || label == kDpdkShm ? std::string("dpdk") : label;
}
/// -p's list with "dpdk" expanded to its two labels (in place, without duplicates).
std::vector<std::string> expand_providers(const std::vector<std::string>& in);

// ---- options ----------------------------------------------------------------------------------

/// Everything that decides what is measured. main.cc fills it from the command line; the
/// orchestrator passes it, with one provider, to the two peers as JSON (--peer-config).
struct Options {
  std::vector<std::string> providers{"dpdk", "shm", "udp", "tcp"};
  std::vector<std::string> modes{kModeNames.begin(), kModeNames.end()};
  /// The message workloads by default; the one-sided ones when asked for (-w rma-write,...).
  std::vector<std::string> workloads{kWorkloadNames.begin(), kWorkloadNames.begin() + 3};
  std::vector<std::string> ep_types{kEpTypeNames.begin(), kEpTypeNames.end()};
  std::vector<std::string> wait_on{"cq"};  ///< what the modes wait on: cq, cntr (a counter)
  std::vector<uint64_t> sizes{64, 1024};
  uint64_t iterations = 10000;    ///< timed iterations per case at most (stream: messages)
  double duration_s = 0.2;        ///< wall time of a case's timed window at most (main job: 5 min)
  uint64_t warmup = 100;          ///< warm-up iterations (also bounded to a quarter of duration_s)
  uint32_t window = 32;           ///< stream: messages in flight per credit
  uint32_t gap_us = 2000;         ///< wakeup: idle gap before each message
  int timeout_ms = 500;           ///< one wait for a reply; a longer silence counts as a loss
  uint32_t max_lost = 10;         ///< losses after which a case ends as an error
  std::string iface = "lo";       ///< preferred domain (interface) for socket-based providers
  std::string layered = "rxm";    ///< utility-provider layers accepted: none, rxm, all
  std::string dpdk_ports;         ///< FI_DPDK_PORTS for the dpdk pair (default: own memif socket)
  std::string dpdk_client_ports;  ///< FI_DPDK_PORTS of the dpdk client when it differs (NICs)
};
void to_json(json& j, const Options& o);
void from_json(const json& j, Options& o);

// ---- the message header -----------------------------------------------------------------------

/// Operations carried in benchmark messages.
enum class Op : uint16_t { kPing = 1, kPong = 2, kData = 3, kCredit = 4, kEnd = 5 };
inline constexpr uint16_t kFlagTimed = 1;  ///< sent inside the timed window (not warm-up)
inline constexpr uint16_t kFlagLast = 2;   ///< stream: last message of a window

/// The first bytes of every benchmark message (so the smallest size is sizeof(Header)).
struct Header {
  uint32_t case_id;  ///< which case the message belongs to: stale ones are dropped
  uint16_t op;       ///< Op
  uint16_t flags;    ///< kFlag*
  uint32_t seq;      ///< iteration (pingpong/wakeup) or window number (stream)
  uint32_t aux;      ///< stream: index in window (DATA) or messages received (CREDIT)
  uint64_t t_ns;     ///< wakeup: send time (PING), or measured wake latency (PONG)
};
static_assert(sizeof(Header) == 24);
inline constexpr uint64_t kMinSize = sizeof(Header);

// ---- clocks and usage -------------------------------------------------------------------------

/// CLOCK_MONOTONIC in ns: one clock for both processes on one machine.
inline int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

/// A getrusage(RUSAGE_SELF) snapshot: every thread of the process (EAL's and the provider's too).
struct Usage {
  double user_s = 0, sys_s = 0;
  int64_t vcsw = 0, ivcsw = 0;
  static Usage now();
  Usage operator-(const Usage& o) const {
    return {user_s - o.user_s, sys_s - o.sys_s, vcsw - o.vcsw, ivcsw - o.ivcsw};
  }
};

/// What one process reports for the timed window of a case.
struct SideFigures {
  Usage usage;
  uint64_t wakeups = 0;
  uint64_t missed_wakeups = 0;
};
json side_json(const SideFigures& s);

/// Hex encoding of binary addresses for the JSON out-of-band messages.
std::string to_hex(const void* data, size_t len);
std::string from_hex(const std::string& hex);

}  // namespace dpfab::bench
