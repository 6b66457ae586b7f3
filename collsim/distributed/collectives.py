"""torch.distributed's collectives on numpy arrays, run by collsim's own collectives.

Each call checks its tensors, then runs the rank's part of the collsim collective of
the same meaning (``rank.all_reduce`` and friends, over the group's global ranks, with
the cluster's algorithm), so the bytes, steps and simulated time are the simulator's.
Outputs are written in place, as torch writes them; with ``async_op=True`` the call
returns a :class:`~collsim.distributed.work.Work` at once and the tensor is written when
the collective completes in simulated time.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.runtime import blocking
>>> from collsim import distributed as dist
>>> def main():
...     dist.init_process_group(backend="collsim")
...     t = np.arange(4.0) + dist.get_rank()
...     dist.all_reduce(t, op=dist.ReduceOp.MAX)
...     parts = [np.zeros(1) for _ in range(dist.get_world_size())]
...     dist.all_gather(parts, np.array([10.0 * dist.get_rank()]))
...     return t.tolist(), [float(p[0]) for p in parts]
>>> blocking.run(collsim.Cluster(collsim.topology.ring(3)), main).returns[0]
([2.0, 3.0, 4.0, 5.0], [0.0, 10.0, 20.0])
"""

import numpy as np

from .checks import TensorMismatchError, check_list_like, check_tensor, describe
from .exchange import uneven_all_to_all
from .process_group import peer, resolve
from .reduce_op import ReduceOp, check_reducible, op_name
from .settings import algorithm_for
from .work import issue

__all__ = [
    "all_reduce",
    "all_reduce_coalesced",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "all_to_all_single",
    "barrier",
]


def _same_kind(call, name, tensor, other_name, other):
    if tensor.dtype != other.dtype:
        raise TensorMismatchError(
            f"{call}: {name} is {describe(tensor)} but {other_name} is "
            f"{describe(other)}: the dtypes must match"
        )


def _write(collective, target):
    """Run ``collective`` and copy its result into ``target`` (if it gives one)."""
    out = yield from collective
    if out is not None:
        np.copyto(target, out.reshape(target.shape))


def _write_parts(collective, targets):
    """Run ``collective`` (an all-gather of flat inputs) and split it into ``targets``."""
    out = yield from collective
    for part, target in zip(np.split(out, len(targets)), targets, strict=True):
        np.copyto(target, part.reshape(target.shape))


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Every rank's ``tensor`` becomes the reduction of all of them, in place."""
    call = "all_reduce"
    name = op_name(op, call)
    rank, pg = resolve(group, call)
    check_tensor(tensor, call)
    check_reducible(op, tensor, call)
    program = rank.all_reduce(
        tensor, group=pg.group, op=name, algorithm=algorithm_for("all_reduce")
    )
    return issue(rank, _write(program, tensor), async_op, [tensor], call)


def all_reduce_coalesced(tensors, op=ReduceOp.SUM, group=None, async_op=False):
    """Each tensor of ``tensors`` becomes the reduction of every rank's, in place, by one
    all-reduce of them all laid end to end (what coalescing saves: one call's latency)."""
    call = "all_reduce_coalesced"
    name = op_name(op, call)
    rank, pg = resolve(group, call)
    tensors = _tensor_list(tensors, call, "tensors")
    for i, t in enumerate(tensors):
        check_tensor(t, call, f"tensors[{i}]")
        _same_kind(call, f"tensors[{i}]", t, "tensors[0]", tensors[0])
    check_reducible(op, tensors[0], call)
    flat = np.concatenate([t.reshape(-1) for t in tensors])
    program = rank.all_reduce(flat, group=pg.group, op=name, algorithm=algorithm_for("all_reduce"))
    return issue(rank, _write_split(program, tensors), async_op, tensors, call)


def _tensor_list(tensors, call, name, length=None):
    """``tensors`` as a list, if it is a non-empty list (of ``length`` entries)."""
    if not isinstance(tensors, list | tuple) or not tensors:
        raise TensorMismatchError(
            f"{call}({name}={tensors!r:.60}): give a non-empty list of tensors"
        )
    if length is not None and len(tensors) != length:
        raise TensorMismatchError(
            f"{call}({name}=...): give a list of {length} tensors, one per rank of the "
            f"group, got {len(tensors)} tensors"
        )
    return list(tensors)


