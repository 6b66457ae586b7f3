"""The mesh trainer: one training step loop for every combination of dp, tp and pp.

:func:`train` lays the ranks on a ``(pp, dp, tp)`` :class:`~collsim.runtime.group.RankGrid`
(:class:`~collsim.parallel.config.ParallelConfig` says how) and runs, on every rank:

* **TP** inside each layer: a transformer block becomes a
  :class:`~collsim.parallel.tensor.ParallelTransformerBlock` (heads and MLP columns split),
  an MLP a :class:`~collsim.parallel.tensor.ParallelMLP`; other layers are replicated.
  With ``sp`` the activations between them are split by tokens (sequence parallelism).
* **PP** between stages: each (dp, tp) coordinate is one pipeline running the schedule with
  :func:`~collsim.parallel.pipeline.stage_program`. With ``pp = 1`` that is one stage running
  its micro-batches one after another: gradient accumulation. A replicated activation is sent
  in ``tp`` shares, one per TP rank, and all-gathered on arrival (Megatron's scatter-gather).
* **DP** as PyTorch DDP does it: each chunk's gradient is final after its last weight pass of
  the step; it goes into a bucket then, and a full bucket's all-reduce (average) starts at
  once on the communication stream, overlapping the rest of the backward
  (:class:`~collsim.parallel.data.GradientBuckets`). Then every rank steps its optimizer.

The global batch is split evenly over the ``dp`` replicas, then into ``microbatches``; the
loss is the mean over the whole batch, so gradients gathered from the shards equal one
device's, which :class:`MeshRun` checks when the model is a `Sequential`.
What each rank holds (its groups and its shard of the model) is built by
:func:`~collsim.parallel.mesh_setup.rank_setup`.

Examples
--------
>>> from collsim.parallel.config import ParallelConfig
>>> from collsim.parallel.runs.pipeline import toy_batch, toy_model
>>> model = toy_model(layers=4, hidden=8, heads=2)
>>> x, target = toy_batch(batch=8)  # dp=2 replicas x m=2 micro-batches x 2 sequences
>>> run = train(model, [(x, target)], ParallelConfig(dp=2, pp=2, tp=2, microbatches=2))
>>> run.mesh, run.match
(RankGrid({'pp': 2, 'dp': 2, 'tp': 2}), True)
>>> sorted(run.pipelines)  # one pipeline per (dp, tp) coordinate
[(0, 0), (0, 1), (1, 0), (1, 1)]
>>> sorted(run.bytes_by_group)  # gradients along dp, activations along tp, stages along pp
[('dp', 'all_reduce'), ('pp', 'send'), ('tp', 'all_gather'), ('tp', 'all_reduce')]
"""

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .. import topology
from ..errors import ConfigError
from ..nn import Sequential, mse_loss
from ..runtime import Cluster
from .batch import shard_rows, split_batch
from .config import ParallelConfig
from .context.layouts import check_sequence, shard_sequence
from .data.checkpoint import check_state_dict, save_state
from .data.sync import gradient_sync
from .mesh_run import MeshRun, MeshStep, RankStep, assemble_run
from .mesh_setup import oracle_model, rank_setup, shard_layer
from .oracle import reference_steps
from .pipeline.chunk import ModelChunk
from .pipeline.schedules import Schedule, build_schedule, split_layers
from .pipeline.stage import StageJob, chunk_seconds, pipeline_messages, stage_program
from .tensor import LAYOUTS, local_part

__all__ = ["train", "MeshRun", "MeshStep", "shard_layer"]


