// SPDX-License-Identifier: BSD-3-Clause
//
// Configuration: default < file < environment, and every way a file or value can be wrong.
#include "common/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rdma/fi_errno.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>

using dpfab::config::Config;
using dpfab::config::KeyInfo;
using dpfab::config::Source;
using testing::HasSubstr;

namespace {

// A fake environment: FI_DPDK_<KEY> values by lower-case key.
struct Env {
  std::map<std::string, std::string> vars;
  dpfab::config::EnvLookup lookup() const {
    return [this](const KeyInfo& k) -> std::optional<std::string> {
      auto it = vars.find(k.name);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
  }
};

class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    char tmpl[] = "/tmp/dpfab_conf_XXXXXX";
    int fd = mkstemp(tmpl);
    path_ = tmpl;
    FILE* f = fdopen(fd, "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }
  ~TempFile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

dpfab::Result<Config> load_text(const std::string& text, Env env = {}) {
  TempFile f(text);
  env.vars["config"] = f.path();
  return dpfab::config::load(env.lookup());
}

}  // namespace

TEST(Config, DefaultsApplyWithoutFileOrEnvironment) {
  Env env;
  auto cfg = dpfab::config::load(env.lookup(), "/nonexistent/dpfab.conf");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_TRUE(cfg->file.empty());
  EXPECT_THAT(cfg->eal_args, testing::Contains("--no-huge"));
  EXPECT_THAT(cfg->eal_args, testing::Contains("--no-shconf"));
  EXPECT_THAT(cfg->eal_args, testing::Contains("--no-pci"));
  ASSERT_EQ(cfg->ports.size(), 1u);
  EXPECT_THAT(cfg->ports[0], HasSubstr("net_memif0"));
  ASSERT_EQ(cfg->ipv4.size(), 1u);
  EXPECT_FALSE(cfg->ipv4[0].has_value());
  EXPECT_TRUE(cfg->lcores.empty());
  EXPECT_EQ(cfg->mbufs, 4095u);
  EXPECT_EQ(cfg->rx_depth, 512);
  EXPECT_EQ(cfg->tx_depth, 512);
  EXPECT_TRUE(cfg->spin_auto);
  EXPECT_EQ(cfg->spin_max_us, 100);
  EXPECT_TRUE(cfg->lcore_spin_auto);
  EXPECT_FALSE(cfg->faults.any());  // fault injection off
  EXPECT_EQ(cfg->faults.seed, 1u);
  EXPECT_EQ(cfg->rdm_peer_timeout_ms, 10'000u);
  EXPECT_EQ(cfg->rdm_max_retries, 10u);
  for (const auto& v : cfg->values) EXPECT_EQ(v.source, Source::kDefault) << v.key;
}

TEST(Config, EveryKeyIsListedOnceWithHelp) {
  std::set<std::string> names;
  for (const auto& k : dpfab::config::keys()) {
    EXPECT_TRUE(names.insert(k.name).second) << k.name;
    EXPECT_GT(std::string(k.help).size(), 10u) << k.name;
  }
  for (const char* required : {"config",
                               "eal_args",
                               "ports",
                               "ipv4",
                               "lcores",
                               "mbufs",
                               "rx_depth",
                               "tx_depth",
                               "spin_us",
                               "spin_max_us",
                               "lcore_spin_us",
                               "fault_loss",
                               "fault_reorder",
                               "fault_dup",
                               "fault_corrupt",
                               "fault_seed",
                               "rdm_peer_timeout_ms",
                               "rdm_max_retries",
                               "rdm_ack_delay_us",
                               "msg_connect_timeout_ms"})
    EXPECT_TRUE(names.count(required)) << required;
}

// The shipped config/dpfab.conf must say what the built-in defaults are.
TEST(Config, ShippedFileEqualsBuiltInDefaults) {
  Env env;
  env.vars["config"] = DPFAB_SOURCE_CONF;
  auto from_file = dpfab::config::load(env.lookup());
  ASSERT_TRUE(from_file) << from_file.error().message;
  for (const auto& k : dpfab::config::keys()) {
    if (std::string(k.name) == "config") continue;
    const auto* v = from_file->find(k.name);
    ASSERT_NE(v, nullptr) << k.name;
    EXPECT_EQ(v->source, Source::kFile) << k.name << " is missing from dpfab.conf";
    EXPECT_EQ(v->text, k.default_value) << k.name;
  }
}

TEST(Config, FileOverridesDefaultAndEnvironmentOverridesFile) {
  Env env;
  env.vars["rx_depth"] = "2048";
  auto cfg = load_text("[dpdk]\nmbufs = 8191\nrx_depth = 1024\n", env);
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->mbufs, 8191u);
  EXPECT_EQ(cfg->find("mbufs")->source, Source::kFile);
  EXPECT_THAT(cfg->find("mbufs")->origin, HasSubstr(":2"));
  EXPECT_EQ(cfg->rx_depth, 2048);
  EXPECT_EQ(cfg->find("rx_depth")->source, Source::kEnvironment);
  EXPECT_EQ(cfg->find("rx_depth")->origin, "FI_DPDK_RX_DEPTH");
  EXPECT_EQ(cfg->tx_depth, 512);
  EXPECT_EQ(cfg->find("tx_depth")->source, Source::kDefault);
  EXPECT_EQ(cfg->find("config")->source, Source::kEnvironment);
}

TEST(Config, DefaultFileIsReadWhenPresent) {
  TempFile f("[dpdk]\nlcore_spin_us = -1\nspin_us = 20\n");
  Env env;
  auto cfg = dpfab::config::load(env.lookup(), f.path());
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->file, f.path());
  EXPECT_FALSE(cfg->lcore_spin_auto);
  EXPECT_EQ(cfg->lcore_spin_us, -1);
  EXPECT_FALSE(cfg->spin_auto);
  EXPECT_EQ(cfg->spin_us, 20);
}

// A consumer's budget cannot be negative: a manual-progress sread would spin for ever.
TEST(Config, ConsumerSpinBudgetIsAutoOrNotNegative) {
  auto bad = load_text("[dpdk]\nspin_us = -1\n");
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message, HasSubstr("key 'spin_us'"));
  auto good = load_text("[dpdk]\nspin_us = auto\nlcore_spin_us = 50\n");
  ASSERT_TRUE(good) << good.error().message;
  EXPECT_TRUE(good->spin_auto);
  EXPECT_EQ(good->lcore_spin_us, 50);
}

