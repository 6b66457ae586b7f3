"""The calls NCCL builds from grouped sends and receives: ``gather``, ``scatter``,
``all_to_all`` (of lists), an ``all_to_all_single`` with uneven splits, and
``batch_isend_irecv``.

Each posts its point-to-point messages together (``rank.exchange``, as NCCL's
``ncclGroupStart``/``ncclGroupEnd`` does), with a
:class:`~collsim.distributed.tags.CallTag` (the group and the call) that no user message (an
int tag) can match.  The bytes and the time are the network's.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.runtime import blocking
>>> from collsim import distributed as dist
>>> def main():
...     dist.init_process_group()
...     me, k = dist.get_rank(), dist.get_world_size()
...     inp = np.arange(k * (k + 1) // 2, dtype=float) + 100 * me  # rank j gets j + 1 rows
...     out = np.zeros(k * (me + 1))
...     dist.all_to_all_single(out, inp, output_split_sizes=[me + 1] * k,
...                            input_split_sizes=list(range(1, k + 1)))
...     return out.tolist()
>>> blocking.run(collsim.Cluster(collsim.topology.switch(3)), main).returns[1]
[1.0, 2.0, 101.0, 102.0, 201.0, 202.0]
"""

from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from ..collectives.checks import is_int
from ..errors import ConfigError
from .checks import TensorMismatchError, check_list_like, check_tensor
from .p2p import irecv, isend
from .process_group import default_root, peer, resolve
from .tags import CallTag
from .work import issue

__all__ = ["gather", "scatter", "all_to_all", "uneven_all_to_all", "P2POp", "batch_isend_irecv"]


def _program(rank, sends, recvs, copies):
    """Post ``sends`` and ``recvs`` together, then make the local ``copies`` (dst, src)."""
    if sends or recvs:
        yield rank.exchange(sends, recvs)
    for target, source in copies:
        np.copyto(target, source.reshape(target.shape))


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    """``gather_list[i]`` on rank ``dst`` becomes group rank i's ``tensor``."""
    call = "gather"
    rank, pg = resolve(group, call)
    dst = peer(pg, default_root(dst, group_dst), "dst", call, group_dst, "group_dst")
    check_tensor(tensor, call, writes=False)
    tag = CallTag.on(pg.id, call)
    if rank.id != dst:
        if gather_list is not None:
            raise ConfigError(
                f"gather(gather_list=...) on rank {rank.id}: only rank dst={dst} "
                "gives a gather_list; pass None here"
            )
        return issue(rank, _program(rank, [(dst, tensor, tag)], [], []), async_op, [], call)
    parts = check_list_like(gather_list, pg.size(), tensor, call, "gather_list", writes=True)
    recvs = [(r, tag, parts[i]) for i, r in enumerate(pg.ranks) if r != rank.id]
    own = [(parts[pg.rank()], tensor)]
    return issue(rank, _program(rank, [], recvs, own), async_op, parts, call)


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    """Group rank i's ``tensor`` becomes ``scatter_list[i]`` of rank ``src``."""
    call = "scatter"
    rank, pg = resolve(group, call)
    src = peer(pg, default_root(src, group_src), "src", call, group_src, "group_src")
    check_tensor(tensor, call)
    tag = CallTag.on(pg.id, call)
    if rank.id != src:
        if scatter_list is not None:
            raise ConfigError(
                f"scatter(scatter_list=...) on rank {rank.id}: only rank "
                f"src={src} gives a scatter_list; pass None here"
            )
        return issue(rank, _program(rank, [], [(src, tag, tensor)], []), async_op, [tensor], call)
    parts = check_list_like(scatter_list, pg.size(), tensor, call, "scatter_list", writes=False)
    sends = [(r, parts[i], tag) for i, r in enumerate(pg.ranks) if r != rank.id]
    own = [(tensor, parts[pg.rank()])]
    return issue(rank, _program(rank, sends, [], own), async_op, [tensor], call)


