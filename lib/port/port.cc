// SPDX-License-Identifier: BSD-3-Clause
#include "port.h"

#include "memif_prefault.h"

#include <net/if.h>
#include <net/if_arp.h>
#include <rdma/fi_errno.h>
#include <rte_alarm.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_interrupts.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_mempool.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string_view>
#include <thread>

#include "common/fd.h"
#include "common/log.h"
#include "common/strings.h"
#include "eal/eal_args.h"
#include "port/vdev.h"

namespace dpfab::port {

using vdev::create_vdev;
using vdev::get_arg;
using vdev::spec_mtu;
using vdev::split_spec;
using vdev::start_failure_cause;
namespace {

// Process-lifetime state, never destroyed: libfabric calls our cleanup from its own destructor
// (fi_fini), after this library's static destructors would have run.
struct Registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<Port>> ports;
  bool opened = false;
};
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

constexpr useconds_t kCloseLingerUs = 100'000;  // 100 ms, once per port at provider cleanup
// The net_null device behind the placeholder port (open_placeholder). A plain array, not a
// std::string: provider cleanup (~Port) runs from libfabric's destructor, after the exit handlers
// have destroyed this library's namespace-scope objects.
constexpr char kPlaceholderDevice[] = "net_null_dpfab_shm";

std::string err_text(int err) { return rte_strerror(err < 0 ? -err : err); }

// Stopping and closing a port on DPDK's interrupt thread.
//
// The memif PMD runs its control channel on EAL's interrupt thread: a message from the peer, or
// the peer's socket closing, calls memif_disconnect() there, which closes the queues' fds and
// frees the shared memory regions (memif_free_regions: munmap, rte_free). rte_eth_dev_stop runs
// the same memif_disconnect() on the calling thread, and only its control channel part holds a
// lock: when both ends go away together (a job ending, a peer killed) the two disconnects free
// the same regions and close the same fds at once, and rte_eth_dev_close can free the device
// under a disconnect still running on the interrupt thread. That is the SIGSEGV seen on the
// interrupt thread of a fabtests server at exit (interrupt thread -> memif -> EAL).
//
// The interrupt thread runs one callback at a time, and EAL's alarms are callbacks of that
// thread: a stop, start or close run as an alarm never overlaps a memif control callback. So
// every stop/start/close of a port dpfab created goes through run_on_interrupt_thread.
constexpr auto kInterruptThreadWait = std::chrono::seconds(5);

struct IntrJob {
  void (*fn)(void*) = nullptr;
  void* arg = nullptr;
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;  // under mutex
};

void intr_job_run(void* p) {
  auto* job = static_cast<IntrJob*>(p);
  job->fn(job->arg);
  std::lock_guard lock(job->mutex);
  job->done = true;
  job->cv.notify_one();  // under the mutex: the waiter may destroy the job once it sees done
}

// Runs fn(arg) on EAL's interrupt thread and waits for it. Runs it on the calling thread when
// that is the interrupt thread, when the alarm cannot be set, or when the interrupt thread has
// not started it within kInterruptThreadWait (a callback stuck there: better the old race than a
// hang at exit). Control path only (a mutex, a condition variable, an alarm).
void run_on_interrupt_thread(void (*fn)(void*), void* arg) noexcept {
  if (rte_thread_is_intr()) {
    fn(arg);
    return;
  }
  IntrJob job;
  job.fn = fn;
  job.arg = arg;
  if (rte_eal_alarm_set(1, intr_job_run, &job) != 0) {
    fn(arg);
    return;
  }
  std::unique_lock lock(job.mutex);
  if (job.cv.wait_for(lock, kInterruptThreadWait, [&] { return job.done; })) return;
  lock.unlock();
  // Not run yet: take the alarm back and run it here. Running now: rte_eal_alarm_cancel waits
  // for it to finish (it returns 0 then), and the job must outlive it.
  if (rte_eal_alarm_cancel(intr_job_run, &job) > 0) {
    DPFAB_WARN(FI_LOG_CORE,
               "DPDK's interrupt thread did not run a port stop/close within %lld s: running it "
               "on this thread",
               static_cast<long long>(kInterruptThreadWait.count()));
    fn(arg);
    return;
  }
  lock.lock();
  job.cv.wait(lock, [&] { return job.done; });
}

// Runs `f` (returning an int) on the interrupt thread and returns its result (see above).
template <typename F>
int on_interrupt_thread(F f) noexcept {
  struct Job {
    F f;
    int ret;
  } job{f, 0};
  run_on_interrupt_thread([](void* p) { static_cast<Job*>(p)->ret = static_cast<Job*>(p)->f(); },
                          &job);
  return job.ret;
}

// rte_eth_dev_stop / start / close of `port_id` on the interrupt thread.
int stop_port(uint16_t port_id) noexcept {
  return on_interrupt_thread([port_id] { return rte_eth_dev_stop(port_id); });
}
int start_port(uint16_t port_id) noexcept {
  return on_interrupt_thread([port_id] { return rte_eth_dev_start(port_id); });
}
// Stops (when `stop`) and closes in one go: no control message is handled in between.
int stop_close_port(uint16_t port_id, bool stop) noexcept {
  return on_interrupt_thread([port_id, stop] {
    if (stop) rte_eth_dev_stop(port_id);
    return rte_eth_dev_close(port_id);
  });
}

// The port's mempool. Without hugepages nothing DMAs from these mbufs (virtual devices copy), so
// objects may straddle 4 KiB pages: about 2.3 KiB per mbuf instead of a whole page each (measured:
// 4095 mbufs cost 16 MiB resident the default way). With hugepages, the default pool.
// `buf_size` is each mbuf's buffer (headroom + data room): RTE_MBUF_DEFAULT_BUF_SIZE, or more for
// a jumbo MTU, so that a frame we send or receive stays one segment.
rte_mempool* make_pool(const char* name, unsigned n, unsigned cache, int socket,
                       uint16_t buf_size) {
  if (rte_eal_has_hugepages()) return rte_pktmbuf_pool_create(name, n, cache, 0, buf_size, socket);
  rte_pktmbuf_pool_private priv{};
  priv.mbuf_data_room_size = buf_size;
  priv.mbuf_priv_size = 0;
  rte_mempool* mp = rte_mempool_create_empty(name, n, sizeof(rte_mbuf) + buf_size, cache,
                                             sizeof(priv), socket, RTE_MEMPOOL_F_NO_IOVA_CONTIG);
  if (!mp) return nullptr;
  if (rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), nullptr) != 0) {
    rte_mempool_free(mp);
    return nullptr;
  }
  rte_pktmbuf_pool_init(mp, &priv);
  if (rte_mempool_populate_default(mp) < 0) {
    rte_mempool_free(mp);
    return nullptr;
  }
  rte_mempool_obj_iter(mp, rte_pktmbuf_init, nullptr);
  return mp;
}

