"""A token passed once around a ring of ranks with comm.Send and comm.Recv.

Rank 0 starts the token at 0 and sends it to rank 1; every other rank receives it from its
left neighbour, adds its own rank and sends it on to the right; when it is back at rank 0
the token holds 0 + 1 + ... + (size-1).  Only rank 0 sends first: if every rank sent first,
the ring would deadlock (each Send waits for a Recv its neighbour never reaches).

Plain mpi4py; run it unchanged:

    mpirun -n 4 python examples/mpi_ring_pass.py
    collsim exec -n 4 examples/mpi_ring_pass.py
"""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size
token = np.zeros(1, dtype=np.int64)

if rank == 0:
    comm.Send(token, dest=right, tag=1)
    comm.Recv(token, source=left, tag=1)
    print(
        f"rank 0: the token is back after {size} hops: {token[0]} "
        f"(0 + 1 + ... + {size - 1} = {size * (size - 1) // 2})"
    )
else:
    comm.Recv(token, source=left, tag=1)
    print(
        f"rank {rank}: received {token[0]} from rank {left}, passing {token[0] + rank} to "
        f"rank {right}"
    )
    token += rank
    comm.Send(token, dest=right, tag=1)
