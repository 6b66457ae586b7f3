"""The uppercase collectives on numpy buffers, IN_PLACE too; timing-independent output."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

x = np.arange(4, dtype="d") + 10 * rank
total = np.empty(4)
comm.Allreduce(x, total, op=MPI.SUM)
print("Allreduce", total.tolist())

ints = np.array([rank, -rank, 2 * rank], dtype="i")
biggest = np.zeros(3, dtype="i") if rank == 0 else None
comm.Reduce([ints, MPI.INT], [biggest, MPI.INT] if rank == 0 else None, op=MPI.MAX, root=0)
print("Reduce", None if biggest is None else biggest.tolist())

buf = np.arange(3, dtype=np.int64) * (rank + 1)
comm.Bcast(buf, root=size - 1)
print("Bcast", buf.tolist())

gathered = np.empty(2 * size)
comm.Allgather(np.array([rank, rank + 0.5]), gathered)
print("Allgather", gathered.tolist())

blocks = np.arange(2 * size, dtype="d") * (rank + 1)
mine = np.empty(2)
comm.Reduce_scatter_block(blocks, mine, op=MPI.SUM)
print("Reduce_scatter_block", mine.tolist())

send = np.array([100 * rank + j for j in range(size)], dtype=np.int32)
recv = np.empty(size, dtype=np.int32)
comm.Alltoall(send, recv)
print("Alltoall", recv.tolist())

whole = np.arange(3 * size, dtype="f") if rank == 0 else None
part = np.empty(3, dtype="f")
comm.Scatter(whole, part, root=0)
print("Scatter", part.tolist())

everyone = np.empty(3 * size, dtype="f") if rank == 0 else None
comm.Gather(part * 2, everyone, root=0)
print("Gather", None if everyone is None else everyone.tolist())

inplace = np.full(2, rank + 1.0)
comm.Allreduce(MPI.IN_PLACE, inplace, op=MPI.PROD)
print("Allreduce IN_PLACE", inplace.tolist())
comm.Barrier()
