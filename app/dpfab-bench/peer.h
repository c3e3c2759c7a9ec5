// SPDX-License-Identifier: BSD-3-Clause
//
// The two benchmark processes of one provider. The server answers the client's commands on the
// out-of-band socket (open a group, exchange addresses or connect, serve a case, report its own
// usage, close); the client drives every case, measures it and writes one JSON line per event
// (plan, case start, record) to the events fd that the orchestrator reads.
#pragma once

#include <string>

#include "common.h"

namespace dpfab::bench {

/// Runs the server side for opts.providers[0]. Returns the process exit code.
int run_server(const Options& opts, const std::string& oob_path);
/// Runs the client side for opts.providers[0], writing events to events_fd. Returns the process
/// exit code.
int run_client(const Options& opts, const std::string& oob_path, int events_fd);

}  // namespace dpfab::bench
