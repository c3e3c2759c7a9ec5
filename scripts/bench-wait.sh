#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Runs the wakeup micro-benchmarks (test/perf/wait_bench.cc) through the real libfabric core and
# prints the ratios that issue 3 sets as goals: our wake latency / raw eventfd wake, and fi_poll /
# fi_trywait with 1,001 members / with 1 member. Same run, same machine: compare ratios only.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
out=$(mktemp --suffix=.json)
trap 'rm -f "$out"' EXIT
FI_PROVIDER_PATH=$PWD/build/drivers/ofi FI_DPDK_PORTS=net_null0 \
  ./build/test/perf/bench-wait --benchmark_out="$out" --benchmark_out_format=json "$@"
python3 - "$out" <<'PY'
import json, sys
b = {x["name"]: x for x in json.load(open(sys.argv[1]))["benchmarks"]}
def get(name, key="real_time"):
    for n, x in b.items():
        if n.startswith(name):
            return x.get(key)
    return None
raw50, raw99 = get("BM_Wake_RawEventfdEpoll", "p50_us"), get("BM_Wake_RawEventfdEpoll", "p99_us")
print("\nwake latency (p50 / p99 us), ratio of p50 to raw eventfd -> epoll_wait:")
print(f"  {'raw eventfd -> epoll_wait':34s} {raw50:7.2f} / {raw99:7.2f}")
for name, label in [("BM_Wake_FiEqSread", "fi_eq_sread"), ("BM_Wake_FiCntrWait", "fi_cntr_wait"),
                    ("BM_Wake_FdTrywaitEpoll", "FD + fi_trywait + epoll_wait"),
                    ("BM_Wake_CqSread", "CQ sread (lib)"), ("BM_Wake_CqFdEpoll", "CQ FD + epoll (lib)")]:
    p50, p99 = get(name, "p50_us"), get(name, "p99_us")
    if p50 is not None:
        print(f"  {label:34s} {p50:7.2f} / {p99:7.2f}   x{p50 / raw50:.2f}")
print("\nscaling with idle members (ns per call), 1001 members / 1 member:")
for base, label in [("BM_FiPoll_OneActive", "fi_poll, 1 active"),
                    ("BM_FiTrywaitWaitSet/{}/1", "fi_trywait wait set, 1 active"),
                    ("BM_FiTrywaitWaitSet/{}/0", "fi_trywait wait set, all idle")]:
    one = get(base.format(1) if "{}" in base else base + "/1")
    many = get(base.format(1001) if "{}" in base else base + "/1001")
    if one and many:
        print(f"  {label:34s} {one:8.1f} -> {many:8.1f}   x{many / one:.2f}")
print("\nuncontended (ns per call):")
for n in ["BM_Trywait_EmptyFdEq", "BM_Trywait_EmptyFdCntr", "BM_Read_EmptyEq", "BM_Trywait_EmptyFdCq",
          "BM_Read_EmptyCq", "BM_CqWriteRead_TwoThreads"]:
    v = get(n)
    if v is not None:
        print(f"  {n:34s} {v:8.1f}")
PY
