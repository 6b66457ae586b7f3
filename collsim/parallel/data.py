"""Data parallelism: shard the batch, all-reduce the gradients, step every replica alike.

The batch-64, dp=4 example: every rank holds the whole model and 16 samples,
computes ``g_r = grad L_r`` on them, and an all-reduce (sum, then divide by 4) leaves
every rank with ``(g_0 + g_1 + g_2 + g_3) / 4``, which is exactly the gradient of the
mean loss over all 64 samples.  Every rank then takes the same optimizer step, so the
replicas stay identical (bitwise: the ring all-reduce hands every rank the same sums).

Megatron-LM's batch rule, ``global_batch = micro_batch · dp · accumulation``: each rank
runs ``accumulation`` micro-batches of ``micro_batch`` samples, adding up their
gradients, and all-reduces once, after the last one (DDP's ``no_sync``).

The all-reduce is *bucketed* and *overlapped*, as PyTorch DDP does it: gradients are
packed, in the order backward produces them (last layer first), into buckets of about
``bucket_bytes``; each full bucket's all-reduce starts at once on the rank's
communication stream (``rank.start``) while backward goes on computing the earlier
layers.  Only what is still in flight when backward ends is *exposed*: the step waits
for it.  :func:`collsim.parallel.accounting.overlap` measures both from the trace.

============================  ============================================================
name                          what it is
============================  ============================================================
:func:`resolve_batch`         micro batch and accumulation from Megatron's rule, or a
                              ConfigError naming all four numbers (from ``batch``)
:func:`shard_rows`            rank ``index``'s rows of a batch (from ``batch``)
:class:`GradientBuckets`      DDP's reducer inside a rank program: ``add``, ``flush``, ``wait``
:func:`data_parallel_step`    one optimizer step of any units on one rank (a generator)
:func:`train_data_parallel`   a whole run on a cluster: :class:`DataParallelRun`
============================  ============================================================

Compute time is each layer's FLOPs at the cluster's ``compute_rate``; the optimizer step
itself is free.

Examples
--------
The batch-64, dp=4 example: 16 samples per rank; the gradient equals one device's.

>>> import numpy as np, collsim
>>> from collsim.nn import GELU, Linear, Sequential, mse_loss
>>> rng = np.random.default_rng(0)
>>> model = Sequential(Linear.init(8, 32, rng), GELU(), Linear.init(32, 8, rng))
>>> x, target = rng.uniform(-1, 1, (64, 8)), rng.uniform(-1, 1, (64, 8))
>>> run = train_data_parallel(collsim.Cluster(collsim.topology.switch(4)), model, [(x, target)])
>>> run.micro_batch, run.accumulation
(16, 1)
>>> y, ctx = model.forward(x)
>>> grads = model.backward(ctx, mse_loss(y, target)[1])[1]
>>> max(float(np.max(np.abs(run.steps[0]["grads"][k] - grads[k]))) for k in grads) < 1e-12
True
>>> P = sum(g.size for g in grads.values())  # 552 parameters
>>> run.bytes_by_collective["all_reduce"][0] == 2 * 3 / 4 * P * 8  # 2(K-1)/K·P·b
True
"""

import copy
from dataclasses import dataclass

import numpy as np

from .. import units as _units
from ..errors import ConfigError
from ..nn import SGD, mse_loss
from ..runtime.group import Group
from .accounting import collective_bytes, overlap
from .batch import resolve_batch, shard_rows
from .modules import flat_params, units_of

__all__ = [
    "resolve_batch",
    "shard_rows",
    "GradientBuckets",
    "data_parallel_step",
    "train_data_parallel",
    "DataParallelRun",
    "DEFAULT_BUCKET_BYTES",
]

DEFAULT_BUCKET_BYTES = 25 * 2**20  # PyTorch DDP's bucket_cap_mb=25


