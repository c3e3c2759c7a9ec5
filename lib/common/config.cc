// SPDX-License-Identifier: BSD-3-Clause
#include "config.h"

#include <arpa/inet.h>
#include <rdma/fi_errno.h>
#include <rte_cfgfile.h>
#include <sys/stat.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>

#include "strings.h"

namespace dpfab::config {
namespace {

constexpr const char* kSection = "dpdk";

// The single list of keys. config/dpfab.conf must show the same defaults; a unit test checks it.
constexpr std::array<KeyInfo, 30> kKeys{{
    {"config", "",
     "Path of the configuration file to read instead of the installed default (dpfab.conf)."},
    {"eal_args", "--no-huge --no-shconf --no-pci -m 48 --log-level=*:warning",
     "Extra DPDK EAL arguments. The default runs anywhere: no hugepages, no shared config, no "
     "PCI scan, 48 MiB of memory. Users with NICs and hugepages drop --no-huge/--no-pci."},
    {"ports", "net_memif0,role=auto,socket=/run/dpfab-memif0.sock",
     "Semicolon-separated ports: DPDK vdev specs (net_memif0,role=client,socket=/tmp/a.sock) or "
     "PCI addresses. memif role=auto is server when the socket is free, client otherwise."},
    {"ipv4", "auto",
     "Semicolon-separated IPv4 address/prefix per port, in the order of ports; 'auto' picks a "
     "link-local 169.254.x.y/16 address from the port's MAC."},
    {"lcores", "",
     "Worker lcores (CPU list such as 1,2-3) that progress ports; empty = manual progress only."},
    {"mbufs", "4095", "Mbufs in each port's mempool."},
    {"rx_depth", "512", "RX descriptors per queue (adjusted to what the port allows)."},
    {"tx_depth", "512", "TX descriptors per queue (adjusted to what the port allows)."},
    {"spin_us", "auto",
     "Microseconds a blocked application wait (sread, cntr_wait, fi_wait, worker wait) polls "
     "before it sleeps; 'auto' learns it per domain from the gaps it sees (spin only while the "
     "expected wait is shorter than two wake-ups, at most spin_max_us); 0 = sleep at once."},
    {"spin_max_us", "100", "The most an 'auto' spin budget (spin_us, lcore_spin_us) may reach."},
    {"lcore_spin_us", "auto",
     "Microseconds an idle worker lcore spins before parking; 'auto' learns it from the gaps "
     "between the frames it sees (at most spin_max_us); 0 = park at once, negative = never park."},
    {"idle_poll_us", "1000",
     "While consumers sleep or lcores are parked, the wakeup thread polls a port without rx "
     "interrupts (memif, af_packet, null, ring) at most this many microseconds apart (from 20 us "
     "after traffic, doubling while idle): the extra latency of the first frame after a pause."},
    {"rdm_peer_timeout_ms", "10000",
     "FI_EP_RDM: milliseconds a peer may stay silent (no ack of our packets, no answer to "
     "keepalive probes) before it is declared unreachable and its operations complete with "
     "FI_EHOSTUNREACH (also needs rdm_max_retries retries to go unanswered); 0 to 86400000."},
    {"rdm_max_retries", "10",
     "FI_EP_RDM: retransmissions (or keepalive probes) in a row that must go unanswered, besides "
     "rdm_peer_timeout_ms of silence, before a peer is declared unreachable; 0 to 1000."},
    {"rdm_ack_delay_us", "20",
     "FI_EP_RDM and FI_EP_MSG: microseconds a received packet's ack may wait for a packet going "
     "back to ride on (a delayed ack) before it is sent alone; 1 to 100000. Past the "
     "retransmission timeout (at least 200 us) the sender resends."},
    {"msg_connect_timeout_ms", "10000",
     "FI_EP_MSG: milliseconds a connect (or an accept) may go unanswered before it fails with "
     "FI_ETIMEDOUT; its request is repeated meanwhile (100 ms, doubling up to 1 s); 100 to "
     "86400000. A connected peer is lost after rdm_peer_timeout_ms of silence."},
    {"udp_checksum", "auto",
     "UDP checksum of the frames sent: 'auto' leaves it out (0, 'none computed', RFC 768) on "
     "memif and ring ports, whose frames never leave this host's memory, and computes it on "
     "every other port; 'on' computes it everywhere."},
    {"tx_extbuf_min", "4096",
     "Frames whose data (message bytes) is at least this long are sent from the application's "
     "memory, with no copy into an mbuf first (an external-buffer mbuf chained after the "
     "headers), on ports whose transmit copies every frame before it returns: memif (not in its "
     "zero-copy mode) and af_packet. Other ports always copy. 0 turns it off; 64 to 65535."},
    {"rdm_copy_max", "4096",
     "FI_EP_RDM and FI_EP_MSG: a send of at most this many bytes is copied and completes at once "
     "(FI_INJECT_COMPLETE) unless its flags ask for transmit or delivery completion; a longer "
     "one is sent from the application's buffer and completes when the peer acknowledged it, "
     "which it does at once (a blocked sender is woken for that, then for the reply). Never "
     "below the endpoint's inject_size; 0 to 65536."},
    {"shm", "on",
     "The same-host path: 'on' reaches endpoints of other processes on this host through shared "
     "memory instead of the ports (and gives a process without a port of its own a domain that "
     "reaches them); 'off' sends everything through the ports (to test a NIC's own path)."},
    {"shm_dir", "",
     "Where the same-host path's segments live: empty = anonymous memory (sealed memfds; nothing "
     "is ever left in /dev/shm); a directory (/dev/shm, a hugetlbfs mount) = files there, mode "
     "0600, removed as soon as both ends mapped them (leftovers of killed processes are removed "
     "by the next process)."},
    {"shm_ring_kb", "128",
     "KiB of each ring of a same-host link (one per direction and pair of processes): a power of "
     "two from 4 to 65536."},
    {"shm_cma", "on",
     "Same-host messages of a rendezvous (larger than 16 KiB) are copied once, by the receiver, "
     "from the sender's memory (process_vm_readv) where the kernel allows it; 'off' copies them "
     "through the rings."},
    {"mr_keys", "provider",
     "Memory regions (FI_RMA, FI_ATOMIC): 'provider' gives them provider keys (unguessable) and "
     "virtual addresses wherever the application's mr_mode offers FI_MR_PROV_KEY and "
     "FI_MR_VIRT_ADDR; 'application' takes neither, nor FI_MR_ENDPOINT: the keys the "
     "application requests, offsets from each region's start and regions every endpoint answers "
     "for, as tcp and sockets do (FI_MR_BASIC is unaffected)."},
    {"mr_endpoint", "off",
     "Memory regions: 'on' takes up FI_MR_ENDPOINT where the application's mr_mode offers it "
     "(with mr_keys=provider): a region must be bound to an endpoint and answers only through "
     "it. 'off' leaves the bit out, as tcp, shm and verbs do: regions answer through every "
     "endpoint of their domain (fabtests 2.x's fi_multi_ep relies on that)."},
    {"fault_loss", "0",
     "Fault injection (testing): probability in [0, 1] that a received IPv4/UDP frame is "
     "dropped. ARP and IGMP frames are never faulted."},
    {"fault_reorder", "0",
     "Fault injection: probability in [0, 1] that a received IPv4/UDP frame is held back and "
     "handled after the next frame (at most 8 held; an idle poll releases them)."},
    {"fault_dup", "0",
     "Fault injection: probability in [0, 1] that a received IPv4/UDP frame is handled twice "
     "(the second time as a copy)."},
    {"fault_corrupt", "0",
     "Fault injection: probability in [0, 1] that one random bit of a received IPv4 packet "
     "(header or payload) is flipped; the decoder's checksums reject it."},
    {"fault_seed", "1",
     "Seed of the fault injection's generator (0 to 2^63-1, mixed with the port id): the same "
     "seed and traffic give the same faults."},
}};

// What rte_cfgfile keeps per name/value (CFG_NAME_LEN/CFG_VALUE_LEN in rte_cfgfile.h, minus NUL).
constexpr size_t kMaxName = CFG_NAME_LEN - 1;
constexpr size_t kMaxValue = CFG_VALUE_LEN - 1;

struct FileLine {
  int line = 0;
  std::string section;
  std::string key;
};

std::string at(const std::string& file, int line) { return file + ":" + std::to_string(line); }

// rte_cfgfile parses; it reports only "failed" to us (its line-numbered message goes to the DPDK
// log). This scan walks the same lines to name the line and key in our own error messages and to
// catch what rte_cfgfile accepts silently (duplicates, unknown keys, over-long values).
Result<std::vector<FileLine>> scan_file(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return make_error(-FI_EINVAL, path + ": not a regular file");
  std::ifstream in(path);
  if (!in) return make_error(-FI_ENOENT, path + ": cannot open: " + std::strerror(errno));
  std::vector<FileLine> entries;
  std::string raw, section;
  int line = 0;
  while (std::getline(in, raw)) {
    ++line;
    std::string_view s(raw);
    if (auto hash = s.find('#'); hash != std::string_view::npos) s = s.substr(0, hash);
    s = str::trim(s);
    if (s.empty()) continue;
    if (s.front() == '[') {
      if (s.back() != ']')
        return make_error(-FI_EINVAL, at(path, line) + ": section header without ']'");
      section = std::string(str::trim(s.substr(1, s.size() - 2)));
      if (section != kSection)
        return make_error(-FI_EINVAL, at(path, line) + ": unknown section [" + section +
                                          "] (only [" + kSection + "] is read)");
      continue;
    }
    auto eq = s.find('=');
    if (eq == std::string_view::npos)
      return make_error(
          -FI_EINVAL, at(path, line) + ": expected 'key = value', found '" + std::string(s) + "'");
    std::string key = str::to_lower(str::trim(s.substr(0, eq)));
    auto value = str::trim(s.substr(eq + 1));
    if (key.empty()) return make_error(-FI_EINVAL, at(path, line) + ": empty key before '='");
    if (section.empty())
      return make_error(
          -FI_EINVAL, at(path, line) + ": key '" + key + "' outside a [" + kSection + "] section");
    if (key.size() > kMaxName || value.size() > kMaxValue)
      return make_error(-FI_EINVAL, at(path, line) + ": key '" + key + "': longer than " +
                                        std::to_string(kMaxValue) + " characters");
    bool known = false;
    for (const auto& k : kKeys) known |= (key == k.name);
    if (!known || key == "config")
      return make_error(-FI_EINVAL, at(path, line) + ": unknown key '" + key + "'");
    for (const auto& e : entries)
      if (e.key == key)
        return make_error(-FI_EINVAL, at(path, line) + ": key '" + key + "' already set at line " +
                                          std::to_string(e.line));
    entries.push_back({line, section, key});
  }
  return entries;
}

struct CfgFileCloser {
  void operator()(rte_cfgfile* f) const { rte_cfgfile_close(f); }
};

// Reads the file with rte_cfgfile; returns key -> (value, line).
Result<std::map<std::string, std::pair<std::string, int>>> read_file(const std::string& path) {
  auto scanned = scan_file(path);
  if (!scanned) return scanned.error();
  rte_cfgfile_parameters params{};
  params.comment_character = '#';
  std::unique_ptr<rte_cfgfile, CfgFileCloser> cfg(
      rte_cfgfile_load_with_params(path.c_str(), CFG_FLAG_EMPTY_VALUES, &params));
  if (!cfg) return make_error(-FI_EINVAL, path + ": rte_cfgfile could not parse the file");
  std::map<std::string, std::pair<std::string, int>> out;
  int n = rte_cfgfile_section_num_entries(cfg.get(), kSection);
  std::vector<rte_cfgfile_entry> entries(n > 0 ? n : 0);
  if (n > 0 && rte_cfgfile_section_entries(cfg.get(), kSection, entries.data(), n) != n)
    return make_error(-FI_EINVAL, path + ": rte_cfgfile could not read section [dpdk]");
  for (const auto& e : entries) {
    std::string key = str::to_lower(e.name);
    int line = 0;
    for (const auto& s : *scanned)
      if (s.key == key) line = s.line;
    out[key] = {std::string(str::trim(e.value)), line};
  }
  return out;
}

Result<int64_t> int_in_range(const Value& v, int64_t lo, int64_t hi) {
  auto n = str::parse_int(v.text);
  if (!n || *n < lo || *n > hi)
    return make_error(-FI_EINVAL, v.origin + ": key '" + v.key + "': '" + v.text +
                                      "' is not an integer in [" + std::to_string(lo) + ", " +
                                      std::to_string(hi) + "]");
  return *n;
}

Error bad(const Value& v, const std::string& why) {
  return make_error(-FI_EINVAL, v.origin + ": key '" + v.key + "': '" + v.text + "': " + why);
}

// A probability: a decimal number in [0, 1] ("0.1", "1e-3"), read with from_chars (not strtod:
// the application's locale may want a decimal comma).
Result<double> probability(const Value& v) {
  double p = 0;
  const char* end = v.text.data() + v.text.size();
  auto [ptr, ec] = std::from_chars(v.text.data(), end, p);
  if (v.text.empty() || ec != std::errc() || ptr != end || !std::isfinite(p) || p < 0 || p > 1)
    return bad(v, "not a probability from 0 to 1 (such as 0.01)");
  return p;
}

}  // namespace

std::span<const KeyInfo> keys() noexcept { return kKeys; }

const char* source_name(Source s) noexcept {
  switch (s) {
    case Source::kDefault:
      return "default";
    case Source::kFile:
      return "file";
    case Source::kEnvironment:
      return "environment";
  }
  return "?";
}

const Value* Config::find(std::string_view key) const noexcept {
  for (const auto& v : values)
    if (v.key == key) return &v;
  return nullptr;
}

std::optional<std::string> getenv_lookup(const KeyInfo& key) {
  std::string var = "FI_DPDK_" + str::to_upper(key.name);
  const char* v = std::getenv(var.c_str());
  if (!v) return std::nullopt;
  return std::string(v);
}

std::optional<Ipv4Prefix> parse_ipv4_prefix(std::string_view s) noexcept {
  s = str::trim(s);
  auto slash = s.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  std::string addr(s.substr(0, slash));
  auto len = str::parse_int(s.substr(slash + 1));
  in_addr a{};
  if (!len || *len < 1 || *len > 32 || inet_pton(AF_INET, addr.c_str(), &a) != 1)
    return std::nullopt;
  return Ipv4Prefix{ntohl(a.s_addr), static_cast<uint8_t>(*len)};
}

std::string format_ipv4(uint32_t addr) {
  in_addr a{htonl(addr)};
  char buf[INET_ADDRSTRLEN];
  return inet_ntop(AF_INET, &a, buf, sizeof(buf)) ? buf : "?";
}

Result<Config> load(const EnvLookup& env, const std::string& default_file) {
  Config cfg;
  const KeyInfo& config_key = kKeys[0];
  if (auto path = env(config_key); path && !str::trim(*path).empty()) {
    cfg.file = std::string(str::trim(*path));
    struct stat st {};
    if (stat(cfg.file.c_str(), &st) != 0)
      return make_error(-FI_ENOENT, "FI_DPDK_CONFIG: " + cfg.file + ": " + std::strerror(errno));
  } else if (!default_file.empty()) {
    struct stat st {};
    if (stat(default_file.c_str(), &st) == 0) cfg.file = default_file;
  }

  std::map<std::string, std::pair<std::string, int>> from_file;
  if (!cfg.file.empty()) {
    auto r = read_file(cfg.file);
    if (!r) return r.error();
    from_file = std::move(r.value());
  }

  for (const auto& k : kKeys) {
    Value v{k.name, k.default_value, Source::kDefault, "default"};
    if (&k == &config_key) {
      v.text = cfg.file;
      if (auto e = env(k); e && !str::trim(*e).empty()) {
        v.source = Source::kEnvironment;
        v.origin = "FI_DPDK_CONFIG";
      }
    } else if (auto e = env(k)) {
      v.text = std::string(str::trim(*e));
      v.source = Source::kEnvironment;
      v.origin = "FI_DPDK_" + str::to_upper(k.name);
    } else if (auto it = from_file.find(k.name); it != from_file.end()) {
      v.text = it->second.first;
      v.source = Source::kFile;
      v.origin = at(cfg.file, it->second.second);
    }
    cfg.values.push_back(std::move(v));
  }

  for (const auto& v : cfg.values) {
    if (v.key == "eal_args") {
      auto args = str::split_args(v.text);
      if (!args) return bad(v, "unterminated quote");
      cfg.eal_args = std::move(*args);
    } else if (v.key == "ports") {
      cfg.ports = str::split(v.text, ';');
      for (const auto& p : cfg.ports)
        if (p.find_first_of(" \t") != std::string::npos)
          return bad(v, "port '" + p + "' contains a blank");
    } else if (v.key == "ipv4") {
      for (const auto& a : str::split(v.text, ';')) {
        if (a == "auto") {
          cfg.ipv4.emplace_back(std::nullopt);
          continue;
        }
        auto p = parse_ipv4_prefix(a);
        if (!p)
          return bad(v, "'" + a + "' is not 'auto' or an IPv4 address/prefix like 10.0.0.1/24");
        cfg.ipv4.emplace_back(*p);
      }
    } else if (v.key == "lcores") {
      auto l = str::parse_cpu_list(v.text, 1024);
      if (!l) return bad(v, "not a CPU list such as 1,2-3 (ids below 1024, no repeats)");
      cfg.lcores = std::move(*l);
    } else if (v.key == "mbufs") {
      auto n = int_in_range(v, 63, 1 << 24);
      if (!n) return n.error();
      cfg.mbufs = static_cast<uint32_t>(*n);
    } else if (v.key == "rx_depth" || v.key == "tx_depth") {
      auto n = int_in_range(v, 16, 32768);
      if (!n) return n.error();
      (v.key == "rx_depth" ? cfg.rx_depth : cfg.tx_depth) = static_cast<uint16_t>(*n);
    } else if (v.key == "spin_us") {
      cfg.spin_auto = v.text == "auto";
      if (!cfg.spin_auto) {
        auto n = int_in_range(v, 0, 60'000'000);
        if (!n) return bad(v, "not 'auto' or a number of microseconds from 0 to 60000000");
        cfg.spin_us = *n;
      }
    } else if (v.key == "spin_max_us") {
      auto n = int_in_range(v, 0, 60'000'000);
      if (!n) return n.error();
      cfg.spin_max_us = *n;
    } else if (v.key == "lcore_spin_us") {
      cfg.lcore_spin_auto = v.text == "auto";
      if (!cfg.lcore_spin_auto) {
        auto n = int_in_range(v, INT32_MIN, 60'000'000);
        if (!n) return bad(v, "not 'auto' or a number of microseconds (negative: never park)");
        cfg.lcore_spin_us = *n;
      }
    } else if (v.key == "idle_poll_us") {
      auto n = int_in_range(v, 20, 1'000'000);
      if (!n) return n.error();
      cfg.idle_poll_us = *n;
    } else if (v.key == "rdm_peer_timeout_ms") {
      auto n = int_in_range(v, 0, 86'400'000);
      if (!n) return n.error();
      cfg.rdm_peer_timeout_ms = static_cast<uint64_t>(*n);
    } else if (v.key == "rdm_max_retries") {
      auto n = int_in_range(v, 0, 1000);
      if (!n) return n.error();
      cfg.rdm_max_retries = static_cast<uint32_t>(*n);
    } else if (v.key == "rdm_ack_delay_us") {
      auto n = int_in_range(v, 1, 100'000);
      if (!n) return n.error();
      cfg.rdm_ack_delay_us = static_cast<uint64_t>(*n);
    } else if (v.key == "msg_connect_timeout_ms") {
      auto n = int_in_range(v, 100, 86'400'000);
      if (!n) return n.error();
      cfg.msg_connect_timeout_ms = static_cast<uint64_t>(*n);
    } else if (v.key == "mr_keys") {
      if (v.text != "provider" && v.text != "application")
        return bad(v, "not 'provider' or 'application'");
      cfg.mr_application_keys = v.text == "application";
    } else if (v.key == "mr_endpoint") {
      if (v.text != "on" && v.text != "off") return bad(v, "not 'on' or 'off'");
      cfg.mr_endpoint = v.text == "on";
    } else if (v.key == "tx_extbuf_min") {
      auto n = int_in_range(v, 0, 65'535);
      if (!n) return n.error();
      if (*n != 0 && *n < 64) return bad(v, "not 0 or 64 to 65535");
      cfg.tx_extbuf_min = static_cast<uint32_t>(*n);
    } else if (v.key == "rdm_copy_max") {
      auto n = int_in_range(v, 0, 65'536);
      if (!n) return n.error();
      cfg.rdm_copy_max = static_cast<uint32_t>(*n);
    } else if (v.key == "udp_checksum") {
      if (v.text != "auto" && v.text != "on") return bad(v, "not 'auto' or 'on'");
      cfg.udp_checksum_always = v.text == "on";
    } else if (v.key == "shm" || v.key == "shm_cma") {
      if (v.text != "on" && v.text != "off") return bad(v, "not 'on' or 'off'");
      (v.key == "shm" ? cfg.shm : cfg.shm_cma) = v.text == "on";
    } else if (v.key == "shm_dir") {
      if (!v.text.empty() && v.text.front() != '/') return bad(v, "not an absolute directory");
      cfg.shm_dir = v.text;
    } else if (v.key == "shm_ring_kb") {
      auto n = int_in_range(v, 4, 65536);
      if (!n || (*n & (*n - 1)) != 0) return bad(v, "not a power of two from 4 to 65536");
      cfg.shm_ring_kb = static_cast<uint32_t>(*n);
    } else if (v.key.starts_with("fault_") && v.key != "fault_seed") {
      auto p = probability(v);
      if (!p) return p.error();
      if (v.key == "fault_loss") cfg.faults.loss = *p;
      if (v.key == "fault_reorder") cfg.faults.reorder = *p;
      if (v.key == "fault_dup") cfg.faults.dup = *p;
      if (v.key == "fault_corrupt") cfg.faults.corrupt = *p;
    } else if (v.key == "fault_seed") {
      auto n = int_in_range(v, 0, INT64_MAX);
      if (!n) return n.error();
      cfg.faults.seed = static_cast<uint64_t>(*n);
    }
  }
  // Trailing 'auto' entries beyond the ports are harmless (the default is one 'auto').
  while (cfg.ipv4.size() > cfg.ports.size() && !cfg.ipv4.back()) cfg.ipv4.pop_back();
  if (cfg.ipv4.size() > cfg.ports.size())
    return bad(*cfg.find("ipv4"), "more addresses (" + std::to_string(cfg.ipv4.size()) +
                                      ") than ports (" + std::to_string(cfg.ports.size()) + ")");
  cfg.ipv4.resize(cfg.ports.size(), std::nullopt);
  return cfg;
}

}  // namespace dpfab::config
