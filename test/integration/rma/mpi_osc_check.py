# SPDX-License-Identifier: BSD-3-Clause
"""MPI one-sided communication checked, and timed (mpi4py, no numpy).

Run under mpirun by ompi_osc_test.sh with any osc component (osc rdma over btl ofi for dpdk and
sockets, osc pt2pt over Open MPI's tcp for comparison). Every rank exposes a window of 8-byte
unsigned integers and, in fence epochs and in passive-target epochs (exclusive and shared locks,
lock_all with flushes), does Put, Get, Accumulate (SUM, MAX, BXOR, REPLACE), Get_accumulate and
Fetch_and_op on its neighbours and on rank 0, with sizes from one element to several frames;
every result is compared with what it must be. Compare_and_swap is not used: through osc rdma it
crashes inside Open MPI 4.1.4 itself (see fi_dpdk(7)). Prints "mpi-osc: OK ..." from rank 0, or
MISMATCH lines, and exits non-zero on any mismatch. With "time", rank 0 then prints the median
one-way latency in microseconds of an 8-byte Put + flush, Get + flush, Accumulate + flush and
Fetch_and_op on rank 1 under lock_all: "mpi-osc-latency: put P get G acc A fop F".
    mpirun ... python3 mpi_osc_check.py [time]
"""
import sys
import time
from array import array

import mpi4py

# osc pt2pt (the comparison over Open MPI's tcp) refuses MPI_THREAD_MULTIPLE, mpi4py's default.
mpi4py.rc.thread_level = "single"
from mpi4py import MPI  # noqa: E402

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
size = comm.Get_size()
U64 = MPI.UINT64_T
errors = 0
N = 8192  # window elements: 64 KiB


def expect(what, got, want):
    """Counts and reports (the first 3 per call) elements that differ."""
    global errors
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
    if len(got) != len(want):
        bad.append(min(len(got), len(want)))
    for i in bad[:3]:
        g = got[i] if i < len(got) else None
        w = want[i] if i < len(want) else None
        print(f"MISMATCH rank {rank} {what} [{i}]: got {g} want {w}", flush=True)
    errors += len(bad)


def value(owner, i, salt=0):
    return (owner * 1000003 + i * 7 + salt) & 0xFFFFFFFFFFFF


mem = array("Q", [0]) * N
win = MPI.Win.Create(mem, disp_unit=8, comm=comm)
right = (rank + 1) % size
left = (rank - 1) % size

