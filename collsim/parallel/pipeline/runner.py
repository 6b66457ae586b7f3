"""Pipeline parallelism executed for real: a `Schedule` run on the virtual cluster.

Each pipeline stage is a rank holding a slice of a `Sequential` model (Megatron's layout,
:func:`~collsim.parallel.pipeline.schedules.split_layers`). The stages run the schedule's passes in
order with the real numpy forward and backward of their layers, send activations forward and
gradients backward to their neighbours through the network (interleaved: the last stage sends
to the first one too, from chunk ``c`` to chunk ``c + 1``), and each pass occupies its stage for
a configurable time:

=========  ===========================================================================
pass       simulated seconds (per stage; with interleaving each chunk's pass is 1/v)
=========  ===========================================================================
``F``      ``t_f``
``B``      ``t_b``: input gradient, what the previous stage waits for
``W``      ``t_w``: weight gradient (zero-bubble schedules run it on its own)
``BW``     ``t_b + t_w``: the whole backward, for schedules that do not split it
=========  ===========================================================================

Defaults ``t_f = t_b = t_w`` = 1 ms, so a backward costs twice a forward. A stage whose layer
count is off the even share takes proportionally longer (``split_layers`` warns about it).

The loss is the mean over the whole batch: each micro-batch's mean loss is divided by ``m``, so
the gradients accumulated over the micro-batches are exactly the one-device gradients, which the
result checks (``match``). With ``optimizer=`` every stage then steps its own parameters.

The bubble, busy/idle time and the spans of every pass are read from the trace; see
:mod:`collsim.parallel.pipeline.result` for the definitions. The in-flight activations are
what the stages really held: a (micro-batch, chunk) ``ctx`` from its ``F`` until its backward
(``BW``, or ``W`` for zero-bubble) is done.

Examples
--------
>>> from collsim.parallel.pipeline import run_pipeline, toy_batch, toy_model
>>> from collsim.parallel.pipeline.schedules import build_schedule
>>> sched = build_schedule("1f1b", p=4, m=8)
>>> model = toy_model(layers=4)
>>> x, target = toy_batch(batch=16)  # 8 micro-batches of 2 sequences (B, S, H) = (2, 4, 8)
>>> result = run_pipeline(sched, model, x, target, t_f=1e-3)
>>> round(result.bubble_fraction, 12), round(result.formula_bubble_fraction(), 12)  # 3/11
(0.272727272727, 0.272727272727)
>>> result.peak_inflight, result.match
((4, 3, 2, 1), True)
>>> round(result.step_time, 9)  # (m + p - 1)(t_f + t_b + t_w)
0.033
"""

import copy

import numpy as np

from ... import topology
from ...errors import ConfigError
from ...nn import Sequential, TransformerBlock, mse_loss
from ...runtime import Cluster
from .result import OpSpan, PipelineResult, op_spans
from .schedules import build_schedule, split_layers
from .schedules._checks import check_times
from .stage import StageJob, stage_program

__all__ = [
    "run_pipeline",
    "pipeline_step",
    "PipelineResult",
    "OpSpan",
    "single_device_step",
    "split_batch",
    "chunk_seconds",
    "toy_model",
    "toy_batch",
]