class GradientBuckets:
    """PyTorch DDP's reducer, inside a rank program: bucket gradients as backward produces
    them and all-reduce (average) each full bucket on the communication stream.

    Parameters
    ----------
    rank : Rank
    group : Group
        The data-parallel group: every rank in it must add the same names in the same order.
    bucket_bytes : int or str
        A bucket is launched once it holds at least this many bytes (``"25MiB"``).

    Use with ``yield from``: ``add(name, grad)`` (may launch a bucket), ``flush()``
    (launches what is left), ``wait()`` (returns ``{name: averaged gradient}``).
    """

    def __init__(self, rank, group, bucket_bytes=DEFAULT_BUCKET_BYTES, algorithm="ring"):
        self.rank, self.group, self.algorithm = rank, group, algorithm
        self.bucket_bytes = _units.parse_size(bucket_bytes)
        self._pending = []  # (name, grad) not yet launched
        self._launched = []  # (names and shapes, handle)

    @property
    def sizes(self):
        """Elements in each launched bucket, in launch order."""
        return [sum(int(np.prod(s)) for _, s in layout) for layout, _ in self._launched]

    def add(self, name, grad):
        self._pending.append((name, np.asarray(grad)))
        if sum(g.nbytes for _, g in self._pending) >= self.bucket_bytes:
            yield from self.flush()

    def flush(self):
        if not self._pending:
            return
        layout = [(name, g.shape) for name, g in self._pending]
        flat = np.concatenate([g.ravel() for _, g in self._pending])
        self._pending = []
        if self.group.size == 1:
            handle = None
            self._launched.append((layout, flat))
            return
        index = len(self._launched)
        task = self.rank.all_reduce(flat, group=self.group, algorithm=self.algorithm, op="avg")
        handle = yield self.rank.start(task, name=f"grad bucket {index}")
        self._launched.append((layout, handle))

    def wait(self):
        yield from self.flush()
        out = {}
        for layout, handle in self._launched:
            flat = handle if isinstance(handle, np.ndarray) else (yield self.rank.wait(handle))
            at = 0
            for name, shape in layout:
                size = int(np.prod(shape))
                out[name] = flat[at : at + size].reshape(shape)
                at += size
        return out


def data_parallel_step(rank, units, optimizer, micro_batches, group, loss_fn=mse_loss,
                       bucket_bytes=DEFAULT_BUCKET_BYTES, grad_scale=1.0):  # fmt: skip
    """One optimizer step of ``units`` on this rank (use with ``yield from``).

    Parameters
    ----------
    units : list of (prefix, rank module)
        This rank's model, e.g. from :func:`~collsim.parallel.modules.units_of`; any rank
        modules, tensor-parallel ones included (their TP communication runs on the main
        stream, the gradient all-reduce on the communication stream).
    micro_batches : list of (x, target)
        This rank's ``accumulation`` micro-batches.
    group : Group
        The data-parallel group: gradients are averaged over it.
    grad_scale : float
        Multiplies every micro-batch's loss gradient (besides ``1/accumulation``); e.g.
        ``1/tp`` when sequence parallelism splits the loss's tokens over the TP group.

    Returns a dict: ``loss`` (the mean of the micro-batches' losses), ``output`` (the
    micro-batches' outputs, concatenated), ``input_grad`` (the loss gradient with respect
    to the micro-batches' inputs, concatenated), ``grads`` (averaged over the group,
    before the step), ``params`` (copies, after the step) and ``buckets`` (elements per
    all-reduced bucket).
    """
    accumulation = len(micro_batches)
    params = flat_params(units)
    acc, losses, outputs, input_grads = {}, [], [], []
    buckets = GradientBuckets(rank, group, bucket_bytes)
    for i, (x, target) in enumerate(micro_batches):
        last = i == accumulation - 1
        ctxs = []
        for _, unit in units:
            x, ctx = yield from unit.forward(rank, x)
            ctxs.append(ctx)
        loss, dy = loss_fn(x, target)
        losses.append(float(loss))
        outputs.append(x)
        dy = dy * (grad_scale / accumulation)
        for (prefix, unit), ctx in zip(reversed(units), reversed(ctxs)):
            dy, grads = yield from unit.backward(rank, ctx, dy)
            for name in reversed(list(grads)):  # DDP fills buckets in reverse order
                key = f"{prefix}.{name}" if prefix else name
                acc[key] = acc[key] + grads[name] if key in acc else grads[name]
                if last:  # this gradient is final: into a bucket, maybe launch it
                    yield from buckets.add(key, acc[key])
        input_grads.append(dy / group.size)  # the local loss counts its rows dp times
    averaged = yield from buckets.wait()
    optimizer.step(params, averaged)
    return {
        "loss": float(np.mean(losses)),
        "output": np.concatenate(outputs, axis=0),
        "input_grad": np.concatenate(input_grads, axis=0),
        "grads": averaged,
        "params": {k: v.copy() for k, v in params.items()},  # after the step
        "buckets": buckets.sizes,
    }


