// SPDX-License-Identifier: BSD-3-Clause
//
// Telemetry of the wake path: /dpfab/stats (a flat dict: the wakeup thread, each port's wake
// sources, sleeps and data-path counters, each worker lcore), for dpdk-telemetry.py and
// dpfab-info --stats.
#include <rte_mempool.h>
#include <rte_telemetry.h>

#include <algorithm>
#include <string>

#include "progress/engine.h"
#include "progress/wakeup.h"

namespace dpfab::progress {
namespace {

void add_u64(rte_tel_data* d, const std::string& k, uint64_t v) {
  rte_tel_data_add_dict_u64(d, k.c_str(), v);
}

int tel_stats(const char*, const char*, rte_tel_data* d) {
  WakeupStats s = wakeup_stats();
  rte_tel_data_start_dict(d);
  add_u64(d, "wakeup_running", s.running);
  add_u64(d, "wakeup_loops", s.loops);
  add_u64(d, "wakeup_doorbells", s.doorbells);
  add_u64(d, "wakeup_timer_fires", s.timer_fires);
  for (const auto& p : s.ports) {
    std::string k = "port" + std::to_string(p.port_id) + "_";
    rte_tel_data_add_dict_string(d, (k + "name").c_str(), p.name.c_str());
    rte_tel_data_add_dict_string(d, (k + "rx_interrupt").c_str(), p.rx_interrupt.c_str());
    add_u64(d, k + "watched", p.watched);
    add_u64(d, k + "watchers", static_cast<uint64_t>(std::max(p.watchers, 0)));
    add_u64(d, k + "watch_starts", p.watch_starts);
    add_u64(d, k + "doorbells", p.doorbells);
    add_u64(d, k + "interrupts", p.interrupts);
    add_u64(d, k + "idle_polls", p.idle_polls);
    add_u64(d, k + "wakeups", p.wakeups);
    add_u64(d, k + "events_delivered", p.events);
    add_u64(d, k + "rx_busy", p.rx_busy);
    add_u64(d, k + "fd_mutes", p.fd_mutes);
    rte_tel_data_add_dict_string(d, (k + "memif_kick").c_str(), p.kick.c_str());
    add_u64(d, k + "kicks", p.kicks);
    add_u64(d, k + "idle_poll_us", static_cast<uint64_t>(p.idle_poll_ns / 1000));
    rte_tel_data_add_dict_int(d, (k + "owner_lcore").c_str(), p.owner_lcore);
  }
  // The data path of each port (lib/progress/engine.h EngineStats, the decoder's rejects).
  PortEngine::for_each(
      [](const PortEngine& e, void* arg) {
        auto* d = static_cast<rte_tel_data*>(arg);
        const std::string k = "port" + std::to_string(e.port()->info().port_id) + "_";
        const EngineStats& st = e.stats();
        add_u64(d, k + "rx_frames", st.rx_frames.load(std::memory_order_relaxed));
        add_u64(d, k + "tx_frames", st.tx_frames.load(std::memory_order_relaxed));
        add_u64(d, k + "tx_full", st.tx_full.load(std::memory_order_relaxed));
        add_u64(d, k + "tx_link_down", st.tx_link_down.load(std::memory_order_relaxed));
        add_u64(d, k + "restarts", st.restarts.load(std::memory_order_relaxed));
        add_u64(d, k + "burst_faults", st.burst_faults.load(std::memory_order_relaxed));
        add_u64(d, k + "no_listener", st.no_listener.load(std::memory_order_relaxed));
        add_u64(d, k + "not_ours", st.not_ours.load(std::memory_order_relaxed));
        add_u64(d, k + "arp", st.arp.load(std::memory_order_relaxed));
        add_u64(d, k + "arp_sent", st.arp_sent.load(std::memory_order_relaxed));
        add_u64(d, k + "rx_rejected", e.decode_stats().rejected());
        // Of those, frames of dpfab wire version 1 (wire/format.h): a peer runs an older dpfab.
        add_u64(d, k + "rx_old_version", e.decode_stats().get(wire::Verdict::kOldVersion));
        // Mbufs of the port's pool not free (held by the PMD, queued, or leaked), but the frames
        // the last poll step handled, which the next frees: tests compare it before and after an
        // event.
        if (rte_mempool* mp = e.pool()) {
          const uint64_t in_use = rte_mempool_in_use_count(mp);
          const uint64_t done = e.done_frames();
          add_u64(d, k + "mbufs_in_use", in_use > done ? in_use - done : 0);
        }
        // Fault injection (faults.h; all 0 when off).
        add_u64(d, k + "faults_dropped", st.faults.dropped.load(std::memory_order_relaxed));
        add_u64(d, k + "faults_reordered", st.faults.reordered.load(std::memory_order_relaxed));
        add_u64(d, k + "faults_duplicated", st.faults.duplicated.load(std::memory_order_relaxed));
        add_u64(d, k + "faults_corrupted", st.faults.corrupted.load(std::memory_order_relaxed));
        // FI_EP_MSG (proto/msg_endpoint.h): connection management and stale traffic dropped.
        const proto::MsgPortStats& ms = e.msg_stats();
        add_u64(d, k + "msg_cm_rx", ms.cm_rx.load(std::memory_order_relaxed));
        add_u64(d, k + "msg_cm_tx", ms.cm_tx.load(std::memory_order_relaxed));
        add_u64(d, k + "msg_cm_rejected", ms.cm_rejected.load(std::memory_order_relaxed));
        add_u64(d, k + "msg_stale_cm", ms.stale_cm.load(std::memory_order_relaxed));
        add_u64(d, k + "msg_stale_data", ms.stale_data.load(std::memory_order_relaxed));
        add_u64(d, k + "msg_not_connected", ms.not_connected.load(std::memory_order_relaxed));
        add_u64(d, k + "msg_connreqs", ms.connreqs.load(std::memory_order_relaxed));
        add_u64(d, k + "msg_connreq_repeats", ms.connreq_repeats.load(std::memory_order_relaxed));
        add_u64(d, k + "msg_connreq_full", ms.connreq_full.load(std::memory_order_relaxed));
        add_u64(d, k + "msg_no_listener", ms.no_listener.load(std::memory_order_relaxed));
        add_u64(d, k + "msg_cm_busy", ms.cm_busy.load(std::memory_order_relaxed));
        // Sleeping on the port (port_wake.h): how its sleepers are woken, and what they did.
        const PortWake& w = e.wake();
        rte_tel_data_add_dict_string(d, (k + "sleep").c_str(), w.describe());
        const PortSleepStats& ws = w.stats();
        add_u64(d, k + "sleep_arms", ws.arms.load(std::memory_order_relaxed));
        add_u64(d, k + "sleep_kick_wakes", ws.kick_wakes.load(std::memory_order_relaxed));
        add_u64(d, k + "sleep_intr_enables", ws.intr_enables.load(std::memory_order_relaxed));
        add_u64(d, k + "sleep_timer_arms", ws.timer_arms.load(std::memory_order_relaxed));
        add_u64(d, k + "sleep_not_safe", ws.not_safe.load(std::memory_order_relaxed));
        add_u64(d, k + "sleep_sigio_runs", ws.sigio_runs.load(std::memory_order_relaxed));
        add_u64(d, k + "spin_budget_us",
                static_cast<uint64_t>(ws.spin_budget_ns.load(std::memory_order_relaxed) / 1000));
        add_u64(d, k + "wake_cost_us",
                static_cast<uint64_t>(ws.wake_cost_ns.load(std::memory_order_relaxed) / 1000));
        // The same-host path (shm/node.h): what it carried next to the port's rx/tx_frames.
        const shm::Node* n = e.local_node();
        add_u64(d, k + "shm", n != nullptr);
        if (!n) return;
        const shm::NodeStats& ns = n->stats();
        add_u64(d, k + "shm_node", n->id());
        add_u64(d, k + "shm_links_up", n->links_up());
        add_u64(d, k + "shm_links_made", ns.links_up.load(std::memory_order_relaxed));
        add_u64(d, k + "shm_links_lost", ns.links_lost.load(std::memory_order_relaxed));
        add_u64(d, k + "shm_links_failed", ns.links_failed.load(std::memory_order_relaxed));
        add_u64(d, k + "shm_hellos_refused", ns.hellos_refused.load(std::memory_order_relaxed));
        add_u64(d, k + "shm_corrupt", ns.corrupt.load(std::memory_order_relaxed));
        add_u64(d, k + "shm_tx_records", n->tx_records());
        add_u64(d, k + "shm_tx_bytes", n->tx_bytes());
        add_u64(d, k + "shm_tx_full", ns.tx_full.load(std::memory_order_relaxed));
        add_u64(d, k + "shm_rx_records", ns.rx_records.load(std::memory_order_relaxed));
        add_u64(d, k + "shm_rx_bytes", ns.rx_bytes.load(std::memory_order_relaxed));
        add_u64(d, k + "shm_rx_frames", st.local_frames.load(std::memory_order_relaxed));
        add_u64(d, k + "shm_rx_rdm", st.local_rdm.load(std::memory_order_relaxed));
        add_u64(d, k + "shm_rx_no_mbuf", st.local_no_mbuf.load(std::memory_order_relaxed));
        add_u64(d, k + "shm_rx_no_listener", st.local_no_listener.load(std::memory_order_relaxed));
        add_u64(d, k + "shm_rx_rejected", st.local_rejected.load(std::memory_order_relaxed));
        add_u64(d, k + "shm_kicks_sent", ns.kicks_sent.load(std::memory_order_relaxed));
        add_u64(d, k + "shm_cma_reads", ns.cma_reads.load(std::memory_order_relaxed));
        add_u64(d, k + "shm_cma_bytes", ns.cma_bytes.load(std::memory_order_relaxed));
        add_u64(d, k + "shm_cma_failed", ns.cma_failed.load(std::memory_order_relaxed));
      },
      d);
  for (const auto& l : s.lcores) {
    std::string k = "lcore" + std::to_string(l.lcore) + "_";
    add_u64(d, k + "parked", l.parked);
    add_u64(d, k + "busy_polls", l.busy_polls);
    add_u64(d, k + "idle_polls", l.idle_polls);
    add_u64(d, k + "parks", l.parks);
    add_u64(d, k + "backouts", l.backouts);
    add_u64(d, k + "parked_us", l.parked_ns / 1000);
    for (size_t c = 0; c < kCauses; ++c)
      add_u64(d, k + "unparks_" + cause_name(static_cast<Cause>(c)), l.unparks[c]);
  }
  return 0;
}

}  // namespace

void register_telemetry() noexcept {
  rte_telemetry_register_cmd("/dpfab/stats", tel_stats,
                             "dpfab wakeup thread, port and lcore statistics. Takes no parameters");
}

}  // namespace dpfab::progress
