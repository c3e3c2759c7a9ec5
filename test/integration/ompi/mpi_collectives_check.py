# SPDX-License-Identifier: BSD-3-Clause
"""Correctness of MPI collectives over whatever transport mpirun chose (mpi4py, no numpy).

Run by ompi_test.sh under mpirun: every rank computes what Allreduce (sum, max), Alltoall,
Alltoallv, Bcast, Gather and the pickled object collectives must return and compares it with
what it got, for sizes from one 8-byte element (an inject-sized message) through ones above the
provider's eager limits (16 KiB to a same-host peer, 64 KiB over a port: rendezvous) and several
frames. Prints one "mpi-collectives: OK ..." line from rank 0, or "MISMATCH" lines naming rank,
operation and element, and exits non-zero on any mismatch (every rank learns the total error
count).
    mpirun ... python3 mpi_collectives_check.py [repetitions]
"""
import sys
from array import array

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
size = comm.Get_size()
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
errors = 0


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


# Elements of 8 bytes: 8 B, 1 KiB (one frame), 8 KiB, 64 KiB (the port's eager limit; rendezvous to
# a same-host peer) and 512 KiB (rendezvous).
counts = (1, 128, 1024, 8192, 65536)
for rep in range(reps):
    for n in counts:
        tag = f"rep {rep} n {n}"
        # Allreduce SUM and MAX of values that depend on rank, element and repetition.
        send = array("q", (rank * 1_000_003 + i * 7 + rep for i in range(n)))
        recv = array("q", bytes(8 * n))
        comm.Allreduce(send, recv, op=MPI.SUM)
        rsum = size * (size - 1) // 2 * 1_000_003
        expect(f"Allreduce(SUM) {tag}", recv, [rsum + size * (i * 7 + rep) for i in range(n)])
        comm.Allreduce(send, recv, op=MPI.MAX)
        expect(f"Allreduce(MAX) {tag}", recv,
               [(size - 1) * 1_000_003 + i * 7 + rep for i in range(n)])

        # Alltoall: block d of rank r's buffer goes to rank d; element i of it says (r, d, i).
        per = max(1, n // size)

        def cell(src, dst, i):
            return (src * 131 + dst) * 1_000_000 + i * 3 + rep

        send = array("q", (cell(rank, d, i) for d in range(size) for i in range(per)))
        recv = array("q", bytes(8 * per * size))
        comm.Alltoall(send, recv)
        expect(f"Alltoall {tag}", recv, [cell(s, rank, i) for s in range(size) for i in range(per)])

        # Alltoallv with different block lengths per pair (some empty).
        def length(src, dst):
            return (per * (src + 2 * dst + 1)) % (per + 3)

        scounts = [length(rank, d) for d in range(size)]
        rcounts = [length(s, rank) for s in range(size)]
        sdispl = [sum(scounts[:d]) for d in range(size)]
        rdispl = [sum(rcounts[:s]) for s in range(size)]
        send = array("q", (cell(rank, d, i) for d in range(size) for i in range(scounts[d])))
        recv = array("q", bytes(8 * sum(rcounts)))
        comm.Alltoallv([send, (scounts, sdispl), MPI.INT64_T],
                       [recv, (rcounts, rdispl), MPI.INT64_T])
        expect(f"Alltoallv {tag}", recv,
               [cell(s, rank, i) for s in range(size) for i in range(rcounts[s])])

        # Bcast from a rotating root, Gather to it.
        root = (rep + n) % size
        buf = array("q", (root * 17 + i + rep for i in range(n))) if rank == root else \
            array("q", bytes(8 * n))
        comm.Bcast(buf, root=root)
        expect(f"Bcast root {root} {tag}", buf, [root * 17 + i + rep for i in range(n)])
        mine = array("q", (rank * 5 + i for i in range(per)))
        gathered = array("q", bytes(8 * per * size)) if rank == root else None
        comm.Gather(mine, gathered, root=root)
        if rank == root:
            expect(f"Gather root {root} {tag}", gathered,
                   [s * 5 + i for s in range(size) for i in range(per)])

    # Pickled objects (the send/recv path with probes and unknown sizes).
    got = comm.allgather({"rank": rank, "rep": rep})
    expect(f"allgather rep {rep}", [d["rank"] for d in got], list(range(size)))
    got = comm.alltoall([(rank, d, "x" * (d * 500)) for d in range(size)])
    expect(f"alltoall(obj) rep {rep}", got, [(s, rank, "x" * (rank * 500)) for s in range(size)])
    comm.Barrier()

total = comm.allreduce(errors, op=MPI.SUM)
if rank == 0:
    if total == 0:
        print(f"mpi-collectives: OK ({size} ranks, {reps} repetitions, counts {counts})", flush=True)
    else:
        print(f"mpi-collectives: {total} mismatches", flush=True)
sys.exit(0 if total == 0 else 1)
