// SPDX-License-Identifier: BSD-3-Clause
//
// dpfab-bench-floor: the raw-port floor that dpfab-bench measures next to the dpdk provider. A
// pair of processes joined by a net_memif link of their own, configured as dpfab configures its
// memif ports (buffers that hold a whole frame, rings of 512), exchanging raw frames with
// rte_eth_tx_burst/rte_eth_rx_burst only: no libfabric, no dpfab headers built or checked, no
// reliability, no completion queue. A message of n bytes is the frames a dpdk DGRAM message of n
// bytes takes on that link (n + wire::kOverhead bytes, or several frames of the MTU), the first
// bytes of each frame the benchmark's header (common.h). So every dpdk figure of the same run
// reads as "floor + provider".
//
// The same protocol as the libfabric peers (peer.cc): dpfab-bench starts a server and a client
// (--role, --oob, --peer-config, --events-fd), the client drives the cases over the out-of-band
// socket and writes one event per line (plan, case, record) to the events fd, and the records
// carry the same fields and statistics (record.h). Workloads pingpong (the server sends a whole
// message back once all its frames arrived: store and forward, as a provider that completes a
// receive before the reply is sent) and stream (windows of messages, one credit frame each);
// mode spin only (nothing here sleeps). wakeup records are `unsupported`.
//
// Not linked with libdpfab: a DPDK application that takes only the frame format's constants from
// lib/wire/format.h (header-only), so that its frames follow the wire version.
//
//   dpfab-bench-floor --role server|client --oob PATH --peer-config JSON --memif DEVARGS
//                     --mtu N [--events-fd FD]
// DEVARGS: net_memif devargs without role (socket=..., socket-abstract=no, ...).
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <sched.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common.h"
#include "common/strings.h"
#include "oob.h"
#include "port/memif_prefault.h"
#include "record.h"
#include "wire/format.h"

using namespace dpfab::bench;

namespace {

constexpr int64_t kHandshakeNs = 5'000'000'000;
constexpr int64_t kLinkUpNs = 30'000'000'000;
constexpr int64_t kRestartNs = 500'000'000;  // a client link down this long is restarted
constexpr int64_t kRetryNs = 20'000'000;     // a client start that failed is tried again
constexpr uint16_t kBurst = 32;
constexpr uint16_t kPortId = 0;
constexpr unsigned kMbufs = 4095;
/// The most frames one message may take (its mbufs are held until the message is complete).
constexpr size_t kMaxFrames = 2048;
/// A frame's last flag bit: the last frame of its message.
constexpr uint16_t kFlagEndOfMessage = 0x8000;
/// memif buffers as dpfab makes them for its ports (lib/port/vdev.cc, kMemifBufSize: a frame of
/// MTU 9000 with a VLAN tag, rounded to 512), in rings of 512.
constexpr unsigned kMemifBufSize = 9216;

// ---- the port ---------------------------------------------------------------------------------

// "0-3,6" for the CPUs this process may run on: EAL's main lcore is mapped to all of them, as
// dpfab maps it (lib/eal/eal_args.cc), rather than pinned to one CPU.
std::string cpu_list() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<unsigned> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (unsigned c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus.empty() ? "0" : dpfab::str::format_cpu_list(cpus);
}

struct Port {
  rte_mempool* pool = nullptr;
  uint16_t mtu = 9000;