// Some vdevs (net_ring) report an all-zero MAC; give them a random locally administered one so
// that fabric addresses differ. A PMD that cannot take it (net_ring) does not filter by MAC
// either, so the frames we send carry the new MAC all the same.
void ensure_mac(uint16_t port_id, rte_ether_addr* mac) {
  if (rte_is_valid_assigned_ether_addr(mac)) return;
  rte_eth_random_addr(mac->addr_bytes);
  rte_eth_dev_default_mac_addr_set(port_id, mac);
}

// Asks the PMD whether queue 0 can wake a sleeper. rte_eth_dev_rx_intr_ctl_q_get_fd logs an
// error for PMDs without an interrupt handle: silence ethdev while asking.
RxInterrupt probe_rx_interrupt(uint16_t port_id) {
  int type = rte_log_register("lib.ethdev");
  int saved = type >= 0 ? rte_log_get_level(type) : -1;
  if (type >= 0) rte_log_set_level(type, RTE_LOG_CRIT);
  RxInterrupt r = RxInterrupt::kNone;
  int fd = rte_eth_dev_rx_intr_ctl_q_get_fd(port_id, 0);
  if (rte_eth_dev_rx_intr_enable(port_id, 0) == 0) {
    r = RxInterrupt::kEnable;
    rte_eth_dev_rx_intr_disable(port_id, 0);  // armed only when a sleeper needs it
  } else if (fd >= 0) {
    r = RxInterrupt::kFdOnly;
  }
  if (saved >= 0) rte_log_set_level(type, static_cast<uint32_t>(saved));
  return r;
}

