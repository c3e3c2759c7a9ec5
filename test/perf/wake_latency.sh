#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Runs wake-latency (test/perf/wake_latency.cc) against this build's provider: wake-up latency of
# the first message after >= 1 s idle, busy-poll and blocking round trips, CPU per 100k round
# trips, on net_tap, virtio-user <-> vhost and net_memif, and the raw eventfd wake latency.
#   test/perf/wake_latency.sh [build dir] [pmd...]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
shift || true
export FI_PROVIDER_PATH=$build/drivers/ofi FI_DPDK_CONFIG=$root/config/dpfab.conf
export FI_PROVIDER='^ofi_rxd' FI_LOG_LEVEL=${FI_LOG_LEVEL:-warn}
exec "$build/test/perf/wake-latency" "$@" 2> >(grep -v -e 'ofi_rx[md]' -e ofi_mrail -e 'rte_log' >&2)
