#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The README's first command: installs what is missing, builds, and runs the main job. Until the
# benchmark lands (app/dpfab-bench), the main job is dpfab-info on the default virtual devices.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
./build/app/dpfab-info/dpfab-info "$@"