// net_tap gives the kernel side of the tap the port's own MAC. On a Linux bridge that sends
// frames for us to the host: a bridge keeps its ports' own MACs for itself. So once the port has
// started, the kernel interface gets another MAC, derived from the port's and locally
// administered. The interface is the one the PMD reports (if_index), else iface= of the devargs.
void separate_tap_kernel_mac(const std::string& port, unsigned if_index, const std::string& args,
                             const rte_ether_addr& mac) {
  char ifname[IF_NAMESIZE] = {};
  if (!(if_index && if_indextoname(if_index, ifname))) {
    std::string iface = get_arg(args, "iface");
    if (iface.empty() || iface.size() >= IF_NAMESIZE) {
      DPFAB_WARN(FI_LOG_CORE,
                 "port %s: cannot find its kernel interface to give it a MAC of its "
                 "own: on a bridge, frames for this port may stay in the host",
                 port.c_str());
      return;
    }
    std::memcpy(ifname, iface.data(), iface.size());
  }
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, ifname, sizeof(ifr.ifr_name) - 1);
  ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
  uint8_t kmac[RTE_ETHER_ADDR_LEN];
  std::memcpy(kmac, mac.addr_bytes, sizeof(kmac));
  kmac[0] = static_cast<uint8_t>((kmac[0] | 0x02) & ~0x01);  // locally administered, unicast
  if (std::memcmp(kmac, mac.addr_bytes, sizeof(kmac)) == 0) kmac[0] ^= 0x04;
  std::memcpy(ifr.ifr_hwaddr.sa_data, kmac, sizeof(kmac));
  UniqueFd fd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid() || ioctl(fd.get(), SIOCSIFHWADDR, &ifr) != 0) {
    DPFAB_WARN(FI_LOG_CORE,
               "port %s: cannot set the MAC of its kernel interface %s: %s (on a "
               "bridge, frames for this port may stay in the host)",
               port.c_str(), ifname, std::strerror(errno));
    return;
  }
  rte_ether_addr k;
  std::memcpy(k.addr_bytes, kmac, sizeof(kmac));
  DPFAB_INFO(FI_LOG_CORE, "port %s: kernel interface %s gets MAC %s (the port keeps %s)",
             port.c_str(), ifname, format_mac(k).c_str(), format_mac(mac).c_str());
}

uint32_t auto_ipv4(const rte_ether_addr& mac) {
  // 169.254.1.0 - 169.254.254.255 (RFC 3927), from the MAC's last two bytes.
  return (169u << 24) | (254u << 16) | ((1u + mac.addr_bytes[4] % 254u) << 8) | mac.addr_bytes[5];
}

}  // namespace

const char* rx_interrupt_name(RxInterrupt r) noexcept {
  switch (r) {
    case RxInterrupt::kNone:
      return "none (polled while idle)";
    case RxInterrupt::kEnable:
      return "yes";
    case RxInterrupt::kFdOnly:
      return "queue fd only (no enable)";
  }
  return "?";
}

const char* mc_filter_name(McFilter f) noexcept {
  switch (f) {
    case McFilter::kNone:
      return "none";
    case McFilter::kList:
      return "group list";
    case McFilter::kAllMulti:
      return "allmulticast";
    case McFilter::kUnfiltered:
      return "unfiltered (the PMD has no multicast filter)";
  }
  return "?";
}

int Port::join_multicast(const rte_ether_addr& mac) noexcept {
  if (!rte_is_multicast_ether_addr(&mac) || rte_is_broadcast_ether_addr(&mac)) return -FI_EINVAL;
  if (!info_.created || !started_) return -FI_ENODEV;
  try {
    std::lock_guard lock(mc_mutex_);
    for (auto& [m, refs] : mc_macs_) {
      if (rte_is_same_ether_addr(&m, &mac)) {
        ++refs;
        return 0;
      }
    }
    mc_macs_.emplace_back(mac, 1u);
    apply_mc_filter_locked();
    return 0;
  } catch (const std::bad_alloc&) {
    return -FI_ENOMEM;
  }
}

void Port::leave_multicast(const rte_ether_addr& mac) noexcept {
  std::lock_guard lock(mc_mutex_);
  for (auto it = mc_macs_.begin(); it != mc_macs_.end(); ++it) {
    if (!rte_is_same_ether_addr(&it->first, &mac)) continue;
    if (--it->second == 0) {
      mc_macs_.erase(it);
      apply_mc_filter_locked();
    }
    return;
  }
}

