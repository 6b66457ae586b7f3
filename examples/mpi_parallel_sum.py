"""A parallel sum with comm.Allreduce: every rank adds up its slice of 1..N, and one
Allreduce gives every rank the total, which it checks against N(N+1)/2.

Plain mpi4py; run it unchanged:

    mpirun -n 4 python examples/mpi_parallel_sum.py 1000
    collsim exec -n 4 examples/mpi_parallel_sum.py 1000
"""

import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
N = int(sys.argv[1]) if len(sys.argv) > 1 else 1000  # every rank reads the same argv

numbers = np.arange(1, N + 1, dtype=np.int64)
mine = np.array_split(numbers, size)[rank]  # this rank's contiguous slice
local = np.array([mine.sum()], dtype=np.int64)
total = np.empty(1, dtype=np.int64)
comm.Allreduce(local, total, op=MPI.SUM)

expected = N * (N + 1) // 2
verdict = "correct" if total[0] == expected else f"WRONG, expected {expected}"
print(f"rank {rank}: {len(mine)} numbers sum to {local[0]}; the total is {total[0]} ({verdict})")
