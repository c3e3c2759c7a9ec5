#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Per-message costs from hot-path's callgrind runs (doc/performance.md, "Where the time goes").

  test/perf/cg_phases.py DIR [ITERS] [IDLE]

DIR holds callgrind outputs named cg.<ep>.<phase> (one hot-path run per endpoint type and phase,
--phase <phase>, --iters ITERS, --idle IDLE; defaults 2000 and 8) and cg.<ep>.all (every phase).
Prints, per endpoint type and phase, the events per message (per call for idle): instructions
(Ir), data reads and writes (Dr, Dw), simulated L1 and last-level misses; then, from cg.<ep>.all,
the functions with the largest exclusive cost per message and the share of the PMD's own burst
functions (net_ring's, which a memif link replaces with its own).
"""
import os
import re
import subprocess
import sys

PHASES = ["send", "rx", "repost", "txc", "idle"]


def totals(path):
    """The summary line's events of a callgrind output: {event: count}."""
    events, summary = [], None
    for line in open(path, errors="replace"):
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("summary:") or line.startswith("totals:"):
            summary = [int(x) for x in line.split()[1:]]
    return dict(zip(events, summary or []))


def functions(path, top):
    """Exclusive Ir per function (callgrind_annotate), largest first."""
    out = subprocess.run(["callgrind_annotate", "--threshold=99", path], capture_output=True,
                         text=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(?:\S+:)?(.+?)(?:\s+\[(.+)\])?$", line)
        if m:
            rows.append((int(m[1].replace(",", "")), m[2].strip(), (m[3] or "").rsplit("/", 1)[-1]))
    return rows[:top]


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    d = sys.argv[1]
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    idle = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    msgs = 2 * iters
    cols = ["Ir", "Dr", "Dw", "D1mr", "D1mw", "DLmr", "DLmw"]
    for ep in ["dgram", "rdm", "msg"]:
        have = [p for p in PHASES if os.path.exists(f"{d}/cg.{ep}.{p}")]
        if not have:
            continue
        print(f"== {ep}: per message (idle: per empty fi_cq_read)")
        print(f"   {'phase':8s}" + "".join(f"{c:>9s}" for c in cols))
        total = dict.fromkeys(cols, 0.0)
        for p in have:
            t = totals(f"{d}/cg.{ep}.{p}")
            n = iters * idle if p == "idle" else msgs
            print(f"   {p:8s}" + "".join(f"{t.get(c, 0) / n:9.1f}" for c in cols))
            if p != "idle":
                for c in cols:
                    total[c] += t.get(c, 0) / n
        print(f"   {'message':8s}" + "".join(f"{total[c]:9.1f}" for c in cols))
        allp = f"{d}/cg.{ep}.all"
        if os.path.exists(allp):
            t = totals(allp)
            print(f"   largest exclusive costs, all phases (Ir per message, of "
                  f"{t.get('Ir', 0) / msgs:.0f} with the idle reads):")
            for ir, fn, obj in functions(allp, 25):
                print(f"     {ir / msgs:8.1f}  {fn[:90]}  [{obj}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
