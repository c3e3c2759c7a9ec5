#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Runs the libFuzzer targets of test/fuzz for a bounded time each.
#   scripts/fuzz.sh [seconds per target (default 30)] [target ...]   (targets: decoder arp rdm rdm-core cm shm-ring shm-hello address rma)
# Configures build-fuzz with clang (-Dfuzz=true -Dtests=true) if it is missing, builds only the
# fuzz targets, and runs each from a copy of its seed corpus (build-fuzz/fuzz-corpus/<target>,
# which keeps what the fuzzer finds between runs) with -max_total_time and -rss_limit_mb=2048.
# Crash inputs land in build-fuzz/fuzz-artifacts/<target>/. Targets run in parallel, one per core
# (DPFAB_FUZZ_JOBS=N to change). Prints one summary line per target, in the order given, and exits
# non-zero if any target crashed (or failed to run).
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

# One target per core at a time (DPFAB_FUZZ_JOBS overrides): libFuzzer runs one thread, and each
# target still gets its full time, so the whole run takes about ceil(targets / jobs) * seconds.
jobs=${DPFAB_FUZZ_JOBS:-$(nproc)}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1

# Runs one target and writes its summary line to build-fuzz/fuzz-<target>.result.
run_target() {
  local t=$1 corpus=build-fuzz/fuzz-corpus/$1 artifacts=build-fuzz/fuzz-artifacts/$1
  local log=build-fuzz/fuzz-$1.log status execs rate cov corp verdict
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
  fi
  echo "fuzz-$t: ${secs}s, ${execs:-?} execs (${rate:-?}/s), ${cov:-cov: ?}, ${corp:-corp: ?}: $verdict" \
    >build-fuzz/fuzz-"$t".result
}

running=0
for t in "${targets[@]}"; do
  rm -f build-fuzz/fuzz-"$t".result
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  run_target "$t" &
  running=$((running + 1))
done
wait

rc=0
for t in "${targets[@]}"; do
  line=$(cat build-fuzz/fuzz-"$t".result 2>/dev/null || echo "fuzz-$t: no result (the runner failed)")
  echo "$line"
  case $line in *": ok") ;; *) rc=1 ;; esac
done
exit $rc