def _write_split(collective, targets):
    """Run ``collective`` and cut its flat result into ``targets``, in order."""
    out = yield from collective
    ends = np.cumsum([t.size for t in targets])[:-1]
    for part, target in zip(np.split(out.reshape(-1), ends), targets, strict=True):
        np.copyto(target, part.reshape(target.shape))


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """``tensor_list[i]`` becomes group rank i's ``tensor``, on every rank."""
    call = "all_gather"
    rank, pg = resolve(group, call)
    check_tensor(tensor, call, writes=False)
    if not isinstance(tensor_list, list | tuple) or len(tensor_list) != pg.size():
        got = (
            f"{len(tensor_list)} tensors"
            if isinstance(tensor_list, list | tuple)
            else repr(tensor_list)
        )
        raise TensorMismatchError(
            f"{call}(tensor_list=...): give a list of {pg.size()} tensors, one "
            f"per rank of the group, got {got}"
        )
    for i, t in enumerate(tensor_list):
        check_tensor(t, call, f"tensor_list[{i}]")
        if t.shape != tensor.shape or t.dtype != tensor.dtype:
            raise TensorMismatchError(
                f"{call}: tensor_list[{i}] is {describe(t)} but tensor is "
                f"{describe(tensor)}: every entry must match it"
            )
    program = rank.all_gather(
        tensor.reshape(-1), group=pg.group, algorithm=algorithm_for("all_gather")
    )
    return issue(rank, _write_parts(program, list(tensor_list)), async_op, list(tensor_list), call)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """``output_tensor`` becomes every rank's ``input_tensor`` in group order: shaped
    ``(K * n, ...)`` (concatenated) or ``(K, n, ...)`` (stacked), as torch accepts."""
    call = "all_gather_into_tensor"
    rank, pg = resolve(group, call)
    check_tensor(input_tensor, call, "input_tensor", writes=False)
    check_tensor(output_tensor, call, "output_tensor")
    _same_kind(call, "output_tensor", output_tensor, "input_tensor", input_tensor)
    k = pg.size()
    if output_tensor.size != k * input_tensor.size:
        raise TensorMismatchError(
            f"{call}: output_tensor is {describe(output_tensor)}, {output_tensor.size} "
            f"elements, but {k} ranks of input_tensor {describe(input_tensor)} make "
            f"{k * input_tensor.size}: use shape {_concat(input_tensor.shape, k)}"
        )
    program = rank.all_gather(
        input_tensor.reshape(-1), group=pg.group, algorithm=algorithm_for("all_gather")
    )
    return issue(rank, _write(program, output_tensor), async_op, [output_tensor], call)


