"""torch.distributed's names on numpy arrays, run on the virtual cluster.

Write the program as a torch user does (``import collsim.distributed as dist``,
``dist.init_process_group()``, ``dist.all_reduce(grad)``) and run it on K ranks with
``collsim exec -n K script.py`` or ``collsim.exec(main, n=K)``.  Each rank is a thread
of the run; every collective is collsim's own (the cluster's algorithm, over the
group's ranks), so its bytes, steps and simulated time are the simulator's and its
transfers are in the trace.  Tensors are numpy arrays and are written in place, as
torch writes them.  A call returns when its operation is done on this rank, as gloo's
do (NCCL's return at once, but its stream orders what follows after them, which gives
the same values); with ``async_op=True`` it returns a :class:`Work` at once.  Code
between calls costs no simulated time unless it says so (``collsim.compute(seconds=...)``).

==========================  =================================================
module                      contents
==========================  =================================================
``process_group``           init_process_group, get_rank, ProcessGroup, ...
``groups``                  new_group, new_subgroups, get_global_rank, ...
``collectives``             all_reduce, all_gather, reduce_scatter(_tensor), ...
``p2p``                     send, recv, isend, irecv
``exchange``                gather, scatter, all_to_all, batch_isend_irecv, P2POp, and
                            all_to_all_single's uneven splits (grouped p2p)
``objects``                 broadcast_object_list, all_gather_object, send_object_list,
                            recv_object_list (pickles)
``work``                    Work (what ``async_op=True`` returns)
``device_mesh``             init_device_mesh, DeviceMesh
``reduce_op``               ReduceOp
``settings``                configure(algorithm=...): what a launcher chose
``checks``                  the checks of tensors every call makes first
``torch_backend``           the ``"collsim"`` torch.distributed backend (needs torch)
``torch_run``               what ``collsim exec`` sets up for torch scripts (needs torch)
==========================  =================================================

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.runtime import blocking
>>> import collsim.distributed as dist
>>> def main():
...     dist.init_process_group(backend="collsim")
...     grad = np.full(3, float(dist.get_rank()))
...     dist.all_reduce(grad, op=dist.ReduceOp.AVG)
...     return grad.tolist()
>>> blocking.run(collsim.Cluster(collsim.topology.ring(4)), main).returns[0]
[1.5, 1.5, 1.5]
"""

from .collectives import (
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    all_reduce_coalesced,
    all_to_all_single,
    barrier,
    broadcast,
    reduce,
    reduce_scatter,
    reduce_scatter_tensor,
)
from .device_mesh import DeviceMesh, init_device_mesh
from .exchange import P2POp, all_to_all, batch_isend_irecv, gather, scatter
from .groups import (
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    new_group,
    new_subgroups,
    new_subgroups_by_enumeration,
)
from .objects import (
    all_gather_object,
    broadcast_object_list,
    recv_object_list,
    send_object_list,
)
from .p2p import irecv, isend, recv, send
from .process_group import (
    GroupMember,
    ProcessGroup,
    destroy_process_group,
    get_backend,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    is_available,
    is_initialized,
)
from .reduce_op import ReduceOp
from .settings import configure, configured
from .work import Work

__all__ = [
    "init_process_group",
    "destroy_process_group",
    "is_initialized",
    "is_available",
    "get_backend",
    "get_rank",
    "get_world_size",
    "new_group",
    "new_subgroups",
    "new_subgroups_by_enumeration",
    "get_global_rank",
    "get_group_rank",
    "get_process_group_ranks",
    "group",
    "GroupMember",
    "ProcessGroup",
    "ReduceOp",
    "all_reduce",
    "all_reduce_coalesced",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "all_to_all_single",
    "all_to_all",
    "barrier",
    "broadcast_object_list",
    "all_gather_object",
    "send_object_list",
    "recv_object_list",
    "gather",
    "scatter",
    "send",
    "recv",
    "isend",
    "irecv",
    "P2POp",
    "batch_isend_irecv",
    "Work",
    "init_device_mesh",
    "DeviceMesh",
    "configure",
    "configured",
]
