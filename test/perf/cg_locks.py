#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Locked instructions (atomic read-modify-writes and full fences) per message, per phase, from
hot-path's callgrind runs (doc/performance.md, "Where the time goes").

  test/perf/cg_locks.py FILE MESSAGES

FILE is a callgrind output made with per-instruction counts:

  FI_PROVIDER_PATH=build/drivers/ofi FI_DPDK_PORTS=net_ring0 FI_DPDK_SHM=off \\
    valgrind --tool=callgrind --collect-atstart=no --dump-instr=yes --compress-pos=no \\
    --compress-strings=no --callgrind-out-file=DIR/cgi.rdm.rx \\
    build/test/perf/hot-path --phases rdm --iters 2000 --phase rx

and MESSAGES the messages it measured (2 x --iters: hot-path sends both ways). Every instruction
with a lock prefix, and every xchg with a memory operand (implicitly locked), that ran is listed
with its function and how often it ran per message. Callgrind counts instructions, not cycles: a
locked instruction is one instruction to it, but on x86 it waits for the store buffer to drain
(measured here at 4-14 ns each on the data path), which is why they are counted apart.
"""
import collections
import re
import subprocess
import sys


def executed(path):
    """{(object, address): times run, (object, address): function} of a --dump-instr file."""
    runs, fn_of = collections.defaultdict(int), {}
    ob = fn = None
    after_calls = False
    for line in open(path, errors="replace"):
        if line.startswith("ob="):
            ob = line[3:].strip()
        elif line.startswith("fn="):
            fn = line[3:].strip()
        elif line.startswith("calls="):
            after_calls = True  # the next cost line is the call's inclusive cost: not ours
        elif line.startswith("0x"):
            if after_calls:
                after_calls = False
                continue
            parts = line.split()
            key = (ob, int(parts[0], 16))
            runs[key] += int(parts[2])  # Ir of one instruction = the times it ran
            fn_of[key] = fn
    return runs, fn_of


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    runs, fn_of = executed(sys.argv[1])
    messages = float(sys.argv[2])
    locked = re.compile(r"\s*([0-9a-f]+):\s+(lock .*|xchg\s+\S*\(.*)$")
    found = []
    for ob in sorted({o for o, _ in runs}):
        dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", ob], capture_output=True,
                             text=True).stdout
        for line in dis.splitlines():
            m = locked.match(line)
            if m and (ob, int(m.group(1), 16)) in runs:
                key = (ob, int(m.group(1), 16))
                found.append((runs[key] / messages, ob.rsplit("/", 1)[-1], fn_of[key],
                              m.group(2).strip()))
    total = 0.0
    for per, ob, fn, insn in sorted(found, reverse=True):
        if per >= 0.01:
            print(f"{per:6.2f}  {ob:22s} {fn[:80]}  [{insn[:36]}]")
            total += per
    print(f"{total:6.2f}  locked instructions per message")


if __name__ == "__main__":
    main()
