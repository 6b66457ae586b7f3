"""Point-to-point: a ring pass, non-blocking requests, Sendrecv, ANY_SOURCE with Status."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size

token = np.zeros(1, dtype="i")
if rank == 0:
    token[0] = 1
    if size > 1:
        comm.Send(token, dest=right, tag=7)
        comm.Recv(token, source=left, tag=7)
else:
    comm.Recv(token, source=left, tag=7)
    token[0] += rank
    comm.Send(token, dest=right, tag=7)
print("token", int(token[0]))

got = np.empty(2)
reqs = [comm.Irecv(got, source=left, tag=1), comm.Isend(np.array([rank, rank * 1.5]), right, 1)]
MPI.Request.Waitall(reqs)
print("from left", got.tolist())

print("sendrecv", comm.sendrecv({"rank": rank}, dest=right, source=left))

if rank == 0:
    seen = []
    for _ in range(size - 1):
        status = MPI.Status()
        data = np.zeros(4, dtype="i")
        comm.Recv(data, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
        n = status.Get_count(MPI.INT)
        seen.append((status.Get_source(), status.Get_tag(), n, data[:n].tolist()))
    print("any source", sorted(seen))
else:
    comm.Send(np.arange(rank % 4 + 1, dtype="i"), dest=0, tag=rank * 10)

comm.Barrier()  # every message above is received: ANY_TAG above cannot take the next one
request = comm.isend(f"hello from {rank}", dest=right, tag=3)
print(comm.recv(source=left, tag=3))
request.wait()
