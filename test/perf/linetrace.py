#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Cache lines touched and locked instructions per message, from a valgrind lackey trace.

  FI_DPDK_PORTS=net_ring0 valgrind --tool=lackey --trace-mem=yes --log-fd=3 \\
      build/test/perf/hot-path --phases rdm --iters 100 2>hot.err 3>&1 1>/dev/null |
    test/perf/linetrace.py hot.err

hot-path (test/perf/hot_path.cc) prints the addresses of its phase markers and its memory map on
stderr (hot.err); lackey writes every instruction fetch ("I  addr,size") and data access
(" L/S/M addr,size") to fd 3. A phase runs from a call of its marker to the call of the end
marker. For each phase this prints, per occurrence (averaged over the occurrences):

  instr     instructions executed (lackey's count: the same as callgrind's Ir)
  lines     distinct 64-byte data lines touched, and how many of them were written
  by region the lines per mapping: stack, heap, dpdk (EAL's anonymous memory: mbufs, rings,
            mempool caches), lib data (.data/.bss of a shared object), other
  locked    lock-prefixed instructions and xchg with memory (each a full barrier on x86, about
            20 cycles uncontended), and mfence
  syscall   syscall instructions; rdtsc: TSC reads; vdso: calls into the vDSO (clock_gettime)

