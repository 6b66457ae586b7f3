"""collsim as a torch.distributed backend: a Python ``ProcessGroup`` whose collectives
run on the virtual cluster.

``dist.init_process_group("collsim")`` under ``collsim exec`` makes one
:class:`CollsimProcessGroup` per rank (and one per ``new_group``), as PyTorch's own
threaded test backend (``torch.testing._internal.distributed.multi_threaded_pg``)
plugs in a Python ``ProcessGroup``.  Each method views its torch tensors as numpy
arrays (``tensor.numpy()`` shares the memory: nothing is copied on the way in, and the
result is written straight into the tensor) and calls :mod:`collsim.distributed`'s
function of the same meaning with ``async_op=True``, so the bytes, steps, simulated time
and the trace are collsim's; torch waits on the :class:`CollsimWork` it returns unless
the script asked for ``async_op=True``.  A call the backend does not run raises
``NotImplementedError`` naming it.

Importing this module imports torch: :mod:`collsim.distributed.torch_run` does, only
when torch is installed (``pip install 'collsim[torch]'``).
"""

import torch
import torch.distributed as dist

from . import collectives, exchange, p2p
from .checks import TensorTypeError
from .reduce_op import ReduceOp

__all__ = ["CollsimProcessGroup", "CollsimWork", "BACKEND_NAME", "as_array"]

BACKEND_NAME = "collsim"

# torch's RedOpType -> collsim.distributed's ReduceOp, by name (PREMUL_SUM is refused there)
_OPS = {getattr(dist.ReduceOp.RedOpType, op.name): op for op in ReduceOp}


def as_array(tensor, call):
    """A numpy view of a CPU ``tensor`` (same memory), or a collsim error naming it."""
    if not isinstance(tensor, torch.Tensor):
        raise TensorTypeError(f"{call}: expected a torch.Tensor, got a {type(tensor).__name__}")
    if tensor.device.type != "cpu":
        raise TensorTypeError(
            f"{call}: a tensor on {tensor.device} : the collsim backend moves CPU tensors "
            "(the simulated GPUs are the cluster's); use tensor.cpu()"
        )
    if tensor.dtype in (torch.bfloat16, torch.complex64, torch.complex128):
        raise TensorTypeError(
            f"{call}: dtype {tensor.dtype} has no numpy type collsim reduces; use "
            "torch.float32 (or view it as real, torch.view_as_real)"
        )
    return tensor.detach().numpy()


def _arrays(tensors, call):
    return [as_array(t, call) for t in tensors]


def _op(opts):
    return _OPS[opts.reduceOp.op]


class CollsimWork(dist.distributed_c10d.Work):
    """torch's ``Work`` for a collsim operation: ``wait()`` blocks the rank in simulated
    time until it is done."""

    def __init__(self, works, group=None, result=()):
        super().__init__()
        self._works = works  # collsim.distributed's Works: one, or a coalesced call's
        self._group = group  # for _source_rank: a global rank -> this group's rank
        self._result = list(result)  # the tensors it writes: its future's value, as gloo's
        self._future = None

    def wait(self, timeout=None):
        for work in self._works:
            work.wait()
        return True

    def is_completed(self):
        return all(work.is_completed() for work in self._works)

    def is_success(self):
        return all(work.is_success() for work in self._works)

    def _source_rank(self):
        """The group rank an ``irecv`` from any source got its message from."""
        return self._group.group.index(self._works[0]._source_rank())

    def get_future(self):
        """A completed ``torch.futures.Future`` of the output tensors (gloo's value: a
        list), the same one every call.  It waits for the operation first, in simulated
        time: torch waits on futures inside its C++ (DDP's reducer does), where a rank
        cannot let simulated time go on, so a pending future would hang the run."""
        if self._future is None:
            self.wait()
            self._future = torch.futures.Future()
            self._future.set_result(self._result)
        return self._future