def train(
    model,
    batches,
    config=None,
    *,
    cluster=None,
    loss=mse_loss,
    optimizer=None,
    in_layout=None,
    out_layout=None,
    keep_io=True,
    check=None,
    rtol=1e-10,
    atol=1e-10,
    bandwidth="inf",
    latency=0,
    state_dict=None,
):
    """Train ``model`` for one optimizer step per ``(x, target)`` of ``batches`` on the mesh.

    Parameters
    ----------
    model : Sequential or callable ``(tp_group, tp_rank) -> [(prefix, rank module), ...]``
        A `Sequential` is cut into ``pp·vpp`` chunks of consecutive layers, each layer
        sharded by :func:`shard_layer`; it is not changed. A callable builds one TP rank's
        units of the whole model (from a full model it must not change), cut the same way.
    batches : list of (x, target)
        Global batches; the first axis splits into ``dp`` replicas, then ``microbatches``.
    config : ParallelConfig
        dp, tp, pp, micro-batches, schedule, pass times, buckets (default: one rank).
    cluster : Cluster, optional
        Exactly ``pp·dp·tp`` ranks. Default: a switch with ``bandwidth`` and ``latency``
        whose layer FLOPs are free, so the time is the passes' ``t_f``/``t_b``/``t_w``.
    in_layout, out_layout : {"full", "seq", "last"}
        How the model's input and output are split over a TP group
        (:mod:`collsim.parallel.tensor.layouts`); default ``"seq"`` with ``sp``, else
        ``"full"``. The loss of a split output is the mean over the rank's part, its gradient
        scaled by ``1/tp``, so the sum over the group is the full mean's gradient.
    optimizer : SGD or Adam, optional
        Every rank steps its own copy after the gradient sync; None: no step.
    check : bool, optional
        Compare every step with one device (default: when ``model`` is a `Sequential`).
    state_dict : {"full", "sharded"}, optional
        With ZeRO (``zero >= 1``), save the training state after the last step
        (:mod:`collsim.parallel.data.checkpoint`); ``MeshRun.saved`` holds what each rank saved.
    """
    config = ParallelConfig() if config is None else config
    if not isinstance(config, ParallelConfig):
        raise ConfigError(f"config must be a ParallelConfig, got {type(config).__name__}")
    batches = _check_batches(batches)
    layout = "seq" if config.sp else "full"
    in_layout = layout if in_layout is None else in_layout
    out_layout = layout if out_layout is None else out_layout
    for name, value in (("in_layout", in_layout), ("out_layout", out_layout)):
        if value not in LAYOUTS:
            raise ConfigError(f"{name} must be one of {LAYOUTS}, got {value!r}")
    sequential = isinstance(model, Sequential)
    if not sequential and not callable(model):
        raise ConfigError(
            f"train needs a collsim.nn.Sequential or a callable (tp_group, tp_rank) -> units, "
            f"got {type(model).__name__}; wrap the layers: Sequential(*layers)"
        )
    check = sequential if check is None else check
    if state_dict is not None:
        check_state_dict(state_dict)
        if config.zero == 0:
            raise ConfigError(
                f"state_dict={state_dict!r} saves a sharded state: it needs zero >= 1, got "
                "zero=0 (with plain data parallelism every rank already holds the whole state)"
            )
    if check and not sequential:
        raise ConfigError("check=True needs a Sequential model: a callable has no one-device twin")
    sched = _schedule(config)
    mesh = config.mesh()
    cluster = _cluster(cluster, mesh, config, bandwidth, latency)
    for x, target in batches:  # raise on uneven shards before anything runs
        if config.cp > 1:
            check_sequence(np.shape(x)[1] if np.ndim(x) > 1 else 0, config.cp, config.cp_layout)
        for array in (x, target):
            split_batch(split_batch(array, config.dp)[0], config.microbatches)
    setups = [rank_setup(mesh, r, model, sequential, config, optimizer) for r in range(mesh.size)]
    if state_dict is not None and any(s.expert_names for s in setups):
        raise ConfigError(
            f"state_dict={state_dict!r} with MoE layers: the experts' state is sharded over "
            "their expert-data-parallel group, which the checkpoint does not save yet; "
            "nearest valid state_dict=None"
        )
    n_layers = setups[0].n_layers
    ranges = split_layers(n_layers, config.pp, config.vpp)
    seconds = chunk_seconds(ranges, n_layers, *config.pass_times)
    plan = _Plan(
        config,
        sched,
        seconds,
        pipeline_messages(sched),
        loss,
        in_layout,
        out_layout,
        keep_io,
        state_dict,
    )
    reference = None
    if check:  # one device, its MoE layers routing each rank's tokens as the rank does
        reference = reference_steps(oracle_model(model, config), batches, loss, optimizer)
    run = cluster.run(_program, setups, batches, plan)
    return assemble_run(config, mesh, sched, run, setups, len(batches), plan, reference, rtol, atol)


