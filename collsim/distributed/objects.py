"""Picklable Python objects: ``broadcast_object_list``, ``all_gather_object``, and
point-to-point ``send_object_list`` / ``recv_object_list``.

As torch does, each object is pickled into a byte tensor (here a ``uint8`` array), so
what moves, and what the trace counts, is the pickle's bytes.  They travel as grouped
point-to-point messages with a :class:`~collsim.distributed.tags.CallTag` (the group and
the call).  ``send_object_list`` is one message of the list's pickle (torch sends its size
first, then the bytes; one message here, as the receiver takes a message of any size).
Unpickling runs whatever the sender's objects say, so use them only with data
you trust, as in torch.

Examples
--------
>>> import collsim
>>> from collsim.runtime import blocking
>>> from collsim import distributed as dist
>>> def main():
...     dist.init_process_group()
...     config = [{"lr": 0.1}, "adam"] if dist.get_rank() == 0 else [None, None]
...     dist.broadcast_object_list(config, src=0)
...     everyone = [None] * dist.get_world_size()
...     dist.all_gather_object(everyone, (dist.get_rank(), config[1]))
...     return config, everyone
>>> blocking.run(collsim.Cluster(collsim.topology.ring(3)), main).returns[2]
([{'lr': 0.1}, 'adam'], [(0, 'adam'), (1, 'adam'), (2, 'adam')])
"""

import pickle

import numpy as np

from ..errors import ConfigError
from ..runtime import blocking
from ..runtime.ops import ANY
from .process_group import default_root, peer, resolve
from .tags import CallTag

__all__ = [
    "broadcast_object_list",
    "all_gather_object",
    "send_object_list",
    "recv_object_list",
]


def _pickled(obj, call):
    try:
        return np.frombuffer(pickle.dumps(obj), dtype=np.uint8).copy()
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise ConfigError(
            f"{call}: {obj!r:.60} cannot be pickled ({exc}); send data that pickle can "
            "copy (numbers, strings, lists, dicts, arrays)"
        ) from None


def _unpickled(data):
    return pickle.loads(data.tobytes())


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Every rank's ``object_list`` becomes (in place) rank ``src``'s: each entry a copy."""
    call = "broadcast_object_list"
    rank, pg = resolve(group, call)
    src = peer(pg, default_root(src, group_src), "src", call, group_src, "group_src")
    _check_list(object_list, call)
    tag = CallTag.on(pg.id, call)
    if rank.id == src:
        data = _pickled(list(object_list), call)
        others = [(r, data, tag) for r in pg.ranks if r != src]
        if others:
            blocking.call(rank.exchange(others, []))
        return
    (data,) = blocking.call(rank.exchange([], [(src, tag)]))
    _fill(object_list, data, src, rank, call)


def _fill(object_list, data, sender, rank, call):
    """``object_list``'s entries become the list pickled in ``data``, of the same length."""
    got = _unpickled(data)
    if len(got) != len(object_list):
        raise ConfigError(
            f"{call}: rank {sender} sent {len(got)} objects but rank {rank.id}'s "
            f"object_list holds {len(object_list)}: give lists of one length"
        )
    object_list[:] = got


def _check_list(object_list, call):
    if not isinstance(object_list, list):
        raise ConfigError(
            f"{call}(object_list={object_list!r:.60}): give a list; its entries "
            "are replaced in place, as torch does"
        )


def send_object_list(object_list, dst=None, group=None, device=None, group_dst=None):
    """Send (a pickle of) ``object_list`` to global rank ``dst`` (or group rank
    ``group_dst``); blocks until it has arrived, as torch's blocking send."""
    call = "send_object_list"
    rank, pg = resolve(group, call)
    dst = peer(pg, dst, "dst", call, group_dst, "group_dst")
    _check_list(object_list, call)
    if dst == rank.id:
        raise ConfigError(f"{call}(dst={dst}): rank {dst} cannot send to itself")
    tag = CallTag.on(pg.id, "object_list")
    blocking.call(rank.exchange([(dst, _pickled(list(object_list), call), tag)], []))


def recv_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Fill ``object_list`` (in place) with the list global rank ``src`` sent (None: any
    rank of the group); returns the sender's global rank, as torch does."""
    call = "recv_object_list"
    rank, pg = resolve(group, call)
    _check_list(object_list, call)
    tag = CallTag.on(pg.id, "object_list")
    if src is None and group_src is None:
        got = blocking.call(rank.recv(ANY, tag=tag, status=True))
        data, sender = got.value, got.src
    else:
        sender = peer(pg, src, "src", call, group_src, "group_src")
        data = blocking.call(rank.recv(sender, tag=tag))
    _fill(object_list, data, sender, rank, call)
    return sender


def all_gather_object(object_list, obj, group=None):
    """``object_list[i]`` becomes (in place) a copy of group rank i's ``obj``."""
    call = "all_gather_object"
    rank, pg = resolve(group, call)
    if not isinstance(object_list, list) or len(object_list) != pg.size():
        raise ConfigError(
            f"{call}(object_list={object_list!r:.60}): give a list of "
            f"{pg.size()} entries, one per rank of the group"
        )
    data = _pickled(obj, call)
    tag = CallTag.on(pg.id, call)
    others = [r for r in pg.ranks if r != rank.id]
    got = blocking.call(rank.exchange([(r, data, tag) for r in others], [(r, tag) for r in others]))
    received = dict(zip(others, got, strict=True))
    for i, r in enumerate(pg.ranks):
        object_list[i] = _unpickled(received[r]) if r != rank.id else _unpickled(data)
