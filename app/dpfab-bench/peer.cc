// SPDX-License-Identifier: BSD-3-Clause
#include "peer.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "endpoint.h"
#include "oob.h"
#include "record.h"
#include "rma.h"

namespace dpfab::bench {

namespace {

constexpr int kConnectTimeoutMs = 5'000;         // MSG connection set-up
constexpr int64_t kHandshakeNs = 5'000'000'000;  // first message of a case may take this long

// ---- messages ---------------------------------------------------------------------------------

Header read_header(const Rx& rx) {
  Header h;
  std::memcpy(&h, rx.data, sizeof(h));
  return h;
}

// Sends a message of `size` bytes that starts with h. Returns 0 or a negative -FI_E*.
int send_msg(Endpoint& ep, const Header& h, size_t size, int64_t deadline_ns) {
  int slot = ep.acquire_tx(deadline_ns);
  if (slot < 0) return slot;
  std::memcpy(ep.tx_buf(static_cast<uint32_t>(slot)), &h, sizeof(h));
  return ep.send(static_cast<uint32_t>(slot), size, deadline_ns);
}

// Waits for the message (op, seq) of case `case_id`, dropping others. Returns 1 (and *out), 0 at
// the deadline, or a negative -FI_E*.
int wait_for(Endpoint& ep, uint32_t case_id, Op op, uint32_t seq, int64_t deadline_ns,
             Header* out) {
  for (;;) {
    int r = ep.wait_rx(deadline_ns);
    if (r <= 0) return r;
    Rx rx;
    bool found = false;
    while (ep.pop_rx(&rx)) {
      if (rx.len >= kMinSize) {
        Header h = read_header(rx);
        if (h.case_id == case_id && h.op == static_cast<uint16_t>(op) && h.seq == seq) {
          *out = h;
          found = true;
        }
      }
      int ret = ep.repost(rx.slot);
      if (ret) return ret;
      if (found) return 1;
    }
  }
}

// ---- client workloads -------------------------------------------------------------------------

struct CaseParams {
  uint32_t case_id;
  Workload workload;
  size_t size;
  uint32_t window;
};

class ClientCase {
 public:
  ClientCase(const Options& o, Endpoint& ep, const CaseParams& p) : o_(o), ep_(ep), p_(p) {}

  Measured run() {
    if (std::string e = handshake(); !e.empty()) {
      m_.error = e;
      return m_;
    }
    switch (p_.workload) {
      case Workload::kPingpong:
      case Workload::kWakeup:
        rounds();
        break;
      case Workload::kStream:
        windows();
        break;
      default:  // the one-sided workloads run in run_rma_group, never here
        m_.error = "not a message workload";
        break;
    }
    // Best effort: tells the server the case is over (the out-of-band "end" follows anyway).
    Header h{p_.case_id, static_cast<uint16_t>(Op::kEnd), 0, 0, 0, 0};
    send_msg(ep_, h, p_.size, now_ns() + timeout_ns());
    if (m_.error.empty()) m_.error = ep_.take_error();
    return m_;
  }

 private:
  int64_t timeout_ns() const { return int64_t{o_.timeout_ms} * 1'000'000; }

  // The first message of a case: repeated until the peer answers (a memif link coming up, a
  // connection being made), for at most kHandshakeNs.
  std::string handshake() {
    int64_t end = now_ns() + kHandshakeNs;
    Header h{p_.case_id, static_cast<uint16_t>(Op::kPing), 0, 0, 0, 0};
    while (now_ns() < end) {
      int r = send_msg(ep_, h, p_.size, end);
      if (r < 0) return fi_error("handshake send", r) + detail();
      Header got;
      r = wait_for(ep_, p_.case_id, Op::kPong, 0, std::min(end, now_ns() + 200'000'000), &got);
      if (r == 1) return "";
      if (r < 0) return fi_error("handshake wait", r) + detail();
    }
    return "no answer from the peer within 5 s" + detail();
  }

  std::string detail() {
    std::string e = ep_.take_error();
    return e.empty() ? "" : " (" + e + ")";
  }