  // EAL, the memif port, its link. Returns "" or what failed.
  std::string open(bool server, const std::string& devargs) {
    std::string vdev = "--vdev=net_memif0,role=" + std::string(server ? "server" : "client") + "," +
                       devargs + ",bsize=" + std::to_string(kMemifBufSize) + ",rsize=9";
    std::vector<std::string> args = {"dpfab-bench-floor",
                                     "--no-huge",
                                     "--no-pci",
                                     "--no-shconf",
                                     "-m",
                                     "128",
                                     "--log-level=*:warning",
                                     "--lcores=0@(" + cpu_list() + ")",
                                     vdev};
    std::vector<char*> av;
    for (auto& a : args) av.push_back(a.data());
    if (rte_eal_init(static_cast<int>(av.size()), av.data()) < 0)
      return "rte_eal_init: " + std::string(rte_strerror(rte_errno));
    // One mbuf holds a whole frame of the MTU, as dpfab's pools (lib/port/port.cc).
    const unsigned frame = RTE_ALIGN_CEIL(mtu + RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN, 64u);
    const auto buf = static_cast<uint16_t>(
        std::max<unsigned>(RTE_MBUF_DEFAULT_BUF_SIZE, RTE_PKTMBUF_HEADROOM + frame));
    pool = rte_pktmbuf_pool_create("floor", kMbufs, 256, 0, buf, 0);
    if (!pool) return "mempool: " + std::string(rte_strerror(rte_errno));
    rte_eth_conf conf{};
    if (int r = rte_eth_dev_configure(kPortId, 1, 1, &conf)) return fail("configure", r);
    if (int r = rte_eth_rx_queue_setup(kPortId, 0, 512, 0, nullptr, pool)) return fail("rxq", r);
    if (int r = rte_eth_tx_queue_setup(kPortId, 0, 512, 0, nullptr)) return fail("txq", r);
    // A memif client connects at start only: started before its server listened (dpfab-bench
    // starts both at once), its start fails (the socket is not there yet: EPERM) or its link
    // never comes up. It starts again until the link is up, as dpfab's port engine does
    // (check_link). The server's start is final.
    const int64_t started = now_ns(), give_up = started + kLinkUpNs;
    bool running = false;
    if (int r = rte_eth_dev_start(kPortId); r == 0) {
      running = true;
    } else if (server) {
      return fail("start", r);
    }
    int64_t restart_at = started + (running ? kRestartNs : kRetryNs);
    rte_eth_link link{};
    do {
      if (running) rte_eth_link_get_nowait(kPortId, &link);
      const int64_t now = now_ns();
      if (now > give_up) return "the memif link did not come up within 30 s";
      if (running && link.link_status == RTE_ETH_LINK_UP) break;
      if (!server && now >= restart_at) {
        if (running) rte_eth_dev_stop(kPortId);
        running = rte_eth_dev_start(kPortId) == 0;  // 0 too when the stop failed: still started
        restart_at = now + (running ? kRestartNs : kRetryNs);
      }
      usleep(1000);
    } while (true);
    // The link's shared memory faulted in now, as dpfab does at link-up (the server walking
    // backward): pages would otherwise fault on the first laps of the rings, in the timed window.
    dpfab::port::prefault_memif_regions(server);
    return "";
  }
  void close() {
    rte_eth_dev_stop(kPortId);
    rte_eth_dev_close(kPortId);
    rte_eal_cleanup();
  }
  static std::string fail(const char* what, int r) {
    return std::string(what) + ": " + rte_strerror(r < 0 ? -r : r);
  }

  // Frames of a message of `size` bytes, and the bytes of frame i: the payload of a DGRAM
  // message on this MTU plus the headers in front of it.
  size_t payload_per_frame() const { return dpfab::wire::max_payload(mtu); }
  size_t frames_of(size_t size) const {
    const size_t per = payload_per_frame();
    return per ? std::max<size_t>(1, (size + per - 1) / per) : 0;
  }
  uint16_t frame_len(size_t size, size_t i) const {
    const size_t per = payload_per_frame();
    const size_t payload = std::min(per, size - std::min(size, i * per));
    return static_cast<uint16_t>(dpfab::wire::kOverhead + payload);
  }

  // Sends the frames of one message starting with header h (each frame carries it, the last one
  // with kFlagEndOfMessage), until deadline_ns. Returns "" or an error.
  std::string send_message(Header h, size_t size, int64_t deadline_ns) {
    const size_t n = frames_of(size);
    rte_mbuf* m[kBurst];
    for (size_t sent = 0; sent < n;) {
      const auto k = static_cast<uint16_t>(std::min<size_t>(kBurst, n - sent));
      if (rte_pktmbuf_alloc_bulk(pool, m, k) != 0) return "no mbufs";
      for (uint16_t j = 0; j < k; ++j) {
        const size_t i = sent + j;
        char* p = rte_pktmbuf_append(m[j], frame_len(size, i));
        Header fh = h;
        if (i + 1 == n) fh.flags |= kFlagEndOfMessage;
        std::memcpy(p, &fh, sizeof(fh));
      }
      if (std::string e = transmit(m, k, deadline_ns); !e.empty()) return e;
      sent += k;
    }
    return "";
  }

