"""Uneven work split with comm.Scatterv and gathered back with comm.Gatherv.

Rank 0 holds N values; N need not divide by the number of ranks, so rank r gets
``counts[r]`` of them (N // size, one more for the first N % size ranks) starting at
``displs[r]``.  Each rank squares its part; Gatherv puts the parts back in order, and rank
0 checks the result against squaring the whole vector itself.  The buffer specs are
mpi4py's ``[array, counts, displs, MPI.DOUBLE]``; the other ranks pass None where only
the root's buffer matters.

Plain mpi4py; run it unchanged (argument: N):

    mpirun -n 3 python examples/mpi_scatterv_gatherv.py 10
    collsim exec -n 3 examples/mpi_scatterv_gatherv.py 10
"""

import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
N = int(sys.argv[1]) if len(sys.argv) > 1 else 10

counts = [N // size + (1 if r < N % size else 0) for r in range(size)]
displs = [sum(counts[:r]) for r in range(size)]
values = np.arange(N, dtype=np.float64) if rank == 0 else None

part = np.empty(counts[rank])
comm.Scatterv([values, counts, displs, MPI.DOUBLE] if rank == 0 else None, part, root=0)
print(f"rank {rank}: got {counts[rank]} values from offset {displs[rank]}: {part.tolist()}")
part **= 2

squares = np.empty(N) if rank == 0 else None
comm.Gatherv(part, [squares, counts, displs, MPI.DOUBLE] if rank == 0 else None, root=0)
if rank == 0:
    same = np.array_equal(squares, np.arange(N, dtype=np.float64) ** 2)
    print(f"rank 0: gathered {squares.tolist()}")
    print(f"rank 0: equal to squaring on one rank: {same}")