McFilter Port::mc_filter() const noexcept {
  std::lock_guard lock(mc_mutex_);
  return mc_filter_;
}

unsigned Port::multicast_refs(const rte_ether_addr& mac) const noexcept {
  std::lock_guard lock(mc_mutex_);
  for (const auto& [m, refs] : mc_macs_)
    if (rte_is_same_ether_addr(&m, &mac)) return refs;
  return 0;
}

// Programs the port for mc_macs_: the list when the PMD takes it, else allmulticast, else nothing
// (the PMD is assumed to deliver every frame). Called whenever the set of MACs changes.
void Port::apply_mc_filter_locked() noexcept {
  const uint16_t id = info_.port_id;
  std::vector<rte_ether_addr> list;
  list.reserve(mc_macs_.size());
  for (const auto& [m, refs] : mc_macs_) list.push_back(m);
  if (!mc_list_refused_) {
    int r = rte_eth_dev_set_mc_addr_list(id, list.empty() ? nullptr : list.data(),
                                         static_cast<uint32_t>(list.size()));
    if (r == 0) {
      mc_filter_ = list.empty() ? McFilter::kNone : McFilter::kList;
      return;
    }
    DPFAB_INFO(FI_LOG_CORE, "port %s: multicast address list refused (%s): using allmulticast",
               info_.name.c_str(), err_text(r).c_str());
    mc_list_refused_ = true;
  }
  if (list.empty()) {
    if (mc_allmulti_on_) rte_eth_allmulticast_disable(id);
    mc_allmulti_on_ = false;
    mc_filter_ = McFilter::kNone;
    return;
  }
  if (mc_allmulti_on_ || rte_eth_allmulticast_get(id) == 1) {
    mc_filter_ = McFilter::kAllMulti;
    return;
  }
  int r = rte_eth_allmulticast_enable(id);
  if (r == 0 && rte_eth_allmulticast_get(id) == 1) {
    mc_allmulti_on_ = true;
    mc_filter_ = McFilter::kAllMulti;
    return;
  }
  DPFAB_INFO(FI_LOG_CORE,
             "port %s: no multicast filter (allmulticast: %s): the PMD is taken to deliver every "
             "frame",
             info_.name.c_str(), err_text(r).c_str());
  mc_filter_ = McFilter::kUnfiltered;
}

std::string format_mac(const rte_ether_addr& mac) {
  char buf[RTE_ETHER_ADDR_FMT_SIZE];
  rte_ether_format_addr(buf, sizeof(buf), &mac);
  return buf;
}

Port::~Port() {
  // Frames the application sent just before closing may still sit in the TX ring, or (memif) in
  // rings that live in our memory and vanish when we disconnect. A socket would deliver them;
  // give the peer a moment to take them before the link goes away.
  if (started_ && !info_.placeholder) {  // the placeholder carries nothing
    refresh_link();
    if (info_.link_up) usleep(kCloseLingerUs);
  }
  if (info_.created) {
    (void)stop_close_port(info_.port_id, started_);
    // The device's own name: the placeholder's domain name ("shm") is not its ethdev name.
    rte_eal_hotplug_remove("vdev", info_.placeholder ? kPlaceholderDevice : info_.name.c_str());
  } else if (started_) {
    (void)stop_port(info_.port_id);
  }
  if (pool_) rte_mempool_free(pool_);
}

void Port::refresh_link() noexcept {
  rte_eth_link link{};
  if (rte_eth_link_get_nowait(info_.port_id, &link) == 0) {
    info_.link_up = link.link_status == RTE_ETH_LINK_UP;
    info_.link_speed_mbps = link.link_speed;
  }
}

size_t Port::prefault_shared_memory() noexcept {
  if (info_.driver != "net_memif") return 0;
  // The server walks backward, the client forward (memif_prefault.h).
  const size_t pages = prefault_memif_regions(info_.memif_server);
  DPFAB_INFO(FI_LOG_CORE, "port %u: faulted in %zu pages of memif shared memory", info_.port_id,
             pages);
  return pages;
}

