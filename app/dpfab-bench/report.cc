// SPDX-License-Identifier: BSD-3-Clause
#include "report.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "record.h"

namespace dpfab::bench {

namespace {

std::string num(const json& v) {
  if (!v.is_number()) return "-";
  char b[32];
  if (v.is_number_integer()) {
    std::snprintf(b, sizeof(b), "%lld", v.get<long long>());
    return b;
  }
  double d = v.get<double>();
  if (d != 0 && std::fabs(d) < 10)
    std::snprintf(b, sizeof(b), "%.2f", d);
  else if (std::fabs(d) < 1000)
    std::snprintf(b, sizeof(b), "%.1f", d);
  else
    std::snprintf(b, sizeof(b), "%.0f", d);
  return b;
}

std::string group_name(const json& r) {
  return r.value("provider", "") + "/" + r.value("ep_type", "");
}

bool ok(const json& r) { return r.value("status", "") == "ok"; }

// The mode as the table and plots show it: "fd", or "cntr-fd" when it waited on a counter.
std::string mode_label(const json& r) {
  return (r.value("wait_on", "cq") == "cntr" ? "cntr-" : "") + r.value("mode", "");
}

// The first size of the run (the plots and the comparison use it).
uint64_t first_size(const json& records) {
  for (const auto& r : records) return r.value("size", uint64_t{0});
  return 0;
}

// One colour per mode in every panel (dashed when it waited on a counter).
std::string mode_style(const json& r) {
  static const char* const colours[] = {"#9400d3", "#009e73", "#56b4e9", "#e69f00", "#c8b400",
                                        "#0072b2", "#e51e10", "#000000", "#8b4513"};
  auto m = parse_mode(r.value("mode", ""));
  std::string c = colours[m ? static_cast<int>(*m) : 7];
  return "lc rgb '" + c + "' dt " + (r.value("wait_on", "cq") == "cntr" ? "2" : "1");
}

std::string shorten(std::string s, size_t n) {
  for (auto& c : s)
    if (c == '\n') c = ' ';
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}

// Whether both processes were preempted about once per iteration or more: two busy-polling
// processes on oversubscribed CPUs (other work running), each handoff waiting for the scheduler to
// run the peer again. The latency is then the scheduler's rotation (milliseconds), not the
// provider's.
bool preempted(const json& r) {
  if (!r["ivcsw"].is_number() || !r["iterations"].is_number()) return false;
  const double iterations = r["iterations"].get<double>();
  return iterations > 0 && r["ivcsw"].get<double>() >= iterations / 4;
}

}  // namespace

void print_table(FILE* out, const json& records) {
  bool missed = false, contended = false;
  for (auto w : kWorkloadNames) {
    bool header = false;
    for (const auto& r : records) {
      if (r.value("workload", "") != w) continue;
      if (!header) {
        const char* kind = w == "pingpong"    ? "half round trip"
                           : w == "stream"    ? "time of one window (send to credit)"
                           : w == "wakeup"    ? "one-way wake-up after an idle gap"
                           : w == "rma-write" ? "half round trip of RMA writes (memory polled)"
                           : w == "rma-read"  ? "completion of one RMA read (a round trip)"
                           : w == "rma-bw"    ? "time of one window of RMA writes"
                                              : "time of one window of 8-byte fetch-and-adds";
        std::fprintf(out, "\n== %s (latency in us: %s)\n", std::string(w).c_str(), kind);
        std::fprintf(out, "%-16s %-12s %6s %8s %8s %8s %8s %8s %9s %8s %7s %7s %7s %6s\n",
                     "provider/ep", "mode", "size", "p50", "p90", "p99", "p99.9", "max", "msg/s",
                     "cpu_us/m", "vcsw", "ivcsw", "wakeups", "missed");
        header = true;
      }
      std::fprintf(out, "%-16s %-12s %6llu ", group_name(r).c_str(), mode_label(r).c_str(),
                   static_cast<unsigned long long>(r.value("size", uint64_t{0})));
      if (!r["lat_p50_us"].is_number()) {
        std::fprintf(out, "%s: %s\n", r.value("status", "").c_str(),
                     shorten(r.value("error", ""), 90).c_str());
        continue;
      }
      std::fprintf(out, "%8s %8s %8s %8s %8s %9s %8s %7s %7s %7s %6s", num(r["lat_p50_us"]).c_str(),
                   num(r["lat_p90_us"]).c_str(), num(r["lat_p99_us"]).c_str(),
                   num(r["lat_p999_us"]).c_str(), num(r["lat_max_us"]).c_str(),
                   num(r["msg_rate"]).c_str(), num(r["cpu_us_per_msg"]).c_str(),
                   num(r["vcsw"]).c_str(), num(r["ivcsw"]).c_str(), num(r["wakeups"]).c_str(),
                   num(r["missed_wakeups"]).c_str());
      if (!ok(r))
        std::fprintf(out, "  %s: %s", r.value("status", "").c_str(),
                     shorten(r.value("error", ""), 60).c_str());
      if (r["missed_wakeups"].is_number() && r["missed_wakeups"].get<uint64_t>() > 0) {
        std::fprintf(out, " *");
        missed = true;
      }
      if (preempted(r)) {
        std::fprintf(out, " !");
        contended = true;
      }
      std::fprintf(out, "\n");
    }
  }
  if (missed)
    std::fprintf(out,
                 "\n* missed wake-ups: a blocked wait was ended by the benchmark's timeout "
                 "(--timeout-ms; the server's slice), not by the provider, although a completion "
                 "was ready: the latency is that bound, not the mode's (doc/benchmark.md).\n");
  if (contended)
    std::fprintf(out,
                 "\n! preempted: ivcsw at least a quarter of the iterations. Other work held the "
                 "CPUs and each handoff between the two busy-polling processes waited for the "
                 "scheduler to run the peer: the latency is the scheduler's (milliseconds), not "
                 "the provider's (doc/benchmark.md).\n");
}

namespace {

constexpr const char* kFloor = "memif-floor";

// "1.21 (+0.41)": a dpdk figure and what it adds to the floor's.
std::string over_cell(const json* r, const json* floor) {
  if (!r || !(*r)["lat_p50_us"].is_number()) return "-";
  std::string cell = num((*r)["lat_p50_us"]);
  if (floor && (*floor)["lat_p50_us"].is_number()) {
    char b[32];
    std::snprintf(b, sizeof(b), " (%+.2f)",
                  (*r)["lat_p50_us"].get<double>() - (*floor)["lat_p50_us"].get<double>());
    cell += b;
  }
  return cell;
}

// dpdk over the raw-port floor measured in the same run: for each workload the floor ran and
// each size, the floor's p50 and, per dpdk endpoint type and mode, its p50 and what it adds.
void print_floor(FILE* out, const json& records) {
  // (workload, size) -> floor record; (workload, size, mode) -> ep type -> dpdk record.
  std::map<std::pair<std::string, uint64_t>, const json*> floor;
  std::map<std::tuple<std::string, uint64_t, std::string>, std::map<std::string, const json*>> dpdk;
  std::set<std::string> why_not;
  for (const auto& r : records) {
    const std::string w = r.value("workload", "");
    const uint64_t size = r.value("size", uint64_t{0});
    if (r.value("provider", "") == kFloor) {
      if (ok(r))
        floor[{w, size}] = &r;
      else if (!r.value("error", "").empty() && w != "wakeup")
        why_not.insert(r.value("status", "") + ": " + r.value("error", ""));
    } else if ((r.value("provider", "") == "dpdk" || r.value("provider", "") == kDpdkPort) &&
               ok(r) && w != "wakeup") {
      dpdk[{w, size, mode_label(r)}][r.value("ep_type", "")] = &r;
    }
  }
  if (floor.empty()) {
    for (const auto& e : why_not)
      std::fprintf(out, "\n== raw-port floor (%s): %s\n", kFloor, e.c_str());
    return;
  }
  std::fprintf(out,
               "\n== dpdk over the raw-port floor (%s: raw frames over memif, same run), p50 us "
               "and (dpdk - floor)\n",
               kFloor);
  std::fprintf(out, "%-9s %7s %-12s %9s  %-17s %-17s %-17s\n", "workload", "size", "mode", "floor",
               "dpdk/dgram", "dpdk/rdm", "dpdk/msg");
  for (const auto& [key, eps] : dpdk) {
    const auto& [w, size, mode] = key;
    auto f = floor.find({w, size});
    if (f == floor.end()) continue;
    auto at = [&](const char* ep) -> const json* {
      auto it = eps.find(ep);
      return it == eps.end() ? nullptr : it->second;
    };
    std::fprintf(out, "%-9s %7llu %-12s %9s  %-17s %-17s %-17s\n", w.c_str(),
                 static_cast<unsigned long long>(size), mode.c_str(),
                 num((*f->second)["lat_p50_us"]).c_str(), over_cell(at("dgram"), f->second).c_str(),
                 over_cell(at("rdm"), f->second).c_str(), over_cell(at("msg"), f->second).c_str());
  }
}

// The one-sided workloads: dpdk's figure at each size, and its ratio to each other provider's
// (same endpoint type), from the same run. Latency for rma-write and rma-read, bandwidth for
// rma-bw, the rate for atomic.
void print_rma_comparison(FILE* out, const json& records) {
  for (std::string w : {"rma-write", "rma-read", "rma-bw", "atomic"}) {
    const char* field = w == "rma-bw"   ? "bandwidth_mbps"
                        : w == "atomic" ? "msg_rate"
                                        : "lat_p50_us";
    std::map<std::pair<std::string, uint64_t>, double> at;  // (provider/ep, size) -> figure
    std::set<uint64_t> sizes;
    std::vector<std::string> others;
    for (const auto& r : records) {
      if (r.value("workload", "") != w || !ok(r) || !r[field].is_number()) continue;
      const std::string g = group_name(r);
      const uint64_t size = r.value("size", uint64_t{0});
      at[{g, size}] = r[field].get<double>();
      sizes.insert(size);
      if (r.value("provider", "").rfind("dpdk", 0) != 0 &&
          std::find(others.begin(), others.end(), g) == others.end())
        others.push_back(g);
    }
    // Each dpdk label (common.h: over its port, over the same-host path) against the others.
    for (std::string d : {"dpdk-port/rdm", "dpdk-port/msg", "dpdk-shm/rdm", "dpdk-shm/msg"}) {
      bool any = false;
      for (uint64_t size : sizes) any |= at.count({d, size}) > 0;
      if (!any || others.empty()) continue;
      std::fprintf(out, "\n== %s %s: %s value and %s/other ratio, same run\n", w.c_str(),
                   w == "rma-bw"   ? "bandwidth (10^6 B/s)"
                   : w == "atomic" ? "rate (atomics/s)"
                                   : "p50 latency us",
                   d.c_str(), d.c_str());
      std::fprintf(out, "%8s %10s", "size", "dpdk");
      for (const auto& g : others) std::fprintf(out, "  %-16s", g.c_str());
      std::fprintf(out, "\n");
      for (uint64_t size : sizes) {
        auto it = at.find({d, size});
        if (it == at.end()) continue;
        std::fprintf(out, "%8llu %10s", static_cast<unsigned long long>(size),
                     num(json(it->second)).c_str());
        for (const auto& g : others) {
          auto o = at.find({g, size});
          char b[32] = "n/a";
          if (o != at.end() && o->second > 0)
            std::snprintf(b, sizeof(b), "x%.3g", it->second / o->second);
          std::fprintf(out, "  %-16s", b);
        }
        std::fprintf(out, "\n");
      }
    }
  }
}

}  // namespace

// The floor under dpdk over its port; the one-sided comparisons; then, for each dpdk label
// (common.h: dpdk-shm, dpdk-port), its RDM group (else DGRAM) against every other provider's
// groups, same mode and size, from one run.
void print_comparison(FILE* out, const json& records) {
  print_floor(out, records);
  print_rma_comparison(out, records);
  uint64_t size = first_size(records);
  for (std::string w : {"pingpong", "wakeup"}) {
    // (group, mode) -> record, for this workload and size.
    std::map<std::pair<std::string, std::string>, const json*> at;
    std::vector<std::string> others, dpdk_groups;
    for (const auto& r : records) {
      if (r.value("workload", "") != w || r.value("size", uint64_t{0}) != size || !ok(r)) continue;
      at[{group_name(r), mode_label(r)}] = &r;
      std::string g = group_name(r);
      if (r.value("provider", "").rfind("dpdk", 0) != 0 && r.value("provider", "") != kFloor &&
          std::find(others.begin(), others.end(), g) == others.end())
        others.push_back(g);
    }
    for (std::string label : {std::string(kDpdkShm), std::string(kDpdkPort), std::string("dpdk")}) {
      for (std::string ep : {"rdm", "dgram"}) {
        const std::string g = label + "/" + ep;
        bool any = false;
        for (const auto& [k, v] : at) any |= k.first == g;
        if (any) {
          dpdk_groups.push_back(g);
          break;
        }
      }
    }
    if (dpdk_groups.empty() || others.empty()) continue;
    for (const std::string& ref : dpdk_groups) {
      std::vector<const json*> dpdk;
      for (std::string prefix : {"", "cntr-"})
        for (auto m : kModeNames)
          if (auto it = at.find({ref, prefix + std::string(m)}); it != at.end())
            dpdk.push_back(it->second);
      for (const char* field : {"lat_p50_us", "cpu_us_per_msg", "os_wakeups_per_msg"}) {
        const std::string f = field;
        std::fprintf(out,
                     "\n== %s vs stock, %s %llu B, %s: %s value and %s/other ratio, same mode "
                     "[other's spin]\n",
                     ref.c_str(), w.c_str(), static_cast<unsigned long long>(size),
                     f == "lat_p50_us"       ? "p50 latency us"
                     : f == "cpu_us_per_msg" ? "CPU us per message"
                                             : "OS wakeups per message (voluntary context "
                                               "switches of both processes)",
                     ref.c_str(), ref.c_str());
        std::fprintf(out, "%-12s %9s", "mode", "value");
        for (const auto& g : others) std::fprintf(out, "  %-19s", g.c_str());
        std::fprintf(out, "\n");
        for (const json* d : dpdk) {
          std::string mode = mode_label(*d);
          std::fprintf(out, "%-12s %9s", mode.c_str(), num((*d)[field]).c_str());
          double dv = (*d)[field].is_number() ? (*d)[field].get<double>() : NAN;
          for (const auto& g : others) {
            auto ratio = [&](const std::string& m) -> std::string {
              auto it = at.find({g, m});
              if (it == at.end() || !(*it->second)[field].is_number()) return "n/a";
              double ov = (*it->second)[field].get<double>();
              if (ov <= 0 || std::isnan(dv)) return "n/a";
              double q = dv / ov;
              char b[32];
              std::snprintf(b, sizeof(b),
                            q >= 100   ? "x%.0f"
                            : q >= 10  ? "x%.1f"
                            : q >= 0.1 ? "x%.2f"
                                       : "x%.2g",
                            q);
              return b;
            };
            std::string cell = ratio(mode) + " [" + ratio("spin") + "]";
            std::fprintf(out, "  %-19s", cell.c_str());
          }
          std::fprintf(out, "\n");
        }
      }
    }
  }
}

std::string write_csv(const std::string& path, const json& records) {
  std::ofstream f(path);
  if (!f) return "cannot write " + path;
  auto cell = [](const json& v) -> std::string {
    if (v.is_null()) return "";
    if (v.is_string()) {
      std::string s = v.get<std::string>(), q = "\"";
      for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
      return q + "\"";
    }
    return v.dump();
  };
  const char* side_fields[] = {"cpu_user_s", "cpu_sys_s", "vcsw",
                               "ivcsw",      "wakeups",   "missed_wakeups"};
  bool first = true;
  for (size_t i = 0; i < kRecordFieldCount; i++) {
    std::string k = kRecordFields[i];
    if (k == "cdf_us") continue;
    if (k == "client" || k == "server") {
      for (auto sf : side_fields) f << (first ? "" : ",") << k << "_" << sf, first = false;
      continue;
    }
    f << (first ? "" : ",") << k;
    first = false;
  }
  f << "\n";
  for (const auto& r : records) {
    first = true;
    for (size_t i = 0; i < kRecordFieldCount; i++) {
      std::string k = kRecordFields[i];
      if (k == "cdf_us") continue;
      if (k == "client" || k == "server") {
        for (auto sf : side_fields) {
          const json& s = r[k];
          f << (first ? "" : ",") << (s.is_object() && s.contains(sf) ? cell(s[sf]) : "");
          first = false;
        }
        continue;
      }
      f << (first ? "" : ",") << cell(r.value(k, json(nullptr)));
      first = false;
    }
    f << "\n";
  }
  return f ? "" : "error writing " + path;
}

std::string write_plots(const std::string& base, const std::string& fmt, const json& records,
                        std::vector<std::string>* files) {
  uint64_t size = first_size(records);
  std::string term = fmt == "png"
                         ? "pngcairo size 1600,1000 font 'sans,10'"
                         : "svg size 1600,1000 dynamic font 'sans,10' background '#ffffff'";
  std::string gp = base + ".gp";
  std::ofstream f(gp);
  if (!f) return "cannot write " + gp;

  // CDF: one panel per provider/endpoint type, one curve per mode (pingpong, first size).
  std::vector<std::string> groups;
  std::map<std::string, std::vector<const json*>> cdf;
  for (const auto& r : records) {
    if (r.value("workload", "") != "pingpong" || r.value("size", uint64_t{0}) != size ||
        !r["cdf_us"].is_array())
      continue;
    std::string g = group_name(r);
    if (!cdf.count(g)) groups.push_back(g);
    cdf[g].push_back(&r);
  }
  int block = 0;
  std::map<const json*, int> block_of;
  for (const auto& g : groups)
    for (const json* r : cdf[g]) {
      f << "$c" << block << " << EOD\n";
      const auto& c = (*r)["cdf_us"];
      for (size_t q = 0; q < c.size(); q++) f << c[q].get<double>() << " " << q / 100.0 << "\n";
      f << "EOD\n";
      block_of[r] = block++;
    }
  // Scatter: one point per (provider/ep, mode): x = p50 latency, y = CPU us per message.
  std::map<std::string, std::map<std::string, std::string>> scatter;  // workload -> group -> rows
  for (const auto& r : records) {
    std::string w = r.value("workload", "");
    if ((w != "pingpong" && w != "wakeup") || r.value("size", uint64_t{0}) != size ||
        !r["lat_p50_us"].is_number() || !r["cpu_us_per_msg"].is_number())
      continue;
    scatter[w][group_name(r)] += std::to_string(r["lat_p50_us"].get<double>()) + " " +
                                 std::to_string(r["cpu_us_per_msg"].get<double>()) + " " +
                                 mode_label(r) + "\n";
  }
  std::map<std::string, std::string> scatter_block;
  int sb = 0;
  for (auto& [w, gs] : scatter)
    for (auto& [g, rows] : gs) {
      std::string name = "$s" + std::to_string(sb++);
      f << name << " << EOD\n" << rows << "EOD\n";
      scatter_block[w + "|" + g] = name;
    }
  if (groups.empty() && scatter.empty()) return "no figures to plot";

  std::string ext = fmt == "png" ? "png" : "svg";
  f << "set terminal " << term << "\n";
  f << "set grid\nset key bottom right\n";
  if (!groups.empty()) {
    std::string out = base + "-cdf." + ext;
    files->push_back(out);
    int cols = groups.size() > 4 ? 3 : static_cast<int>(std::min<size_t>(groups.size(), 2));
    int rows = static_cast<int>((groups.size() + cols - 1) / cols);
    f << "set output '" << out << "'\n";
    f << "set multiplot layout " << rows << "," << cols
      << " title 'dpfab-bench: pingpong latency CDF, " << size
      << " B (half round trip; x log scale)'\n";
    f << "set logscale x\nset xlabel 'latency (us)'\nset ylabel 'fraction of iterations'\n";
    f << "set yrange [0:1]\n";
    for (const auto& g : groups) {
      f << "set title '" << g << "'\nplot ";
      bool first = true;
      for (const json* r : cdf[g]) {
        f << (first ? "" : ", ") << "$c" << block_of[r] << " using 1:2 with lines lw 2 "
          << mode_style(*r) << " title '" << mode_label(*r) << "'";
        first = false;
      }
      f << "\n";
    }
    f << "unset multiplot\nunset yrange\nset autoscale y\n";
  }
  if (!scatter.empty()) {
    std::string out = base + "-cpu." + ext;
    files->push_back(out);
    f << "set output '" << out << "'\n";
    f << "set multiplot layout 1," << scatter.size()
      << " title 'dpfab-bench: CPU per message against p50 latency, " << size
      << " B (both processes; log-log)'\n";
    f << "set logscale xy\nset xlabel 'p50 latency (us)'\nset ylabel 'CPU us per message'\n";
    f << "set key top left\nset offsets graph 0.02, graph 0.12, graph 0.05, graph 0.05\n";
    for (auto& [w, gs] : scatter) {
      f << "set title '" << w << "'\nplot ";
      bool first = true;
      int pt = 5, lt = 1;  // one point type and colour per provider/ep, labels in its colour
      for (auto& [g, rows] : gs) {
        std::string b = scatter_block[w + "|" + g];
        f << (first ? "" : ", ") << b << " using 1:2 with points pt " << pt++ << " ps 1.5 lt " << lt
          << " title '" << g << "', " << b
          << " using 1:2:3 with labels offset char 0.6,0.6 font ',8' left textcolor lt " << lt
          << " notitle";
        lt++;
        first = false;
      }
      f << "\n";
    }
    f << "unset multiplot\n";
  }
  f.close();
  std::string cmd = "gnuplot '" + gp + "' 2>'" + base + "-gnuplot.log'";
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    files->clear();
    return "gnuplot failed (see " + base + "-gnuplot.log; script " + gp + ")";
  }
  unlink((base + "-gnuplot.log").c_str());
  files->push_back(gp);
  return "";
}

}  // namespace dpfab::bench
