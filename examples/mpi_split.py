"""comm.Split: cut the ranks of a rows x cols grid into row and column communicators.

Rank r sits at row r // cols, column r % cols.  Split with color = row groups every row
into its own communicator, color = column every column; key = r keeps the world order
inside each.  A sum over the row communicator adds up a row, over the column communicator a
column: the same pattern as tensor parallelism within a node and data parallelism across
nodes (Megatron-LM's process groups are built this way).

Plain mpi4py; run it unchanged (arguments: rows and cols; default 2 x size/2):

    mpirun -n 6 python examples/mpi_split.py 2 3
    collsim exec -n 6 examples/mpi_split.py 2 3
"""

import sys

from mpi4py import MPI

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
rows = int(sys.argv[1]) if len(sys.argv) > 1 else (2 if size % 2 == 0 else 1)
cols = int(sys.argv[2]) if len(sys.argv) > 2 else size // rows
if rows * cols != size:
    sys.exit(f"a {rows} x {cols} grid needs {rows * cols} ranks, not {size}")

row, col = divmod(rank, cols)
row_comm = world.Split(color=row, key=rank)  # the ranks of my row
col_comm = world.Split(color=col, key=rank)  # the ranks of my column
row_sum = row_comm.allreduce(rank, op=MPI.SUM)
col_sum = col_comm.allreduce(rank, op=MPI.SUM)

print(
    f"world rank {rank} at ({row}, {col}): row rank {row_comm.Get_rank()} of "
    f"{row_comm.Get_size()}, column rank {col_comm.Get_rank()} of {col_comm.Get_size()}; "
    f"row sum {row_sum}, column sum {col_sum}"
)
row_comm.Free()
col_comm.Free()
