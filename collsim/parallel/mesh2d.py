"""Data parallel × tensor parallel on a 2-D device mesh (the dp × tp grid).

In a mesh of shape ``(dp, tp)`` rank ``i·tp + j`` sits at ``(dp=i, tp=j)``.  The ranks
that share a dp index form one TP group, one model replica split ``tp`` ways; the ranks
that share a tp index form one DP group, the ``dp`` copies of one shard.  Activations
move along ``tp`` only (the TP layers' ``f``/``g`` on the main stream); gradients move
along ``dp`` only (bucketed all-reduce on the communication stream, overlapping
backward), each DP group averaging the shard its members share.

:func:`train_mesh` trains any tensor-parallel rank modules this way and gathers what
every rank computed back into single-device shapes for checking: the outputs, the
gradient of the input, the parameter gradients and the parameters.  With ``tp = 1`` it
is plain data parallelism, with ``dp = 1`` plain tensor parallelism.

Activation layouts (``in_layout``, ``out_layout``): ``"full"`` every TP rank holds all of
it; ``"seq"`` TP rank ``j`` holds tokens ``j·S/t ..`` (axis 1, sequence parallelism);
``"last"`` TP rank ``j`` holds columns ``j·n/t ..`` of the last axis (the input of a
row-parallel layer, the output of a column-parallel one that does not gather).

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.nn import TransformerBlock
>>> from collsim.parallel.tensor.attention import ParallelTransformerBlock
>>> from collsim.runtime.group import DeviceMesh
>>> rng = np.random.default_rng(0)
>>> block = TransformerBlock.init(8, 2, rng)
>>> x, target = rng.uniform(-1, 1, (4, 3, 8)), rng.uniform(-1, 1, (4, 3, 8))
>>> mesh = DeviceMesh((2, 2), ("dp", "tp"))
>>> run = train_mesh(collsim.Cluster(collsim.topology.switch(4)), mesh,
...                  lambda g, j: [("", ParallelTransformerBlock.from_full(block, g, j))],
...                  [(x, target)])
>>> sorted(run.bytes_by_group)  # activations along tp, gradients along dp
[('dp', 'all_reduce'), ('tp', 'all_reduce')]
>>> run.bytes_by_group[("tp", "all_reduce")][0]  # 4 × 2(t-1)/t × (B/dp)·S·H·8 B = 4 × 384
1536
"""

import copy
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from ..nn import SGD, mse_loss
from .accounting import collective_bytes, overlap
from .data import DEFAULT_BUCKET_BYTES, data_parallel_step, resolve_batch, shard_rows
from .modules import flat_params, flat_shard_axes, gather_params, replica_max_diff
from .tensor import check_tp, split_along

__all__ = ["train_mesh", "MeshRun", "LAYOUTS", "local_part", "assemble"]

LAYOUTS = ("full", "seq", "last")


def local_part(x, layout, group, tp_rank):
    """This TP rank's part of an activation in ``layout``."""
    if layout == "full" or group.size == 1:
        return x
    if layout == "seq":
        check_tp(group.size, seq=np.shape(x)[1], sequence_parallel=True)
        return split_along(x, group, tp_rank, 1)
    return split_along(x, group, tp_rank, -1)


def assemble(parts, layout):
    """The full activation from the TP ranks' parts, in group order."""
    if layout == "full":
        return parts[0]
    return np.concatenate(parts, axis=1 if layout == "seq" else -1)


@dataclass
class MeshRun:
    """What :func:`train_mesh` returns; every array is in single-device shape."""

    dp: int
    tp: int
    micro_batch: int
    accumulation: int
    steps: list  # per step: loss, output, input_grad, grads, params after (DP replica 0)
    params: dict  # full parameters after the last step (dp index 0)
    dp_replica_diff: float  # max |difference| of any parameter between DP replicas
    tp_replica_diff: float  # ... of any replicated parameter between the ranks of a TP group
    buckets: list  # elements per gradient bucket of rank 0
    result: object  # the cluster's RunResult
    bytes_by_group: dict  # ("dp" | "tp", collective) -> bytes sent per rank, whole run
    overlap: list  # per rank: accounting.Overlap

    @property
    def time(self):
        return self.result.time