  // Gives all of m[0, n) to the port, retrying while its ring is full, until deadline_ns (what is
  // left then is freed). Returns "" or an error.
  static std::string transmit(rte_mbuf** m, uint16_t n, int64_t deadline_ns) {
    uint16_t done = 0;
    while (done < n) {
      done += rte_eth_tx_burst(kPortId, 0, m + done, n - done);
      if (done < n && now_ns() > deadline_ns) {
        rte_pktmbuf_free_bulk(m + done, n - done);
        return "the port took no frame until the timeout";
      }
    }
    return "";
  }
};

Header header_of(const rte_mbuf* m) {
  Header h{};
  if (rte_pktmbuf_data_len(m) >= sizeof(h))
    std::memcpy(&h, rte_pktmbuf_mtod(m, const void*), sizeof(h));
  return h;
}

struct CaseParams {
  uint32_t case_id;
  Workload workload;
  size_t size;
  uint32_t window;
};

// ---- client -----------------------------------------------------------------------------------

class FloorCase {
 public:
  FloorCase(const Options& o, Port& port, const CaseParams& p) : o_(o), port_(port), p_(p) {}

  Measured run() {
    if (std::string e = handshake(); !e.empty()) {
      m_.error = e;
      return m_;
    }
    if (p_.workload == Workload::kStream)
      windows();
    else
      rounds();
    Header end{p_.case_id, static_cast<uint16_t>(Op::kEnd), 0, 0, 0, 0};
    (void)port_.send_message(end, kMinSize, now_ns() + timeout_ns());
    return m_;
  }

 private:
  int64_t timeout_ns() const { return int64_t{o_.timeout_ms} * 1'000'000; }

  // Waits for the `want` frames of (case, seq) and returns the last one's header in *last, until
  // deadline_ns. Frames of other cases or rounds are dropped. Returns true when all came.
  bool wait_frames(uint32_t seq, size_t want, int64_t deadline_ns, Header* last) {
    rte_mbuf* pkts[kBurst];
    size_t got = 0;
    for (;;) {
      const uint16_t n = rte_eth_rx_burst(kPortId, 0, pkts, kBurst);
      for (uint16_t i = 0; i < n; ++i) {
        const Header h = header_of(pkts[i]);
        if (h.case_id == p_.case_id && h.seq == seq) {
          ++got;
          *last = h;
        }
      }
      if (n) rte_pktmbuf_free_bulk(pkts, n);
      if (got >= want) return true;
      if (!n && now_ns() > deadline_ns) return false;
    }
  }

  std::string handshake() {
    const int64_t end = now_ns() + kHandshakeNs;
    Header h{p_.case_id, static_cast<uint16_t>(Op::kPing), 0, 0, 0, 0};
    while (now_ns() < end) {
      if (std::string e = port_.send_message(h, p_.size, end); !e.empty()) return "handshake: " + e;
      Header got;
      if (wait_frames(0, port_.frames_of(p_.size), std::min(end, now_ns() + 200'000'000), &got))
        return "";
    }
    return "no answer from the peer within 5 s";
  }

  bool lose(const char* what) {
    if (++m_.lost > o_.max_lost)
      m_.error = std::to_string(m_.lost) + " " + what + " timed out (" +
                 std::to_string(o_.timeout_ms) + " ms each)";
    return m_.error.empty();
  }

  void start_window() {
    t_start_ = now_ns();
    u0_ = Usage::now();
  }
  void end_window() {
    m_.side.usage = Usage::now() - u0_;
    m_.duration_s = static_cast<double>(now_ns() - t_start_) * 1e-9;
  }

  void rounds() {
    const int64_t dur = static_cast<int64_t>(o_.duration_s * 1e9);
    const int64_t warm_end = now_ns() + dur / 4;
    uint32_t seq = 1;
    for (uint64_t i = 0; i < o_.warmup && now_ns() < warm_end && m_.error.empty(); i++)
      round(seq++, false);
    start_window();
    m_.samples_us.reserve(std::min<uint64_t>(o_.iterations, 1'000'000));
    while (m_.error.empty() && m_.iterations < o_.iterations &&
           (now_ns() - t_start_ < dur || m_.samples_us.empty()))
      round(seq++, true);
    end_window();
    m_.messages = 2 * m_.samples_us.size();
  }

