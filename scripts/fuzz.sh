#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Runs the libFuzzer targets of test/fuzz for a bounded time each.
#   scripts/fuzz.sh [seconds per target (default 30)] [target ...]   (targets: decoder arp rdm rdm-core cm shm-ring shm-hello address rma)
# Configures build-fuzz with clang (-Dfuzz=true -Dtests=true) if it is missing, builds only the
# fuzz targets, and runs each from a copy of its seed corpus (build-fuzz/fuzz-corpus/<target>,
# which keeps what the fuzzer finds between runs) with -max_total_time and -rss_limit_mb=2048.
# Crash inputs land in build-fuzz/fuzz-artifacts/<target>/. Prints one summary line per target and
# exits non-zero if any target crashed (or failed to run).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(decoder arp rdm rdm-core cm shm-ring shm-hello address rma)

if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang CXX=clang++ meson setup build-fuzz -Dfuzz=true -Dtests=true >/dev/null
fi
ninja -C build-fuzz "${targets[@]/#/test/fuzz/fuzz-}" >/dev/null

rc=0
summary=()
for t in "${targets[@]}"; do
  corpus=build-fuzz/fuzz-corpus/$t
  artifacts=build-fuzz/fuzz-artifacts/$t
  log=build-fuzz/fuzz-$t.log
  mkdir -p "$corpus" "$artifacts"
  cp -n test/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  set +e
  ./build-fuzz/test/fuzz/fuzz-"$t" "$corpus" -max_total_time="$secs" -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts"/ >"$log" 2>&1
  status=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1 || true)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1 || true)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 || true)
  corp=$(grep -oE 'corp: [0-9]+/[0-9]+[bKMG]b?' "$log" | tail -1 || true)
  if [ $status -eq 0 ]; then
    verdict=ok
  else
    verdict="CRASH (exit $status): see $log and $artifacts/"
    rc=1
  fi
  summary+=("fuzz-$t: ${secs}s, ${execs:-?} execs (${rate:-?}/s), ${cov:-cov: ?}, ${corp:-corp: ?}: $verdict")
done
printf '%s\n' "${summary[@]}"
exit $rc
