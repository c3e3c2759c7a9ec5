// SPDX-License-Identifier: BSD-3-Clause
#include "common.h"

#include <algorithm>

namespace dpfab::bench {

std::vector<std::string> expand_providers(const std::vector<std::string>& in) {
  std::vector<std::string> out;
  auto add = [&](const std::string& p) {
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  };
  for (const auto& p : in) {
    if (p == "dpdk") {
      add(std::string(kDpdkPort));
      add(std::string(kDpdkShm));
    } else {
      add(p);
    }
  }
  return out;
}

std::optional<Mode> parse_mode(std::string_view name) {
  for (size_t i = 0; i < kModeNames.size(); i++)
    if (kModeNames[i] == name) return static_cast<Mode>(i);
  return std::nullopt;
}

std::optional<Workload> parse_workload(std::string_view name) {
  for (size_t i = 0; i < kWorkloadNames.size(); i++)
    if (kWorkloadNames[i] == name) return static_cast<Workload>(i);
  return std::nullopt;
}

void to_json(json& j, const Options& o) {
  j = json{{"providers", o.providers},
           {"modes", o.modes},
           {"workloads", o.workloads},
           {"ep_types", o.ep_types},
           {"wait_on", o.wait_on},
           {"sizes", o.sizes},
           {"iterations", o.iterations},
           {"duration_s", o.duration_s},
           {"warmup", o.warmup},
           {"window", o.window},
           {"gap_us", o.gap_us},
           {"timeout_ms", o.timeout_ms},
           {"max_lost", o.max_lost},
           {"iface", o.iface},
           {"layered", o.layered},
           {"dpdk_ports", o.dpdk_ports},
           {"dpdk_client_ports", o.dpdk_client_ports}};
}

void from_json(const json& j, Options& o) {
  j.at("providers").get_to(o.providers);
  j.at("modes").get_to(o.modes);
  j.at("workloads").get_to(o.workloads);
  j.at("ep_types").get_to(o.ep_types);
  j.at("wait_on").get_to(o.wait_on);
  j.at("sizes").get_to(o.sizes);
  j.at("iterations").get_to(o.iterations);
  j.at("duration_s").get_to(o.duration_s);
  j.at("warmup").get_to(o.warmup);
  j.at("window").get_to(o.window);
  j.at("gap_us").get_to(o.gap_us);
  j.at("timeout_ms").get_to(o.timeout_ms);
  j.at("max_lost").get_to(o.max_lost);
  j.at("iface").get_to(o.iface);
  j.at("layered").get_to(o.layered);
  j.at("dpdk_ports").get_to(o.dpdk_ports);
  j.at("dpdk_client_ports").get_to(o.dpdk_client_ports);
}

Usage Usage::now() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  Usage u;
  u.user_s = static_cast<double>(ru.ru_utime.tv_sec) + ru.ru_utime.tv_usec * 1e-6;
  u.sys_s = static_cast<double>(ru.ru_stime.tv_sec) + ru.ru_stime.tv_usec * 1e-6;
  u.vcsw = ru.ru_nvcsw;
  u.ivcsw = ru.ru_nivcsw;
  return u;
}

json side_json(const SideFigures& s) {
  return json{{"cpu_user_s", s.usage.user_s}, {"cpu_sys_s", s.usage.sys_s},
              {"vcsw", s.usage.vcsw},         {"ivcsw", s.usage.ivcsw},
              {"wakeups", s.wakeups},         {"missed_wakeups", s.missed_wakeups}};
}

std::string to_hex(const void* data, size_t len) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < len; i++) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

std::string from_hex(const std::string& hex) {
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return 0;
  };
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(nib(hex[i]) << 4 | nib(hex[i + 1]));
  return out;
}

}  // namespace dpfab::bench