  // A loss: counted; too many end the case with an error. Returns false to stop.
  bool lose(const char* what) {
    if (++m_.lost > o_.max_lost)
      m_.error = std::to_string(m_.lost) + " " + what + " timed out (" +
                 std::to_string(o_.timeout_ms) + " ms each)" + detail();
    return m_.error.empty();
  }

  void start_window() {
    t_start_ = now_ns();
    u0_ = Usage::now();
    w0_ = ep_.wakeups();
    mw0_ = ep_.missed_wakeups();
  }
  void end_window() {
    int64_t t_end = now_ns();
    m_.side.usage = Usage::now() - u0_;
    m_.side.wakeups = ep_.wakeups() - w0_;
    m_.side.missed_wakeups = ep_.missed_wakeups() - mw0_;
    m_.duration_s = static_cast<double>(t_end - t_start_) * 1e-9;
  }

  // pingpong: half round trips; wakeup: the server's wake latency after an idle gap.
  void rounds() {
    bool wake = p_.workload == Workload::kWakeup;
    uint64_t warmup = wake ? std::min<uint64_t>(o_.warmup, 5) : o_.warmup;
    int64_t dur = static_cast<int64_t>(o_.duration_s * 1e9);
    int64_t warm_end = now_ns() + dur / 4;
    uint32_t seq = 1;
    for (uint64_t i = 0; i < warmup && now_ns() < warm_end && m_.error.empty(); i++)
      round(seq++, false, wake);
    start_window();
    m_.samples_us.reserve(std::min<uint64_t>(o_.iterations, 1'000'000));
    // Bounded by iterations and time, but never ends without a figure (losses bound that).
    while (m_.error.empty() && m_.iterations < o_.iterations &&
           (now_ns() - t_start_ < dur || m_.samples_us.empty()))
      round(seq++, true, wake);
    end_window();
    m_.messages = 2 * m_.samples_us.size();
  }

  void round(uint32_t seq, bool timed, bool wake) {
    if (wake) {
      timespec gap{0, static_cast<long>(o_.gap_us) * 1000};
      gap.tv_sec = gap.tv_nsec / 1'000'000'000;
      gap.tv_nsec %= 1'000'000'000;
      nanosleep(&gap, nullptr);
    }
    int64_t t0 = now_ns();
    Header h{p_.case_id,
             static_cast<uint16_t>(Op::kPing),
             static_cast<uint16_t>(timed ? kFlagTimed : 0),
             seq,
             0,
             static_cast<uint64_t>(wake ? t0 : 0)};
    int r = send_msg(ep_, h, p_.size, t0 + timeout_ns());
    if (r < 0) {
      m_.error = fi_error("fi_send", r) + detail();
      return;
    }
    Header got;
    r = wait_for(ep_, p_.case_id, Op::kPong, seq, t0 + timeout_ns(), &got);
    int64_t t1 = now_ns();
    if (r < 0) {
      m_.error = fi_error("waiting for a reply", r) + detail();
      return;
    }
    if (!timed) return;
    m_.iterations++;
    if (r == 0) {
      lose("replies");
      return;
    }
    m_.samples_us.push_back(wake ? static_cast<double>(got.t_ns) * 1e-3
                                 : static_cast<double>(t1 - t0) * 0.5e-3);
  }

  // stream: windows of messages, each acknowledged by one credit message with the count received.
  void windows() {
    uint32_t w = std::max<uint32_t>(1, p_.window);
    int64_t dur = static_cast<int64_t>(o_.duration_s * 1e9);
    int64_t warm_end = now_ns() + dur / 4;
    uint32_t seq = 1;
    uint64_t warm_windows = std::max<uint64_t>(1, o_.warmup / w);
    for (uint64_t i = 0; i < warm_windows && now_ns() < warm_end && m_.error.empty(); i++)
      window(seq++, w, false);
    start_window();
    while (m_.error.empty() && m_.messages < o_.iterations &&
           (now_ns() - t_start_ < dur || m_.samples_us.empty()))
      window(seq++, w, true);
    end_window();
  }