bool Port::link_up_now() const noexcept {
  rte_eth_link link{};
  return rte_eth_link_get_nowait(info_.port_id, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

int Port::restart() noexcept {
  if (!started_) return -EINVAL;
  (void)stop_port(info_.port_id);
  int ret = start_port(info_.port_id);
  device_started_ = ret == 0;
  if (ret != 0)  // a memif client with no server yet: the next restart tries again
    DPFAB_DBG(FI_LOG_CORE, "port %s: restart: %s", info_.name.c_str(), err_text(ret).c_str());
  return ret;
}

Result<std::unique_ptr<Port>> Port::open(const std::string& spec,
                                         const std::optional<config::Ipv4Prefix>& ipv4,
                                         const config::Config& cfg) {
  std::unique_ptr<Port> p(new Port());
  Info& in = p->info_;
  in.spec = spec;
  auto [name, args] = split_spec(spec);
  uint16_t port_id = 0;
  uint16_t jumbo_mtu = 0;  // a created memif port's MTU (spec_mtu); 0: the device's own

  if (eal::is_pci_address(spec)) {
    // PCI devices are probed by EAL (-a <addr>); find the port it made.
    if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) != 0)
      return make_error(-FI_ENODEV, "port '" + spec +
                                        "': no ethdev for this PCI address (is it bound to "
                                        "vfio-pci and allowed with -a?)");
  } else if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) == 0) {
    // The application (which owns EAL) created it already: use it as it is.
    DPFAB_INFO(FI_LOG_CORE, "port %s exists already: using it", name.c_str());
  } else {
    auto mtu = spec_mtu(name, args);
    if (!mtu) return mtu.error();
    jumbo_mtu = mtu.value();
    auto made = create_vdev(spec, jumbo_mtu, &p->role_lock_, /*wait_busy=*/!cfg.shm);
    if (!made) return made.error();
    in.spec = *made;
    in.created = true;
    const std::string made_args = split_spec(*made).second;
    const bool memif = name.rfind("net_memif", 0) == 0;
    in.reconnect_by_restart = memif && get_arg(made_args, "role") == "client";
    if (memif) {
      // Both ends name the link alike: memif's socket (its default when none is given) and id.
      std::string sock = get_arg(made_args, "socket");
      std::string id = get_arg(made_args, "id");
      in.memif_link = (sock.empty() ? "/run/memif.sock" : sock) + "#" + (id.empty() ? "0" : id);
      in.memif_server = get_arg(made_args, "role") == "server";
    }
    if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) != 0)
      return make_error(-FI_ENODEV, "port '" + spec + "': created, but no ethdev port appeared");
  }
  in.port_id = port_id;
  in.name = name;

  rte_eth_dev_info dev{};
  if (int r = rte_eth_dev_info_get(port_id, &dev); r != 0)
    return make_error(-FI_EIO, "port '" + name + "': rte_eth_dev_info_get: " + err_text(r));
  in.driver = dev.driver_name ? dev.driver_name : "?";
  in.max_rx_queues = dev.max_rx_queues;
  in.max_tx_queues = dev.max_tx_queues;
  in.rx_offloads = dev.rx_offload_capa;
  in.tx_offloads = dev.tx_offload_capa;
  in.socket_id = rte_eth_dev_socket_id(port_id);
  if (in.socket_id < 0) in.socket_id = 0;

  if (!in.created) {
    // A port the application owns: report it, do not reconfigure it under its feet.
    rte_eth_macaddr_get(port_id, &in.mac);
    p->refresh_link();
  } else {
    char pool_name[RTE_MEMPOOL_NAMESIZE];
    std::snprintf(pool_name, sizeof(pool_name), "dpfab_mp_%u", port_id);
    unsigned cache = std::min<unsigned>(RTE_MEMPOOL_CACHE_MAX_SIZE, cfg.mbufs / 8);
    // One mbuf holds a whole frame of the MTU (and an 802.1Q tag): no chains on our side.
    const unsigned frame = jumbo_mtu + RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN;
    const auto buf_size = static_cast<uint16_t>(std::max<unsigned>(
        RTE_MBUF_DEFAULT_BUF_SIZE, RTE_PKTMBUF_HEADROOM + RTE_ALIGN_CEIL(frame, 64)));
    p->pool_ = make_pool(pool_name, cfg.mbufs, cache, in.socket_id, buf_size);
    if (!p->pool_)
      return make_error(
          -FI_ENOMEM, "port '" + name + "': cannot allocate " + std::to_string(cfg.mbufs) +
                          " mbufs: " + err_text(rte_errno) + " (lower FI_DPDK_MBUFS or raise -m)");

    in.rx_queues = 1;
    in.tx_queues = 1;
    in.rx_desc = cfg.rx_depth;
    in.tx_desc = cfg.tx_depth;
    // Ask for rx interrupts; PMDs without them refuse at configure or start, then retry without.
    int ret = -1;
    for (int want_intr = 1; want_intr >= 0 && ret != 0; --want_intr) {
      rte_eth_conf conf{};
      conf.intr_conf.rxq = want_intr;
      ret = rte_eth_dev_configure(port_id, in.rx_queues, in.tx_queues, &conf);
      if (ret == 0) ret = rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &in.rx_desc, &in.tx_desc);
      if (ret == 0)
        ret = rte_eth_rx_queue_setup(port_id, 0, in.rx_desc, in.socket_id, nullptr, p->pool_);
      if (ret == 0) ret = rte_eth_tx_queue_setup(port_id, 0, in.tx_desc, in.socket_id, nullptr);
      if (ret == 0) ret = start_port(port_id);
      if (ret != 0) {
        DPFAB_DBG(FI_LOG_CORE, "port %s: start with rxq interrupts=%d: %s", name.c_str(), want_intr,
                  err_text(ret).c_str());
        (void)stop_port(port_id);
      }
    }
    const std::string made_args = split_spec(in.spec).second;
    // memif role=auto: the server we became the client of may be gone by our start (it exited,
    // done, without waiting for a client). Like a client whose server died later, the port stays
    // down and restarts until a server comes (Port::restart): the role=auto pairing recovers
    // without tearing the device down and making it again, which can leave DPDK's interrupt
    // thread panicking (seen: 1 in 30).
    const bool server_gone =
        ret != 0 && get_arg(args, "role") == "auto" && vdev::memif_server_gone(name, made_args);
    if (ret != 0 && !server_gone)
      return make_error(-FI_EIO, "port '" + name + "': configure/start failed: " +
                                     start_failure_cause(name, made_args, ret));
    if (server_gone)
      DPFAB_INFO(FI_LOG_CORE,
                 "port %s: the memif server went away before this client started; the port "
                 "restarts when a server listens again",
                 name.c_str());
    p->started_ = true;
    p->device_started_ = !server_gone;
    rte_eth_macaddr_get(port_id, &in.mac);
    ensure_mac(port_id, &in.mac);
    in.rx_interrupt = probe_rx_interrupt(port_id);
    if (in.driver == "net_tap")
      separate_tap_kernel_mac(name, dev.if_index, split_spec(in.spec).second, in.mac);
    p->refresh_link();
  }
  rte_eth_dev_get_mtu(port_id, &in.mtu);
  if (jumbo_mtu) in.mtu = jumbo_mtu;  // memif: ours to choose (spec_mtu), not ethdev's 1500
  if (ipv4) {
    in.ipv4 = ipv4->addr;
    in.ipv4_prefix = ipv4->prefix_len;
  } else {
    in.ipv4 = auto_ipv4(in.mac);
    in.ipv4_prefix = 16;
    in.ipv4_auto = true;
  }
  return p;
}