def _splits(sizes, rows, k, call, name, tensor):
    """``sizes`` as K row counts summing to ``rows`` (None: K equal blocks)."""
    if sizes is None:
        if rows % k:
            raise TensorMismatchError(
                f"{call}: {name} is None, so {tensor} is cut into {k} equal blocks, but its "
                f"first axis has {rows} rows; give {name}"
            )
        return [rows // k] * k
    listed = list(sizes) if isinstance(sizes, list | tuple | np.ndarray) else None
    if listed is None or len(listed) != k or not all(is_int(s) and s >= 0 for s in listed):
        raise ConfigError(
            f"{call}({name}={sizes!r}): give {k} row counts (ints >= 0), one per rank of the group"
        )
    if sum(listed) != rows:
        raise TensorMismatchError(
            f"{call}({name}={listed!r}): they add up to {sum(listed)} rows but {tensor} has {rows}"
        )
    return [int(s) for s in listed]


def uneven_all_to_all(rank, pg, output, input, output_split_sizes, input_split_sizes, async_op):
    """``all_to_all_single`` with split sizes: rows ``input_split_sizes[j]`` go to group
    rank j, rows ``output_split_sizes[j]`` come from it (each pair must agree)."""
    call = "all_to_all_single"
    k = pg.size()
    if input.ndim == 0 or output.ndim == 0 or input.shape[1:] != output.shape[1:]:
        raise TensorMismatchError(
            f"{call}: input {input.dtype} {input.shape} and output "
            f"{output.dtype} {output.shape} are split into rows along the first "
            "axis: both need one, and the same shape after it"
        )
    send_rows = _splits(input_split_sizes, input.shape[0], k, call, "input_split_sizes", "input")
    recv_rows = _splits(
        output_split_sizes, output.shape[0], k, call, "output_split_sizes", "output"
    )
    me = pg.rank()
    if send_rows[me] != recv_rows[me]:
        raise TensorMismatchError(
            f"{call}: rank {rank.id} sends itself {send_rows[me]} rows "
            f"(input_split_sizes={send_rows}) but expects {recv_rows[me]} "
            f"(output_split_sizes={recv_rows}): entry {me} of both must "
            "match"
        )
    send_at = [0, *accumulate(send_rows)]
    recv_at = [0, *accumulate(recv_rows)]
    tag = CallTag.on(pg.id, call)
    sends, recvs = [], []
    for j, r in enumerate(pg.ranks):
        if j != me:
            sends.append((r, input[send_at[j] : send_at[j + 1]], tag))
            recvs.append((r, tag, output[recv_at[j] : recv_at[j + 1]]))
    own = [(output[recv_at[me] : recv_at[me + 1]], input[send_at[me] : send_at[me + 1]])]
    return issue(rank, _program(rank, sends, recvs, own), async_op, [output], call)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """``output_tensor_list[j]`` becomes group rank j's ``input_tensor_list[r]`` (r: this
    rank); the tensors may differ in size, as long as each pair agrees."""
    call = "all_to_all"
    rank, pg = resolve(group, call)
    k = pg.size()
    for name, tensors, writes in (
        ("output_tensor_list", output_tensor_list, True),
        ("input_tensor_list", input_tensor_list, False),
    ):
        if not isinstance(tensors, list | tuple) or len(tensors) != k:
            got = f"{len(tensors)} tensors" if isinstance(tensors, list | tuple) else repr(tensors)
            raise TensorMismatchError(
                f"{call}({name}=...): give a list of {k} tensors, one per rank "
                f"of the group, got {got}"
            )
        for i, t in enumerate(tensors):
            check_tensor(t, call, f"{name}[{i}]", writes=writes)
    me = pg.rank()
    tag = CallTag.on(pg.id, call)
    sends = [(r, input_tensor_list[j], tag) for j, r in enumerate(pg.ranks) if j != me]
    recvs = [(r, tag, output_tensor_list[j]) for j, r in enumerate(pg.ranks) if j != me]
    own = [(output_tensor_list[me], input_tensor_list[me])]
    return issue(rank, _program(rank, sends, recvs, own), async_op, list(output_tensor_list), call)


@dataclass
class P2POp:
    """One send or receive of a :func:`batch_isend_irecv`: ``op`` is ``isend`` or ``irecv``."""

    op: object
    tensor: object
    peer: int = None
    group: object = None
    tag: int = 0
    group_peer: int = None


def batch_isend_irecv(p2p_op_list):
    """Post every :class:`P2POp` at once; returns their :class:`Work` handles, in order."""
    if not isinstance(p2p_op_list, list | tuple) or not p2p_op_list:
        raise ConfigError(f"batch_isend_irecv({p2p_op_list!r}): give a non-empty list of P2POp")
    for i, item in enumerate(p2p_op_list):
        if not isinstance(item, P2POp) or item.op not in (isend, irecv):
            raise ConfigError(
                f"batch_isend_irecv: entry {i} ({item!r}) must be a P2POp whose "
                "op is isend or irecv"
            )
    works = []
    for item in p2p_op_list:
        if item.op is isend:
            works.append(isend(item.tensor, item.peer, item.group, item.tag, item.group_peer))
        else:
            works.append(irecv(item.tensor, item.peer, item.group, item.tag, item.group_peer))
    return works
