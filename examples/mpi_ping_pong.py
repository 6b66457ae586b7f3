"""Ping-pong between ranks 0 and 1: the way latency and bandwidth of a link are measured.

Rank 0 sends a message of n bytes to rank 1, which sends it straight back; half the
round-trip time, averaged over a few repetitions, is the one-way time t(n).  On any network
t(n) is close to the alpha-beta model (Hockney 1994, "The communication challenge for MPP")

    t(n) = alpha + n / beta        alpha: latency (s), beta: bandwidth (bytes/s)

so the smallest messages measure alpha and the largest ones beta.  At the end a least-squares
fit of t(n) over all sizes gives both.  This is plain mpi4py; run it on a real cluster or on
collsim's virtual one, unchanged:

    mpirun -n 2 python examples/mpi_ping_pong.py
    collsim exec -n 2 examples/mpi_ping_pong.py --latency 2us --bandwidth 25GB/s

Under collsim, MPI.Wtime() is simulated time, so the fit gives back the link's configured
latency and bandwidth exactly.  An optional argument is the largest size in bytes (default
4194304, 4 MiB).
"""

import sys

import numpy as np
from mpi4py import MPI

REPEATS = 10  # round trips per size

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
if comm.Get_size() < 2:
    sys.exit("ping-pong needs 2 ranks: mpirun -n 2 python mpi_ping_pong.py")
largest = int(sys.argv[1]) if len(sys.argv) > 1 else 4 * 1024 * 1024
sizes = [1]
while sizes[-1] * 4 <= largest:
    sizes.append(sizes[-1] * 4)


def ping_pong(buf):
    """One round trip of ``buf`` between ranks 0 and 1 (the other ranks sit it out)."""
    if rank == 0:
        comm.Send(buf, dest=1, tag=7)
        comm.Recv(buf, source=1, tag=7)
    elif rank == 1:
        comm.Recv(buf, source=0, tag=7)
        comm.Send(buf, dest=0, tag=7)


if rank == 0:
    print(f"{'bytes':>10} {'one-way time (us)':>18} {'bandwidth (GB/s)':>17}")
times = []
for size in sizes:
    buf = np.zeros(size, dtype=np.uint8)
    ping_pong(buf)  # warm-up: both ranks are now inside the loop, so none waits for the other
    start = MPI.Wtime()
    for _ in range(REPEATS):
        ping_pong(buf)
    one_way = (MPI.Wtime() - start) / (2 * REPEATS)
    times.append(one_way)
    if rank == 0:
        print(f"{size:>10} {one_way * 1e6:>18.3f} {size / one_way / 1e9:>17.3f}")

if rank == 0:
    # least squares of t = alpha + n / beta over every size
    slope, alpha = np.polyfit(np.array(sizes, float), np.array(times), 1)
    print(f"fit: latency {alpha * 1e6:.3f} us, bandwidth {1 / slope / 1e9:.3f} GB/s")