@dataclass
class DataParallelRun:
    """What :func:`train_data_parallel` returns."""

    dp: int
    micro_batch: int
    accumulation: int
    steps: list  # per step: loss (global mean), output (full batch), grads (rank 0's)
    replicas: list  # per rank: {name: parameter} after the last step
    buckets: list  # elements per gradient bucket, in launch order (every step alike)
    result: object  # the cluster's RunResult: trace, stats, time
    bytes_by_collective: dict  # collective -> bytes sent per rank, whole run
    overlap: list  # per rank: accounting.Overlap

    @property
    def time(self):
        return self.result.time


def train_data_parallel(cluster, model, batches, dp=None, micro_batch=None, accumulation=None,
                        loss_fn=mse_loss, optimizer=None, bucket_bytes=DEFAULT_BUCKET_BYTES,
                        group=None):  # fmt: skip
    """Train ``model`` data-parallel on ``cluster`` for one step per ``(x, target)`` batch.

    Every rank of ``group`` (default: all ranks, ``dp`` of them) trains its own copy of
    ``model`` (the model passed in is not changed) with its own copy of ``optimizer``
    (default ``SGD(lr=0.1)``).  Rank ``i`` of the group takes rows ``i·B/dp ..`` of every
    batch, in ``accumulation`` micro-batches of ``micro_batch`` rows.
    """
    group = Group.of(group, cluster.size)
    dp = group.size if dp is None else dp
    if dp != group.size:
        raise ConfigError(f"dp={dp} but the data-parallel group has {group.size} ranks")
    global_batch = int(np.shape(batches[0][0])[0])
    micro, accum = resolve_batch(global_batch, dp, micro_batch, accumulation)
    optimizer = SGD(lr=0.1) if optimizer is None else optimizer

    def program(rank):
        if rank.id not in group:
            return None
        index = group.index(rank.id)
        units = units_of(copy.deepcopy(model))
        opt = copy.deepcopy(optimizer)
        records = []
        for x, target in batches:
            xs, ts = shard_rows(x, dp, index), shard_rows(target, dp, index)
            micro_batches = [(xs[m * micro : (m + 1) * micro], ts[m * micro : (m + 1) * micro])
                             for m in range(accum)]  # fmt: skip
            record = yield from data_parallel_step(
                rank, units, opt, micro_batches, group, loss_fn, bucket_bytes
            )
            records.append(record)
        return records, {k: v.copy() for k, v in flat_params(units).items()}

    result = cluster.run(program)
    per_rank = [result.returns[r] for r in group.ranks]
    steps = []
    for s in range(len(batches)):
        records = [records[s] for records, _ in per_rank]
        steps.append({
            "loss": float(np.mean([rec["loss"] for rec in records])),
            "output": np.concatenate([rec["output"] for rec in records], axis=0),
            "grads": records[0]["grads"],
            "rank_grads": [rec["grads"] for rec in records],
        })  # fmt: skip
    return DataParallelRun(
        dp=dp,
        micro_batch=micro,
        accumulation=accum,
        steps=steps,
        replicas=[params for _, params in per_rank],
        buckets=per_rank[0][0][0]["buckets"] if batches else [],
        result=result,
        bytes_by_collective=collective_bytes(result.trace, cluster.size),
        overlap=overlap(result.trace, cluster.size),
    )