  void round(uint32_t seq, bool timed) {
    const int64_t t0 = now_ns();
    Header h{p_.case_id,
             static_cast<uint16_t>(Op::kPing),
             static_cast<uint16_t>(timed ? kFlagTimed : 0),
             seq,
             0,
             0};
    if (std::string e = port_.send_message(h, p_.size, t0 + timeout_ns()); !e.empty()) {
      m_.error = "send: " + e;
      return;
    }
    Header got;
    const bool ok = wait_frames(seq, port_.frames_of(p_.size), t0 + timeout_ns(), &got);
    const int64_t t1 = now_ns();
    if (!timed) return;
    m_.iterations++;
    if (!ok) {
      lose("replies");
      return;
    }
    m_.samples_us.push_back(static_cast<double>(t1 - t0) * 0.5e-3);
  }

  void windows() {
    const uint32_t w = std::max<uint32_t>(1, p_.window);
    const int64_t dur = static_cast<int64_t>(o_.duration_s * 1e9);
    const int64_t warm_end = now_ns() + dur / 4;
    uint32_t seq = 1;
    const uint64_t warm_windows = std::max<uint64_t>(1, o_.warmup / w);
    for (uint64_t i = 0; i < warm_windows && now_ns() < warm_end && m_.error.empty(); i++)
      window(seq++, w, false);
    start_window();
    while (m_.error.empty() && m_.messages < o_.iterations &&
           (now_ns() - t_start_ < dur || m_.samples_us.empty()))
      window(seq++, w, true);
    end_window();
  }

  void window(uint32_t seq, uint32_t w, bool timed) {
    const int64_t t0 = now_ns();
    for (uint32_t k = 0; k < w; k++) {
      const auto flags =
          static_cast<uint16_t>((timed ? kFlagTimed : 0) | (k + 1 == w ? kFlagLast : 0));
      Header h{p_.case_id, static_cast<uint16_t>(Op::kData), flags, seq, k, 0};
      if (std::string e = port_.send_message(h, p_.size, now_ns() + timeout_ns()); !e.empty()) {
        m_.error = "send: " + e;
        return;
      }
    }
    Header got{};
    const bool ok = wait_frames(seq, 1, now_ns() + timeout_ns(), &got);
    const int64_t t1 = now_ns();
    if (!timed) return;
    m_.iterations++;
    if (!ok) {
      lose("credits");
      return;
    }
    m_.messages += got.aux;
    m_.lost += w - std::min(w, got.aux);
    m_.samples_us.push_back(static_cast<double>(t1 - t0) * 1e-3);
  }

  const Options& o_;
  Port& port_;
  CaseParams p_;
  Measured m_;
  int64_t t_start_ = 0;
  Usage u0_;
};

class Client {
 public:
  Client(const Options& o, Port& port, int events_fd, std::string mtu_note)
      : o_(o), port_(port), events_fd_(events_fd), note_(std::move(mtu_note)) {}

  int run(const std::string& oob_path, const std::string& port_error) {
    if (std::string e = oob_.connect(oob_path, kOobTimeoutMs); !e.empty()) {
      emit({{"event", "provider_error"}, {"error", e}});
      return 1;
    }
    emit({{"event", "plan"},
          {"cases", o_.workloads.size() * o_.sizes.size()},
          {"offered", {{"raw", "net_memif"}}},
          {"absent", json::object()}});
    CaseKey key{"", o_.providers.at(0), "net_memif", note_, "net_memif0", "raw", "spin", "none", 0};
    for (const auto& w : o_.workloads) {
      for (auto size : o_.sizes) {
        key.workload = w;
        key.size = size;
        emit({{"event", "case"},
              {"workload", w},
              {"ep_type", "raw"},
              {"mode", "spin"},
              {"size", size}});
        json rec;
        auto wl = parse_workload(w);
        if (!port_error.empty())
          rec = failed_record(key, "error", port_error);
        else if (!wl)
          rec = failed_record(key, "unsupported", "unknown workload");
        else if (*wl == Workload::kWakeup)
          rec = failed_record(key, "unsupported",
                              "the raw port floor busy-polls: it has no wake-up to measure");
        else if (*wl != Workload::kPingpong && *wl != Workload::kStream)
          rec = failed_record(key, "unsupported",
                              "the raw port floor is measured for pingpong and stream only");
        else if (size < kMinSize)
          rec = failed_record(
              key, "unsupported",
              "size below the benchmark's " + std::to_string(kMinSize) + "-byte header");
        else if (port_.frames_of(size) > kMaxFrames || port_.frames_of(size) == 0)
          rec = failed_record(key, "unsupported",
                              "a message of " + std::to_string(size) + " bytes takes more than " +
                                  std::to_string(kMaxFrames) + " frames of MTU " +
                                  std::to_string(port_.mtu));
        else
          rec = run_case(key, *wl, size);
        emit({{"event", "record"}, {"record", rec}});
      }
    }
    oob_.send({{"cmd", "quit"}});
    oob_.recv(5000);
    return 0;
  }

