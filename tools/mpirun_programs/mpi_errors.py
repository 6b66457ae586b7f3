"""Bad calls raise the same exception classes as mpi4py: MPI.Exception with its error class
(a bad root, rank or tag) or ValueError (mismatched buffers)."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()


def attempt(name, call):
    try:
        call()
        print(name, "ok")
    except MPI.Exception as exc:
        names = {MPI.ERR_ROOT: "ERR_ROOT", MPI.ERR_RANK: "ERR_RANK", MPI.ERR_TAG: "ERR_TAG"}
        print(name, "MPI.Exception", names.get(exc.Get_error_class(), "other"))
    except ValueError:
        print(name, "ValueError")


attempt("bad root", lambda: comm.Bcast(np.zeros(2), root=size))
attempt("bad dest", lambda: comm.Send(np.zeros(2), dest=size + 3))
attempt("bad tag", lambda: comm.send("x", dest=rank, tag=-7))
attempt("count mismatch", lambda: comm.Allreduce(np.zeros(3), np.zeros(4)))
attempt("type mismatch", lambda: comm.Allreduce(np.zeros(3), np.zeros(3, dtype="i")))
attempt("good call", lambda: comm.Allreduce(np.ones(3), np.zeros(3)))
