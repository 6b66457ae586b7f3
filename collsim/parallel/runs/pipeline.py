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
>>> from collsim.parallel.runs.pipeline import run_pipeline, toy_batch, toy_model
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

import numpy as np

from ... import topology
from ...errors import ConfigError
from ...nn import Sequential, TransformerBlock, mse_loss
from ...runtime import Cluster
from ..batch import split_batch
from ..config import ParallelConfig
from ..mesh import train
from ..oracle import single_device_step
from ..pipeline.result import OpSpan, PipelineResult
from ..pipeline.schedules import Schedule, build_schedule
from ..pipeline.schedules._checks import check_times
from ..pipeline.stage import chunk_seconds

__all__ = [
    "run_pipeline",
    "pipeline_step",
    "toy_pipeline",
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

    The pipeline-only case of the mesh trainer (:func:`collsim.parallel.mesh.train` with
    ``ParallelConfig(pp=p, microbatches=m, vpp=v, schedule=schedule)``).

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
        Stepped by every stage on its own parameters after the flush; the stepped parameters
        are written back into ``model``.
    cluster : Cluster, optional
        ``p`` ranks; stage ``s`` runs on rank ``s``. Default: a bidirectional ring of ``p``
        ranks with ``bandwidth`` and ``latency`` (free links by default: the compute bubble)
        and free layer FLOPs; on a cluster of your own the layers' FLOPs at its
        ``compute_rate`` are charged too, before each pass's own time.
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
    config = ParallelConfig(
        pp=p, microbatches=m, vpp=v, schedule=schedule, t_f=t_f, t_b=t_b, t_w=t_w
    )
    check_times(*config.pass_times)  # a bubble needs passes that take time, even at p = 1
    if not isinstance(model, Sequential):
        raise ConfigError(
            f"run_pipeline needs a collsim.nn.Sequential to cut into stages, got "
            f"{type(model).__name__}; wrap the layers: Sequential(*layers)"
        )
    if cluster is None:
        graph = topology.bidirectional_ring(p, bandwidth=bandwidth, latency=latency)
        cluster = Cluster(graph, compute_rate=float("inf"))
    if cluster.size != p:
        raise ConfigError(
            f"the cluster has {cluster.size} ranks but the schedule has p={p} stages; "
            f"give a cluster of exactly {p} ranks (stage s runs on rank s)"
        )
    run = train(
        model,
        [(x, target)],
        config,
        cluster=cluster,
        loss=loss,
        optimizer=optimizer,
        keep_io=False,
        check=check,
        rtol=rtol,
        atol=atol,
    )
    if optimizer is not None:  # the documented effect: the stages stepped the model's arrays
        for name, array in model.params.items():
            array[...] = run.params[name]
    result = run.pipelines[(0, 0)]
    result.match, result.max_error = run.match, run.max_error
    return result


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
    t_f=1e-3,
    t_b=None,
    t_w=None,
    **options,
):
    """Build the schedule, a `toy_model` and a `toy_batch`, and run one step.

    ``layers`` defaults to ``stages * virtual`` (one per chunk); the rest of ``options`` go
    to :func:`run_pipeline`.

    >>> pipeline_step("zb-h1", stages=4, microbatches=8).formula_bubble_fraction()  # 3/27
    0.1111...
    """
    config = ParallelConfig(
        pp=stages, microbatches=microbatches, vpp=virtual, schedule=name, t_f=t_f, t_b=t_b, t_w=t_w
    )
    return toy_pipeline(config, layers, micro_batch_size, seq, hidden, heads, **options)


def toy_pipeline(config, layers=None, micro_batch_size=2, seq=4, hidden=8, heads=2, **options):
    """One step of the pipeline ``config`` describes (a `ParallelConfig` with ``dp = tp = 1``)
    on a `toy_model` of ``layers`` blocks (default ``pp * vpp``) and a `toy_batch`.

    >>> toy_pipeline(ParallelConfig(pp=2, microbatches=4)).bubble_fraction  # 1/5
    0.2
    """
    if config.dp != 1 or config.tp != 1:
        raise ConfigError(
            f"toy_pipeline runs a pipeline alone (dp = tp = 1), got dp={config.dp}, "
            f"tp={config.tp}; use collsim.parallel.mesh.train for a mesh"
        )
    schedule = config.schedule
    if not isinstance(schedule, Schedule):
        schedule = build_schedule(schedule, config.pp, config.microbatches, config.vpp)
    layers = config.pp * config.vpp if layers is None else layers
    model = toy_model(layers, hidden=hidden, heads=heads)
    x, target = toy_batch(config.microbatches * micro_batch_size, seq=seq, hidden=hidden)
    t_f, t_b, t_w = config.pass_times
    return run_pipeline(schedule, model, x, target, t_f=t_f, t_b=t_b, t_w=t_w, **options)
