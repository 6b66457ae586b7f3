"""How a rank's gradients are synchronised and its optimizer stepped, one class per ZeRO stage.

The mesh trainer makes one of these per rank (:func:`gradient_sync`); each step it asks it
for the hooks of every model chunk, runs the stage program, then ``finish()``es the step:

==========  =================================================================================
ZeRO stage  the sync
==========  =================================================================================
0           :class:`DDPSync`: DDP's buckets, all-reduced (averaged) as they fill; every rank
            steps the whole optimizer
1, 2        :class:`ZeroSync`: reduce-scatter (after the chunk's last backward for stage 1,
            after every backward for stage 2), the optimizer on this rank's shard,
            all-gather of the parameters (:class:`~collsim.parallel.data.sharded.ZeroChunkSync`)
3           :class:`Zero3Sync`: the units reduce-scatter their own gradients
            (:class:`~collsim.parallel.data.sharded.ShardedUnit`); the optimizer steps the shards
==========  =================================================================================

Each also charges the rank's model state to the memory tracker at the declared precisions
(bf16 parameters and gradients, fp32 optimizer state; :mod:`collsim.parallel.data.sharded`).
``finish()`` returns a :class:`StepShards`: this rank's gradients and parameters, whole or as
its shard of a :class:`~collsim.parallel.data.sharded.FlatLayout`, which the run's assembly puts
back together.
"""

from dataclasses import dataclass, field

import numpy as np

from . import expert_grads
from .buckets import GradientBuckets
from .sharded import ZeroChunkSync, optimizer_bytes_per_param

__all__ = ["gradient_sync", "StepShards", "DDPSync", "ZeroSync", "Zero3Sync", "whole"]


@dataclass
class StepShards:
    """One rank's gradients (averaged, before the step) and parameters (after it).

    ``layouts`` is empty when both are whole; otherwise ``grads[key]`` / ``params[key]`` are
    this rank's shards of ``layouts[key]``, and the whole arrays it names are rebuilt from
    the shards of the ranks ``groups[key]`` (its shard group, in group order: the dense
    parameters' or the experts')."""

    grads: dict
    params: dict
    buckets: list = field(default_factory=list)
    layouts: dict = field(default_factory=dict)
    groups: dict = field(default_factory=dict)


def gradient_sync(rank, me, config, params):
    """The sync of ZeRO stage ``config.zero`` for rank ``rank`` (its setup ``me``)."""
    if config.zero == 0:
        return DDPSync(rank, me, config, params)
    if config.zero == 3:
        return Zero3Sync(rank, me, config, params)
    return ZeroSync(rank, me, config, params)


def _elements(arrays):
    return sum(int(a.size) for a in arrays.values())


class DDPSync:
    """ZeRO stage 0: every rank holds everything; gradients all-reduced in buckets."""

    def __init__(self, rank, me, config, params):
        self.rank, self.me, self.config, self.params = rank, me, config, params
        n = _elements(params)
        rank.alloc("params", "parameters", n)
        k = optimizer_bytes_per_param(me.optimizer)
        if k:
            rank.alloc("optimizer", "optimizer state", n, bytes_per_element=k)

    def hooks(self, chunk):
        """``(on_final, on_pass)`` of model chunk ``chunk``."""
        return self._add, None

    def _add(self, name, grad):
        """Bucket a final gradient: MoE experts' over their expert-data-parallel group,
        everything else (attention, router, ...) over the data-parallel group."""
        if expert_grads.is_expert_gradient(name, self.me):
            share = expert_grads.expert_grad_share(grad, self.me.expert_shards)
            yield from self.expert_buckets.add(name, share)
        else:
            yield from self.buckets.add(name, grad)

    def begin(self):
        self.buckets = GradientBuckets(self.rank, self.me.dp_group, self.config.bucket_bytes)
        edp = self.me.experts.edp
        self.expert_buckets = GradientBuckets(self.rank, edp, self.config.bucket_bytes)
        self.grads_block = self.rank.alloc("grads", "gradients", _elements(self.params))

    def finish(self, chunks):
        averaged = yield from self.buckets.wait()
        averaged |= yield from self.expert_buckets.wait()
        if self.me.optimizer is not None:  # after the flush: no micro-batch needs old weights
            self.me.optimizer.step(self.params, averaged)
        self.rank.free(self.grads_block)
        after = {k: v.copy() for k, v in self.params.items()}
        return StepShards(averaged, after, self.buckets.sizes)


