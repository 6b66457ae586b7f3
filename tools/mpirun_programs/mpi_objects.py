"""The lowercase collectives on Python objects; the output does not depend on timing."""

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
print(f"rank {rank} of {size}")
print("bcast", comm.bcast({"from": 0, "values": [1, 2, 3]} if rank == 0 else None, root=0))
print(
    "scatter",
    comm.scatter([f"item {i}" for i in range(size)] if rank == size - 1 else None, root=size - 1),
)
print("gather", comm.gather((rank, rank * rank), root=0))
print("allgather", comm.allgather(chr(ord("a") + rank)))
print("reduce", comm.reduce(rank + 1, op=MPI.PROD, root=0))
print("allreduce", comm.allreduce([rank], op=MPI.SUM), comm.allreduce(rank, op=MPI.MAX))
print("alltoall", comm.alltoall([f"{rank}->{j}" for j in range(size)]))
print("fold", comm.reduce(f"r{rank}", op=lambda a, b: f"({a}+{b})", root=0))
comm.barrier()
print("done")