Result<std::unique_ptr<Port>> Port::open_placeholder(const config::Config& cfg) {
  constexpr uint16_t kMtu = 9000;
  std::unique_ptr<Port> p(new Port());
  Info& in = p->info_;
  in.spec = std::string(kPlaceholderDevice) + ",no-rx=1";
  if (int r = rte_dev_probe(in.spec.c_str()); r != 0)
    return make_error(-FI_ENODEV,
                      "cannot create the placeholder port (" + in.spec + "): " + err_text(r));
  uint16_t port_id = 0;
  if (rte_eth_dev_get_port_by_name(kPlaceholderDevice, &port_id) != 0)
    return make_error(-FI_ENODEV, "placeholder port: no ethdev port appeared");
  in.created = true;
  in.placeholder = true;
  in.port_id = port_id;
  in.name = "shm";  // the domain's name
  in.driver = "net_null";
  in.mtu = kMtu;
  in.socket_id = std::max(0, rte_eth_dev_socket_id(port_id));
  // Its mbufs carry only the same-host path's frames (DGRAM, connection management), each copied
  // out of a ring: a small pool whose buffers hold a frame of the MTU.
  char pool_name[RTE_MEMPOOL_NAMESIZE];
  std::snprintf(pool_name, sizeof(pool_name), "dpfab_mp_%u", port_id);
  const unsigned n = std::min<unsigned>(cfg.mbufs, 1023);
  const unsigned frame = kMtu + RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN;
  const auto buf_size = static_cast<uint16_t>(RTE_PKTMBUF_HEADROOM + RTE_ALIGN_CEIL(frame, 64));
  p->pool_ = make_pool(pool_name, n, std::min<unsigned>(RTE_MEMPOOL_CACHE_MAX_SIZE, n / 8),
                       in.socket_id, buf_size);
  if (!p->pool_)
    return make_error(-FI_ENOMEM, "placeholder port: cannot allocate " + std::to_string(n) +
                                      " mbufs: " + err_text(rte_errno));
  in.rx_queues = in.tx_queues = 1;
  in.rx_desc = in.tx_desc = 64;
  rte_eth_conf conf{};
  int ret = rte_eth_dev_configure(port_id, 1, 1, &conf);
  if (ret == 0) ret = rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &in.rx_desc, &in.tx_desc);
  if (ret == 0)
    ret = rte_eth_rx_queue_setup(port_id, 0, in.rx_desc, in.socket_id, nullptr, p->pool_);
  if (ret == 0) ret = rte_eth_tx_queue_setup(port_id, 0, in.tx_desc, in.socket_id, nullptr);
  if (ret == 0) ret = start_port(port_id);
  if (ret != 0)
    return make_error(-FI_EIO, "placeholder port: configure/start failed: " + err_text(ret));
  p->started_ = true;
  p->device_started_ = true;
  rte_eth_macaddr_get(port_id, &in.mac);
  in.rx_interrupt = RxInterrupt::kNone;
  in.link_up = true;
  return p;
}

