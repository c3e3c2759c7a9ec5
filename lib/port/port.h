// SPDX-License-Identifier: BSD-3-Clause
//
// Ports: the rte_ethdev devices the provider moves frames through, one per FI_DPDK_PORTS entry
// (a vdev spec or a PCI address). open_all() creates or finds each device, gives it a mempool,
// configures and starts it, and reads what later layers need: MAC, IPv4, link, queue counts and
// whether the PMD can wake a sleeper with an rx interrupt.
//
// Ports live for the process lifetime once opened (EAL cannot be restarted); close_all() stops and
// releases the ones dpfab created, at provider cleanup.
#pragma once

#include <rte_ether.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/config.h"
#include "common/fd.h"
#include "common/result.h"

struct rte_mempool;

namespace dpfab::port {

/// How a port's receive queue can wake a sleeping thread.
enum class RxInterrupt {
  kNone,    ///< no rx interrupt: the wakeup thread must poll it
  kEnable,  ///< rte_eth_dev_rx_intr_enable works and the queue has an event fd
  kFdOnly,  ///< enable is not supported, but the queue fd itself becomes readable (net_tap)
};
const char* rx_interrupt_name(RxInterrupt r) noexcept;

/// How a port lets in frames sent to Ethernet group (multicast) addresses.
enum class McFilter {
  kNone,        ///< no group joined: the port's default (PMDs drop foreign group MACs)
  kList,        ///< the joined groups' MACs are programmed (rte_eth_dev_set_mc_addr_list)
  kAllMulti,    ///< the PMD refused the list: every group frame is let in (allmulticast)
  kUnfiltered,  ///< the PMD has neither: it is assumed to deliver every frame (net_ring, memif)
};
const char* mc_filter_name(McFilter f) noexcept;

struct Info {
  std::string spec;    ///< as configured (memif role=auto resolved)
  std::string name;    ///< rte_eth_dev_get_name_by_port
  std::string driver;  ///< dev_info.driver_name
  uint16_t port_id = 0;
  int socket_id = 0;
  rte_ether_addr mac{};
  uint32_t ipv4 = 0;  ///< host byte order
  uint8_t ipv4_prefix = 0;
  bool ipv4_auto = false;
  bool link_up = false;
  uint32_t link_speed_mbps = 0;
  uint16_t rx_queues = 0, tx_queues = 0;          ///< configured
  uint16_t max_rx_queues = 0, max_tx_queues = 0;  ///< what the device allows
  uint16_t rx_desc = 0, tx_desc = 0;              ///< after adjustment to the device's limits
  uint16_t mtu = 0;
  uint64_t rx_offloads = 0, tx_offloads = 0;  ///< capabilities
  RxInterrupt rx_interrupt = RxInterrupt::kNone;
  bool created = false;  ///< dpfab created the device (false: the application had it)
  /// A memif client: DPDK 22.11's memif connects only at device start, so when its server goes
  /// away the port must be restarted to reach the next one (Port::restart).
  bool reconnect_by_restart = false;
  /// A memif port dpfab created: its link's name, the same at both ends (socket path and
  /// interface id), and whether we are memif's server. Empty otherwise.
  std::string memif_link;
  bool memif_server = false;
  /// The placeholder of a process without a port (open_placeholder): a net_null device that
  /// never receives, named "shm"; its endpoints reach the peers of this host only.
  bool placeholder = false;
};

class Port {
 public:
  ~Port();
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  const Info& info() const noexcept { return info_; }
  rte_mempool* mempool() const noexcept { return pool_; }
  /// Re-reads the link state without waiting.
  void refresh_link() noexcept;
  /// Whether the link is up now (rte_eth_link_get_nowait; cheap on virtual devices). Any thread.
  bool link_up_now() const noexcept;
  /// Faults in, in this process, every page of the memif shared memory the memif PMD has mapped
  /// (its memfd regions, "memif_region_N" in /proc/self/maps: rings and packet buffers, ~4 MiB
  /// with the PMD's defaults), so that the first ~1,000 messages do not each pay a minor page
  /// fault (~6 us). Call it once the link is up: the regions of the connection exist then. Pages
  /// are populated writable without changing their content (MADV_POPULATE_WRITE; an atomic add
  /// of 0 per page on kernels before 5.14), so it is safe while the peer uses the region. One
  /// read of /proc/self/maps and a few madvise calls: not for the data path's steady state. The
  /// memif client walks the pages forward and the server backward, so that two ends populating
  /// at once do not queue on each other's page locks (a sleep, an OS wakeup, per page).
  /// No-op (0) for a port that is not memif. @return pages faulted in.
  size_t prefault_shared_memory() noexcept;
  /// Stops and starts a port dpfab created (a memif client then connects again). The caller
  /// must own both queues: no rx or tx burst may run meanwhile. @return 0 or a negative errno.
  int restart() noexcept;
  /// Sets the port's MAC and IPv4 (the placeholder takes its node's: shm::Node). Control path,
  /// before the port's engine exists.
  void set_address(const rte_ether_addr& mac, uint32_t ipv4_host) noexcept {
    info_.mac = mac;
    info_.ipv4 = ipv4_host;
    info_.ipv4_prefix = 32;
    info_.ipv4_auto = false;
  }
  /// Whether the device runs: false for a memif role=auto client whose server went away before
  /// its start (it waits for restart()), and after a restart() that failed.
  bool device_started() const noexcept { return device_started_; }

