"""3-D parallelism: data x pipeline x tensor parallel on one device mesh, one training step.

The ranks form a :class:`~collsim.runtime.group.DeviceMesh` of shape ``(pp, dp, tp)`` with names
``("pp", "dp", "tp")``: TP innermost (neighbouring ranks share a tensor-parallel group, as they
share a node's NVLink), then DP, then PP, Megatron's order. Rank ``r`` is stage ``r // (dp tp)``,
replica ``(r // tp) % dp``, TP rank ``r % tp``.

* **TP** inside a stage: every transformer block is a
  :class:`~collsim.parallel.tensor.attention.ParallelTransformerBlock` (heads and MLP columns
  split, one all-reduce per sub-layer each way); other layers are replicated.
* **PP** between stages: each (dp, tp) coordinate is one pipeline that runs the schedule with
  the executor of :mod:`collsim.parallel.pipeline.stage`. An activation is replicated on the
  TP ranks of a stage, so each TP rank sends only **its 1/tp share** of it to the same TP rank
  of the next stage, and the receiving TP group all-gathers it (Megatron's scatter-gather of
  pipeline messages). Per micro-batch and stage boundary that is ``B S H b`` bytes forward and
  the same backward, in ``tp`` messages of ``B S H b / tp``.
* **DP** after the pipeline flush: every rank all-reduces its gradients (one flat buffer) over
  its dp group and divides by ``dp``, then steps its own optimizer (a copy of the one given).

The global batch is split evenly over the ``dp`` replicas, then into ``m`` micro-batches; the
loss is the mean over the whole batch, so the gradients gathered from the shards equal one
device's. Pass times are ``t_f``, ``t_b``, ``t_w`` per stage as in the pipeline executor; the
layers' own FLOPs are free unless the cluster's ``compute_rate`` is finite.

Examples
--------
>>> from collsim.parallel.pipeline import toy_batch, toy_model
>>> model = toy_model(layers=4, hidden=8, heads=2)
>>> x, target = toy_batch(batch=8)  # dp=2 replicas x m=2 micro-batches x 2 sequences
>>> result = run_3d(model, x, target, dp=2, pp=2, tp=2, microbatches=2)
>>> result.mesh, result.match
(DeviceMesh({'pp': 2, 'dp': 2, 'tp': 2}), True)
>>> sorted(result.pipelines)  # one pipeline per (dp, tp) coordinate
[(0, 0), (0, 1), (1, 0), (1, 1)]
"""

import copy
import math
from dataclasses import dataclass

import numpy as np

from .. import topology
from ..errors import ConfigError
from ..nn import MLP, TransformerBlock, mse_loss
from ..runtime import Cluster
from ..runtime.group import DeviceMesh
from .modules import Local, flat_params, flat_shard_axes, gather_params, replica_max_diff
from .pipeline.runner import _reference, _result, chunk_seconds, compare, split_batch
from .pipeline.schedules import build_schedule, split_layers
from .pipeline.schedules._checks import check_times
from .pipeline.stage import StageJob, stage_program
from .tensor import ParallelMLP
from .tensor.attention import ParallelTransformerBlock

__all__ = ["run_3d", "ThreeDResult", "shard_layer"]


@dataclass
class ThreeDResult:
    """One 3-D training step: the mesh, each pipeline's measurements, and the check.

    ``pipelines[(d, t)]`` is the `PipelineResult` of the pipeline at dp coordinate ``d`` and tp
    coordinate ``t`` (its trace is the whole run's). ``grads`` and ``params`` are full arrays
    gathered from the TP shards of replica 0 (``params`` after the optimizer step).
    ``replica_error`` is the largest difference between dp replicas' parameters (0: in sync).
    """

    mesh: DeviceMesh
    schedule: object
    run: object
    pipelines: dict
    loss: float
    grads: dict
    params: dict
    match: object = None
    max_error: float = float("nan")
    replica_error: float = 0.0

    @property
    def trace(self):
        return self.run.trace


def shard_layer(layer, group, tp_rank, name):
    """The rank module holding TP rank ``tp_rank``'s part of ``layer`` (a copy).

    TransformerBlock and MLP are split (tensor parallel); any other layer is replicated.
    """
    if isinstance(layer, TransformerBlock):
        return ParallelTransformerBlock.from_full(layer, group, tp_rank, name=name)
    if isinstance(layer, MLP):
        return ParallelMLP.from_full(layer, group, tp_rank)
    return Local(copy.deepcopy(layer), name=name)  # a copy: replicas must not share arrays


