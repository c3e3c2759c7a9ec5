#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Configures (once) and builds the project in ./build. Warnings are errors under CI.
#   scripts/build.sh          everything, tests included (scripts/test.sh)
#   scripts/build.sh --main   only the plugin, dpfab-bench, its floor helper and dpfab-info
#                             (scripts/main.sh); a build folder made this way has no tests
#                             until scripts/build.sh turns them on
set -euo pipefail
cd "$(dirname "$0")/.."
main=0
[ "${1:-}" = --main ] && main=1
werror=false
[ -n "${CI:-}" ] && werror=true
if [ ! -f build/build.ninja ]; then
  tests=true
  [ $main = 1 ] && tests=false
  meson setup build -Dwerror_ci="$werror" -Dtests="$tests"
elif [ $main = 0 ]; then
  meson configure build -Dwerror_ci="$werror" -Dtests=true >/dev/null
fi
if [ $main = 1 ]; then
  ninja -C build drivers/ofi/libdpdk-fi.so app/dpfab-bench/dpfab-bench app/dpfab-bench/dpfab-bench-floor \
    app/dpfab-info/dpfab-info
else
  ninja -C build
fi
