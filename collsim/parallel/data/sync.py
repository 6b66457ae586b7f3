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

from .buckets import GradientBuckets
from .sharded import ZeroChunkSync, optimizer_bytes_per_param

__all__ = ["gradient_sync", "StepShards", "DDPSync", "ZeroSync", "Zero3Sync", "whole"]


@dataclass
class StepShards:
    """One rank's gradients (averaged, before the step) and parameters (after it).

    ``layouts`` is empty when both are whole; otherwise ``grads[key]`` / ``params[key]`` are
    this rank's shards of ``layouts[key]`` (and the whole arrays it names are rebuilt from
    the data-parallel group's shards, in group order)."""

    grads: dict
    params: dict
    buckets: list = field(default_factory=list)
    layouts: dict = field(default_factory=dict)


def gradient_sync(rank, me, config, params):
    """The sync of ZeRO stage ``config.zero`` for rank ``rank`` (its setup ``me``)."""
    if config.zero == 0:
        return DDPSync(rank, me, config, params)
    if config.zero == 3:
        return Zero3Sync(rank, me, config, params)
    return ZeroSync(rank, me, config, params)


def expert_grad_share(grad, ep):
    """An expert's gradient on its rank, as its share of the edp group's average.

    The rank's experts received the tokens of all ``ep`` ranks of its ep group, each
    weighted by its own rank's 1/T, so the gradient is ep ranks' worth: averaging it over
    the edp group (the other copies of these experts) and dividing by ep gives the mean over
    every dp x cp rank.  Leaving out the division is the doubled gradient with ep = 2.
    """
    return grad / ep


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
        if name in self.me.expert_names:
            yield from self.expert_buckets.add(name, expert_grad_share(grad, self.me.ep))
        else:
            yield from self.buckets.add(name, grad)

    def begin(self):
        self.buckets = GradientBuckets(self.rank, self.me.dp_group, self.config.bucket_bytes)
        edp = self.me.edp_group or self.me.dp_group
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
    """ZeRO stages 1 and 2: optimizer state (and for stage 2 the gradients) sharded."""

    def __init__(self, rank, me, config, params):
        self.rank, self.me, self.config = rank, me, config
        self.syncs = []
        for units in me.chunks:
            chunk_params = {}
            for prefix, unit in units:
                chunk_params |= {
                    f"{prefix}.{k}" if prefix else k: v for k, v in unit.params.items()
                }
            key = f"shard {len(self.syncs)}"  # the optimizer's state name for this chunk
            self.syncs.append(
                ZeroChunkSync(
                    rank,
                    me.dp_group,
                    chunk_params,
                    config.zero,
                    me.optimizer,
                    key,
                    config.zero1_gradients,
                )
            )
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

    def hooks(self, chunk):
        sync = self.syncs[chunk]
        if self.config.zero == 2:  # each backward's gradients reduce-scattered at once
            return None, sync.reduce
        return None, None

    def begin(self):
        self.grads_block = self.rank.alloc("grads", "gradients", self.grad_elements)

    def finish(self, chunks):
        grads, params, layouts = {}, {}, {}
        for c, (sync, chunk) in enumerate(zip(self.syncs, chunks)):
            if self.config.zero == 1:  # the accumulated gradients, reduce-scattered once
                yield from sync.reduce(chunk.grads)
            grads[c] = yield from sync.step()
            params[c] = sync.master.copy()
            layouts[c] = sync.layout
        self.rank.free(self.grads_block)
        return StepShards(grads, params, [], layouts)


class Zero3Sync:
    """ZeRO stage 3 / FSDP: the units hold shards and sync their own gradients."""

    def __init__(self, rank, me, config, params):
        self.rank, self.me = rank, me
        self.units = [(p, u) for units in me.chunks for p, u in units]
        self.group = self.units[0][1].group if self.units else me.dp_group  # the shard group
        shard = sum(u.layout.shard_size for _, u in self.units)
        rank.alloc("params", "parameter shards", shard)
        k = optimizer_bytes_per_param(me.optimizer)
        if k:
            rank.alloc("optimizer", "optimizer state shard", shard, bytes_per_element=k)
        self.shard = shard
        self.params = params  # "<prefix>.shard" -> the unit's fp32 shard

    def master_shards(self):
        return {(f"{p}.shard" if p else "shard"): u.shard for p, u in self.units}

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
        keys = [f"{p}.shard" if p else "shard" for p, _ in self.units]
        layouts = {key: unit.layout.prefixed(p) for key, (p, unit) in zip(keys, self.units)}
        after = {key: self.params[key].copy() for key in keys}
        yield from ()
        return StepShards({k: grads[k] for k in keys}, after, [], layouts)


def whole(group_shards):
    """``(grads, params)``, whole, from the `StepShards` of one data-parallel group (in group
    order); whole records pass through."""
    first = group_shards[0]
    if not first.layouts:
        return first.grads, first.params
    grads, params = {}, {}
    for key, layout in first.layouts.items():
        grads |= layout.unflatten(np.concatenate([s.grads[key] for s in group_shards]))
        params |= layout.unflatten(np.concatenate([s.params[key] for s in group_shards]))
    return grads, params