  /// Lets frames to group MAC `mac` in (a joined IPv4 group, wire::multicast_mac). Counted per
  /// MAC across all users of the port: the MAC stays in the filter until every join is matched by
  /// a leave_multicast. The port's filter is programmed with the list of joined MACs; when the PMD
  /// refuses the list (-ENOTSUP, or no room for more) the port falls back to allmulticast, and
  /// when it refuses that too the PMD is taken to deliver every frame (vdevs such as net_ring and
  /// memif have no filter): mc_filter() says which. Control path, any thread (a mutex).
  /// @return 0; -FI_EINVAL when `mac` is not a group address; -FI_ENODEV for a port the
  ///         application owns (dpfab does not reconfigure it); -FI_ENOMEM.
  int join_multicast(const rte_ether_addr& mac) noexcept;
  /// Undoes one join_multicast of `mac`; the last one removes it from the filter (and turns
  /// allmulticast off again when dpfab turned it on and no group is left). Unknown MACs are
  /// ignored. Control path, any thread.
  void leave_multicast(const rte_ether_addr& mac) noexcept;
  /// How group frames get in now.
  McFilter mc_filter() const noexcept;
  /// Joins of `mac` not yet left (0 when not joined).
  unsigned multicast_refs(const rte_ether_addr& mac) const noexcept;

  /// Opens one port. @return -FI_ENODEV when the device cannot be created or found, -FI_EINVAL
  /// for a spec DPDK rejects, -FI_ENOMEM when the mempool cannot be allocated, -FI_EIO when the
  /// device refuses configuration or start; the message names the port.
  static Result<std::unique_ptr<Port>> open(const std::string& spec,
                                            const std::optional<config::Ipv4Prefix>& ipv4,
                                            const config::Config& cfg);
  /// Opens the placeholder port of a process that has no port of its own (Info::placeholder):
  /// a net_null device without receive (no-rx=1), MTU 9000, a small mempool for the frames of
  /// the same-host path. Its address is set later from the node's (set_address).
  static Result<std::unique_ptr<Port>> open_placeholder(const config::Config& cfg);

 private:
  Port() = default;
  Info info_;
  rte_mempool* pool_ = nullptr;
  bool started_ = false;         // configured by us and to be stopped at close
  bool device_started_ = false;  // rte_eth_dev_start succeeded (a memif client may wait for one)
  UniqueFd role_lock_;           // memif role=auto: the lock of our role (server or client), held

  // Multicast filter (join_multicast): under mc_mutex_.
  void apply_mc_filter_locked() noexcept;
  mutable std::mutex mc_mutex_;
  std::vector<std::pair<rte_ether_addr, unsigned>> mc_macs_;  // joined MACs with their counts
  bool mc_list_refused_ = false;  // the PMD refused a list once: allmulticast from then on
  bool mc_allmulti_on_ = false;   // dpfab turned allmulticast on (and turns it off)
  McFilter mc_filter_ = McFilter::kNone;
};

/// Opens every configured port once per process (thread-safe; later calls return the first
/// call's ports or error). EAL must have been started.
Result<const std::vector<std::unique_ptr<Port>>*> open_all(const config::Config& cfg);

/// The ports opened by open_all (empty before).
const std::vector<std::unique_ptr<Port>>& ports() noexcept;

/// Stops and releases the ports dpfab created. Ports cannot be used afterwards; a later open_all
/// opens them again.
void close_all() noexcept;

/// Formats a MAC as aa:bb:cc:dd:ee:ff.
std::string format_mac(const rte_ether_addr& mac);

}  // namespace dpfab::port