TEST(Config, FaultRatesAreProbabilitiesAndTheSeedAnInteger) {
  Env env;
  env.vars["fault_dup"] = "1";
  env.vars["fault_seed"] = "9223372036854775807";
  auto cfg = load_text("[dpdk]\nfault_loss = 0.1\nfault_reorder = 1e-3\nfault_corrupt = 0\n", env);
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_DOUBLE_EQ(cfg->faults.loss, 0.1);
  EXPECT_DOUBLE_EQ(cfg->faults.reorder, 0.001);
  EXPECT_DOUBLE_EQ(cfg->faults.dup, 1.0);
  EXPECT_DOUBLE_EQ(cfg->faults.corrupt, 0.0);
  EXPECT_EQ(cfg->faults.seed, 9223372036854775807u);
  EXPECT_TRUE(cfg->faults.any());
  EXPECT_EQ(cfg->find("fault_loss")->source, Source::kFile);
  EXPECT_EQ(cfg->find("fault_dup")->origin, "FI_DPDK_FAULT_DUP");
  // Any one rate above 0 turns injection on.
  for (const char* key : {"fault_loss", "fault_reorder", "fault_dup", "fault_corrupt"}) {
    Env one;
    one.vars[key] = "0.000001";
    auto c = dpfab::config::load(one.lookup());
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_TRUE(c->faults.any()) << key;
  }
}

TEST(Config, CommentsBlankLinesAndCaseOfKeys) {
  auto cfg = load_text("# top\n\n[dpdk]   # section\n  MBUFS = 1023   # trailing\n");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->mbufs, 1023u);
}

TEST(Config, ListsAreParsedFromFileAndEnvironment) {
  Env env;
  env.vars["lcores"] = "1,3-4";
  env.vars["eal_args"] = "--no-huge -m 64 --file-prefix 'a b'";
  auto cfg = load_text(
      "[dpdk]\nports = net_ring0; net_null0 ;net_tap0,iface=x\nipv4 = 10.0.0.1/24;auto\n", env);
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_THAT(cfg->ports, testing::ElementsAre("net_ring0", "net_null0", "net_tap0,iface=x"));
  ASSERT_EQ(cfg->ipv4.size(), 3u);
  ASSERT_TRUE(cfg->ipv4[0]);
  EXPECT_EQ(cfg->ipv4[0]->addr, 0x0a000001u);
  EXPECT_EQ(cfg->ipv4[0]->prefix_len, 24);
  EXPECT_FALSE(cfg->ipv4[1]);
  EXPECT_FALSE(cfg->ipv4[2]);  // fewer addresses than ports: the rest are automatic
  EXPECT_THAT(cfg->lcores, testing::ElementsAre(1u, 3u, 4u));
  EXPECT_THAT(cfg->eal_args, testing::ElementsAre("--no-huge", "-m", "64", "--file-prefix", "a b"));
}

