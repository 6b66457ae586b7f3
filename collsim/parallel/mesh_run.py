"""What the mesh trainer returns: the steps in single-device shape, the measurements, the check.

:func:`assemble_run` puts the ranks' shards back together (TP shards by their ``shard_axes``,
the batch by its layouts, the stages in order), reads the pipelines and the bytes per mesh
dimension from the trace, and compares every step with the one-device oracle.
"""

from dataclasses import dataclass

import numpy as np

from .accounting import collective_bytes, overlap
from .config import ParallelConfig
from .context.layouts import gather_sequence
from .data.checkpoint import SavedState
from .data.sync import StepShards, whole
from .modules import flat_shard_axes, gather_params, replica_max_diff
from .oracle import compare
from .pipeline.result import measure_pipeline
from .pipeline.schedules import Schedule
from .pipeline.stage import StageOutcome
from .tensor import assemble

__all__ = ["RankStep", "WholeStep", "MeshStep", "MeshRun", "assemble_run"]


@dataclass(frozen=True)
class RankStep:
    """What one rank's program returns for one optimizer step: ``run.returns[rank][step]``."""

    outcome: StageOutcome  # the stage program's: loss, gradients, in-flight activations
    shards: StepShards  # gradients (averaged) and parameters (stepped): whole, or a ZeRO shard
    saved: SavedState | None = None  # after the last step of train(state_dict=...), else None


@dataclass(frozen=True)
class WholeStep:
    """One rank's step with its ZeRO shards put back together (its TP shards still apart)."""

    outcome: StageOutcome
    grads: dict  # whole over the data-parallel shard group, before the step
    params: dict  # whole over the data-parallel shard group, after the step
    buckets: list  # elements per gradient bucket of this rank


@dataclass
class MeshStep:
    """One optimizer step, every array in single-device shape."""

    loss: float  # mean over the whole global batch
    output: object  # the model's output for the whole batch (None unless kept)
    input_grad: object  # d loss / d input for the whole batch (None unless kept)
    grads: dict  # full gradients after the data-parallel average (before the step)
    params: dict  # full parameters after the step


@dataclass
class MeshRun:
    """What :func:`train` returns: the steps, the measurements and the check.

    ``pipelines[(d, t)]`` is the :class:`~collsim.parallel.pipeline.PipelineResult` of the
    pipeline at dp coordinate ``d`` and tp coordinate ``t`` (its trace is the whole run's;
    measured for single-step runs). ``bytes_by_group[(dimension, collective)]`` is bytes sent
    per rank along a mesh dimension, read from the trace. ``dp_replica_diff`` and
    ``tp_replica_diff`` are the largest differences between parameters that should be equal
    (0.0: in sync).
    """

    config: ParallelConfig
    mesh: object
    schedule: Schedule
    run: object
    steps: list
    pipelines: dict
    buckets: list  # elements per gradient bucket of rank 0 in step 1
    dp_replica_diff: float
    tp_replica_diff: float
    bytes_by_group: dict
    overlap: list  # per rank: accounting.Overlap
    saved: list = None  # per rank: the SavedState of train(state_dict=...), or None
    match: object = None  # every step's gradients and parameters equal one device's
    max_error: float = float("nan")

    @property
    def trace(self):
        return self.run.trace

    @property
    def time(self):
        """Simulated seconds of the whole run."""
        return self.run.time

    @property
    def loss(self):
        return self.steps[-1].loss

    @property
    def grads(self):
        return self.steps[-1].grads

    @property
    def params(self):
        return self.steps[-1].params


def assemble_run(config, mesh, sched, run, setups, n_steps, plan, reference, rtol, atol):
    """Full arrays from the shards, the pipelines' measurements and the one-device check."""
    pp, dp, cp, tp = config.pp, config.dp, config.cp, config.tp
    grid4 = mesh.grid.reshape(pp, dp, cp, tp)  # [pp, dp, cp, tp] -> rank
    grid = grid4[:, :, 0, :]  # [pp, dp, tp]: cp ranks hold the same parameters
    axes = {}
    for s in range(pp):
        for units in setups[int(grid[s, 0, 0])].chunks:
            axes |= flat_shard_axes([(p, getattr(u, "unit", u)) for p, u in units])
    wholes = _whole_steps(run.returns, n_steps)
    steps, keep = [], plan.keep_io
    for i in range(n_steps):
        rec = [per_step[i] for per_step in wholes]  # per rank
        last = [rec[int(r)].outcome for r in grid4[pp - 1].ravel()]  # the last stage's

        def whole(stage, field, layout, scale=1.0, rec=rec):
            """The whole batch from a stage's ranks: tp parts, then cp tokens, then dp rows."""
            rows = []
            for replica in grid4[stage]:  # (cp, tp)
                tokens = []
                for row in replica:
                    outcomes = [rec[int(r)].outcome for r in row]
                    parts = [
                        np.concatenate([getattr(o, field)[mb] for mb in sorted(getattr(o, field))])
                        for o in outcomes
                    ]
                    tokens.append(assemble(parts, layout))
                rows.append(tokens[0] if cp == 1 else gather_sequence(tokens, config.cp_layout))
            return np.concatenate(rows, axis=0) * scale

        replica0 = [int(r) for s in range(pp) for r in grid[s, 0, :]]
        grads, params = (
            _gather_experts(
                _gather(grid, [getattr(rec[r], field) for r in range(mesh.size)], axes, replica0),
                [getattr(rec[r], field) for r in range(mesh.size)],
                grid4,
                setups,
            )
            for field in ("grads", "params")
        )
        steps.append(
            MeshStep(
                loss=float(np.mean([o.loss for o in last])),  # every rank holds as many tokens
                output=whole(pp - 1, "outputs", plan.out_layout) if keep else None,
                input_grad=whole(0, "input_grads", plan.in_layout, 1 / (dp * cp)) if keep else None,
                grads=grads,
                params=params,
            )
        )
    final = [wholes[r][-1].params for r in range(mesh.size)]
    experts = set().union(*(setup.expert_names for setup in setups))
    replicated = [k for k, a in axes.items() if a is None and k not in experts]
    result = MeshRun(
        config=config,
        mesh=mesh,
        schedule=sched,
        run=run,
        steps=steps,
        pipelines=_pipelines(sched, config, run, wholes, grid4) if n_steps == 1 else {},
        buckets=wholes[0][0].buckets,
        dp_replica_diff=_data_replica_diff(grid4, final, setups),
        tp_replica_diff=_replica_diff(grid, final, "tp", replicated),
        bytes_by_group=collective_bytes(run.trace, mesh.size, mesh),
        saved=[per_step[-1].saved for per_step in run.returns],
        overlap=overlap(run.trace, mesh.size),
    )
    if reference is not None:
        stepped = setups[0].optimizer is not None
        checks = [
            compare(step.grads, step.params if stepped else None, ref, rtol, atol)
            for step, ref in zip(steps, reference)
        ]
        result.match = all(ok for ok, _ in checks)
        result.max_error = max(error for _, error in checks)
    return result