class _Chunk:
    """Rank modules run one after another, behind the call shape of an nn module.

    The stage program calls ``forward(x)`` / ``backward_input(ctx, dy)`` /
    ``backward_weight(ctx, dy)``; these are generators that ``yield from`` each unit's passes
    on ``rank`` (its collectives included). Gradient names are prefixed like the full model's.
    """

    def __init__(self, rank, units):
        self.rank, self.units = rank, units

    def forward(self, x):
        ctxs = []
        for _, unit in self.units:
            x, ctx = yield from unit.forward(self.rank, x)
            ctxs.append(ctx)
        return x, {"units": ctxs}

    def backward_input(self, ctx, dy):
        dys = []
        for (_, unit), unit_ctx in zip(reversed(self.units), reversed(ctx["units"])):
            dys.append(dy)  # the gradient at this unit's output, for its W
            dy = yield from unit.backward_input(self.rank, unit_ctx, dy)
        ctx["dys"] = dys[::-1]
        return dy

    def backward_weight(self, ctx, dy):
        grads = {}
        for (prefix, unit), unit_ctx, unit_dy in zip(self.units, ctx["units"], ctx.pop("dys")):
            part = yield from unit.backward_weight(self.rank, unit_ctx, unit_dy)
            grads |= {f"{prefix}.{k}": v for k, v in part.items()}
        return grads


