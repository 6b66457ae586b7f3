"""Run unmodified torch.distributed code on the virtual cluster: what ``collsim exec``
sets up around a run when torch is installed.

Within :func:`torch_on_collsim`

- the backend ``"collsim"`` is registered (``dist.Backend.register_backend``, once a
  process) and makes a :class:`~collsim.distributed.torch_backend.CollsimProcessGroup`;
- torch's one global world of process groups (``distributed_c10d._world``) becomes one
  world per rank, as PyTorch's threaded test backend makes it one per thread; here it is
  per rank, kept by the run (``execution.front_ends``), so that a thread a rank starts
  sees its rank's groups too;
- ``dist.init_process_group()`` called by a rank uses the collsim backend whatever
  backend it names (``"gloo"``, ``"nccl"``, none), this rank's id and the run's size,
  and one in-memory store of the run: ``env://``, ``MASTER_ADDR``, ``RANK`` and
  ``WORLD_SIZE`` are not read (a process's environment is one for every thread).

Afterwards torch is as it was.

Examples
--------
>>> import torch, torch.distributed as dist, collsim
>>> def main():
...     dist.init_process_group()              # no backend, no env://: collsim's
...     t = torch.full((2,), float(dist.get_rank()))
...     dist.all_reduce(t)
...     return t.tolist(), dist.get_backend()
>>> result = collsim.exec(main, n=3, echo=False)
>>> result.returns[0], result.trace.transfer_count
(([3.0, 3.0], 'collsim'), 12)
"""

import contextlib
import dataclasses
import sys
import typing

import torch
import torch.distributed as dist
from torch.testing._internal.distributed.multi_threaded_pg import ThreadLocalWorld, WorldData

from ..errors import ConfigError
from ..runtime import blocking
from . import groups, process_group
from .torch_backend import BACKEND_NAME, CollsimProcessGroup

__all__ = ["torch_on_collsim", "register"]


def _create(options, backend_options=None):
    """The backend's creator (torch's extended API): one rank's group of ``options``'s
    global ranks (none listed: the world)."""
    me = blocking.current_rank()
    if not process_group.is_initialized():
        process_group.init_process_group(backend=BACKEND_NAME)
    ranks = list(options.global_ranks_in_group) or list(range(me.size))
    if ranks == list(range(me.size)) and not options.global_ranks_in_group:
        group = process_group.state("init_process_group").world
    else:
        group = groups.new_group(ranks)
    return CollsimProcessGroup(options.group_rank, options.group_size, group)


def register():
    """Register the ``"collsim"`` backend with torch (once; later calls do nothing)."""
    if BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND_NAME, _create, extended_api=True, devices=["cpu"])


class _RankWorld(ThreadLocalWorld):
    """torch's world of process groups, one per rank of the run (the one it replaced
    outside the ranks: the main thread's)."""

    def __init__(self, outside):
        self._outside = outside

    def _get_world(self):
        try:
            me = blocking.current_rank()
        except ConfigError:
            return self._outside
        worlds = _torch_state(me).worlds
        if me.id not in worlds:
            worlds[me.id] = WorldData(**{f.name: _empty(f) for f in dataclasses.fields(WorldData)})
        return worlds[me.id]


def _empty(field):
    """A new world's value of ``field``: an empty container, 0 for a count, else None."""
    kind = typing.get_origin(field.type) or field.type
    if isinstance(kind, type) and issubclass(kind, dict | list | int):
        return kind()
    return None


@dataclasses.dataclass
class _TorchState:
    """The torch side of one run, kept by the run (``execution.front_ends["torch"]``)."""

    store: object = dataclasses.field(default_factory=dist.HashStore)
    worlds: dict = dataclasses.field(default_factory=dict)  # rank id -> its WorldData


def _torch_state(rank):
    kept = rank._execution.front_ends
    if "torch" not in kept:
        kept["torch"] = _TorchState()
    return kept["torch"]


def _init_on_collsim(original):
    """``init_process_group`` as a rank of the run calls it (outside a run: torch's own)."""

    def init_process_group(
        backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None, **rest
    ):
        try:
            me = blocking.current_rank()
        except ConfigError:
            return original(backend, init_method, timeout, world_size, rank, store, **rest)
        process_group.check_backend(backend)  # a name torch knows, or refused naming it
        process_group.check_rank_and_size(me, rank, world_size)
        rest.pop("device_id", None)  # a CPU run: no device to bind
        options = {"timeout": timeout} if timeout is not None else {}
        return original(
            BACKEND_NAME,
            store=_torch_state(me).store,
            rank=me.id,
            world_size=me.size,
            **options,
            **rest,
        )

    init_process_group.__wrapped__ = original
    init_process_group.__doc__ = original.__doc__
    return init_process_group


def _no_registry(isolated):
    """A torch without the registry of group names has nothing to isolate."""


@contextlib.contextmanager
def torch_on_collsim():
    """Within the block, torch.distributed code run by the ranks of a blocking run runs on
    the virtual cluster (see the module's docstring); afterwards torch is as it was."""
    register()
    c10d = dist.distributed_c10d
    saved_world, saved_init = c10d._world, dist.init_process_group
    saved_hook = sys.excepthook  # init_process_group prefixes it with "[rank0]"
    c10d._world = _RankWorld(saved_world)
    dist.init_process_group = _init_on_collsim(saved_init)
    # as torch's threaded tests do: the registry of group names (which the functional
    # collectives and the device mesh read) one per thread, since every rank names its
    # groups "0", "1", ...; and autograd's device threads off, which would run a rank's
    # backward outside the baton
    isolate = getattr(torch._C._distributed_c10d, "_set_thread_isolation_mode", _no_registry)
    isolate(True)
    multithreading = torch.autograd.set_multithreading_enabled(False)
    try:
        yield
    finally:
        multithreading.__exit__(None, None, None)
        isolate(False)
        dist.init_process_group = saved_init
        c10d._world = saved_world
        sys.excepthook = saved_hook