def _gather_experts(full, per_rank, grid4, setups):
    """``full`` with every MoE expert stack put together from the first ranks of each
    stage's ep group, experts in ep-rank order, each expert's columns (and ``w_down``'s
    rows) from its etp group in etp-rank order."""
    for s in range(grid4.shape[0]):
        first = setups[int(grid4[s].ravel()[0])]
        for name in first.expert_names:
            stacks = []
            for holder in first.experts.ep.ranks:
                etp = setups[holder].experts.etp.ranks
                axis = 1 if name.endswith("w_down") else 2  # (E, f, d) rows, (E, d, f) columns
                stacks.append(np.concatenate([per_rank[r][name] for r in etp], axis=axis))
            full[name] = np.concatenate(stacks)
    return full


def _data_replica_diff(grid4, final, setups):
    """Largest difference between copies over dp x cp: of the whole replicas' dense
    parameters, and of each expert slice over its expert-data-parallel group."""
    pp, dp, cp, tp = grid4.shape
    experts = set().union(*(s.expert_names for s in setups))
    dense = sorted(set().union(*final) - experts)
    worst = _replica_diff(grid4.reshape(pp, dp * cp, tp), final, "dp", dense)
    for setup in setups:
        dicts = [final[r] for r in setup.experts.edp.ranks]
        worst = max(worst, replica_max_diff(dicts, sorted(setup.expert_names)))
    return worst


def _replica_diff(grid, params, along, names=None):
    """Largest difference between the parameters of ranks that differ only ``along`` one
    dimension ("dp": whole replicas; "tp": the ``names`` every TP rank holds whole)."""
    pp, dp, tp = grid.shape
    if along == "dp":
        groups = [grid[s, :, t] for s in range(pp) for t in range(tp)]
    else:
        groups = [grid[s, d, :] for s in range(pp) for d in range(dp)]
    worst = 0.0
    for ranks in groups:
        dicts = [params[int(r)] for r in ranks]
        held = None if names is None else [n for n in names if n in dicts[0]]
        worst = max(worst, replica_max_diff(dicts, held))
    return worst


def _gather(grid, per_rank, axes, replica0):
    """Full arrays from replica 0's TP shards, stage by stage."""
    full = {}
    for s in range(grid.shape[0]):
        group = [int(r) for r in grid[s, 0, :]]
        names = per_rank[group[0]]
        full |= gather_params([per_rank[r] for r in group], {k: axes[k] for k in names})
    return full


def _whole_steps(returned, n_steps):
    """Per rank and step a :class:`WholeStep` from the ranks' :class:`RankStep`: ZeRO shards
    are put back together from each flat parameter's shard group (the dense parameters'
    block of ``dp_shard`` data-parallel ranks, all of dp unless HSDP; the experts' edp
    shard group)."""
    out = [[None] * n_steps for _ in returned]
    for i in range(n_steps):
        shards = [per_step[i].shards for per_step in returned]
        for r, per_step in enumerate(returned):
            step = per_step[i]
            grads, params = whole(shards, r)
            out[r][i] = WholeStep(step.outcome, grads, params, step.shards.buckets)
    return out


def _pipelines(sched, config, run, wholes, grid4):
    """One :class:`PipelineResult` per (dp, tp) coordinate (per (dp, cp, tp) with context
    parallelism), read from the trace."""
    times = dict(zip(("t_f", "t_b", "t_w"), config.pass_times))
    pipelines = {}
    _, dp, cp, tp = grid4.shape
    for d in range(dp):
        for c in range(cp):
            for t in range(tp):
                stage_ranks = tuple(int(r) for r in grid4[:, d, c, t])
                key = (d, t) if cp == 1 else (d, c, t)
                pipelines[key] = _pipeline(sched, times, run, wholes, stage_ranks)
    return pipelines


def _pipeline(sched, times, run, wholes, stage_ranks):
    """The :class:`PipelineResult` of the stages on ``stage_ranks`` (step 1 of ``wholes``)."""
    outcomes = [wholes[r][0].outcome for r in stage_ranks]
    grads = {}
    for r in stage_ranks:
        grads |= wholes[r][0].grads
    return measure_pipeline(sched, times, run, outcomes, stage_ranks, grads)
