// SPDX-License-Identifier: BSD-3-Clause
//
// dpfab-bench end to end: one brief run of every waiting mode and workload with -p dpdk (its two
// labelled pairs: over their own memif link, dpdk-port, and over the same-host path, dpdk-shm) and
// -p udp (two processes per provider over their own memif link / loopback), then checks of what
// doc/benchmark.md promises: every record carries the documented fields, no mode is skipped
// silently (an unsupported one carries its error), and every supported mode produced figures.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

using nlohmann::json;

namespace {

// The record fields as documented in doc/benchmark.md ("JSON schema").
const char* const kDocumentedFields[] = {
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
const char* const kSideFields[] = {"cpu_user_s", "cpu_sys_s", "vcsw",
                                   "ivcsw",      "wakeups",   "missed_wakeups"};
const char* const kModes[] = {"spin",    "sread", "fd",    "pollfd", "waitset",
                              "pollset", "cond",  "yield", "worker"};
const char* const kWorkloads[] = {"pingpong", "stream", "wakeup"};

class BenchTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* bench = std::getenv("DPFAB_BENCH");
    ASSERT_NE(bench, nullptr) << "meson sets DPFAB_BENCH";
    char tmpl[] = "/tmp/dpfab-bench-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // Brief: one size, 50 ms timed window, short waits so that modes whose wake-ups depend on
    // the benchmark's timeout (manual progress) stay quick; all modes and workloads, each
    // waiting on the CQ and on a counter.
    std::string cmd =
        std::string("timeout 360 ") + bench +
        " -p dpdk,udp --wait-on cq,cntr -s 64 -d 0.05 --warmup 10 --timeout-ms 200 --gap-us 500"
        " --stall-s 60 -o " +
        dir_ + " --name run 2>" + dir_ + "/stderr.txt";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof(buf), p)) stdout_.append(buf, n);
    rc_ = pclose(p);
    std::ifstream f(dir_ + "/run.json");
    doc_ = json::parse(f, nullptr, false);
  }
  static void TearDownTestSuite() {
    if (!::testing::Test::HasFailure() && !dir_.empty())
      std::system(("rm -rf " + dir_).c_str());
    else
      std::fprintf(stderr, "outputs kept in %s\n", dir_.c_str());
  }
  void SetUp() override {
    ASSERT_EQ(rc_, 0) << stdout_;
    ASSERT_FALSE(doc_.is_discarded()) << "run.json is not JSON";
    ASSERT_TRUE(doc_.contains("records"));
  }

  static std::string dir_, stdout_;
  static int rc_;
  static json doc_;
};

std::string BenchTest::dir_, BenchTest::stdout_;
int BenchTest::rc_ = -1;
json BenchTest::doc_;

std::string label(const json& r) {
  return r.value("provider", "?") + "/" + r.value("ep_type", "?") + " " + r.value("mode", "?") +
         " on " + r.value("wait_on", "?") + " " + r.value("workload", "?") + " " +
         std::to_string(r.value("size", 0));
}

}  // namespace

TEST_F(BenchTest, TheDocumentTopLevelHasToolHostOptionsProvidersAndRecords) {
  EXPECT_EQ(doc_.value("tool", ""), "dpfab-bench");
  EXPECT_EQ(doc_.value("schema_version", 0), 2);
  for (const char* k : {"host", "options", "providers", "started", "elapsed_s"})
    EXPECT_TRUE(doc_.contains(k)) << k;
  // -p dpdk: a pair over the port and a pair over the same-host path, each labelled.
  for (const char* p : {"dpdk-port", "dpdk-shm"}) {
    EXPECT_TRUE(doc_["providers"].contains(p)) << p;
    EXPECT_EQ(doc_["providers"][p]["offered"].value("dgram", ""), "dpdk")
        << p << ": the dpdk provider's own entry, not a layered dpdk;ofi_rxd one";
  }
  EXPECT_EQ(doc_["providers"]["dpdk-port"].value("FI_DPDK_SHM", ""), "off");
  EXPECT_EQ(doc_["providers"]["dpdk-shm"].value("FI_DPDK_SHM", ""), "on");
  EXPECT_TRUE(doc_["providers"].contains("udp"));
  EXPECT_TRUE(doc_["providers"].contains("memif-floor")) << "dpdk over its own memif link";
}

TEST_F(BenchTest, EveryRecordHasTheDocumentedFields) {
  ASSERT_FALSE(doc_["records"].empty());
  for (const auto& r : doc_["records"]) {
    for (const char* k : kDocumentedFields) EXPECT_TRUE(r.contains(k)) << label(r) << ": " << k;
    EXPECT_EQ(r.size(), std::size(kDocumentedFields)) << label(r) << ": undocumented fields";
    std::string s = r.value("status", "");
    EXPECT_TRUE(s == "ok" || s == "unsupported" || s == "error") << label(r) << ": " << s;
  }
}