 private:
  void emit(const json& j) { write_event(events_fd_, j); }
  std::optional<json> ask(const json& cmd) { return oob_.ask(cmd); }

  json run_case(const CaseKey& key, Workload w, size_t size) {
    CaseParams p{++case_id_, w, size, window()};
    auto ack = ask({{"cmd", "run"}, {"case", p.case_id}, {"size", size}, {"window", p.window}});
    if (!ack || !ack->value("ok", false))
      return failed_record(key, "error",
                           ack ? "server: " + ack->value("error", "?") : "server did not answer");
    Measured m = FloorCase(o_, port_, p).run();
    auto server = ask({{"cmd", "end"}});
    json rec = base_record(key);
    std::string error = m.error;
    if (!server)
      error = error.empty() ? "the server did not report its figures" : error;
    else if (error.empty() && !server->value("error", "").empty())
      error = "server: " + server->value("error", "");
    else if (error.empty() && !server->value("timed", false))
      error = "the server saw no message of the timed window";
    if (error.empty() && m.samples_us.empty())
      error = "no figure in the timed window (" + std::to_string(m.lost) + " lost)";
    if (server) server->erase("timed"), server->erase("error");
    fill_figures(rec, m, server ? *server : json(nullptr), size);
    if (!error.empty()) {
      rec["status"] = "error";
      rec["error"] = error;
    }
    return rec;
  }

  // The window of the libfabric peers' stream (peer.cc run_case, endpoint.cc open): --window, at
  // most half the receives a peer keeps posted, which are at most 64 and no more buffers of the
  // run's largest size than 64 MiB hold (at least 4).
  uint32_t window() const {
    uint64_t largest = kMinSize;
    for (auto s : o_.sizes) largest = std::max<uint64_t>(largest, s);
    const uint64_t buf = (std::min<uint64_t>(largest, uint64_t{16} << 20) + 63) / 64 * 64;
    const uint64_t posted = std::clamp<uint64_t>((uint64_t{64} << 20) / buf, 4, 64);
    return static_cast<uint32_t>(std::max<uint64_t>(1, std::min<uint64_t>(o_.window, posted / 2)));
  }