Result<const std::vector<std::unique_ptr<Port>>*> open_all(const config::Config& cfg) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (r.opened) return &r.ports;
  std::vector<std::unique_ptr<Port>> opened;
  for (size_t i = 0; i < cfg.ports.size(); ++i) {
    auto p = Port::open(cfg.ports[i], cfg.ipv4[i], cfg);
    if (!p && p.code() == -FI_EBUSY && cfg.shm) {
      // A memif socket two other processes hold (role=auto): its link is theirs, and the
      // same-host path reaches them (and everyone else on this host) anyway.
      DPFAB_INFO(FI_LOG_CORE, "%s; the same-host path reaches the processes of this host",
                 p.error().message.c_str());
      continue;
    }
    if (!p) {
      DPFAB_WARN(FI_LOG_CORE, "%s", p.error().message.c_str());
      return p.error();  // `opened` releases the ports made so far
    }
    DPFAB_INFO(FI_LOG_CORE, "port %u %s (%s) mac %s ipv4 %s/%u link %s", p.value()->info().port_id,
               p.value()->info().name.c_str(), p.value()->info().driver.c_str(),
               format_mac(p.value()->info().mac).c_str(),
               config::format_ipv4(p.value()->info().ipv4).c_str(), p.value()->info().ipv4_prefix,
               p.value()->info().link_up ? "up" : "down");
    opened.push_back(std::move(p.value()));
  }
  if (opened.empty() && cfg.shm) {
    // No port of our own (none configured, or the memif link is taken): a domain that reaches
    // this host's processes through the same-host path only.
    auto p = Port::open_placeholder(cfg);
    if (!p) {
      DPFAB_WARN(FI_LOG_CORE, "%s", p.error().message.c_str());
      return p.error();
    }
    DPFAB_INFO(FI_LOG_CORE, "no port: domain 'shm' reaches the processes of this host only");
    opened.push_back(std::move(p.value()));
  }
  if (opened.empty())
    return make_error(-FI_ENODEV,
                      "no port configured (FI_DPDK_PORTS) and the same-host path is "
                      "off (FI_DPDK_SHM=off): nothing to reach peers with");
  r.ports = std::move(opened);
  r.opened = true;
  return &r.ports;
}

const std::vector<std::unique_ptr<Port>>& ports() noexcept { return registry().ports; }

void close_all() noexcept {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.ports.clear();
  r.opened = false;
}

}  // namespace dpfab::port
