"""Pi by numerical integration, the classic first MPI program (Gropp, Lusk & Skjellum,
"Using MPI", chapter 3): pi = integral of 4 / (1 + x^2) over [0, 1].

Rank 0 broadcasts the number of intervals n, every rank sums the midpoint rule over its
share of the intervals (every size-th one, starting at its rank), and comm.Reduce adds the
shares up on rank 0, which prints pi and its error.  Plain mpi4py; run it unchanged:

    mpirun -n 4 python examples/mpi_pi.py 1000000
    collsim exec -n 4 examples/mpi_pi.py 1000000
"""

import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

n = int(sys.argv[1]) if rank == 0 and len(sys.argv) > 1 else 100_000
n = comm.bcast(n, root=0)  # every rank integrates with rank 0's n

h = 1.0 / n
x = h * (np.arange(rank, n, size) + 0.5)  # the midpoints of this rank's intervals
mine = np.array(h * np.sum(4.0 / (1.0 + x * x)))
pi = np.zeros(1) if rank == 0 else None
comm.Reduce(mine, pi, op=MPI.SUM, root=0)

print(f"rank {rank}: {len(x)} of {n} intervals, partial sum {float(mine):.12f}")
if rank == 0:
    print(f"pi is approximately {pi[0]:.12f}, error {abs(pi[0] - np.pi):.3e}")
