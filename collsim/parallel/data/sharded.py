"""ZeRO stages 1-3 (Rajbhandari et al. 2020) on the data-parallel group of the mesh trainer.

Mixed-precision Adam holds 16 bytes per parameter: bf16 parameters (2) and gradients (2),
and fp32 master weights, Adam ``m`` and ``v`` (4 each, 12 in all). ZeRO shards that model
state over the ``N`` ranks of the data-parallel group:

======  ===================================================  ====================  ==========
stage   what each rank keeps                                 model state / rank    sends/step
======  ===================================================  ====================  ==========
0       everything (DDP: gradients all-reduced)              16Ψ                   2Ψ(N-1)/N·b
1       its 1/N of the optimizer state                       4Ψ + 12Ψ/N            2Ψ(N-1)/N·b
2       ... and of the gradients                             2Ψ + 14Ψ/N            2Ψ(N-1)/N·b
3       ... and of the parameters (gathered per unit)        16Ψ/N + one unit      3Ψ(N-1)/N·b
======  ===================================================  ====================  ==========

A rank's parameters are laid out flat (:class:`FlatLayout`, padded with zeros to a multiple of
``N`` as PyTorch FSDP pads its flat parameters) and rank ``i`` owns elements
``i·P/N .. (i+1)·P/N`` of it.

* **Stage 1**: gradients accumulate in full; after the chunk's last backward they are
  reduce-scattered (averaged), each rank runs the optimizer on its shard of the fp32 master
  weights, and the updated parameters are all-gathered. ``zero1_gradients="all_reduce"``
  all-reduces them instead (every rank gets the whole average and keeps its part: twice the
  gradient bytes, as some stage-1 implementations do).
* **Stage 2**: the same, but each micro-batch's gradients are reduce-scattered right after
  its backward of the chunk and only the shard is accumulated; the full gradient lives only
  as the communication buffer of that reduce-scatter.
* **Stage 3** (:class:`ShardedUnit`): the parameters themselves are sharded; each unit
  all-gathers its parameters before its forward and again before its backward, frees them
  after use, and reduce-scatters its gradients right after its backward. The freed arrays
  are filled with NaN, so a pass that used parameters it had not gathered would show in the
  check against one device.

Memory is charged to the run's tracker at the declared precisions (``rank.alloc``), so peaks
are read from the run.

>>> layout = FlatLayout.of({"w": np.zeros((2, 3)), "b": np.zeros(3)}, shards=4)
>>> layout.total, layout.padded, layout.shard_size
(9, 12, 3)
>>> layout.unflatten(np.arange(12.0))["b"].tolist()
[6.0, 7.0, 8.0]
"""

import math
from dataclasses import dataclass

import numpy as np

from ...errors import ConfigError
from ...nn import SGD, Adam
from . import expert_grads

__all__ = [
    "ZERO_STAGES",
    "FlatLayout",
    "optimizer_bytes_per_param",
    "ShardedUnit",
    "ShardPart",
    "ZeroChunkSync",
]

ZERO_STAGES = (0, 1, 2, 3)


def optimizer_bytes_per_param(optimizer):
    """Bytes of fp32 optimizer state per parameter under mixed precision (the ZeRO paper's
    K): the master weights (4) plus Adam's m and v (4 each) = 12; SGD with momentum 8;
    plain SGD 4 (the master weights alone); no optimizer 0."""
    if optimizer is None:
        return 0
    if isinstance(optimizer, Adam):
        return 12
    if isinstance(optimizer, SGD):
        return 8 if optimizer.momentum else 4
    raise ConfigError(f"ZeRO knows Adam and SGD, got {type(optimizer).__name__}")