TEST(Config, NoPortsIsAllowed) {
  Env env;
  env.vars["ports"] = "";
  auto cfg = dpfab::config::load(env.lookup());
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_TRUE(cfg->ports.empty());
  EXPECT_TRUE(cfg->ipv4.empty());
}

// ---- bad files: the message names the file, the line and the key --------------------------

struct BadFile {
  const char* text;
  const char* line;   // ":<n>" expected in the message
  const char* words;  // expected in the message
};

class ConfigBadFile : public testing::TestWithParam<BadFile> {};

TEST_P(ConfigBadFile, IsRejectedWithFileLineAndKey) {
  TempFile f(GetParam().text);
  Env env;
  env.vars["config"] = f.path();
  auto cfg = dpfab::config::load(env.lookup());
  ASSERT_FALSE(cfg);
  EXPECT_EQ(cfg.code(), -FI_EINVAL);
  EXPECT_THAT(cfg.error().message, HasSubstr(f.path() + GetParam().line));
  EXPECT_THAT(cfg.error().message, HasSubstr(GetParam().words));
}

INSTANTIATE_TEST_SUITE_P(
    Files, ConfigBadFile,
    testing::Values(
        BadFile{"[dpdk]\nmbufs 12\n", ":2", "expected 'key = value'"},
        BadFile{"[dpdk\nmbufs = 12\n", ":1", "without ']'"},
        BadFile{"mbufs = 12\n", ":1", "key 'mbufs' outside"},
        BadFile{"[eal]\nmbufs = 12\n", ":1", "unknown section [eal]"},
        BadFile{"[dpdk]\nmbfus = 12\n", ":2", "unknown key 'mbfus'"},
        BadFile{"[dpdk]\nconfig = /x\n", ":2", "unknown key 'config'"},
        BadFile{"[dpdk]\n = 12\n", ":2", "empty key"},
        BadFile{"[dpdk]\nmbufs = 12\n\nmbufs = 13\n", ":4", "already set at line 2"},
        BadFile{"[dpdk]\nmbufs = twelve\n", ":2", "key 'mbufs': 'twelve' is not an integer"},
        BadFile{"[dpdk]\nmbufs = 12\n", ":2", "key 'mbufs': '12' is not an integer in [63"},
        BadFile{"[dpdk]\nrx_depth = 99999\n", ":2", "key 'rx_depth'"},
        BadFile{"[dpdk]\ntx_depth = -4\n", ":2", "key 'tx_depth'"},
        BadFile{"[dpdk]\nspin_us = 1.5\n", ":2", "key 'spin_us'"},
        BadFile{"[dpdk]\nlcores = 1-\n", ":2", "key 'lcores'"},
        BadFile{"[dpdk]\nfault_loss = 2\n", ":2",
                "key 'fault_loss': '2': not a probability from 0 to 1"},
        BadFile{"[dpdk]\nfault_seed = seed\n", ":2", "key 'fault_seed': 'seed' is not an integer"},
        BadFile{"[dpdk]\nlcores = 2,2\n", ":2", "key 'lcores'"},
        BadFile{"[dpdk]\nipv4 = 10.0.0.1\n", ":2", "key 'ipv4'"},
        BadFile{"[dpdk]\nipv4 = 10.0.0.300/24\n", ":2", "key 'ipv4'"},
        BadFile{"[dpdk]\nports = net_ring0\nipv4 = 10.0.0.1/8;10.0.0.2/8\n", ":3",
                "more addresses (2) than ports (1)"},
        BadFile{"[dpdk]\nports = net ring0\n", ":2", "contains a blank"},
        BadFile{"[dpdk]\neal_args = --file-prefix 'x\n", ":2", "unterminated quote"},
        BadFile{
            "[dpdk]\nports = "
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
            "\n",
            ":2", "longer than 255 characters"}));

// The RDM liveness keys (drivers/ofi passes them to proto::rdm::ReliabilityConfig).
TEST(Config, RdmLivenessKeysFromFileAndEnvironment) {
  Env env;
  env.vars["rdm_max_retries"] = "3";
  env.vars["rdm_ack_delay_us"] = "100000";
  auto cfg = load_text("[dpdk]\nrdm_peer_timeout_ms = 1500\nrdm_max_retries = 7\n", env);
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->rdm_ack_delay_us, 100000u);
  EXPECT_EQ(cfg->find("rdm_ack_delay_us")->origin, "FI_DPDK_RDM_ACK_DELAY_US");
  EXPECT_EQ(cfg->rdm_peer_timeout_ms, 1500u);
  EXPECT_EQ(cfg->find("rdm_peer_timeout_ms")->source, Source::kFile);
  EXPECT_EQ(cfg->rdm_max_retries, 3u);
  EXPECT_EQ(cfg->find("rdm_max_retries")->origin, "FI_DPDK_RDM_MAX_RETRIES");
  Env zero;
  zero.vars["rdm_peer_timeout_ms"] = "0";
  zero.vars["rdm_max_retries"] = "0";
  auto z = dpfab::config::load(zero.lookup());
  ASSERT_TRUE(z) << z.error().message;
  EXPECT_EQ(z->rdm_peer_timeout_ms, 0u);
  EXPECT_EQ(z->rdm_max_retries, 0u);
}