TEST_F(BenchTest, EveryModeAndWorkloadIsReportedForEachProviderNeverSkippedSilently) {
  for (std::string prov : {"dpdk-port", "dpdk-shm", "udp"}) {
    for (std::string on : {"cq", "cntr"}) {
      for (const char* m : kModes) {
        for (const char* w : kWorkloads) {
          int n = 0;
          for (const auto& r : doc_["records"])
            n += r.value("provider", "") == prov && r.value("mode", "") == m &&
                 r.value("workload", "") == w && r.value("ep_type", "") == "dgram" &&
                 r.value("wait_on", "") == on;
          EXPECT_EQ(n, 1) << prov << " " << on << " " << m << " " << w;
        }
      }
    }
  }
}

TEST_F(BenchTest, AModeThatIsNotSupportedIsReportedWithItsError) {
  for (const auto& r : doc_["records"])
    if (r.value("status", "") != "ok") {
      EXPECT_FALSE(r.value("error", "").empty()) << label(r);
    }
  // The worker is the dpdk provider's extension: udp must refuse it, with fi_open_ops' error.
  bool seen = false;
  for (const auto& r : doc_["records"])
    if (r.value("provider", "") == "udp" && r.value("mode", "") == "worker") {
      seen = true;
      EXPECT_EQ(r.value("status", ""), "unsupported");
      EXPECT_NE(r.value("error", "").find("fi_open_ops"), std::string::npos) << r.dump();
    }
  EXPECT_TRUE(seen);
}

TEST_F(BenchTest, TheDpdkProviderSupportsEveryWaitingMode) {
  for (const auto& r : doc_["records"])
    if (r.value("provider", "").rfind("dpdk", 0) == 0) {
      EXPECT_EQ(r.value("prov_name", ""), "dpdk") << label(r);
      EXPECT_EQ(r.value("status", ""), "ok") << label(r) << ": " << r.value("error", "");
    }
}

TEST_F(BenchTest, EverySupportedModeProducedFigures) {
  int ok = 0;
  for (const auto& r : doc_["records"]) {
    if (r.value("status", "") == "unsupported") continue;
    EXPECT_EQ(r.value("status", ""), "ok") << label(r) << ": " << r.value("error", "");
    if (r.value("status", "") != "ok") continue;
    ok++;
    SCOPED_TRACE(label(r));
    for (const char* k : kDocumentedFields)
      if (std::string(k) != "over_floor_us") {  // dpdk records only: TheRawPortFloor...
        EXPECT_FALSE(r[k].is_null()) << k << " is null in an ok record";
      }
    EXPECT_GT(r["iterations"].get<uint64_t>(), 0u);
    EXPECT_GT(r["messages"].get<uint64_t>(), 0u);
    EXPECT_GT(r["duration_s"].get<double>(), 0);
    EXPECT_GT(r["msg_rate"].get<double>(), 0);
    EXPECT_GT(r["bandwidth_mbps"].get<double>(), 0);
    double mn = r["lat_min_us"], p50 = r["lat_p50_us"], p90 = r["lat_p90_us"],
           p99 = r["lat_p99_us"], p999 = r["lat_p999_us"], mx = r["lat_max_us"],
           mean = r["lat_mean_us"];
    EXPECT_GE(mn, 0);
    EXPECT_LE(mn, p50);
    EXPECT_LE(p50, p90);
    EXPECT_LE(p90, p99);
    EXPECT_LE(p99, p999);
    EXPECT_LE(p999, mx);
    EXPECT_GT(mx, 0);
    EXPECT_LE(mean, mx);
    EXPECT_GE(mean, mn);
    const auto& cdf = r["cdf_us"];
    ASSERT_EQ(cdf.size(), 101u);
    EXPECT_DOUBLE_EQ(cdf[0].get<double>(), mn);
    EXPECT_DOUBLE_EQ(cdf[100].get<double>(), mx);
    for (size_t i = 1; i < cdf.size(); i++)
      EXPECT_LE(cdf[i - 1].get<double>(), cdf[i].get<double>());
    EXPECT_GE(r["cpu_s"].get<double>(), 0);
    EXPECT_NEAR(r["cpu_s"].get<double>(),
                r["cpu_user_s"].get<double>() + r["cpu_sys_s"].get<double>(), 1e-9);
    EXPECT_NEAR(r["cpu_us_per_msg"].get<double>(),
                r["cpu_s"].get<double>() * 1e6 / r["messages"].get<double>(), 1e-6);
    for (const char* side : {"client", "server"})
      for (const char* k : kSideFields) EXPECT_TRUE(r[side].contains(k)) << side << "." << k;
    EXPECT_EQ(r["wakeups"].get<uint64_t>(),
              r["client"]["wakeups"].get<uint64_t>() + r["server"]["wakeups"].get<uint64_t>());
    EXPECT_GE(r["vcsw"].get<int64_t>(), 0);
    if (r.value("mode", "") == "spin" || r.value("mode", "") == "pollset") {
      EXPECT_EQ(r["wakeups"].get<uint64_t>(), 0u) << "busy modes never sleep";
    }
  }
  EXPECT_GE(ok, 108) << "all of dpdk's 9 modes x 3 workloads x (cq, cntr), both paths, at least";
}

