"""Split into rows and columns of a grid, Dup and Free; timing-independent output."""

import numpy as np
from mpi4py import MPI

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
cols = 2 if size % 2 == 0 else 1
row, col = divmod(rank, cols)

row_comm = world.Split(color=row, key=col)
col_comm = world.Split(color=col, key=-rank)  # the key reverses the order
print("row", row, "rank", row_comm.Get_rank(), "of", row_comm.Get_size())
print("col", col, "rank", col_comm.Get_rank(), "of", col_comm.Get_size())
total = np.zeros(1)
row_comm.Allreduce(np.array([float(rank)]), total)
print("row sum", total[0], "col members", col_comm.allgather(rank))

dup = world.Dup()
print("dup", dup.Get_rank(), dup.Get_size(), dup.bcast("same ranks", root=0))
dup.Free()
print("freed", dup == MPI.COMM_NULL)

odd = world.Split(MPI.UNDEFINED if rank % 2 == 0 else 1, rank)
print("odd", odd == MPI.COMM_NULL, None if odd == MPI.COMM_NULL else odd.Get_size())
