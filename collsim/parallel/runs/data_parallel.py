"""Data parallelism alone: the mesh trainer with ``dp`` and nothing else.

:func:`train_data_parallel` shards every batch over the ranks (Megatron-LM's batch rule,
``global_batch = micro_batch · dp · accumulation``: each rank runs ``accumulation``
micro-batches of ``micro_batch`` samples, adding up their gradients, and all-reduces once,
after the last one, as DDP's ``no_sync`` does) and returns a :class:`DataParallelRun`.

The all-reduce is *bucketed* and *overlapped*, as PyTorch DDP does it
(:class:`~collsim.parallel.data.buckets.GradientBuckets`): each full bucket's all-reduce
starts while backward goes on computing the earlier layers, and only what is still in
flight when backward ends is *exposed*. :func:`collsim.parallel.accounting.overlap`
measures both from the trace. The pieces it runs are in :mod:`collsim.parallel.data`.

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

from ... import units as _units
from ...errors import ConfigError
from ...nn import SGD, mse_loss
from ..accounting import collective_bytes
from ..batch import resolve_batch
from ..config import ParallelConfig
from ..data.buckets import DEFAULT_BUCKET_BYTES
from ..mesh import train
from ..modules import units_of

__all__ = ["train_data_parallel", "DataParallelRun"]


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


def train_data_parallel(
    cluster,
    model,
    batches,
    dp=None,
    micro_batch=None,
    accumulation=None,
    loss_fn=mse_loss,
    optimizer=None,
    bucket_bytes=DEFAULT_BUCKET_BYTES,
):
    """Train ``model`` data-parallel on every rank of ``cluster``, one step per batch.

    Every rank trains its own copy of ``model`` (the model passed in is not changed) with
    its own copy of ``optimizer`` (default ``SGD(lr=0.1)``).  Rank ``i`` takes rows
    ``i·B/dp ..`` of every batch, in ``accumulation`` micro-batches of ``micro_batch`` rows.
    This is the mesh trainer with ``dp`` alone (:func:`collsim.parallel.mesh.train` with
    ``ParallelConfig(dp=dp, microbatches=accumulation, t_f=0)``): compute time is each
    layer's FLOPs at the cluster's ``compute_rate``.
    """
    dp = cluster.size if dp is None else dp
    if dp != cluster.size:
        raise ConfigError(
            f"dp={dp} but the cluster has {cluster.size} ranks: data parallelism runs on every "
            f"rank; give a cluster of {dp} ranks or dp={cluster.size}"
        )
    if not isinstance(batches, list | tuple) or not batches:
        raise ConfigError(f"batches must be a non-empty list of (x, target) pairs, got {batches!r}")
    global_batch = int(np.shape(batches[0][0])[0])
    micro, accum = resolve_batch(global_batch, dp, micro_batch, accumulation)
    optimizer = SGD(lr=0.1) if optimizer is None else optimizer
    units_of(model)  # refuses what cannot be trained, before anything runs
    config = ParallelConfig(
        dp=dp, microbatches=accum, t_f=0, bucket_bytes=_units.parse_size(bucket_bytes)
    )
    run = train(
        lambda group, tp_rank: units_of(copy.deepcopy(model)),
        list(batches),
        config,
        cluster=cluster,
        loss=loss_fn,
        optimizer=optimizer,
    )
    returns = run.run.returns
    steps = []
    for s, step in enumerate(run.steps):
        steps.append(
            {
                "loss": step.loss,
                "output": step.output,
                "grads": step.grads,
                "rank_grads": [returns[r][s].shards.grads for r in range(dp)],
            }
        )
    return DataParallelRun(
        dp=dp,
        micro_batch=micro,
        accumulation=accum,
        steps=steps,
        replicas=[returns[r][-1].shards.params for r in range(dp)],
        buckets=run.buckets,
        result=run.run,
        bytes_by_collective=collective_bytes(run.trace, cluster.size),
        overlap=run.overlap,
    )
