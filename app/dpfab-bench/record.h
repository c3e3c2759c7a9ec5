// SPDX-License-Identifier: BSD-3-Clause
//
// dpfab-bench: one record of the JSON schema (doc/benchmark.md, "JSON schema"): its fields in
// order, the record of a case that did not run, and the figures of one that did. Shared by the
// libfabric peers (peer.cc) and the raw-port floor (floor.cc, the dpfab-bench-floor helper), so
// that both report the same statistics the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common.h"

namespace dpfab::bench {

/// The record fields every record carries (the JSON schema, in order), for CSV and checks.
extern const char* const kRecordFields[];
extern const size_t kRecordFieldCount;

/// What names a case.
struct CaseKey {
  std::string workload, provider, prov_name, fabric, domain, ep_type, mode, wait_on;
  uint64_t size;
};

/// A record with the case's key, status ok, and every other field null.
json base_record(const CaseKey& k);
/// A record that did not run: `status` ("unsupported" or "error") and why.
json failed_record(const CaseKey& k, const std::string& status, const std::string& error);

/// What the client measured in a case's timed window.
struct Measured {
  std::vector<double> samples_us;
  uint64_t iterations = 0, messages = 0, lost = 0;
  double duration_s = 0;
  SideFigures side;
  std::string error;
};

/// Fills r's figures from the client's measurement and the server's figures (side_json, or null):
/// latency statistics (nearest-rank percentiles of the sorted samples), rates, CPU and wakeups
/// of both processes. Sorts m.samples_us.
void fill_figures(json& r, Measured& m, const json& server, uint64_t size);

/// Nearest-rank quantile of sorted samples (q in [0,1]); 0 when empty.
double quantile(const std::vector<double>& sorted, double q);

}  // namespace dpfab::bench
