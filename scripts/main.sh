#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The README's first command: installs what the main job needs (scripts/setup.sh --main), builds
# the plugin, dpfab-bench and dpfab-info (scripts/build.sh --main), and runs the main job: the
# busy-poll versus blocking benchmark (app/dpfab-bench) with its defaults: the dpdk provider in
# every waiting mode against the stock shm, udp and tcp providers, two processes per provider on
# this machine (dpdk over a net_memif link of its own). It prints a table and where the JSON, CSV
# and plots went (./dpfab-bench-results/ unless -o says otherwise). Arguments go to dpfab-bench
# (`bash scripts/main.sh --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --main
bash scripts/build.sh --main
export FI_PROVIDER_PATH="$PWD/build/drivers/ofi"   # the dpdk plugin of this build
exec ./build/app/dpfab-bench/dpfab-bench "$@"