# ---- fence epochs ---------------------------------------------------------------------------
for n in (1, 128, 1024, N // 2):  # 8 B, 1 KiB, 8 KiB, 32 KiB
    for i in range(N):
        mem[i] = value(rank, i)
    win.Fence()
    # Put n elements into the right neighbour's second half.
    src = array("Q", [value(rank, i, 1) for i in range(n)])
    win.Put([src, U64], right, target=N // 2)
    win.Fence()
    expect(f"fence Put n={n}", mem[N // 2:N // 2 + n], array("Q", [value(left, i, 1) for i in range(n)]))
    # Get n elements of the left neighbour's first half.
    got = array("Q", [0]) * n
    win.Get([got, U64], left, target=0)
    win.Fence()
    expect(f"fence Get n={n}", got, array("Q", [value(left, i) for i in range(n)]))
    # Everyone adds into rank 0's first n elements.
    add = array("Q", [rank + 1 + i for i in range(n)])
    win.Accumulate([add, U64], 0, target=0, op=MPI.SUM)
    win.Fence()
    if rank == 0:
        expect(f"fence Accumulate SUM n={n}", mem[:n],
               array("Q", [value(0, i) + sum(r + 1 + i for r in range(size)) for i in range(n)]))
    win.Fence()

# Accumulate MAX, BXOR and REPLACE on the right neighbour (one writer per window element).
for op, fn in ((MPI.MAX, max), (MPI.BXOR, lambda a, b: a ^ b), (MPI.REPLACE, lambda a, b: b)):
    for i in range(64):
        mem[i] = value(rank, i, 3)
    win.Fence()
    opnd = array("Q", [value(rank, i, 4) for i in range(64)])
    win.Accumulate([opnd, U64], right, target=0, op=op)
    win.Fence()
    expect(f"fence Accumulate {op.Get_name() if hasattr(op, 'Get_name') else op}", mem[:64],
           array("Q", [fn(value(rank, i, 3), value(left, i, 4)) for i in range(64)]))
    win.Fence()

# ---- passive target -------------------------------------------------------------------------
for i in range(N):
    mem[i] = 0
comm.Barrier()
# Every rank increments rank 0's counter under exclusive locks with Fetch_and_op, and appends its
# rank at the slot it got: every slot below size * 20 is taken exactly once.
reps = 20
slots = []
one = array("Q", [1])
for _ in range(reps):
    old = array("Q", [0])
    win.Lock(0, MPI.LOCK_EXCLUSIVE)
    win.Fetch_and_op([one, U64], [old, U64], 0, target_disp=0, op=MPI.SUM)
    win.Unlock(0)
    slots.append(old[0])
    mark = array("Q", [rank + 1])
    win.Lock(0, MPI.LOCK_SHARED)
    win.Put([mark, U64], 0, target=16 + old[0])
    win.Unlock(0)
comm.Barrier()
all_slots = comm.gather(slots, root=0)
if rank == 0:
    taken = sorted(s for ss in all_slots for s in ss)
    expect("Fetch_and_op slots", taken, list(range(size * reps)))
    expect("Fetch_and_op total", [mem[0]], [size * reps])
    owners = [0] * size
    for s in range(size * reps):
        if 1 <= mem[16 + s] <= size:
            owners[mem[16 + s] - 1] += 1
    expect("passive Put marks", owners, [reps] * size)
comm.Barrier()

# Get_accumulate (fetch-and-add of vectors) and flushes under lock_all.
for i in range(N):
    mem[i] = value(rank, i, 5)
comm.Barrier()
win.Lock_all()
n = 512
add = array("Q", [i + 1 for i in range(n)])
old = array("Q", [0]) * n
win.Get_accumulate([add, U64], [old, U64], right, target=1024, op=MPI.SUM)
win.Flush(right)
expect("Get_accumulate old", old, array("Q", [value(right, 1024 + i, 5) for i in range(n)]))
back = array("Q", [0]) * n
win.Get([back, U64], right, target=1024)
win.Flush(right)
expect("Get after Get_accumulate", back,
       array("Q", [value(right, 1024 + i, 5) + i + 1 for i in range(n)]))
# A large Put and Get of the whole second half.
big = array("Q", [value(rank, i, 6) for i in range(N // 2)])
win.Put([big, U64], right, target=N // 2)
win.Flush(right)
back = array("Q", [0]) * (N // 2)
win.Get([back, U64], right, target=N // 2)
win.Flush(right)
expect("lock_all Put/Get of 32 KiB", back, big)
win.Unlock_all()
comm.Barrier()

total = comm.allreduce(errors, op=MPI.SUM)
if rank == 0:
    if total == 0:
        print(f"mpi-osc: OK (fence, lock, lock_all; Put, Get, Accumulate, Get_accumulate, "
              f"Fetch_and_op; {size} ranks)", flush=True)
    else:
        print(f"mpi-osc: {total} MISMATCHES", flush=True)

# ---- latency ---------------------------------------------------------------------------------
if len(sys.argv) > 1 and sys.argv[1] == "time" and size >= 2:
    iters, rounds = 300, 5
    x = array("Q", [rank])
    y = array("Q", [0])
    meds = {}
    win.Lock_all()
    for name in ("put", "get", "acc", "fop"):
        times = []
        for _ in range(rounds):
            comm.Barrier()
            if rank == 0:
                t0 = time.perf_counter()
                for _ in range(iters):
                    if name == "put":
                        win.Put([x, U64], 1, target=0)
                    elif name == "get":
                        win.Get([y, U64], 1, target=0)
                    elif name == "acc":
                        win.Accumulate([x, U64], 1, target=0, op=MPI.SUM)
                    else:
                        win.Fetch_and_op([x, U64], [y, U64], 1, target_disp=0, op=MPI.SUM)
                    win.Flush(1)
                times.append((time.perf_counter() - t0) / iters * 1e6)
            else:
                # Targets keep progressing their endpoints while rank 0 works on them.
                comm.Barrier()
                continue
            comm.Barrier()
        if rank == 0:
            times.sort()
            meds[name] = times[len(times) // 2]
    win.Unlock_all()
    if rank == 0:
        print("mpi-osc-latency: " + " ".join(f"{k} {v:.2f}" for k, v in meds.items()), flush=True)

win.Free()
sys.exit(1 if total else 0)
