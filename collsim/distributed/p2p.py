"""Point-to-point with torch's semantics: ``send``, ``recv``, ``isend``, ``irecv``.

``recv`` fills the tensor it is given and returns the sender's global rank;
``src=None`` takes a message from any rank of the group.  Messages travel with a
:class:`~collsim.distributed.tags.MessageTag` (the group and the tag), so they never match
another group's messages or anything else the run sends.  As on collsim's network (and
NCCL's), a send is a rendezvous: a blocking ``send`` returns once its receive was posted
and the data arrived, so two ranks that both ``send`` first deadlock (the report names both
lines); use ``isend``/``irecv`` then.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.runtime import blocking
>>> from collsim import distributed as dist
>>> def main():
...     dist.init_process_group()
...     me = dist.get_rank()
...     if me == 0:
...         got = [np.zeros(2), np.zeros(2)]
...         senders = [dist.recv(got[0]), dist.recv(got[1])]   # from any rank
...         return senders, [g.tolist() for g in got]
...     dist.send(np.full(2, float(me)), dst=0)
>>> blocking.run(collsim.Cluster(collsim.topology.switch(3)), main).returns[0]
([1, 2], [[1.0, 1.0], [2.0, 2.0]])
"""

from ..collectives.checks import is_int
from ..errors import ConfigError
from ..runtime import blocking
from ..runtime.ops import ANY
from .checks import check_tensor
from .process_group import peer, resolve
from .tags import TAG_ROOT, MessageTag
from .work import Work

__all__ = ["send", "recv", "isend", "irecv", "TAG_ROOT"]


def _tag(pg, tag, call):
    if not is_int(tag):
        raise ConfigError(f"{call}(tag={tag!r}): a tag is an int, as in torch")
    return MessageTag.on(pg.id, int(tag))


def _send_args(tensor, dst, group, tag, group_dst, call):
    """``(rank, dst, wire tag)`` of a send, every argument checked."""
    rank, pg = resolve(group, call)
    dst = peer(pg, dst, "dst", call, group_dst, "group_dst")
    if dst == rank.id:
        raise ConfigError(
            f"{call}(dst={dst}): rank {dst} cannot send to itself; choose another rank of the group"
        )
    check_tensor(tensor, call, writes=False)
    return rank, dst, _tag(pg, tag, call)


def _recv_args(tensor, src, group, tag, group_src, call):
    """``(rank, src, wire tag)`` of a receive; ``src`` is ANY for any rank of the group."""
    rank, pg = resolve(group, call)
    check_tensor(tensor, call)
    wire_tag = _tag(pg, tag, call)
    if src is None and group_src is None:
        return rank, ANY, wire_tag
    src = peer(pg, src, "src", call, group_src, "group_src")
    if src == rank.id:
        raise ConfigError(
            f"{call}(src={src}): rank {src} cannot receive from itself; "
            "choose another rank of the group, or src=None for any"
        )
    return rank, src, wire_tag


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Send ``tensor`` to global rank ``dst`` (or group rank ``group_dst``) and block
    until it has arrived."""
    rank, dst, wire_tag = _send_args(tensor, dst, group, tag, group_dst, "send")
    blocking.call(rank.send(dst, tensor, tag=wire_tag, label="send"))


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receive into ``tensor`` from global rank ``src`` (None: any rank of the group);
    returns the sender's global rank."""
    rank, src, wire_tag = _recv_args(tensor, src, group, tag, group_src, "recv")
    value = blocking.call(rank.recv(src, tag=wire_tag, out=tensor, status=src is ANY))
    return value.src if src is ANY else src


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Start sending ``tensor``; returns a :class:`Work` (do not change ``tensor`` before
    its ``wait()``)."""
    rank, dst, wire_tag = _send_args(tensor, dst, group, tag, group_dst, "isend")
    handle = blocking.call(rank.isend(dst, tensor, tag=wire_tag, label="isend"))
    return Work(rank, handle, [tensor], f"isend to rank {dst}")


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    """Start receiving into ``tensor``; returns a :class:`Work` (``tensor`` is written when
    the message arrives)."""
    rank, src, wire_tag = _recv_args(tensor, src, group, tag, group_src, "irecv")
    handle = blocking.call(rank.irecv(src, tag=wire_tag, out=tensor, status=src is ANY))
    where = "any rank" if src is ANY else f"rank {src}"
    return Work(rank, handle, [tensor], f"irecv from {where}", source=None if src is ANY else src)
