// SPDX-License-Identifier: BSD-3-Clause
//
// What dpfab-bench makes of the records: the terminal table, the dpdk-versus-stock comparison,
// the CSV file and the gnuplot plots (latency CDF per mode, CPU per message against latency).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "common.h"

namespace dpfab::bench {

/// Prints one line per record, grouped by workload, readable on an 80+ column terminal.
void print_table(FILE* out, const json& records);
/// Prints, for each dpdk mode, its p50 latency and CPU per message as ratios to the same mode
/// (and to spin) of every other provider in the run; pingpong and wakeup at the first size.
void print_comparison(FILE* out, const json& records);
/// Writes the records as CSV (one row per record, the JSON fields flattened). Returns "" or an
/// error.
std::string write_csv(const std::string& path, const json& records);
/// Writes <base>.gp (the gnuplot script with its data inline) and runs gnuplot to make
/// <base>-cdf.<fmt> and <base>-cpu.<fmt> (fmt: svg or png). Adds the files made to *files.
/// Returns "" or an error.
std::string write_plots(const std::string& base, const std::string& fmt, const json& records,
                        std::vector<std::string>* files);

}  // namespace dpfab::bench