  const Options& o_;
  Port& port_;
  int events_fd_;
  std::string note_;
  Oob oob_;
  uint32_t case_id_ = 0;
};

// ---- server -----------------------------------------------------------------------------------

// Serves one case until its END frame arrives or the client speaks on the oob socket: pingpong
// messages go back once all their frames are here (the same mbufs: no copy), stream messages are
// counted and each window answered with one credit frame. Returns the server's figures.
json serve_case(Port& port, Oob& oob, const CaseParams& p, int timeout_ms) {
  bool timed = false, done = false;
  Usage u0;
  std::string error;
  uint32_t batch = 0, count = 0;
  bool credited = true;
  std::vector<rte_mbuf*> held;
  held.reserve(kMaxFrames);
  const int64_t slice = server_slice_ns(timeout_ms);
  auto credit = [&](uint32_t b, uint32_t n) {
    Header c{p.case_id, static_cast<uint16_t>(Op::kCredit), 0, b, n, 0};
    std::string e = port.send_message(c, kMinSize, now_ns() + int64_t{timeout_ms} * 1'000'000);
    if (!e.empty() && error.empty()) error = "sending a credit: " + e;
  };
  rte_mbuf* pkts[kBurst];
  int64_t idle_since = now_ns();
  while (!done && error.empty()) {
    const uint16_t n = rte_eth_rx_burst(kPortId, 0, pkts, kBurst);
    if (n == 0) {
      if (now_ns() - idle_since > slice) {
        if (oob.readable()) break;
        idle_since = now_ns();
      }
      continue;
    }
    idle_since = now_ns();
    for (uint16_t i = 0; i < n; ++i) {
      rte_mbuf* m = pkts[i];
      const Header h = header_of(m);
      if (h.case_id != p.case_id) {
        rte_pktmbuf_free(m);
        continue;
      }
      if ((h.flags & kFlagTimed) && !timed) {
        timed = true;
        u0 = Usage::now();
      }
      if (h.op == static_cast<uint16_t>(Op::kPing)) {
        held.push_back(m);
        if ((h.flags & kFlagEndOfMessage) || held.size() >= kMaxFrames) {
          std::string e = Port::transmit(held.data(), static_cast<uint16_t>(held.size()),
                                         now_ns() + int64_t{timeout_ms} * 1'000'000);
          if (!e.empty() && error.empty()) error = "sending a reply: " + e;
          held.clear();
        }
        continue;
      }
      rte_pktmbuf_free(m);
      if (h.op == static_cast<uint16_t>(Op::kData) && (h.flags & kFlagEndOfMessage)) {
        if (h.seq != batch) {
          if (!credited && count > 0) credit(batch, count);  // the window's last one was lost
          batch = h.seq;
          count = 0;
          credited = false;
        }
        count++;
        if (!credited && ((h.flags & kFlagLast) || count >= p.window)) {
          credit(batch, count);
          credited = true;
        }
      } else if (h.op == static_cast<uint16_t>(Op::kEnd)) {
        done = true;
      }
    }
  }
  if (!held.empty()) rte_pktmbuf_free_bulk(held.data(), static_cast<unsigned>(held.size()));
  SideFigures side;
  if (timed) side.usage = Usage::now() - u0;
  json j = side_json(side);
  j["timed"] = timed;
  j["error"] = error;
  return j;
}

int run_server(Port& port, const Options& o, const std::string& oob_path,
               const std::string& port_error) {
  Oob oob;
  if (std::string e = oob.accept(oob_path, kOobTimeoutMs); !e.empty()) {
    std::fprintf(stderr, "dpfab-bench-floor server: %s\n", e.c_str());
    return 1;
  }
  for (;;) {
    auto msg = oob.recv(120'000);
    if (!msg) return oob.closed() ? 0 : 1;
    const std::string cmd = msg->value("cmd", "");
    if (cmd == "run") {
      CaseParams p{msg->value("case", 0u), Workload::kPingpong, msg->value("size", size_t{0}),
                   msg->value("window", 1u)};
      oob.send(oob_reply(port_error));
      json fig = port_error.empty() ? serve_case(port, oob, p, o.timeout_ms) : json::object();
      if (!oob.recv(kOobTimeoutMs)) return 1;  // "end"
      oob.send(fig);
    } else if (cmd == "quit") {
      oob.send(oob_reply(""));
      return 0;
    } else {
      oob.send(oob_reply("unknown command " + cmd));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dpfab-bench-floor: raw memif frames between two processes (dpfab-bench's floor)"};
  std::string role, oob, peer_config, memif;
  int events_fd = -1;
  unsigned mtu = 9000;
  app.add_option("--role", role)->required()->check(CLI::IsMember({"server", "client"}));
  app.add_option("--oob", oob)->required();
  app.add_option("--peer-config", peer_config)->required();
  app.add_option("--memif", memif, "net_memif devargs without role")->required();
  app.add_option("--mtu", mtu)->check(CLI::Range(576u, 9000u));
  app.add_option("--events-fd", events_fd);
  CLI11_PARSE(app, argc, argv);
  json j = json::parse(peer_config, nullptr, false);
  if (j.is_discarded()) return 2;
  const Options o = j.get<Options>();
  const bool server = role == "server";
  Port port;
  port.mtu = static_cast<uint16_t>(mtu);
  // A port that cannot be opened is reported in every record (client) or every answer (server).
  const std::string port_error = port.open(server, memif);
  if (!port_error.empty()) std::fprintf(stderr, "dpfab-bench-floor: %s\n", port_error.c_str());
  const std::string note = "raw frames: payload + " + std::to_string(dpfab::wire::kOverhead) +
                           " header bytes, MTU " + std::to_string(mtu);
  const int rc = server ? run_server(port, o, oob, port_error)
                        : Client(o, port, events_fd, note).run(oob, port_error);
  if (port_error.empty()) port.close();
  return rc;
}
