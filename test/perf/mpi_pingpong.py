# SPDX-License-Identifier: BSD-3-Clause
#
# MPI ping-pong between ranks 0 and 1 (mpi4py, preallocated buffers, blocking Send/Recv):
#   mpi_pingpong.py [size ...]       default sizes 8 64 1024 65536
# For each size: 1,000 warm-up round trips, then rounds of 2,000; prints the median one-way
# latency of 11 rounds in microseconds ("size <n> one-way_us <t>"). Other ranks idle.
import sys
import time

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
sizes = [int(s) for s in sys.argv[1:]] or [8, 64, 1024, 65536]
WARMUP, ITERS, ROUNDS = 1000, 2000, 11


def rounds(buf, n):
    peer = 1 - rank
    t0 = time.perf_counter()
    for _ in range(n):
        if rank == 0:
            comm.Send([buf, MPI.BYTE], dest=peer, tag=7)
            comm.Recv([buf, MPI.BYTE], source=peer, tag=7)
        else:
            comm.Recv([buf, MPI.BYTE], source=peer, tag=7)
            comm.Send([buf, MPI.BYTE], dest=peer, tag=7)
    return time.perf_counter() - t0


for size in sizes:
    buf = bytearray(size)
    if rank < 2:
        rounds(buf, WARMUP)
        times = sorted(rounds(buf, ITERS) for _ in range(ROUNDS))
        if rank == 0:
            print(f"size {size} one-way_us {times[ROUNDS // 2] / ITERS / 2 * 1e6:.2f}", flush=True)
    comm.Barrier()