class CollsimProcessGroup(dist.ProcessGroup):
    """One rank's torch ProcessGroup over a :class:`collsim.distributed.ProcessGroup`."""

    def __init__(self, rank, size, group):
        super().__init__(rank, size)
        self._group = group  # collsim.distributed's ProcessGroup of the same ranks

    def getBackendName(self):
        return BACKEND_NAME

    @property
    def group_name(self):
        """The name torch registered this group under (the device mesh reads it); torch
        sets it only on the groups it makes itself, so it is read from the rank's world."""
        return dist.distributed_c10d._world.pg_names[self]

    def __repr__(self):
        return f"CollsimProcessGroup(rank={self.rank()}, ranks={list(self._group.ranks)})"

    def _get_backend(self, device):
        """The group is its own backend on every device: torch keeps no backend for a
        Python ProcessGroup, and torch 2.14's ``batch_isend_irecv`` asks for one."""
        return self

    def _done(self, *works, result=()):
        return CollsimWork(works, self._group, result)

    # -- collectives ----------------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        (t,) = _arrays(tensors, "all_reduce")
        work = collectives.all_reduce(t, op=_op(opts), group=self._group, async_op=True)
        return self._done(work, result=tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        ts = _arrays(tensors, "all_reduce_coalesced")
        return self._done(
            collectives.all_reduce_coalesced(ts, op=_op(opts), group=self._group, async_op=True),
            result=tensors,
        )

    def allgather(self, output_tensors, input_tensors, opts=None):
        outs = _arrays(output_tensors[0], "all_gather")
        (t,) = _arrays(input_tensors, "all_gather")
        work = collectives.all_gather(outs, t, group=self._group, async_op=True)
        return self._done(work, result=output_tensors[0])

    def all_gather_single(self, output, input, opts=None):
        out, inp = as_array(output, "all_gather_into_tensor"), as_array(input, "all_gather")
        work = collectives.all_gather_into_tensor(out, inp, group=self._group, async_op=True)
        return self._done(work, result=output.chunk(self.size()))  # gloo's: one per rank

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        """What ``all_gather_into_tensor`` calls inside ``_coalescing_manager`` become:
        one all-gather each, issued together, one Work for them all."""
        call = "all_gather_into_tensor"
        return self._done(
            *(
                collectives.all_gather_into_tensor(
                    as_array(out, call), as_array(inp, call), group=self._group, async_op=True
                )
                for out, inp in zip(outputs, inputs, strict=True)
            ),
            result=outputs,
        )

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        """``reduce_scatter_tensor`` inside ``_coalescing_manager``: one each, one Work."""
        call = "reduce_scatter_tensor"
        return self._done(
            *(
                collectives.reduce_scatter_tensor(
                    as_array(out, call),
                    as_array(inp, call),
                    op=_op(opts),
                    group=self._group,
                    async_op=True,
                )
                for out, inp in zip(outputs, inputs, strict=True)
            ),
            result=outputs,
        )

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        (out,) = _arrays(output_tensors, "reduce_scatter")
        ins = _arrays(input_tensors[0], "reduce_scatter")
        return self._done(
            collectives.reduce_scatter(out, ins, op=_op(opts), group=self._group, async_op=True),
            result=output_tensors,
        )

    def reduce_scatter_single(self, output, input, opts=None):
        call = "reduce_scatter_tensor"
        out, inp = as_array(output, call), as_array(input, call)
        return self._done(
            collectives.reduce_scatter_tensor(
                out, inp, op=_op(opts), group=self._group, async_op=True
            ),
            result=[output],
        )

    def broadcast(self, tensors, opts=None):
        (t,) = _arrays(tensors, "broadcast")
        return self._done(
            collectives.broadcast(t, group_src=opts.rootRank, group=self._group, async_op=True),
            result=tensors,
        )

    def reduce(self, tensors, opts=None):
        (t,) = _arrays(tensors, "reduce")
        return self._done(
            collectives.reduce(
                t, group_dst=opts.rootRank, op=_op(opts), group=self._group, async_op=True
            ),
            result=tensors,
        )

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        call = "all_to_all_single"
        return self._done(
            collectives.all_to_all_single(
                as_array(output, call),
                as_array(input, call),
                list(output_split_sizes) or None,  # torch passes [] for equal blocks
                list(input_split_sizes) or None,
                group=self._group,
                async_op=True,
            ),
            result=[output],
        )

    def alltoall(self, output_tensors, input_tensors, opts=None):
        outs, ins = _arrays(output_tensors, "all_to_all"), _arrays(input_tensors, "all_to_all")
        work = exchange.all_to_all(outs, ins, group=self._group, async_op=True)
        return self._done(work, result=output_tensors)

    def gather(self, output_tensors, input_tensors, opts=None):
        (t,) = _arrays(input_tensors, "gather")
        outs = _arrays(output_tensors[0], "gather") if output_tensors else None
        return self._done(
            exchange.gather(t, outs, group_dst=opts.rootRank, group=self._group, async_op=True),
            result=output_tensors[0] if output_tensors else (),
        )

    def scatter(self, output_tensors, input_tensors, opts=None):
        (t,) = _arrays(output_tensors, "scatter")
        ins = _arrays(input_tensors[0], "scatter") if input_tensors else None
        return self._done(
            exchange.scatter(t, ins, group_src=opts.rootRank, group=self._group, async_op=True),
            result=output_tensors,
        )

    def barrier(self, opts=None):
        return self._done(collectives.barrier(group=self._group, async_op=True))

    # -- point-to-point -------------------------------------------------------------------

    def send(self, tensors, dst, tag):
        (t,) = _arrays(tensors, "send")
        return self._done(p2p.isend(t, group_dst=dst, group=self._group, tag=tag), result=tensors)

    def recv(self, tensors, src, tag):
        (t,) = _arrays(tensors, "recv")
        work = p2p.irecv(t, group_src=src, group=self._group, tag=tag)
        return self._done(work, result=tensors)

    def recv_anysource(self, tensors, tag):
        (t,) = _arrays(tensors, "recv")
        return self._done(p2p.irecv(t, group=self._group, tag=tag), result=tensors)

    # -- what the backend does not run ----------------------------------------------------

    def allgather_coalesced(self, *args, **kwargs):
        raise NotImplementedError(
            "all_gather_coalesced is deprecated in torch and not supported by the collsim "
            "backend: call all_gather for each tensor"
        )


# the names older torch releases call these methods by (2.13 calls the ones above)
CollsimProcessGroup._allgather_base = CollsimProcessGroup.all_gather_single
CollsimProcessGroup._reduce_scatter_base = CollsimProcessGroup.reduce_scatter_single
CollsimProcessGroup.alltoall_base = CollsimProcessGroup.all_to_all_single