def train_mesh(cluster, mesh, make_units, batches, in_layout="full", out_layout="full",
               micro_batch=None, accumulation=None, loss_fn=mse_loss, optimizer=None,
               bucket_bytes=DEFAULT_BUCKET_BYTES):  # fmt: skip
    """Train tensor-parallel rank modules data-parallel over a ``("dp", "tp")`` mesh.

    Parameters
    ----------
    mesh : DeviceMesh
        Dimensions named ``"dp"`` and ``"tp"``.
    make_units : callable ``(tp_group, tp_rank) -> [(prefix, rank module), ...]``
        Builds one rank's shard of the model (from a full model it must not change).
    batches : list of (x, target)
        One optimizer step per batch; ``x`` is the global batch (rows split over dp).
    in_layout, out_layout : {"full", "seq", "last"}
        How the model's input and output are split over a TP group (module docstring).
        The loss of a split output is the mean over the rank's part, its gradient
        scaled by ``1/tp``, so the sum over the group is the full mean's gradient.
    """
    for name, layout in (("in_layout", in_layout), ("out_layout", out_layout)):
        if layout not in LAYOUTS:
            raise ConfigError(f"{name} must be one of {LAYOUTS}, got {layout!r}")
    if tuple(mesh.names) != ("dp", "tp"):
        raise ConfigError(f"train_mesh needs a mesh with dimensions ('dp', 'tp'), got {mesh}")
    dp, tp = mesh.shape
    if mesh.size > cluster.size:
        raise ConfigError(
            f"mesh dp×tp = {dp}×{tp} = {mesh.size} ranks on a cluster of {cluster.size}"
        )
    micro, accum = resolve_batch(int(np.shape(batches[0][0])[0]), dp, micro_batch, accumulation)
    optimizer = SGD(lr=0.1) if optimizer is None else optimizer
    members = set(mesh.grid.ravel().tolist())
    grad_scale = 1.0 if out_layout == "full" else 1.0 / tp

    def program(rank):
        if rank.id not in members:
            return None
        tp_group, dp_group = mesh.group("tp", rank.id), mesh.group("dp", rank.id)
        j, i = tp_group.index(rank.id), dp_group.index(rank.id)
        units = make_units(tp_group, j)
        opt = copy.deepcopy(optimizer)
        records = []
        for x, target in batches:
            xs = local_part(shard_rows(x, dp, i), in_layout, tp_group, j)
            ts = local_part(shard_rows(target, dp, i), out_layout, tp_group, j)
            micro_batches = [(xs[m * micro : (m + 1) * micro], ts[m * micro : (m + 1) * micro])
                             for m in range(accum)]  # fmt: skip
            record = yield from data_parallel_step(
                rank, units, opt, micro_batches, dp_group, loss_fn, bucket_bytes, grad_scale
            )
            records.append(record)
        params = {k: v.copy() for k, v in flat_params(units).items()}
        return records, params, flat_shard_axes(units)

    result = cluster.run(program)
    returns = {r: result.returns[r] for r in members}
    axes = returns[mesh.grid[0, 0]][2]
    groups = [[returns[r] for r in row] for row in mesh.grid.tolist()]  # [dp][tp]
    steps = []
    for s in range(len(batches)):
        recs = [[g[0][s] for g in row] for row in groups]  # [dp][tp] records

        def full(key, layout, recs=recs):
            return np.concatenate([assemble([r[key] for r in row], layout) for row in recs], axis=0)

        steps.append({
            "loss": float(np.mean([r["loss"] for row in recs for r in row])),
            "output": full("output", out_layout),
            "input_grad": full("input_grad", in_layout),
            "grads": gather_params([r["grads"] for r in recs[0]], axes),
            "params": gather_params([r["params"] for r in recs[0]], axes),
        })  # fmt: skip
    replicated = [k for k, a in axes.items() if a is None]
    return MeshRun(
        dp=dp,
        tp=tp,
        micro_batch=micro,
        accumulation=accum,
        steps=steps,
        params=gather_params([g[1] for g in groups[0]], axes),
        dp_replica_diff=max(replica_max_diff([row[j][1] for row in groups]) for j in range(tp)),
        tp_replica_diff=max(replica_max_diff([g[1] for g in row], replicated) for row in groups),
        buckets=groups[0][0][0][0]["buckets"] if batches else [],
        result=result,
        bytes_by_group=collective_bytes(result.trace, cluster.size, mesh),
        overlap=overlap(result.trace, cluster.size),
    )