  void window(uint32_t seq, uint32_t w, bool timed) {
    int64_t t0 = now_ns();
    for (uint32_t k = 0; k < w; k++) {
      uint16_t flags =
          static_cast<uint16_t>((timed ? kFlagTimed : 0) | (k + 1 == w ? kFlagLast : 0));
      Header h{p_.case_id, static_cast<uint16_t>(Op::kData), flags, seq, k, 0};
      int r = send_msg(ep_, h, p_.size, now_ns() + timeout_ns());
      if (r < 0) {
        m_.error = fi_error("fi_send", r) + detail();
        return;
      }
    }
    Header got;
    int r = wait_for(ep_, p_.case_id, Op::kCredit, seq, now_ns() + timeout_ns(), &got);
    int64_t t1 = now_ns();
    if (r < 0) {
      m_.error = fi_error("waiting for a credit", r) + detail();
      return;
    }
    if (!timed) return;
    m_.iterations++;
    if (r == 0) {
      lose("credits");
      return;
    }
    m_.messages += got.aux;
    m_.lost += w - std::min(w, got.aux);
    m_.samples_us.push_back(static_cast<double>(t1 - t0) * 1e-3);
  }

  const Options& o_;
  Endpoint& ep_;
  CaseParams p_;
  Measured m_;
  int64_t t_start_ = 0;
  Usage u0_;
  uint64_t w0_ = 0, mw0_ = 0;
};

// ---- server side of a case --------------------------------------------------------------------

// Serves one case until its END message arrives or the client speaks on the oob socket.
// Returns the server's figures for the timed window.
json serve_case(Endpoint& ep, Oob& oob, const CaseParams& p, int timeout_ms) {
  bool timed = false, done = false;
  Usage u0;
  uint64_t w0 = 0, mw0 = 0;
  std::string error;
  uint32_t batch = 0, count = 0;
  bool credited = true;
  auto credit = [&](uint32_t b, uint32_t n) {
    Header c{p.case_id, static_cast<uint16_t>(Op::kCredit), 0, b, n, 0};
    int r = send_msg(ep, c, kMinSize, now_ns() + int64_t{timeout_ms} * 1'000'000);
    if (r < 0 && error.empty()) error = fi_error("sending a credit", r);
  };
  while (!done && error.empty()) {
    int r = ep.wait_rx(now_ns() + server_slice_ns(timeout_ms));
    if (r < 0) {
      error = fi_error("waiting", r);
      break;
    }
    if (r == 0) {
      if (oob.readable()) break;
      continue;
    }
    Rx rx;
    while (ep.pop_rx(&rx)) {
      int64_t t = now_ns();
      Header h{};
      bool ours = rx.len >= kMinSize;
      if (ours) {
        h = read_header(rx);
        ours = h.case_id == p.case_id;
      }
      if (ours && (h.flags & kFlagTimed) && !timed) {
        timed = true;
        u0 = Usage::now();
        w0 = ep.wakeups();
        mw0 = ep.missed_wakeups();
      }
      if (ours && h.op == static_cast<uint16_t>(Op::kPing)) {
        Header pong = h;
        pong.op = static_cast<uint16_t>(Op::kPong);
        pong.t_ns = h.t_ns ? static_cast<uint64_t>(t) - h.t_ns : 0;
        int s = send_msg(ep, pong, rx.len, t + int64_t{timeout_ms} * 1'000'000);
        if (s < 0 && error.empty()) error = fi_error("sending a reply", s);
      } else if (ours && h.op == static_cast<uint16_t>(Op::kData)) {
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
      } else if (ours && h.op == static_cast<uint16_t>(Op::kEnd)) {
        done = true;
      }
      int ret = ep.repost(rx.slot);
      if (ret && error.empty()) error = fi_error("fi_recv", ret);
    }
  }
  SideFigures side;
  if (timed) {
    side.usage = Usage::now() - u0;
    side.wakeups = ep.wakeups() - w0;
    side.missed_wakeups = ep.missed_wakeups() - mw0;
  }
  std::string e = ep.take_error();
  if (error.empty()) error = e;
  json j = side_json(side);
  j["timed"] = timed;
  j["error"] = error;
  return j;
}

}  // namespace

// ---- server -----------------------------------------------------------------------------------

int run_server(const Options& o, const std::string& oob_path) {
  const std::string& provider = o.providers.at(0);
  Oob oob;
  if (std::string e = oob.accept(oob_path, kOobTimeoutMs); !e.empty()) {
    std::fprintf(stderr, "dpfab-bench server: %s\n", e.c_str());
    return 1;
  }
  std::unique_ptr<Endpoint> ep;
  std::unique_ptr<RmaRegion> region;     // one-sided groups: our region...
  uint64_t peer_key = 0, peer_addr = 0;  // ...and the client's
  for (;;) {
    auto msg = oob.recv(120'000);
    if (!msg) return oob.closed() ? 0 : 1;
    std::string cmd = msg->value("cmd", "");
    if (cmd == "open") {
      region.reset();
      ep = std::make_unique<Endpoint>();
      std::string ep_type = msg->value("ep", ""), why;
      const bool rma = msg->value("rma", false);
      const size_t buf = msg->value("buf", size_t{kMinSize});
      InfoPtr info = choose_info(fabric_provider(provider), ep_type, o.layered, o.iface, &why, rma);
      std::string e =
          info ? ep->open(info.get(), parse_mode(msg->value("mode", "spin")).value_or(Mode::kSpin),
                          buf, msg->value("wait_on", "cq") == "cntr")
               : why;
      if (e.empty() && rma) {
        region = std::make_unique<RmaRegion>();
        e = region->open(ep->domain(), ep->info(), 2 * buf);
      }
      std::string name;
      if (e.empty()) e = ep->local_name(&name, ep_type == "msg");
      json r = oob_reply(e);
      r["name"] = to_hex(name.data(), name.size());
      if (region) r["key"] = region->key(), r["addr"] = region->addr();
      oob.send(r);
    } else if (cmd == "rma_peer") {
      peer_key = msg->value("key", uint64_t{0});
      peer_addr = msg->value("addr", uint64_t{0});
      oob.send(oob_reply(region ? "" : "no one-sided group open"));
    } else if (cmd == "accept") {
      oob.send(oob_reply(ep ? ep->accept(kConnectTimeoutMs) : "no group open"));
    } else if (cmd == "peer") {
      oob.send(oob_reply(ep ? ep->add_peer(from_hex(msg->value("name", ""))) : "no group open"));
    } else if (cmd == "run") {
      CaseParams p{msg->value("case", 0u), Workload::kPingpong, msg->value("size", size_t{0}),
                   msg->value("window", 1u)};
      const auto w = parse_workload(msg->value("workload", "pingpong"));
      if (w && is_rma(*w)) {
        if (!ep || !region) {
          oob.send(oob_reply("no one-sided group open"));
          continue;
        }
        // The region is cleared before the client is told to start.
        std::memset(region->data(), 0, region->size());
        oob.send(oob_reply(""));
        Usage used;
        const std::string e =
            serve_rma(*ep, oob, *region, peer_key, peer_addr, *w, p.size, o.timeout_ms, &used);
        SideFigures side;
        side.usage = used;
        json fig = side_json(side);
        fig["timed"] = true;
        fig["error"] = e;
        auto end = oob.recv(kOobTimeoutMs);
        if (!end) return 1;
        oob.send(fig);
        continue;
      }
      oob.send(oob_reply(ep ? "" : "no group open"));
      json fig = ep ? serve_case(*ep, oob, p, o.timeout_ms) : json::object();
      auto end = oob.recv(kOobTimeoutMs);
      if (!end) return 1;
      oob.send(fig);
    } else if (cmd == "close") {
      region.reset();
      ep.reset();
      oob.send(oob_reply(""));
    } else if (cmd == "quit") {
      region.reset();
      ep.reset();
      oob.send(oob_reply(""));
      return 0;
    } else {
      oob.send(oob_reply("unknown command " + cmd));
    }
  }
}

// ---- client -----------------------------------------------------------------------------------

namespace {

class Client {
 public:
  Client(const Options& o, int events_fd) : o_(o), events_fd_(events_fd) {}

  int run(const std::string& oob_path) {
    const std::string& provider = o_.providers.at(0);
    if (std::string e = oob_.connect(oob_path, kOobTimeoutMs); !e.empty()) {
      emit({{"event", "provider_error"}, {"error", e}});
      return 1;
    }
    // Which endpoint types the provider offers, and the plan.
    std::vector<std::pair<std::string, InfoPtr>> groups;
    json absent = json::object();
    for (const auto& t : o_.ep_types) {
      std::string why;
      InfoPtr info = choose_info(fabric_provider(provider), t, o_.layered, o_.iface, &why);
      if (info)
        groups.emplace_back(t, std::move(info));
      else
        absent[t] = why;
    }
    json offered = json::object();
    for (auto& [t, info] : groups) offered[t] = info->fabric_attr->prov_name;
    // Message workloads run in every group; one-sided ones once per RDM/MSG endpoint type, in
    // the spin mode, on entries that offer RMA and atomics.
    size_t msg_workloads = 0;
    for (const auto& w : o_.workloads)
      msg_workloads += !(parse_workload(w) && is_rma(*parse_workload(w)));
    const size_t rma_workloads = o_.workloads.size() - msg_workloads;
    std::vector<std::pair<std::string, InfoPtr>> rma_groups;
    if (rma_workloads)
      for (const auto& t : o_.ep_types) {
        if (t == "dgram") continue;
        std::string why;
        InfoPtr info = choose_info(fabric_provider(provider), t, o_.layered, o_.iface, &why, true);
        if (info)
          offered[t + "-rma"] = info->fabric_attr->prov_name;
        else
          absent[t + "-rma"] = why;
        rma_groups.emplace_back(t, std::move(info));
        rma_why_.push_back(why);
      }
    size_t cases =
        groups.size() * o_.wait_on.size() * o_.modes.size() * msg_workloads * o_.sizes.size() +
        rma_groups.size() * rma_workloads * o_.sizes.size();
    emit({{"event", "plan"}, {"cases", cases}, {"offered", offered}, {"absent", absent}});
    size_t max_size = kMinSize;
    for (auto s : o_.sizes) max_size = std::max<size_t>(max_size, s);

    for (auto& [ep_type, info] : groups) {
      for (const auto& object : o_.wait_on)
        for (const auto& mode : o_.modes) run_group(ep_type, info.get(), mode, object, max_size);
    }
    for (size_t g = 0; g < rma_groups.size(); ++g)
      run_rma_group(rma_groups[g].first, rma_groups[g].second.get(), rma_why_[g], max_size);
    oob_.send({{"cmd", "quit"}});
    oob_.recv(5000);
    return 0;
  }

 private:
  void emit(const json& j) { write_event(events_fd_, j); }
  std::optional<json> ask(const json& cmd) { return oob_.ask(cmd); }

  void run_group(const std::string& ep_type, const fi_info* info, const std::string& mode_str,
                 const std::string& wait_on, size_t max_size) {
    CaseKey key{"",
                o_.providers[0],
                info->fabric_attr->prov_name ? info->fabric_attr->prov_name : "",
                info->fabric_attr->name ? info->fabric_attr->name : "",
                info->domain_attr->name ? info->domain_attr->name : "",
                ep_type,
                mode_str,
                wait_on,
                0};
    auto mode = parse_mode(mode_str);
    std::string unsupported, error;
    Endpoint ep;
    bool server_open = false;
    if (!mode) {
      unsupported = "unknown mode";
    } else {
      auto r = ask({{"cmd", "open"},
                    {"ep", ep_type},
                    {"mode", mode_str},
                    {"wait_on", wait_on},
                    {"buf", max_size}});
      if (!r) {
        error = "no answer from the server process";
      } else {
        server_open = true;
        if (!r->value("ok", false)) {
          unsupported = r->value("error", "?");
        } else if (std::string e = ep.open(info, *mode, max_size, wait_on == "cntr"); !e.empty()) {
          unsupported = e;
        } else {
          std::string server_name = from_hex(r->value("name", ""));
          error = connect(ep, ep_type, server_name);
        }
      }
    }
    for (const auto& w : o_.workloads) {
      if (auto wl = parse_workload(w); wl && is_rma(*wl)) continue;  // run_rma_group's
      for (auto size : o_.sizes) {
        key.workload = w;
        key.size = size;
        emit({{"event", "case"},
              {"workload", w},
              {"ep_type", ep_type},
              {"mode", wait_on == "cntr" ? "cntr-" + mode_str : mode_str},
              {"size", size}});
        json rec;
        auto wl = parse_workload(w);
        if (!unsupported.empty())
          rec = failed_record(key, "unsupported", unsupported);
        else if (!error.empty())
          rec = failed_record(key, "error", error);
        else if (!wl)
          rec = failed_record(key, "unsupported", "unknown workload");
        else if (size < kMinSize)
          rec = failed_record(
              key, "unsupported",
              "size below the benchmark's " + std::to_string(kMinSize) + "-byte header");
        else if (size > ep.max_size())
          rec = failed_record(key, "unsupported",
                              "size above " + std::to_string(ep.max_size()) +
                                  " (the smaller of max_msg_size and the benchmark's 16 MiB)");
        else
          rec = run_case(ep, key, *wl, size);
        emit({{"event", "record"}, {"record", rec}});
        // A server that stopped answering: the remaining cases of the group cannot run.
        if (rec["status"] == "error" && oob_.closed()) error = "the server process is gone";
      }
    }
    if (server_open && !oob_.closed()) ask({{"cmd", "close"}});
  }

  // The one-sided workloads of one endpoint type (rma.h): an endpoint with FI_RMA and FI_ATOMIC
  // and a registered region on each side, the spin mode, every size.
  void run_rma_group(const std::string& ep_type, const fi_info* info, const std::string& why,
                     size_t max_size) {
    CaseKey key{"", o_.providers[0], "", "", "", ep_type, "spin", "cq", 0};
    if (info) {
      key.prov_name = info->fabric_attr->prov_name ? info->fabric_attr->prov_name : "";
      key.fabric = info->fabric_attr->name ? info->fabric_attr->name : "";
      key.domain = info->domain_attr->name ? info->domain_attr->name : "";
    }
    std::string unsupported = info ? "" : why, error;
    Endpoint ep;
    RmaRegion region;
    uint64_t rkey = 0, raddr = 0;
    bool server_open = false;
    if (info) {
      auto r = ask({{"cmd", "open"},
                    {"ep", ep_type},
                    {"mode", "spin"},
                    {"wait_on", "cq"},
                    {"buf", max_size},
                    {"rma", true}});
      if (!r) {
        error = "no answer from the server process";
      } else {
        server_open = true;
        if (!r->value("ok", false)) {
          unsupported = r->value("error", "?");
        } else if (std::string e = ep.open(info, Mode::kSpin, max_size); !e.empty()) {
          unsupported = e;
        } else if (std::string e = region.open(ep.domain(), ep.info(), 2 * max_size); !e.empty()) {
          unsupported = e;
        } else {
          rkey = r->value("key", uint64_t{0});
          raddr = r->value("addr", uint64_t{0});
          error = connect(ep, ep_type, from_hex(r->value("name", "")));
          if (error.empty()) {
            auto pr = ask({{"cmd", "rma_peer"}, {"key", region.key()}, {"addr", region.addr()}});
            if (!pr || !pr->value("ok", false))
              error = pr ? "server: " + pr->value("error", "?") : "no answer from the server";
          }
        }
      }
    }
    for (const auto& w : o_.workloads) {
      auto wl = parse_workload(w);
      if (!wl || !is_rma(*wl)) continue;
      for (auto size : o_.sizes) {
        key.workload = w;
        key.size = size;
        emit({{"event", "case"},
              {"workload", w},
              {"ep_type", ep_type},
              {"mode", "spin"},
              {"size", size}});
        json rec;
        if (!unsupported.empty())
          rec = failed_record(key, "unsupported", unsupported);
        else if (!error.empty())
          rec = failed_record(key, "error", error);
        else if (size < kMinSize)
          rec = failed_record(key, "unsupported",
                              "size below the benchmark's " + std::to_string(kMinSize) + " bytes");
        else if (size > ep.max_size())
          rec = failed_record(key, "unsupported",
                              "size above " + std::to_string(ep.max_size()) +
                                  " (the smaller of max_msg_size and the benchmark's 16 MiB)");
        else
          rec = run_rma_case(ep, region, rkey, raddr, key, *wl, size);
        emit({{"event", "record"}, {"record", rec}});
        if (rec["status"] == "error" && oob_.closed()) error = "the server process is gone";
      }
    }
    if (server_open && !oob_.closed()) ask({{"cmd", "close"}});
  }

  json run_rma_case(Endpoint& ep, RmaRegion& region, uint64_t rkey, uint64_t raddr,
                    const CaseKey& key, Workload w, size_t size) {
    const uint32_t window = std::min<uint32_t>(o_.window, ep.tx_depth());
    auto ack = ask({{"cmd", "run"},
                    {"case", ++case_id_},
                    {"workload", key.workload},
                    {"size", size},
                    {"window", window}});
    if (!ack || !ack->value("ok", false))
      return failed_record(key, "error",
                           ack ? "server: " + ack->value("error", "?") : "server did not answer");
    RmaMeasured rm = run_rma_client(o_, ep, region, rkey, raddr, w, size, window);
    auto server = ask({{"cmd", "end"}});
    Measured m;
    m.samples_us = std::move(rm.samples_us);
    m.iterations = rm.iterations;
    m.messages = rm.ops;
    m.duration_s = rm.duration_s;
    m.side.usage = rm.usage;
    json rec = base_record(key);
    std::string error = rm.error;
    if (!server)
      error = error.empty() ? "the server did not report its figures" : error;
    else if (error.empty() && !server->value("error", "").empty())
      error = "server: " + server->value("error", "");
    if (error.empty() && m.samples_us.empty()) error = "no figure in the timed window";
    if (server) server->erase("timed"), server->erase("error");
    fill_figures(rec, m, server ? *server : json(nullptr), size);
    if (!error.empty()) {
      rec["status"] = "error";
      rec["error"] = error;
    }
    return rec;
  }

  std::string connect(Endpoint& ep, const std::string& ep_type, const std::string& server_name) {
    if (ep_type == "msg") {
      if (!oob_.send({{"cmd", "accept"}})) return "the server process is gone";
      std::string e = ep.connect(server_name, kConnectTimeoutMs);
      auto r = oob_.recv(kOobTimeoutMs);
      if (!e.empty()) return e;
      if (!r) return "no answer from the server process";
      if (!r->value("ok", false)) return "server: " + r->value("error", "?");
      return "";
    }
    std::string mine;
    if (std::string e = ep.local_name(&mine, false); !e.empty()) return e;
    if (std::string e = ep.add_peer(server_name); !e.empty()) return e;
    auto r = ask({{"cmd", "peer"}, {"name", to_hex(mine.data(), mine.size())}});
    if (!r) return "no answer from the server process";
    if (!r->value("ok", false)) return "server: " + r->value("error", "?");
    return "";
  }

  json run_case(Endpoint& ep, const CaseKey& key, Workload w, size_t size) {
    CaseParams p{++case_id_, w, size, std::min({o_.window, ep.rx_depth() / 2, ep.tx_depth()})};
    auto ack = ask({{"cmd", "run"},
                    {"case", p.case_id},
                    {"workload", key.workload},
                    {"size", size},
                    {"window", p.window}});
    if (!ack || !ack->value("ok", false))
      return failed_record(key, "error",
                           ack ? "server: " + ack->value("error", "?") : "server did not answer");
    Measured m = ClientCase(o_, ep, p).run();
    auto server = ask({{"cmd", "end"}});
    json rec = base_record(key);
    std::string error = m.error;
    if (!server) {
      error = error.empty() ? "the server did not report its figures" : error;
    } else if (error.empty() && !server->value("error", "").empty()) {
      error = "server: " + server->value("error", "");
    } else if (error.empty() && !server->value("timed", false)) {
      error = "the server saw no message of the timed window";
    }
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

  const Options& o_;
  int events_fd_;
  Oob oob_;
  uint32_t case_id_ = 0;
  std::vector<std::string> rma_why_;  // why each one-sided group has no entry ("" when it has)
};

}  // namespace

int run_client(const Options& o, const std::string& oob_path, int events_fd) {
  return Client(o, events_fd).run(oob_path);
}

}  // namespace dpfab::bench
