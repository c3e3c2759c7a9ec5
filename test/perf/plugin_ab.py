#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Before/after of two builds of the plugin, interleaved, in one dpfab-bench session.

  test/perf/plugin_ab.py [--rounds N] [--bench PATH] DIR_A DIR_B [-- BENCH ARGS...]

DIR_A and DIR_B each hold a libdpdk-fi.so (copy build/drivers/ofi/libdpdk-fi.so there before and
after a change). Each round runs dpfab-bench once with FI_PROVIDER_PATH=DIR_A and once with
DIR_B, the first of the pair alternating from round to round, so that neither build always runs
right after the other or at the same point of the VM's slow and fast spells (doc/performance.md,
"Reading the figures"). Bench arguments default to the 64 B port ping-pong of issue 26:
-p dpdk-port -e dgram,rdm,msg -m spin -w pingpong -s 64 (the raw floor is measured in every run).

Prints, for every record (provider, endpoint type, mode, workload, size): each run's p50 and its
distance to the floor of the same run when there is one, the medians of A and B, and B/A of the
medians; then CPU and OS wakeups per message (both processes' voluntary context switches). On a
noisy 2-vCPU VM a change of a few nanoseconds does not show: compare instruction counts too
(test/perf/cg_phases.py).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

DEFAULT_ARGS = ["-p", "dpdk-port", "-e", "dgram,rdm,msg", "-m", "spin", "-w", "pingpong",
                "-s", "64"]


def run(bench, plugin_dir, args, out_dir):
    """One dpfab-bench run with the plugin of `plugin_dir`: its records, keyed."""
    env = dict(os.environ, FI_PROVIDER_PATH=os.path.abspath(plugin_dir))
    os.makedirs(out_dir, exist_ok=True)
    r = subprocess.run([bench, *args, "-o", out_dir], env=env, capture_output=True, text=True)
    files = sorted(f for f in os.listdir(out_dir) if f.endswith(".json"))
    if r.returncode != 0 or not files:
        sys.exit(f"dpfab-bench failed (rc {r.returncode}) with {plugin_dir}:\n{r.stderr[-2000:]}")
    with open(os.path.join(out_dir, files[-1])) as f:
        doc = json.load(f)
    recs = {}
    for rec in doc["records"]:
        if rec.get("error") or rec.get("lat_p50_us") is None:
            continue
        key = (rec["provider"], rec["ep_type"], rec["mode"], rec["workload"], rec["size"])
        recs[key] = rec
    return recs


def main():
    argv = sys.argv[1:]
    bench_args = DEFAULT_ARGS
    if "--" in argv:
        k = argv.index("--")
        argv, bench_args = argv[:k], argv[k + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--bench", default="build/app/dpfab-bench/dpfab-bench")
    ap.add_argument("dir_a")
    ap.add_argument("dir_b")
    o = ap.parse_args(argv)
    for d in (o.dir_a, o.dir_b):
        if not os.path.isfile(os.path.join(d, "libdpdk-fi.so")):
            sys.exit(f"{d}: no libdpdk-fi.so")
    runs = {"A": [], "B": []}
    with tempfile.TemporaryDirectory(prefix="plugin-ab-") as tmp:
        for i in range(o.rounds):
            order = [("A", o.dir_a), ("B", o.dir_b)]
            if i % 2:
                order.reverse()
            for name, d in order:
                runs[name].append(run(o.bench, d, bench_args, os.path.join(tmp, f"{name}{i}")))
                print(f"round {i + 1}/{o.rounds}: {name} done", file=sys.stderr)
    keys = sorted(set().union(*[r.keys() for r in runs["A"] + runs["B"]]))
    fmt = lambda v: "-" if v is None else f"{v:.3f}"
    print(f"p50 one-way us (over the floor of the same run), {o.rounds} interleaved rounds")
    for key in keys:
        label = "/".join(str(k) for k in key)
        med = {}
        for name in ("A", "B"):
            vals = [r[key] for r in runs[name] if key in r]
            p50 = [v["lat_p50_us"] for v in vals]
            over = [v["over_floor_us"] for v in vals if v.get("over_floor_us") is not None]
            wake = [v["os_wakeups_per_msg"] for v in vals
                    if v.get("os_wakeups_per_msg") is not None]
            med[name] = (statistics.median(p50) if p50 else None,
                         statistics.median(over) if over else None,
                         statistics.median([v["cpu_us_per_msg"] for v in vals]) if vals else None,
                         statistics.median(wake) if wake else None)
            cells = " ".join(
                fmt(v["lat_p50_us"]) + (f" ({v['over_floor_us']:+.3f})"
                                        if v.get("over_floor_us") is not None else "")
                for v in vals)
            print(f"  {label:40s} {name}: {cells}")
        (pa, oa, ca, wa), (pb, ob, cb, wb) = med["A"], med["B"]
        ratio = f"x{pb / pa:.3f}" if pa and pb else "-"
        over = f", over the floor {oa:+.3f} -> {ob:+.3f}" if oa is not None and ob is not None else ""
        print(f"  {label:40s} median {fmt(pa)} -> {fmt(pb)} ({ratio}){over}; "
              f"CPU us/msg {fmt(ca)} -> {fmt(cb)}; OS wakeups/msg {fmt(wa)} -> {fmt(wb)}")


if __name__ == "__main__":
    main()