def run_pipeline(
    schedule,
    model,
    x,
    target,
    *,
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
    """Run one training step of ``model`` on ``x`` with ``schedule``; return a `PipelineResult`.

    Parameters
    ----------
    schedule : Schedule
        From :func:`~collsim.parallel.pipeline.schedules.build_schedule`; ``p`` stages, ``m``
        micro-batches, ``v`` chunks per stage.
    model : Sequential
        Split into ``p * v`` chunks of consecutive layers; at least ``p * v`` layers.
    x, target : array
        The whole batch; its first axis is split into ``m`` equal micro-batches.
    t_f, t_b, t_w : float
        Seconds of one micro-batch's forward, input-gradient and weight-gradient pass on one
        whole stage; ``t_b`` and ``t_w`` default to ``t_f``.
    loss : callable
        ``loss(pred, target) -> (loss, dpred)``, mean-reduced (:func:`~collsim.nn.mse_loss`).
    optimizer : SGD or Adam, optional
        Stepped by every stage on its own parameters after the flush (in place on ``model``).
    cluster : Cluster, optional
        ``p`` ranks; stage ``s`` runs on rank ``s``. Default: a bidirectional ring of ``p``
        ranks with ``bandwidth`` and ``latency`` (free links by default: the compute bubble).
    check : bool
        Compare gradients (and updated parameters) with one device, within ``rtol``/``atol``.
        Summation order differs (micro-batch by micro-batch), so results agree to rounding,
        about 1e-15 in float64. Adam scales a gradient by ``1 / (|g| + eps)``: where the true
        gradient is exactly 0 (the attention key bias) it turns that rounding into
        ``lr * 1e-16 / eps``, which can exceed ``atol`` with the default ``eps=1e-8``.

    Returns
    -------
    PipelineResult
        ``.trace``, ``.spans`` (every pass with its start and end), ``.bubble_time``,
        ``.bubble_fraction``, ``.peak_inflight``, ``.grads``, ``.match``; ``.to_dict()``.

    Raises
    ------
    ConfigError
        Fewer layers than ``p * v``, interleaved layers that do not divide into ``p * v``
        chunks, a batch that does not split into ``m`` equal micro-batches, bad times, or a
        cluster whose size is not ``p``.
    """
    p, m, v = schedule.stages, schedule.microbatches, schedule.virtual
    t_b = t_f if t_b is None else t_b
    t_w = t_f if t_w is None else t_w
    check_times(t_f, t_b, t_w)
    if not isinstance(model, Sequential):
        raise ConfigError(
            f"run_pipeline needs a collsim.nn.Sequential to cut into stages, got "
            f"{type(model).__name__}; wrap the layers: Sequential(*layers)"
        )
    if cluster is None:
        cluster = Cluster(topology.bidirectional_ring(p, bandwidth=bandwidth, latency=latency))
    if cluster.size != p:
        raise ConfigError(
            f"the cluster has {cluster.size} ranks but the schedule has p={p} stages; "
            f"give a cluster of exactly {p} ranks (stage s runs on rank s)"
        )
    inputs, targets = split_batch(x, m), split_batch(target, m)
    layout = split_layers(len(model), p, v)  # raises on too few layers, warns on imbalance
    seconds = chunk_seconds(layout, len(model), t_f, t_b, t_w)
    reference = _reference(model, x, target, loss, optimizer) if check else None
    stage_ranks = tuple(range(p))
    jobs = [
        StageJob(
            schedule=schedule,
            stage=s,
            pp_ranks=stage_ranks,
            chunks=tuple(model[r.start : r.stop] for r in layout[s]),
            inputs=inputs,
            targets=targets,
            seconds=seconds[s],
            loss=loss,
            show_chunk=v > 1,
        )
        for s in range(p)
    ]
    run = cluster.run(_pipeline_program, jobs, optimizer)
    result = _result(schedule, {"t_f": t_f, "t_b": t_b, "t_w": t_w}, run, run.returns, stage_ranks)
    if reference is not None:
        _check(result, model, reference, optimizer is not None, rtol, atol)
    return result


def _pipeline_program(rank, jobs, optimizer):
    job = jobs[rank.id]
    outcome = yield from stage_program(rank, job)
    if optimizer is not None:  # after the flush: no micro-batch still needs the old weights
        optimizer.step(stage_params(job.chunks), outcome.grads)
    return outcome


def stage_params(chunks):
    """Name -> array of every parameter a stage's chunks hold."""
    params = {}
    for chunk in chunks:
        params.update(chunk.params)
    return params


def _result(schedule, times, run, outcomes, stage_ranks):
    """Assemble a `PipelineResult` from the run's trace and the stages' outcomes."""
    spans = op_spans(schedule, run.trace, stage_ranks)
    step_start = min((s.start for s in spans), default=0.0)
    step_end = max((s.end for s in spans), default=0.0)
    busy = [0.0] * schedule.stages
    for span in spans:
        busy[span.stage] += span.end - span.start
    grads = {}
    for outcome in outcomes:
        grads.update(outcome.grads)
    return PipelineResult(
        schedule=schedule,
        times=times,
        run=run,
        spans=spans,
        step_start=step_start,
        step_end=step_end,
        busy_time=tuple(busy),
        idle_time=tuple((step_end - step_start) - b for b in busy),
        peak_inflight=tuple(o.peak_inflight for o in outcomes),
        peak_activation_bytes=tuple(o.peak_activation_bytes for o in outcomes),
        inflight=tuple(o.inflight for o in outcomes),
        loss=sum(o.loss for o in outcomes),
        grads=grads,
        stage_ranks=stage_ranks,
    )


def chunk_seconds(layout, n_layers, t_f, t_b, t_w):
    """``seconds[stage][kind][chunk]``: each pass's time, scaled by the chunk's layer share.

    A chunk holding the even share ``n_layers / (p v)`` of the layers takes exactly ``t / v``.
    """
    p, v = len(layout), len(layout[0])
    per_stage = {"F": t_f, "B": t_b, "W": t_w, "BW": t_b + t_w}
    seconds = []
    for chunks in layout:
        share = [len(r) * p * v / n_layers for r in chunks]  # 1.0 for an even split
        seconds.append({k: [t / v * s for s in share] for k, t in per_stage.items()})
    return seconds


def split_batch(array, m):
    """``m`` equal micro-batches along the first axis; ConfigError if they cannot be equal."""
    array = np.asarray(array)
    rows = array.shape[0] if array.ndim else 0
    if rows < m or rows % m:
        choices = [c for c in ((rows // m) * m, (rows // m + 1) * m) if c >= m]
        raise ConfigError(
            f"a batch of {rows} rows does not split into m={m} equal micro-batches; the mean "
            f"loss needs equal ones; nearest valid batch: {' or '.join(map(str, choices))}"
        )
    return np.split(array, m)


def single_device_step(model, x, target, loss=mse_loss, optimizer=None):
    """The oracle: one forward and backward of the whole batch on one device.

    Returns ``(loss, grads)``; with ``optimizer`` also steps ``model``'s parameters in place.
    """
    y, ctx = model.forward(x)
    value, dy = loss(y, target)
    _, grads = model.backward(ctx, dy)
    if optimizer is not None:
        optimizer.step(model.params, grads)
    return float(value), grads


def _reference(model, x, target, loss, optimizer):
    """One device's loss, gradients and (stepped) parameters, on copies."""
    model, optimizer = copy.deepcopy(model), copy.deepcopy(optimizer)
    value, grads = single_device_step(model, x, target, loss, optimizer)
    return value, grads, {k: a.copy() for k, a in model.params.items()}


def _check(result, model, reference, stepped, rtol, atol):
    """Set ``result.match`` and ``result.max_error`` against the one-device reference."""
    params = model.params if stepped else None
    result.match, result.max_error = compare(result.grads, params, reference, rtol, atol)


def compare(grads, params, reference, rtol, atol):
    """``(match, max_error)`` of gradients (and stepped ``params``, unless None) vs one device."""
    _, ref_grads, ref_params = reference
    pairs = [(grads.get(k), g) for k, g in ref_grads.items()]
    if params is not None:
        pairs += [(params.get(k), a) for k, a in ref_params.items()]
    errors = [np.max(np.abs(a - b), initial=0.0) for a, b in pairs if a is not None]
    match = set(grads) == set(ref_grads) and all(
        a is not None and np.allclose(a, b, rtol=rtol, atol=atol) for a, b in pairs
    )
    return bool(match), float(max(errors, default=0.0))


# -- a small model for the CLI, the examples and the tests ------------------------------


def toy_model(layers, hidden=8, heads=2, seed=0):
    """A `Sequential` of ``layers`` pre-LayerNorm transformer blocks, float64.

    >>> toy_model(layers=2)[0].attn.n_heads
    2
    """
    rng = np.random.default_rng(seed)
    blocks = [TransformerBlock.init(hidden, heads, rng, hidden=2 * hidden) for _ in range(layers)]
    return Sequential(*blocks)


def toy_batch(batch, seq=4, hidden=8, seed=1):
    """A random batch ``(x, target)``, both of shape ``(batch, seq, hidden)``."""
    rng = np.random.default_rng(seed)
    shape = (batch, seq, hidden)
    return rng.uniform(-1, 1, size=shape), rng.uniform(-1, 1, size=shape)


def pipeline_step(
    name,
    stages,
    microbatches,
    virtual=1,
    layers=None,
    micro_batch_size=2,
    seq=4,
    hidden=8,
    heads=2,
    **options,
):
    """Build the schedule, a `toy_model` and a `toy_batch`, and run one step.

    ``layers`` defaults to ``stages * virtual`` (one per chunk); the rest of ``options`` go
    to :func:`run_pipeline`.

    >>> pipeline_step("zb-h1", stages=4, microbatches=8).formula_bubble_fraction()  # 3/27
    0.1111...
    """
    schedule = build_schedule(name, stages, microbatches, virtual)
    layers = stages * virtual if layers is None else layers
    model = toy_model(layers, hidden=hidden, heads=heads)
    x, target = toy_batch(microbatches * micro_batch_size, seq=seq, hidden=hidden)
    return run_pipeline(schedule, model, x, target, **options)
