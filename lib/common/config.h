// SPDX-License-Identifier: BSD-3-Clause
//
// Runtime configuration. Every setting has a built-in default (equal to the shipped
// config/dpfab.conf), may be set in an INI file ([dpdk] section, read with DPDK's rte_cfgfile), and
// may be overridden by an FI_DPDK_<KEY> environment variable: default < file < environment.
// The libfabric plugin declares each key with fi_param_define so `fi_info -e` lists them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "result.h"

namespace dpfab::config {

/// One configuration key. `name` is lower case in the file and upper case after FI_DPDK_.
struct KeyInfo {
  const char* name;
  const char* default_value;
  const char* help;
};

/// Every key, in the order dpfab-info and fi_info -e show them. "config" is environment-only.
std::span<const KeyInfo> keys() noexcept;

enum class Source { kDefault, kFile, kEnvironment };
const char* source_name(Source s) noexcept;

/// An effective value and where it came from ("default", "<file>:<line>", "FI_DPDK_<KEY>").
struct Value {
  std::string key;
  std::string text;
  Source source = Source::kDefault;
  std::string origin;
};

struct Ipv4Prefix {
  uint32_t addr = 0;  ///< host byte order
  uint8_t prefix_len = 0;
};

/// Fault injection on the receive side of every port (progress/faults.h, fi_dpdk(7)): the
/// probability that a received IPv4/UDP frame is lost, held back behind later frames, handled
/// twice or has one bit flipped. All 0 (the default): off.
struct FaultConfig {
  double loss = 0;
  double reorder = 0;
  double dup = 0;
  double corrupt = 0;
  uint64_t seed = 1;  ///< of each port's generator (mixed with the port id): same seed, same faults
  bool any() const noexcept { return loss > 0 || reorder > 0 || dup > 0 || corrupt > 0; }
};

struct Config {
  std::string file;                             ///< the file read, empty when none
  std::vector<std::string> eal_args;            ///< extra EAL arguments, already split
  std::vector<std::string> ports;               ///< vdev specs ("net_ring0,...") or PCI addresses
  std::vector<std::optional<Ipv4Prefix>> ipv4;  ///< one per port; nullopt = automatic
  std::vector<unsigned> lcores;                 ///< worker lcore CPUs; empty = manual progress only
  uint32_t mbufs = 0;
  uint16_t rx_depth = 0;
  uint16_t tx_depth = 0;
  bool spin_auto = true;        ///< consumers' spin budget learnt (spin_us = auto)
  int64_t spin_us = 0;          ///< consumers' fixed spin budget (>= 0) when !spin_auto
  int64_t spin_max_us = 100;    ///< the most a learnt budget may reach
  bool lcore_spin_auto = true;  ///< lcores' spin budget learnt (lcore_spin_us = auto)
  int64_t lcore_spin_us = 0;    ///< lcores' fixed budget when !lcore_spin_auto; < 0 = never park
  int64_t idle_poll_us = 0;     ///< longest idle-poll interval of a port without rx interrupt
  /// FI_EP_RDM liveness (proto/rdm_peer.h): a peer is declared unreachable once it has been
  /// silent this long and rdm_max_retries retransmissions or probes in a row went unanswered.
  uint64_t rdm_peer_timeout_ms = 10'000;
  uint32_t rdm_max_retries = 10;
  /// FI_EP_RDM and FI_EP_MSG (proto/rdm_peer.h, ReliabilityConfig::ack_delay_ns): how long a
  /// received packet's ack may wait for a packet going back before it is sent alone.
  uint64_t rdm_ack_delay_us = 20;
  /// FI_EP_MSG (proto/msg_cm.h): a connect or accept unanswered this long fails (FI_ETIMEDOUT).
  /// A connected peer is lost after rdm_peer_timeout_ms of silence.
  uint64_t msg_connect_timeout_ms = 10'000;
  bool udp_checksum_always = false;  ///< udp_checksum = on
  /// tx_extbuf_min: data of at least this many bytes leaves from the application's memory where
  /// the port allows it (proto::Link::tx_extbuf_min); 0: always copied into mbufs.
  uint32_t tx_extbuf_min = 4096;
  /// rdm_copy_max: an RDM or MSG send of at most this many bytes is copied and completes at once
  /// (FI_INJECT_COMPLETE) unless it asks for more; a longer one completes when the peer acked it.
  /// Never below the endpoint's inject_size.
  uint32_t rdm_copy_max = 4096;
  /// The same-host path (shm/node.h, fi_dpdk(7) "Same-host peers"): shm, shm_dir, shm_ring_kb,
  /// shm_cma.
  bool shm = true;
  std::string shm_dir;
  uint32_t shm_ring_kb = 128;
  bool shm_cma = true;
  /// mr_keys = application: regions take the application's keys and offsets even where its
  /// mr_mode offers FI_MR_PROV_KEY and FI_MR_VIRT_ADDR.
  bool mr_application_keys = false;
  /// mr_endpoint = on: FI_MR_ENDPOINT is taken up where the application offers it.
  bool mr_endpoint = false;
  FaultConfig faults;         ///< fault_* keys
  std::vector<Value> values;  ///< effective text of every key, in keys() order

  const Value* find(std::string_view key) const noexcept;
};

/// Returns the value of FI_DPDK_<KEY> for a key, or nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const KeyInfo&)>;

/// Reads the environment with getenv().
std::optional<std::string> getenv_lookup(const KeyInfo& key);

/// Loads the configuration: the file named by FI_DPDK_CONFIG (which must exist), else
/// `default_file` when it exists, then the environment.
/// @return -FI_EINVAL with a message naming the file, line and key (or the variable) for a
///         malformed file or value; -FI_ENOENT when FI_DPDK_CONFIG names a missing file.
Result<Config> load(const EnvLookup& env = getenv_lookup,
                    const std::string& default_file = std::string());

/// Parses "a.b.c.d/len" (len 1..32); nullopt on anything else.
std::optional<Ipv4Prefix> parse_ipv4_prefix(std::string_view s) noexcept;
std::string format_ipv4(uint32_t addr_host_order);

}  // namespace dpfab::config
