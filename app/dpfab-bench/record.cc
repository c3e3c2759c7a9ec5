// SPDX-License-Identifier: BSD-3-Clause
#include "record.h"

#include <algorithm>
#include <cmath>

namespace dpfab::bench {

const char* const kRecordFields[] = {
    "workload",    "provider",        "prov_name",      "fabric",
    "domain",      "ep_type",         "mode",           "wait_on",
    "size",        "status",          "error",          "latency_kind",
    "iterations",  "messages",        "lost",           "duration_s",
    "lat_min_us",  "lat_p50_us",      "lat_p90_us",     "lat_p99_us",
    "lat_p999_us", "lat_max_us",      "lat_mean_us",    "over_floor_us",
    "msg_rate",    "bandwidth_mbps",  "cpu_user_s",     "cpu_sys_s",
    "cpu_s",       "cpu_us_per_msg",  "vcsw",           "ivcsw",
    "wakeups",     "wakeups_per_msg", "missed_wakeups", "os_wakeups_per_msg",
    "client",      "server",          "cdf_us"};
const size_t kRecordFieldCount = sizeof(kRecordFields) / sizeof(kRecordFields[0]);

// ---- statistics -------------------------------------------------------------------------------

double quantile(const std::vector<double>& s, double q) {
  if (s.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(s.size())));
  return s[rank == 0 ? 0 : rank - 1];
}

// ---- the record -------------------------------------------------------------------------------

json base_record(const CaseKey& k) {
  json r = json::object();
  r["workload"] = k.workload;
  r["provider"] = k.provider;
  r["prov_name"] = k.prov_name;
  r["fabric"] = k.fabric;
  r["domain"] = k.domain;
  r["ep_type"] = k.ep_type;
  r["mode"] = k.mode;
  r["wait_on"] = k.wait_on;
  r["size"] = k.size;
  r["status"] = "ok";
  r["error"] = "";
  r["latency_kind"] = k.workload == "pingpong" || k.workload == "rma-write" ? "half_round_trip"
                      : k.workload == "stream" || k.workload == "rma-bw" || k.workload == "atomic"
                          ? "window_round_trip"
                      : k.workload == "rma-read" ? "round_trip"
                                                 : "one_way_wake";
  for (size_t i = 0; i < kRecordFieldCount; i++)
    if (!r.contains(kRecordFields[i])) r[kRecordFields[i]] = nullptr;
  return r;
}

json failed_record(const CaseKey& k, const std::string& status, const std::string& error) {
  json r = base_record(k);
  r["status"] = status;
  r["error"] = error;
  return r;
}

void fill_figures(json& r, Measured& m, const json& server, uint64_t size) {
  auto& s = m.samples_us;
  std::sort(s.begin(), s.end());
  r["iterations"] = m.iterations;
  r["messages"] = m.messages;
  r["lost"] = m.lost;
  r["duration_s"] = m.duration_s;
  r["client"] = side_json(m.side);
  r["server"] = server.is_object() ? server : json(nullptr);
  if (s.empty() || m.duration_s <= 0) return;
  double sum = 0;
  for (double v : s) sum += v;
  r["lat_min_us"] = s.front();
  r["lat_p50_us"] = quantile(s, 0.50);
  r["lat_p90_us"] = quantile(s, 0.90);
  r["lat_p99_us"] = quantile(s, 0.99);
  r["lat_p999_us"] = quantile(s, 0.999);
  r["lat_max_us"] = s.back();
  r["lat_mean_us"] = sum / static_cast<double>(s.size());
  json cdf = json::array();
  for (int q = 0; q <= 100; q++) cdf.push_back(quantile(s, q / 100.0));
  r["cdf_us"] = cdf;
  double msgs = static_cast<double>(m.messages);
  r["msg_rate"] = msgs / m.duration_s;
  r["bandwidth_mbps"] = msgs * static_cast<double>(size) / m.duration_s / 1e6;
  double user = m.side.usage.user_s, sys = m.side.usage.sys_s;
  int64_t vcsw = m.side.usage.vcsw, ivcsw = m.side.usage.ivcsw;
  uint64_t wakeups = m.side.wakeups, missed = m.side.missed_wakeups;
  if (server.is_object()) {
    user += server.value("cpu_user_s", 0.0);
    sys += server.value("cpu_sys_s", 0.0);
    vcsw += server.value("vcsw", int64_t{0});
    ivcsw += server.value("ivcsw", int64_t{0});
    wakeups += server.value("wakeups", uint64_t{0});
    missed += server.value("missed_wakeups", uint64_t{0});
  }
  r["cpu_user_s"] = user;
  r["cpu_sys_s"] = sys;
  r["cpu_s"] = user + sys;
  r["vcsw"] = vcsw;
  r["ivcsw"] = ivcsw;
  r["wakeups"] = wakeups;
  r["missed_wakeups"] = missed;
  if (msgs > 0) {
    r["cpu_us_per_msg"] = (user + sys) * 1e6 / msgs;
    r["wakeups_per_msg"] = static_cast<double>(wakeups) / msgs;
    // Every voluntary context switch of every thread of both processes is one sleep that ended
    // in an OS wakeup: the count the one-wakeup-per-message goal is about.
    r["os_wakeups_per_msg"] = static_cast<double>(vcsw) / msgs;
  }
}

}  // namespace dpfab::bench