class ZeroSync:
    """ZeRO stages 1 and 2: optimizer state (and for stage 2 the gradients) sharded: the
    dense parameters' over the data-parallel group, the MoE experts' over their
    expert-data-parallel group (Megatron-Core's distributed optimizer keeps the two apart)."""

    def __init__(self, rank, me, config, params):
        self.rank, self.me, self.config = rank, me, config
        self.syncs, self.by_chunk = [], []
        for units in me.chunks:
            chunk_params = {}
            for prefix, unit in units:
                chunk_params |= {
                    f"{prefix}.{k}" if prefix else k: v for k, v in unit.params.items()
                }
            experts = {k for k in chunk_params if expert_grads.is_expert_gradient(k, me)}
            parts = [
                (part, names, group)
                for part, names, group in (
                    ("", [k for k in chunk_params if k not in experts], me.dp_group),
                    (" experts", sorted(experts), me.experts.edp),
                )
                if names
            ]
            mine = []
            for part, names, group in parts:
                key = f"shard {len(self.by_chunk)}{part}"  # the optimizer's state name
                sync = ZeroChunkSync(
                    rank,
                    group,
                    {k: chunk_params[k] for k in names},
                    config.zero,
                    me.optimizer,
                    key,
                    config.zero1_gradients,
                )
                sync.share = me.expert_shards if part else None
                mine.append(sync)
            self.syncs += mine
            self.by_chunk.append(mine)
        n = _elements(params)
        shard = sum(s.layout.shard_size for s in self.syncs)
        rank.alloc("params", "parameters", n)
        k = optimizer_bytes_per_param(me.optimizer)
        if k:
            rank.alloc("optimizer", "optimizer state shard", shard, bytes_per_element=k)
        self.grad_elements = n if config.zero == 1 else shard

    @property
    def group(self):
        return self.me.dp_group

    def master_shards(self):
        """``{key: this rank's fp32 master shard}`` (what a checkpoint saves)."""
        return {c: sync.master for c, sync in enumerate(self.syncs)}

    def state_key(self, key):
        """The optimizer-state name of ``master_shards()[key]``."""
        return self.syncs[key].key

    def _reducer(self, chunk):
        """Reduce-scatter chunk ``chunk``'s gradients, each part over its own group."""

        def reduce(grads):
            for sync in self.by_chunk[chunk]:
                part = grads
                if sync.share is not None:  # the experts': their share of the edp average
                    share = expert_grads.expert_grad_share
                    part = {k: share(grads[k], sync.share) for k in sync.layout.names if k in grads}
                yield from sync.reduce(part)

        return reduce

    def hooks(self, chunk):
        if self.config.zero == 2:  # each backward's gradients reduce-scattered at once
            return None, self._reducer(chunk)
        return None, None

    def begin(self):
        self.grads_block = self.rank.alloc("grads", "gradients", self.grad_elements)

    def finish(self, chunks):
        grads, params, layouts, groups = {}, {}, {}, {}
        for c, chunk in enumerate(chunks):
            if self.config.zero == 1:  # the accumulated gradients, reduce-scattered once
                yield from self._reducer(c)(chunk.grads)
            for sync in self.by_chunk[c]:
                i = len(grads)
                grads[i] = yield from sync.step()
                params[i] = sync.master.copy()
                layouts[i], groups[i] = sync.layout, sync.group.ranks
        self.rank.free(self.grads_block)
        return StepShards(grads, params, [], layouts, groups)


class Zero3Sync:
    """ZeRO stage 3 / FSDP: the units hold shards and sync their own gradients."""

    def __init__(self, rank, me, config, params):
        self.rank, self.me = rank, me
        self.units = [(p, u) for units in me.chunks for p, u in units]
        self.group = self.units[0][1].group if self.units else me.dp_group  # the shard group
        shard = sum(lay.shard_size for _, u in self.units for lay in u.layouts.values())
        rank.alloc("params", "parameter shards", shard)
        k = optimizer_bytes_per_param(me.optimizer)
        if k:
            rank.alloc("optimizer", "optimizer state shard", shard, bytes_per_element=k)
        self.shard = shard
        self.params = params  # "<prefix>.shard" -> the unit's fp32 shard

    def master_shards(self):
        return {
            (f"{p}.{key}" if p else key): shard
            for p, u in self.units
            for key, shard in u.shards.items()
        }

    def state_key(self, key):
        return key

    def hooks(self, chunk):
        return None, None

    def begin(self):
        self.grads_block = self.rank.alloc("grads", "gradient shards", self.shard)

    def finish(self, chunks):
        grads = {}
        for chunk in chunks:
            grads |= chunk.grads
        if self.me.optimizer is not None:
            self.me.optimizer.step(self.params, grads)
        self.rank.free(self.grads_block)
        layouts, groups = {}, {}
        for p, unit in self.units:
            for part in unit.parts:
                key = f"{p}.{part.key}" if p else part.key
                layouts[key] = unit.layouts[part.key].prefixed(p)
                groups[key] = part.group.ranks
        after = {key: self.params[key].copy() for key in layouts}
        yield from ()
        return StepShards({k: grads[k] for k in layouts}, after, [], layouts, groups)


def whole(shards, rank):
    """``(grads, params)`` of ``rank``, whole, from every rank's `StepShards` (``shards``,
    indexed by rank): each flat parameter from its shard group's shards, in group order;
    whole records pass through."""
    mine = shards[rank]
    if not mine.layouts:
        return mine.grads, mine.params
    grads, params = {}, {}
    for key, layout in mine.layouts.items():
        ranks = mine.groups[key]
        grads |= layout.unflatten(np.concatenate([shards[r].grads[key] for r in ranks]))
        params |= layout.unflatten(np.concatenate([shards[r].params[key] for r in ranks]))
    return grads, params