def _concat(shape, k):
    return (k * shape[0], *shape[1:]) if shape else (k,)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """``output`` on group rank r becomes block r of the reduction of every ``input``
    (``input`` holds K blocks of ``output``'s size, along its first axis)."""
    call = "reduce_scatter_tensor"
    name = op_name(op, call)
    rank, pg = resolve(group, call)
    check_tensor(input, call, "input", writes=False)
    check_tensor(output, call, "output")
    _same_kind(call, "output", output, "input", input)
    check_reducible(op, output, call)
    k = pg.size()
    if input.size != k * output.size:
        other = f" or an output of {input.size // k} elements" if input.size % k == 0 else ""
        raise TensorMismatchError(
            f"{call}: input is {describe(input)}, {input.size} elements, but {k} blocks of "
            f"output {describe(output)} make {k * output.size}: use an input of shape "
            f"{_concat(output.shape, k)}{other}"
        )
    # K rows of one block each: the executor cuts the first axis into exactly those blocks
    program = rank.reduce_scatter(
        input.reshape(k, -1), group=pg.group, op=name, algorithm=algorithm_for("reduce_scatter")
    )
    return issue(rank, _write(program, output), async_op, [output], call)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """``output`` on group rank r becomes the reduction of every rank's ``input_list[r]``
    (the list form of :func:`reduce_scatter_tensor`)."""
    call = "reduce_scatter"
    name = op_name(op, call)
    rank, pg = resolve(group, call)
    check_tensor(output, call, "output")
    check_reducible(op, output, call)
    input_list = check_list_like(input_list, pg.size(), output, call, "input_list", False)
    blocks = np.stack([t.reshape(-1) for t in input_list])  # (K, n): one block per rank
    program = rank.reduce_scatter(
        blocks, group=pg.group, op=name, algorithm=algorithm_for("reduce_scatter")
    )
    return issue(rank, _write(program, output), async_op, [output], call)


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    """Every rank's ``tensor`` becomes global rank ``src``'s (or group rank ``group_src``'s)."""
    call = "broadcast"
    rank, pg = resolve(group, call)
    src = peer(pg, src, "src", call, group_src, "group_src")
    check_tensor(tensor, call)
    program = rank.broadcast(
        tensor, root=pg.group.index(src), group=pg.group, algorithm=algorithm_for("broadcast")
    )
    return issue(rank, _write(program, tensor), async_op, [tensor], call)


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Global rank ``dst``'s ``tensor`` becomes the reduction of every rank's; the others'
    stay as they were."""
    call = "reduce"
    name = op_name(op, call)
    rank, pg = resolve(group, call)
    dst = peer(pg, dst, "dst", call, group_dst, "group_dst")
    check_tensor(tensor, call)
    check_reducible(op, tensor, call)
    program = rank.reduce(
        tensor, root=pg.group.index(dst), group=pg.group, op=name, algorithm=algorithm_for("reduce")
    )
    return issue(rank, _write(program, tensor), async_op, [tensor], call)


def all_to_all_single(
    output, input, output_split_sizes=None, input_split_sizes=None, group=None, async_op=False
):
    """Block j of rank r's ``input`` (cut along the first axis) becomes block r of rank j's
    ``output``.  Equal blocks (no split sizes, or K equal ones) run collsim's all-to-all;
    uneven ``input_split_sizes`` / ``output_split_sizes`` (rows to and from each rank) run
    as grouped sends and receives, as NCCL runs every all-to-all."""
    call = "all_to_all_single"
    rank, pg = resolve(group, call)
    check_tensor(input, call, "input", writes=False)
    check_tensor(output, call, "output")
    _same_kind(call, "output", output, "input", input)
    k = pg.size()
    if not _equal_blocks(input, output, (input_split_sizes, output_split_sizes), k):
        return uneven_all_to_all(
            rank, pg, output, input, output_split_sizes, input_split_sizes, async_op
        )
    if input.ndim == 0 or input.shape[0] % k:
        rows = input.shape[0] if input.ndim else None
        near = "" if rows is None else f" (nearest: {rows - rows % k} or {rows - rows % k + k})"
        raise TensorMismatchError(
            f"{call}: input {describe(input)} is cut along its first axis into "
            f"{k} equal blocks, so its first axis must be a multiple of {k}"
            f"{near}, or give input_split_sizes"
        )
    if output.size != input.size:
        raise TensorMismatchError(
            f"{call}: output is {describe(output)} but input is "
            f"{describe(input)}: with equal blocks both hold {input.size} "
            "elements"
        )
    program = rank.all_to_all(
        input.reshape(k, -1), group=pg.group, algorithm=algorithm_for("all_to_all")
    )
    return issue(rank, _write(program, output), async_op, [output], call)


def _equal_blocks(input, output, split_sizes, k):
    """Whether the split sizes (None or lists) ask for K equal blocks of both tensors."""
    if all(s is None for s in split_sizes):
        return True
    if input.ndim == 0 or input.shape != output.shape or input.shape[0] % k:
        return False
    equal = [input.shape[0] // k] * k
    return all(s is None or (isinstance(s, list | tuple) and list(s) == equal) for s in split_sizes)


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank of the group got here: an all-reduce of one element, as NCCL's
    barrier is."""
    call = "barrier"
    rank, pg = resolve(group, call)
    token = np.zeros(1, dtype=np.float32)
    program = rank.all_reduce(token, group=pg.group, algorithm=algorithm_for("all_reduce"))
    return issue(rank, _write(program, token), async_op, [], call)