def _check_batches(batches):
    if not isinstance(batches, list | tuple) or not batches:
        raise ConfigError(f"batches must be a non-empty list of (x, target) pairs, got {batches!r}")
    out = []
    for i, pair in enumerate(batches):
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise ConfigError(f"batches[{i}] must be an (x, target) pair, got {pair!r}")
        out.append((np.asarray(pair[0]), np.asarray(pair[1])))
    return out


def _schedule(config):
    if isinstance(config.schedule, Schedule):
        return config.schedule
    return build_schedule(config.schedule, config.pp, config.microbatches, config.vpp)


def _cluster(cluster, mesh, config, bandwidth, latency):
    if cluster is None:
        graph = topology.switch(mesh.size, bandwidth=bandwidth, latency=latency)
        return Cluster(graph, compute_rate=math.inf)
    if cluster.size != mesh.size:
        dims = " x ".join(f"{k}={v}" for k, v in config.dims.items())
        raise ConfigError(
            f"the cluster has {cluster.size} ranks but the mesh {dims} needs {mesh.size}; "
            f"give a cluster of exactly {mesh.size} ranks"
        )
    return cluster


@dataclass(frozen=True)
class _Plan:
    """What every rank program shares: the config, the schedule and its derived tables."""

    config: ParallelConfig
    schedule: Schedule
    seconds: list
    messages: dict
    loss: object
    in_layout: str
    out_layout: str
    keep_io: bool
    state_dict: object  # None, or "full" / "sharded": save the state after the last step


def _program(rank, setups, batches, plan):
    me, config = setups[rank.id], plan.config
    m, tp_group = config.microbatches, me.tp_group
    scale = 1.0 if plan.out_layout == "full" else 1.0 / tp_group.size
    params = {}
    for units in me.chunks:
        params |= ModelChunk(rank, units).params
    sync = gradient_sync(rank, me, config, params)  # charges the model state to the tracker
    # one gather ahead of the current one: two in flight, FSDP's limit_all_gathers default
    prefetch = config.prefetch if config.max_inflight_gathers >= 2 else "none"
    records = []
    for x, target in batches:
        xs, ts = shard_rows(x, config.dp, me.replica), shard_rows(target, config.dp, me.replica)
        if config.cp > 1:  # this rank's tokens of every sample, in the cp layout
            xs, ts = (shard_sequence(a, config.cp, me.cp_rank, config.cp_layout) for a in (xs, ts))
        xs = local_part(xs, plan.in_layout, tp_group, me.tp_rank)
        ts = local_part(ts, plan.out_layout, tp_group, me.tp_rank)
        inputs = split_batch(xs, m)
        sync.begin()
        scatter, gather = _pipeline_shares(me, inputs[0].shape, plan)
        job = StageJob(
            schedule=plan.schedule,
            stage=me.stage,
            pp_ranks=me.pp_ranks,
            chunks=tuple(
                ModelChunk(
                    rank,
                    units,
                    *sync.hooks(c),
                    prefetch=prefetch,
                    recompute=config.recompute == "full",
                )
                for c, units in enumerate(me.chunks)
            ),
            inputs=inputs,
            targets=split_batch(ts, m),
            seconds=plan.seconds[me.stage],
            loss=plan.loss,
            messages=plan.messages,
            show_chunk=config.vpp > 1,
            loss_scale=scale,
            keep_io=plan.keep_io,
            scatter=scatter,
            gather=gather,
        )
        outcome = yield from stage_program(rank, job)
        records.append(RankStep(outcome, (yield from sync.finish(job.chunks))))
    if plan.state_dict is not None:  # after the last step: save the state, measured
        saved = yield from save_state(rank, sync, me.optimizer, sync.group, plan.state_dict)
        records[-1] = dataclasses.replace(records[-1], saved=saved)
    return records


def _pipeline_shares(me, shape, plan):
    """Megatron's scatter-gather: a replicated activation crosses a stage boundary as ``tp``
    shares, one per TP rank, all-gathered on arrival (``(None, None)``: sent whole)."""
    t = me.tp_group.size
    between = "seq" if plan.config.sp else plan.in_layout
    if t == 1 or plan.config.pp == 1 or between != "full":
        return None, None

    def scatter(array):
        return np.array_split(array.reshape(-1), t)[me.tp_rank]

    def gather(rank, part):
        whole = yield from rank.all_gather(part, group=me.tp_group)
        return whole.reshape(shape)

    return scatter, gather
