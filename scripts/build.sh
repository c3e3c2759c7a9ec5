#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Configures (once) and builds the project in ./build. Warnings are errors under CI.
set -euo pipefail
cd "$(dirname "$0")/.."
werror=false
[ -n "${CI:-}" ] && werror=true
if [ ! -f build/build.ninja ]; then
  meson setup build -Dwerror_ci="$werror"
else
  meson configure build -Dwerror_ci="$werror" >/dev/null
fi
ninja -C build