// FI_EP_MSG's connect timeout (drivers/ofi passes it to proto::msg::CmConfig).
TEST(Config, MsgConnectTimeoutFromEnvironment) {
  Env env;
  env.vars["msg_connect_timeout_ms"] = "1500";
  auto cfg = dpfab::config::load(env.lookup());
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->msg_connect_timeout_ms, 1500u);
  EXPECT_EQ(cfg->find("msg_connect_timeout_ms")->origin, "FI_DPDK_MSG_CONNECT_TIMEOUT_MS");
}

TEST(ConfigBadEnvironment, NamesTheVariable) {
  for (auto [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"mbufs", "lots"},
                                                        {"rx_depth", "0"},
                                                        {"lcores", "x"},
                                                        {"ipv4", "1.2.3.4/33"},
                                                        {"spin_us", "1e3"},
                                                        {"eal_args", "\"open"},
                                                        {"fault_loss", "1.5"},
                                                        {"fault_loss", "-0.1"},
                                                        {"fault_reorder", "lots"},
                                                        {"fault_dup", "0.5x"},
                                                        {"fault_dup", "nan"},
                                                        {"fault_corrupt", "inf"},
                                                        {"fault_corrupt", "0,5"},
                                                        {"fault_corrupt", ""},
                                                        {"fault_seed", "-1"},
                                                        {"fault_seed", "0x10"},
                                                        {"fault_seed", "1.0"},
                                                        {"rdm_peer_timeout_ms", "-1"},
                                                        {"rdm_peer_timeout_ms", "86400001"},
                                                        {"rdm_peer_timeout_ms", "1s"},
                                                        {"rdm_max_retries", "1001"},
                                                        {"rdm_max_retries", "-1"},
                                                        {"rdm_ack_delay_us", "0"},
                                                        {"rdm_ack_delay_us", "100001"},
                                                        {"msg_connect_timeout_ms", "99"},
                                                        {"msg_connect_timeout_ms", "forever"}}) {
    Env env;
    env.vars[key] = value;
    auto cfg = dpfab::config::load(env.lookup());
    ASSERT_FALSE(cfg) << key;
    EXPECT_EQ(cfg.code(), -FI_EINVAL);
    std::string var = "FI_DPDK_";
    for (char c : key) var += static_cast<char>(std::toupper(c));
    EXPECT_THAT(cfg.error().message, HasSubstr(var + ": key '" + key + "'"));
  }
}

TEST(ConfigBadEnvironment, MissingConfigFileIsAnError) {
  Env env;
  env.vars["config"] = "/nonexistent/dpfab.conf";
  auto cfg = dpfab::config::load(env.lookup());
  ASSERT_FALSE(cfg);
  EXPECT_EQ(cfg.code(), -FI_ENOENT);
  EXPECT_THAT(cfg.error().message, HasSubstr("FI_DPDK_CONFIG: /nonexistent/dpfab.conf"));
}

TEST(ConfigBadEnvironment, UnreadableConfigFileIsAnError) {
  char dir[] = "/tmp/dpfab_dir_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  Env env;
  env.vars["config"] = dir;  // a directory: exists, cannot be read as a file
  auto cfg = dpfab::config::load(env.lookup());
  rmdir(dir);
  ASSERT_FALSE(cfg);
  EXPECT_THAT(cfg.error().message, HasSubstr("not a regular file"));
}

TEST(ConfigIpv4, ParseAndFormat) {
  auto p = dpfab::config::parse_ipv4_prefix(" 192.168.1.7/16 ");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->addr, 0xc0a80107u);
  EXPECT_EQ(p->prefix_len, 16);
  EXPECT_EQ(dpfab::config::format_ipv4(p->addr), "192.168.1.7");
  for (const char* bad : {"", "/24", "1.2.3.4/0", "1.2.3.4/x", "1.2.3/24", "a.b.c.d/8"})
    EXPECT_FALSE(dpfab::config::parse_ipv4_prefix(bad)) << bad;
}