def run_3d(
    model,
    x,
    target,
    *,
    dp=1,
    pp=1,
    tp=1,
    schedule="1f1b",
    microbatches=1,
    virtual=1,
    t_f=1e-3,
    t_b=None,
    t_w=None,
    loss=mse_loss,
    optimizer=None,
    cluster=None,
    bandwidth="inf",
    latency=0,
    check=True,
    rtol=1e-10,
    atol=1e-10,
):
    """One training step of ``model`` (a Sequential) on ``dp * pp * tp`` ranks.

    ``schedule``, ``microbatches`` and ``virtual`` choose the pipeline schedule; ``x`` and
    ``target`` are the global batch (first axis ``dp * m * micro-batch size``). The default
    cluster is a switch of ``dp * pp * tp`` ranks with ``bandwidth`` and ``latency`` and free
    layer FLOPs; see :func:`collsim.parallel.pipeline.run_pipeline` for the other parameters.
    ``model`` itself is not changed: every rank builds its own shard.
    """
    for what, value in (("dp", dp), ("pp", pp), ("tp", tp)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{what} must be an integer >= 1, got {value!r}")
    t_b = t_f if t_b is None else t_b
    t_w = t_f if t_w is None else t_w
    check_times(t_f, t_b, t_w)
    sched = build_schedule(schedule, pp, microbatches, virtual)
    mesh = DeviceMesh((pp, dp, tp), ("pp", "dp", "tp"))
    if cluster is None:
        graph = topology.switch(mesh.size, bandwidth=bandwidth, latency=latency)
        cluster = Cluster(graph, compute_rate=math.inf)
    if cluster.size != mesh.size:
        raise ConfigError(
            f"the cluster has {cluster.size} ranks but dp*pp*tp = {dp}*{pp}*{tp} = {mesh.size}; "
            f"give a cluster of exactly {mesh.size} ranks"
        )
    replicas = split_batch(x, dp), split_batch(target, dp)  # raises on uneven shards
    if replicas[0][0].shape[0] % microbatches:
        raise ConfigError(
            f"each of the dp={dp} replicas gets {replicas[0][0].shape[0]} rows, which do not "
            f"split into m={microbatches} equal micro-batches; make the global batch a "
            f"multiple of dp*m = {dp * microbatches}"
        )
    layout = split_layers(len(model), pp, virtual)
    seconds = chunk_seconds(layout, len(model), t_f, t_b, t_w)
    reference = _reference(model, x, target, loss, optimizer) if check else None
    ranks = [_rank_setup(mesh, r, model, layout, replicas, optimizer) for r in range(mesh.size)]
    args = (sched, seconds, loss)
    run = cluster.run(_program, ranks, *args)
    return _assemble(mesh, sched, run, ranks, (t_f, t_b, t_w), reference, rtol, atol)


def _rank_setup(mesh, r, model, layout, replicas, optimizer):
    """What rank ``r`` holds: its groups, its shards of its stage's layers, its data."""
    where = mesh.coords(r)
    stage, replica, tp_rank = where["pp"], where["dp"], where["tp"]
    tp_group = mesh.group("tp", r)
    chunks = [
        [(str(i), shard_layer(model[i], tp_group, tp_rank, str(i))) for i in layer_range]
        for layer_range in layout[stage]
    ]
    return {
        "stage": stage,
        "replica": replica,
        "tp_rank": tp_rank,
        "pp_ranks": mesh.group("pp", r).ranks,
        "dp_group": mesh.group("dp", r),
        "tp_group": tp_group,
        "units": chunks,
        "inputs": replicas[0][replica],
        "targets": replicas[1][replica],
        "optimizer": copy.deepcopy(optimizer),
    }


def _program(rank, ranks, sched, seconds, loss):
    me = ranks[rank.id]
    m, tp_group = sched.microbatches, me["tp_group"]
    inputs = split_batch(me["inputs"], m)
    scatter = gather = None
    if tp_group.size > 1:  # each TP rank sends its share; the receivers all-gather it
        shape, t = inputs[0].shape, tp_group.size

        def scatter(array):
            return np.array_split(array.reshape(-1), t)[me["tp_rank"]]

        def gather(rank, part):
            whole = yield from rank.all_gather(part, group=tp_group)
            return whole.reshape(shape)

    job = StageJob(
        schedule=sched,
        stage=me["stage"],
        pp_ranks=me["pp_ranks"],
        chunks=tuple(_Chunk(rank, units) for units in me["units"]),
        inputs=inputs,
        targets=split_batch(me["targets"], m),
        seconds=seconds[me["stage"]],
        loss=loss,
        show_chunk=sched.virtual > 1,
        scatter=scatter,
        gather=gather,
    )
    outcome = yield from stage_program(rank, job)
    grads, dp_group = outcome.grads, me["dp_group"]
    if dp_group.size > 1:  # average over the replicas: one flat all-reduce
        names = list(grads)
        flat = np.concatenate([grads[n].reshape(-1) for n in names])
        flat = (yield from rank.all_reduce(flat, group=dp_group)) / dp_group.size
        sizes = np.cumsum([grads[n].size for n in names])[:-1]
        grads = {n: g.reshape(grads[n].shape) for n, g in zip(names, np.split(flat, sizes))}
    if me["optimizer"] is not None:
        me["optimizer"].step(_params(me), grads)
    return outcome, grads


def _params(me):
    return flat_params([unit for chunk in me["units"] for unit in chunk])


def _assemble(mesh, sched, run, ranks, times, reference, rtol, atol):
    """Per-pipeline results, full gradients and parameters, and the one-device check."""
    pp, dp, tp = mesh.shape
    outcomes = [returned[0] for returned in run.returns]
    times = dict(zip(("t_f", "t_b", "t_w"), times))
    pipelines = {}
    for d in range(dp):
        for t in range(tp):
            stage_ranks = tuple(int(r) for r in mesh.grid[:, d, t])
            stage_outcomes = [outcomes[r] for r in stage_ranks]
            pipelines[(d, t)] = _result(sched, times, run, stage_outcomes, stage_ranks)
    grads, params = {}, {}
    for s in range(pp):
        group = [int(r) for r in mesh.grid[s, 0, :]]  # the TP shards of replica 0
        units = [unit for chunk in ranks[group[0]]["units"] for unit in chunk]
        axes = flat_shard_axes(units)
        grads |= gather_params([run.returns[r][1] for r in group], axes)
        params |= gather_params([_params(ranks[r]) for r in group], axes)
    replica_error = max(
        (
            replica_max_diff([_params(ranks[r]) for r in mesh.grid[s, :, t]])
            for s in range(pp)
            for t in range(tp)
        ),  # fmt: skip
        default=0.0,
    )
    losses = [outcomes[int(mesh.grid[pp - 1, d, 0])].loss for d in range(dp)]
    result = ThreeDResult(
        mesh=mesh,
        schedule=sched,
        run=run,
        pipelines=pipelines,
        loss=sum(losses) / dp,
        grads=grads,
        params=params,
        replica_error=replica_error,
    )
    if reference is not None:
        stepped = ranks[0]["optimizer"] is not None
        result.match, result.max_error = compare(
            grads, params if stepped else None, reference, rtol, atol
        )
    return result