// dpdk runs over a memif link of its own: the run measures raw memif frames between two processes
// next to it (dpfab-bench-floor), reported as provider memif-floor with the same fields, and every
// ping-pong and stream record of dpdk over its port (not over the same-host path, which does not
// touch the port) says what it adds to that floor (over_floor_us).
TEST_F(BenchTest, TheRawPortFloorIsMeasuredInTheSameRunAndEveryDpdkFigureReadsAsFloorPlus) {
  std::map<std::string, const json*> floor;  // workload -> record
  for (const auto& r : doc_["records"])
    if (r.value("provider", "") == "memif-floor") floor[r.value("workload", "")] = &r;
  for (const char* w : kWorkloads) ASSERT_TRUE(floor.count(w)) << "no floor record for " << w;
  for (const char* w : {"pingpong", "stream"}) {
    const json& f = *floor[w];
    EXPECT_EQ(f.value("status", ""), "ok") << f.value("error", "");
    EXPECT_EQ(f.value("ep_type", ""), "raw");
    EXPECT_EQ(f.value("mode", ""), "spin");
    EXPECT_GT(f["lat_p50_us"].get<double>(), 0);
    EXPECT_TRUE(f["over_floor_us"].is_null());
  }
  EXPECT_EQ(floor["wakeup"]->value("status", ""), "unsupported") << "nothing sleeps in the floor";
  EXPECT_FALSE(floor["wakeup"]->value("error", "").empty());
  int dpdk = 0;
  for (const auto& r : doc_["records"]) {
    if (r.value("status", "") != "ok") continue;
    const std::string w = r.value("workload", "");
    const bool over = r.value("provider", "") == "dpdk-port" && w != "wakeup";
    EXPECT_EQ(r["over_floor_us"].is_number(), over) << label(r);
    if (!over) continue;
    dpdk++;
    EXPECT_NEAR(r["over_floor_us"].get<double>(),
                r["lat_p50_us"].get<double>() - (*floor[w])["lat_p50_us"].get<double>(), 1e-9)
        << label(r);
  }
  EXPECT_GE(dpdk, 36) << "dpdk's 9 modes x (pingpong, stream) x (cq, cntr) at least";
  EXPECT_NE(stdout_.find("== dpdk over the raw-port floor (memif-floor"), std::string::npos)
      << stdout_;
}

TEST_F(BenchTest, TheRunWritesJsonCsvAndPlotsAndSaysWhereTheyWent) {
  for (const char* f : {"/run.json", "/run.csv", "/run-cdf.svg", "/run-cpu.svg", "/run.gp"}) {
    EXPECT_EQ(access((dir_ + f).c_str(), R_OK), 0) << f;
    EXPECT_NE(stdout_.find(dir_ + f), std::string::npos) << "stdout names " << f;
  }
  std::ifstream csv(dir_ + "/run.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header.rfind("workload,provider,prov_name,", 0), 0u) << header;
  size_t rows = 0;
  for (std::string line; std::getline(csv, line);) rows++;
  EXPECT_EQ(rows, doc_["records"].size());
  std::ifstream svg(dir_ + "/run-cdf.svg");
  std::string head((std::istreambuf_iterator<char>(svg)), {});
  EXPECT_NE(head.find("<svg"), std::string::npos);
  // The terminal table names every mode.
  for (const char* m : kModes)
    EXPECT_NE(stdout_.find(std::string(" ") + m + " "), std::string::npos) << m;
}

// The one-sided workloads (spin mode, RDM entries with FI_RMA | FI_ATOMIC), over both of dpdk's
// paths: every case ran and measured (a label such as dpdk-shm must not reach fi_getinfo as a
// provider name: the cases were "unsupported" once).
TEST(BenchOneSided, EveryOneSidedWorkloadRunsOverBothPaths) {
  const char* bench = std::getenv("DPFAB_BENCH");
  ASSERT_NE(bench, nullptr) << "meson sets DPFAB_BENCH";
  char tmpl[] = "/tmp/dpfab-bench-rma.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string cmd = std::string("timeout 120 ") + bench +
                          " -p dpdk -e rdm -m spin -w rma-write,rma-read,rma-bw,atomic -s 64,64k"
                          " -d 0.05 --warmup 10 --plot none -o " +
                          dir + " --name rma >/dev/null 2>" + dir + "/stderr.txt";
  const int rc = std::system(cmd.c_str());
  std::ifstream f(dir + "/rma.json");
  const json doc = json::parse(f, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << "rc " << rc;
  std::set<std::string> seen;
  for (const auto& r : doc["records"]) {
    const std::string prov = r.value("provider", "");
    EXPECT_EQ(r.value("status", ""), "ok") << prov << " " << r.value("workload", "") << " "
                                           << r.value("size", 0) << ": " << r.value("error", "");
    EXPECT_GT(r.value("lat_p50_us", 0.0), 0.0);
    seen.insert(prov + " " + r.value("workload", ""));
  }
  for (const char* p : {"dpdk-port", "dpdk-shm"})
    for (const char* w : {"rma-write", "rma-read", "rma-bw", "atomic"})
      EXPECT_TRUE(seen.count(std::string(p) + " " + w)) << p << " " << w;
  std::system(("rm -rf " + dir).c_str());
}