@dataclass(frozen=True)
class FlatLayout:
    """Named arrays laid end to end, padded to a multiple of ``shards``."""

    names: tuple
    shapes: tuple
    total: int  # elements of the arrays
    padded: int  # total rounded up to a multiple of shards
    shards: int

    @classmethod
    def of(cls, arrays, shards):
        names = tuple(arrays)
        shapes = tuple(np.shape(arrays[n]) for n in names)
        total = sum(math.prod(s) for s in shapes)
        padded = -(-total // shards) * shards
        return cls(names, shapes, total, padded, shards)

    def prefixed(self, prefix):
        """The same layout with ``"<prefix>."`` before every name (a unit inside a model)."""
        if not prefix:
            return self
        names = tuple(f"{prefix}.{name}" for name in self.names)
        return FlatLayout(names, self.shapes, self.total, self.padded, self.shards)

    @property
    def shard_size(self):
        return self.padded // self.shards

    def flatten(self, arrays, dtype=np.float64):
        """The arrays end to end, zero-padded: shape ``(padded,)``; a name missing from
        ``arrays`` (a parameter with no gradient) is zeros."""
        flat = np.zeros(self.padded, dtype=dtype)
        at = 0
        for name, shape in zip(self.names, self.shapes):
            size = math.prod(shape)
            if name in arrays:
                flat[at : at + size] = np.reshape(arrays[name], -1)
            at += size
        return flat

    def unflatten(self, flat):
        """``{name: array}`` views of a ``(padded,)`` vector."""
        out, at = {}, 0
        for name, shape in zip(self.names, self.shapes):
            size = math.prod(shape)
            out[name] = flat[at : at + size].reshape(shape)
            at += size
        return out

    def shard(self, flat, index):
        """Rank ``index``'s slice of a ``(padded,)`` vector."""
        size = self.shard_size
        return flat[index * size : (index + 1) * size]


class ZeroChunkSync:
    """ZeRO-1/2 for one model chunk on one rank: gradients reduce-scattered over the
    data-parallel group, the optimizer stepped on this rank's shard, parameters all-gathered.

    ``params`` are the chunk's arrays (updated in place after the step). The optimizer
    state is per shard, under the name ``key`` (one per model chunk).
    """

    def __init__(self, rank, group, params, stage, optimizer, key="shard", reduce="reduce_scatter"):
        self.rank, self.group, self.stage, self.key = rank, group, stage, key
        self.reduce_with = reduce  # stage 1: "reduce_scatter" or "all_reduce" of the gradients
        self.params = params
        self.layout = FlatLayout.of(params, group.size)
        self.index = group.index(rank.id)
        self.optimizer = optimizer
        # the fp32 master weights: this rank's shard of the flat parameters
        self.master = self.layout.shard(self.layout.flatten(params), self.index).copy()
        self.grad_shard = None  # this step's gradient shard, averaged over the group

    def reduce(self, grads):
        """Reduce-scatter (average) ``grads`` and add this rank's shard to the step's sum.
        The full flat gradient is the collective's buffer while it runs."""
        flat = self.layout.flatten(grads)
        buffer = self.rank.alloc("comm_buffers", "zero grad buffer", self.layout.padded)
        if self.reduce_with == "all_reduce":  # every rank gets the whole average, keeps its part
            whole = yield from self.rank.all_reduce(flat, group=self.group, op="avg")
            shard = self.layout.shard(whole, self.index).copy()
        else:
            shard = yield from self.rank.reduce_scatter(flat, group=self.group, op="avg")
        self.rank.free(buffer)
        self.grad_shard = shard if self.grad_shard is None else self.grad_shard + shard

    def step(self):
        """The optimizer on this rank's shard, then the all-gather of the updated parameters."""
        if self.optimizer is not None and self.grad_shard is not None:
            self.optimizer.step({self.key: self.master}, {self.key: self.grad_shard})
        full = yield from self.rank.all_gather(self.master, group=self.group)
        for name, array in self.layout.unflatten(full).items():
            self.params[name][...] = array
        grad_shard, self.grad_shard = self.grad_shard, None
        return grad_shard


def hsdp_groups(dp_group, dp_shard, rank_id, dims=("dp_shard", "dp_replicate")):
    """``(shard group, replica group)`` of ``rank_id`` in its data-parallel group laid out as
    dp_replicate x dp_shard, the shard dimension inner (neighbouring ranks, one node):
    the replica group is None without HSDP.  ``dims`` names the two (``"edp_shard"``,
    ``"edp_replicate"`` for the experts' expert-data-parallel group).

    >>> from collsim.runtime.group import Group
    >>> shard, replica = hsdp_groups(Group(range(8)), 4, 5)
    >>> shard.ranks, replica.ranks, shard.dim, replica.dim
    ((4, 5, 6, 7), (1, 5), 'dp_shard', 'dp_replicate')
    """
    from ...runtime.group import Group

    if dp_shard == dp_group.size:
        return dp_group, None
    ranks, i = dp_group.ranks, dp_group.index(rank_id)
    block = i // dp_shard
    shard = Group(ranks[block * dp_shard : (block + 1) * dp_shard], dim=dims[0])
    replica = Group(ranks[i % dp_shard :: dp_shard], dim=dims[1])
    return shard, replica


@dataclass(frozen=True)
class ShardPart:
    """One flat parameter of an FSDP unit: which of the unit's parameters it lays out and
    the ranks it is sharded over (FSDP2 shards an MoE block's experts over their own mesh)."""

    key: str  # its name among the unit's params: "shard" (dense) or "expert_shard"
    names: tuple  # the unit's parameters it holds
    group: object  # the shard group
    replica_group: object = None  # HSDP: the ranks holding the same shard
    share: float | None = None  # experts: each rank's gradient is divided by it first
    # (expert_grads.expert_grad_share: the tokens of that many ranks reached its experts)


class ShardedUnit:
    """ZeRO-3 / FSDP: a rank module whose parameters live as this rank's 1/N flat shard,
    gathered for its passes and freed after them (a :class:`~collsim.parallel.modules.RankModule`).

    Its ``params`` is ``{"shard": the fp32 master shard}`` and its gradients
    ``{"shard": the averaged gradient shard}``, reduce-scattered right after the backward;
    with ``experts`` (a :class:`ShardPart` of its MoE experts' parameters) those are a
    second flat parameter, ``"expert_shard"``, on the experts' own groups.

    Parameters
    ----------
    unit : rank module
        The wrapped unit (a transformer block by default); its arrays are overwritten with
        the gathered values for each pass and with NaN after it.
    group : Group
        The shard group (all of dp; the inner dp_shard group with HSDP).
    replica_group : Group, optional
        HSDP: the ranks holding the same shard; the shard's gradient is all-reduced (averaged)
        over it after the reduce-scatter.
    reshard_after_forward : bool
        False keeps the gathered parameters from the forward to the backward (one gather per
        micro-batch, more memory: PyTorch's SHARD_GRAD_OP).
    experts : ShardPart, optional
        The unit's expert parameters and their expert-data-parallel shard and replica groups.
    """

    def __init__(
        self,
        unit,
        group,
        rank_id,
        name,
        replica_group=None,
        reshard_after_forward=True,
        experts=None,
    ):
        self.unit, self.group, self.name = unit, group, name
        self.replica_group = replica_group
        self.reshard_after_forward = reshard_after_forward
        apart = () if experts is None else experts.names
        dense = tuple(n for n in unit.params if n not in apart)
        self.parts = [ShardPart("shard", dense, group, replica_group)]
        self.parts += [experts] if experts is not None and experts.names else []
        self.layouts, self.shards = {}, {}
        for part in self.parts:
            layout = FlatLayout.of({n: unit.params[n] for n in part.names}, part.group.size)
            self.layouts[part.key] = layout
            index = part.group.index(rank_id)
            self.shards[part.key] = layout.shard(layout.flatten(unit.params), index).copy()
        self.layout, self.index = self.layouts["shard"], group.index(rank_id)
        self._holders = 0  # passes (micro-batches) using the gathered parameters now
        self._block = None  # the gathered parameters' memory block while they exist
        self._pending = None  # prefetched all-gathers' handles, not yet waited for
        self._poison()  # the full arrays exist only while gathered

    @property
    def shard(self):
        """The dense flat parameter's fp32 master shard."""
        return self.shards["shard"]

    @property
    def params(self):
        return dict(self.shards)

    @property
    def shard_axes(self):
        return dict.fromkeys(self.shards, 0)  # rank i holds elements i·P/N .. of each

    @property
    def gathered_elements(self):
        return sum(layout.padded for layout in self.layouts.values())

    def _poison(self):
        for array in self.unit.params.values():
            array[...] = np.nan

    def _gathers(self, rank):
        """One all-gather task per flat parameter."""
        return [rank.all_gather(self.shards[p.key], group=p.group) for p in self.parts]

    def _fill(self, gathered):
        for part, full in zip(self.parts, gathered):
            for name, array in self.layouts[part.key].unflatten(full).items():
                self.unit.params[name][...] = array

    def prefetch(self, rank):
        """Start this unit's all-gathers on the communication stream (FSDP's prefetch), unless
        its parameters are gathered or on their way already."""
        if self._holders or self._pending is not None:
            return
        self._block = rank.alloc("gathered_params", self.name, self.gathered_elements)
        self._pending = []
        for task in self._gathers(rank):
            self._pending.append((yield rank.start(task, name=f"prefetch {self.name}")))

    def _acquire(self, rank):
        """Make the gathered parameters available to one more pass."""
        if self._holders == 0:
            if self._pending is not None:  # prefetched: wait for it
                gathered = []
                for handle in self._pending:
                    gathered.append((yield rank.wait(handle)))
                self._pending = None
            else:
                self._block = rank.alloc("gathered_params", self.name, self.gathered_elements)
                gathered = []
                for task in self._gathers(rank):
                    gathered.append((yield from task))
            self._fill(gathered)
        self._holders += 1

    def _release(self, rank):
        self._holders -= 1
        if self._holders == 0:
            self._poison()
            rank.free(self._block)
            self._block = None

    def _reduce(self, rank, grads):
        out = {}
        for part in self.parts:
            layout = self.layouts[part.key]
            flat = layout.flatten(grads)
            if part.share is not None:  # an expert's gradient: its share of the edp average
                flat = expert_grads.expert_grad_share(flat, part.share)
            buffer = rank.alloc("comm_buffers", f"{self.name} grad buffer", layout.padded)
            shard = yield from rank.reduce_scatter(flat, group=part.group, op="avg")
            if part.replica_group is not None and part.replica_group.size > 1:
                shard = yield from rank.all_reduce(shard, group=part.replica_group, op="avg")
            rank.free(buffer)
            out[part.key] = shard
        return out

    def forward(self, rank, x):
        yield from self._acquire(rank)
        y, ctx = yield from self.unit.forward(rank, x)
        if self.reshard_after_forward:
            self._release(rank)
        return y, {"inner": ctx, "held": not self.reshard_after_forward}

    def recompute(self, rank, x):
        """The forward again inside the backward (activation recomputation): gathered once,
        and held for the backward that follows."""
        yield from self._acquire(rank)
        y, ctx = yield from self.unit.forward(rank, x)
        return y, {"inner": ctx, "held": True}

    def _enter_backward(self, rank, ctx):
        if not ctx.pop("held"):  # resharded after the forward: gather again
            yield from self._acquire(rank)

    def backward_input(self, rank, ctx, dy):
        yield from self._enter_backward(rank, ctx)  # held until the weight gradient
        return (yield from self.unit.backward_input(rank, ctx["inner"], dy))

    def backward_weight(self, rank, ctx, dy):
        grads = yield from self.unit.backward_weight(rank, ctx["inner"], dy)
        self._release(rank)
        return (yield from self._reduce(rank, grads))

    def backward(self, rank, ctx, dy):
        yield from self._enter_backward(rank, ctx)
        dx, grads = yield from self.unit.backward(rank, ctx["inner"], dy)
        self._release(rank)
        return dx, (yield from self._reduce(rank, grads))