and the lines written, with the functions that wrote them (addr2line), so that a line can be
named: "rte_ring_enqueue... (prod.tail)". Deterministic: the same binary and arguments give the
same figures. Needs binutils (addr2line).
"""
import bisect
import collections
import re
import subprocess
import sys
import time

PHASES = ["send", "txc", "rx", "repost", "idle"]
LEGACY_PREFIXES = {0x66, 0x67, 0xF2, 0xF3, 0x2E, 0x36, 0x3E, 0x26, 0x64, 0x65, 0xF0}


class Maps:
    def __init__(self):
        self.ranges = []  # (start, end, perms, offset, path)

    def add(self, line):
        m = re.match(r"([0-9a-f]+)-([0-9a-f]+) (\S+) ([0-9a-f]+) \S+ \d+\s*(.*)", line)
        if m:
            self.ranges.append((int(m[1], 16), int(m[2], 16), m[3], int(m[4], 16), m[5].strip()))

    def finish(self):
        self.ranges.sort()
        self.starts = [r[0] for r in self.ranges]

    def find(self, addr):
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0 and addr < self.ranges[i][1]:
            return self.ranges[i]
        return None

    def region(self, addr):
        r = self.find(addr)
        if r is None:
            return "other"
        path = r[4]
        if path == "[stack]":
            return "stack"
        if path == "[heap]":
            return "heap"
        if "memif_region" in path:
            return "memif shm"
        if path.startswith("/") and "w" in r[2]:
            return "lib data"
        if path == "" and "w" in r[2]:
            return "anon (dpdk/thread stacks/malloc)"
        return "other"


class Code:
    """Instruction bytes and names, from the object files behind the map."""

    def __init__(self, maps):
        self.maps = maps
        self.files = {}
        self.cache = {}

    def bytes_at(self, addr, size):
        r = self.maps.find(addr)
        if r is None or not r[4].startswith("/"):
            return None
        path = r[4]
        if path not in self.files:
            try:
                self.files[path] = open(path, "rb").read()
            except OSError:
                self.files[path] = None
        data = self.files[path]
        if data is None:
            return None
        off = addr - r[0] + r[3]
        return data[off:off + size]

    def kind(self, addr, size):
        """'lock', 'mfence', 'syscall', 'rdtsc' or None."""
        key = (addr, size)
        if key in self.cache:
            return self.cache[key]
        b = self.bytes_at(addr, size)
        k = None
        if b:
            i, lock = 0, False
            while i < len(b) and b[i] in LEGACY_PREFIXES:
                lock |= b[i] == 0xF0
                i += 1
            if i < len(b) and 0x40 <= b[i] <= 0x4F:
                i += 1
            op = b[i:i + 3]
            if lock:
                k = "lock"
            elif len(op) >= 2 and op[0] in (0x86, 0x87) and (op[1] >> 6) != 3:
                k = "lock"  # xchg with memory: implicitly locked
            elif op[:3] == bytes([0x0F, 0xAE, 0xF0]):
                k = "mfence"
            elif op[:2] == bytes([0x0F, 0x05]):
                k = "syscall"
            elif op[:2] == bytes([0x0F, 0x31]) or op[:3] == bytes([0x0F, 0x01, 0xF9]):
                k = "rdtsc"
        self.cache[key] = k
        return k

    def name(self, addr):
        r = self.maps.find(addr)
        if r is None:
            return "?"
        if r[4] == "[vdso]":
            return "[vdso]"
        if not r[4].startswith("/"):
            return "?"
        off = addr - r[0] + r[3]
        try:
            out = subprocess.run(["addr2line", "-f", "-C", "-e", r[4], hex(off)],
                                 capture_output=True, text=True, timeout=20).stdout.split("\n")
            fn = out[0] if out and out[0] != "??" else "?"
        except Exception:
            fn = "?"
        return f"{fn} ({r[4].rsplit('/', 1)[-1]})"


def read_markers(path):
    """The marker addresses hot-path printed at the start of main -> name ({} until then)."""
    markers = {}
    try:
        for line in open(path, errors="replace"):
            m = re.match(r"hot-path: marker (\w+) 0x([0-9a-f]+)", line)
            if m:
                markers[int(m[2], 16)] = m[1]
    except OSError:
        pass
    return markers if "end" in markers.values() else {}


def read_maps(path):
    maps = Maps()
    for line in open(path, errors="replace"):
        if line.startswith("hot-path: map "):
            maps.add(line[len("hot-path: map "):])
    maps.finish()
    return maps


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    # The trace is read while the program runs (a pipe: it must never stall). Until hot-path has
    # printed its markers (first thing in main), what comes is the loader's and static
    # initialisers': skipped, looking for the markers every so often.
    markers, skipped = {}, 0
    for raw in sys.stdin:
        skipped += 1
        if skipped % 200000 == 0:
            markers = read_markers(sys.argv[1])
            if markers:
                break
    if not markers:
        markers = read_markers(sys.argv[1])
    if not markers:
        print(f"no markers in {sys.argv[1]}", file=sys.stderr)
        return 1

    counts = collections.Counter()
    ins = {p: collections.Counter() for p in PHASES}  # (addr, size) -> executions
    occ_lines = {p: [] for p in PHASES}  # per occurrence: (lines, written lines)
    written_by = {p: collections.defaultdict(set) for p in PHASES}  # line -> instr addrs
    mem = {p: collections.Counter() for p in PHASES}  # loads, stores
    phase, lines, wlines, last_ins = None, set(), set(), 0

    for raw in sys.stdin:
        if raw[0] == "I":
            a, s_ = raw[3:].split(",")
            addr = int(a, 16)
            name = markers.get(addr)
            if name is not None:
                if phase is not None:
                    occ_lines[phase].append((lines, wlines))
                    counts[phase] += 1
                phase = None if name == "end" else name
                lines, wlines = set(), set()
                continue
            if phase is None:
                continue
            ins[phase][(addr, int(s_))] += 1
            last_ins = addr
        elif phase is not None and len(raw) > 3 and raw[1] in "LSM":
            a, s_ = raw[3:].split(",")
            addr, size = int(a, 16), int(s_)
            store = raw[1] != "L"
            for ln in range(addr >> 6, ((addr + size - 1) >> 6) + 1):
                lines.add(ln)
                if store:
                    wlines.add(ln)
                    written_by[phase][ln].add(last_ins)
            mem[phase]["stores" if store else "loads"] += 1
    if phase is not None:
        occ_lines[phase].append((lines, wlines))
        counts[phase] += 1

    maps = read_maps(sys.argv[1])
    code = Code(maps)
    vdso = [r for r in maps.ranges if r[4] == "[vdso]"]
    names = {}

    def fn(addr):
        if addr not in names:
            names[addr] = code.name(addr)
        return names[addr]

    for p in PHASES:
        n = counts[p]
        if not n:
            continue
        st = collections.Counter()
        locked_at = collections.Counter()
        for (addr, size), c in ins[p].items():
            st["instr"] += c
            if any(r[0] <= addr < r[1] for r in vdso):
                st["vdso instr"] += c
            k = code.kind(addr, size)
            if k:
                st[k] += c
                if k in ("lock", "mfence"):
                    locked_at[addr] += c
        nl = sum(len(x[0]) for x in occ_lines[p])
        nw = sum(len(x[1]) for x in occ_lines[p])
        regions = collections.Counter()
        seen = collections.Counter()
        for ls, _ in occ_lines[p]:
            for ln in ls:
                regions[maps.region(ln << 6)] += 1
                seen[ln] += 1
        print(f"== {p}: {n} occurrences; per occurrence:")
        print(f"   instr {st['instr'] / n:.0f}  loads {mem[p]['loads'] / n:.0f}  stores "
              f"{mem[p]['stores'] / n:.0f}  lines {nl / n:.1f} (written {nw / n:.1f})  locked "
              f"{st['lock'] / n:.2f}  mfence {st['mfence'] / n:.2f}  syscall {st['syscall'] / n:.2f}"
              f"  rdtsc {st['rdtsc'] / n:.2f}  vdso instr {st['vdso instr'] / n:.0f}")
        print("   lines by region: " +
              ", ".join(f"{r} {v / n:.1f}" for r, v in sorted(regions.items())))
        if locked_at:
            print("   locked instructions (per occurrence, where):")
            for addr, c in sorted(locked_at.items(), key=lambda x: -x[1]):
                print(f"     {c / n:5.2f}  {fn(addr)}")
        # The steady set: lines written in at least half the occurrences, with their writers.
        steady = [ln for ln, c in seen.items() if c >= n / 2 and ln in written_by[p]]
        if steady:
            print(f"   lines written in at least half the occurrences ({len(steady)}):")
            rows = collections.Counter()
            for ln in steady:
                who = sorted({fn(a).split(" (")[0] for a in written_by[p][ln]})
                rows[(maps.region(ln << 6), ", ".join(who)[:140])] += 1
            for (reg, who), c in sorted(rows.items()):
                print(f"     {c:3d} x {reg:34s} {who}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
