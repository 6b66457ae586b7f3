"""Train a parallel scheme on the virtual cluster and on one device, side by side.

:func:`verify` builds a small model and data from a seed, trains it for a few SGD steps
twice -- once with plain numpy on "one device" (the oracle) and once with the scheme on
the cluster -- and compares, after every step, the outputs, the gradient of the input,
every parameter gradient and every parameter.  It also checks that data-parallel
replicas stay identical, and sets the bytes each rank sent next to the closed forms
(:func:`expected_bytes`).  ``collsim verify`` prints its :class:`VerifyReport`.

==================  ================================================================  =======
scheme              model and split                                                   layouts
==================  ================================================================  =======
``dp``              ``layers`` transformer blocks, batch split over dp ranks           -
``tp-column``       Linear hidden -> ffn, columns split, output all-gathered (Megatron)  full
``tp-row``          Linear ffn -> hidden, rows split, input already split              last
``tp-mlp``          Megatron MLP: column -> GELU -> row (f/g)                          full
``tp-attention``    multi-head attention, heads split                                  full
``sp``              ``layers`` transformer blocks, TP with sequence parallelism          seq
``dp-tp``           ``layers`` transformer blocks on a (dp, tp) mesh (``--sp`` for SP)  full
==================  ================================================================  =======

Inputs and targets are ``(batch, seq, features)`` arrays drawn uniformly from [-1, 1];
the loss is the mean squared error.  Everything is float64, so "match" means a relative
difference below :data:`TOLERANCE` (in practice ~1e-16).

Examples
--------
>>> report = verify("tp-mlp", tp=2, batch=4, hidden=8, seq=4, steps=2)
>>> report.match, report.max_abs_diff < 1e-12
(True, True)
>>> steps, per_step, ring = 2, 2, 2 * (2 - 1) / 2  # f and g; 2(t-1)/t
>>> report.bytes_by_group[("tp", "all_reduce")] == [steps * per_step * ring * 4 * 4 * 8 * 8] * 2
True
"""

import copy
import math
from dataclasses import dataclass, field

import numpy as np

from .. import topology as topo
from ..errors import ConfigError
from ..nn import MLP, SGD, Linear, MultiHeadAttention, Sequential, TransformerBlock, mse_loss
from ..parallel.data import DEFAULT_BUCKET_BYTES
from ..parallel.mesh2d import train_mesh
from ..parallel.modules import units_of
from ..parallel.tensor import ColumnParallelLinear, ParallelMLP, RowParallelLinear, check_tp
from ..parallel.tensor.attention import ParallelAttention, ParallelTransformerBlock
from ..runtime import Cluster
from ..runtime.group import DeviceMesh

__all__ = [
    "SCHEMES",
    "TOLERANCE",
    "LIMITS",
    "verify",
    "single_device",
    "expected_bytes",
    "estimate_memory",
    "model_shape",
    "check_verify_sizes",
    "VerifyReport",
]

SCHEMES = ("dp", "tp-column", "tp-row", "tp-mlp", "tp-attention", "sp", "dp-tp")
TOLERANCE = 1e-9  # relative: max |cluster - one device| / max |one device|, per array
BYTES = 8  # float64
# a check runs in seconds: more ranks, layers or steps than these teach nothing new
LIMITS = {"ranks": 64, "layers": 64, "steps": 100}


@dataclass
class Problem:
    """One scheme's full model, data, and how to shard it."""

    model: object  # the single-device nn module
    make_units: object  # (tp_group, tp_rank) -> [(prefix, rank module)]
    in_layout: str
    out_layout: str
    dp: int
    tp: int
    description: str


def _problem(scheme, rng, dp, tp, hidden, heads, ffn, seq, layers, sp):
    if scheme == "dp":
        model = Sequential(*(TransformerBlock.init(hidden, heads, rng, ffn) for _ in range(layers)))
        return Problem(model, lambda g, j: units_of(copy.deepcopy(model)), "full", "full", dp, 1,
                       f"{layers} transformer block(s)")  # fmt: skip
    tp_layers = {
        "tp-column": (lambda: Linear.init(hidden, ffn, rng), ColumnParallelLinear,
                      {"gather_output": True}, "full", f"Linear {hidden} -> {ffn}"),
        "tp-row": (lambda: Linear.init(ffn, hidden, rng), RowParallelLinear, {}, "last",
                   f"Linear {ffn} -> {hidden}"),
        "tp-mlp": (lambda: MLP.init(hidden, rng, hidden=ffn), ParallelMLP, {}, "full",
                   f"MLP {hidden} -> {ffn} -> {hidden}"),
        "tp-attention": (lambda: MultiHeadAttention.init(hidden, heads, rng), ParallelAttention,
                         {}, "full", f"attention, hidden {hidden}, {heads} heads"),
    }  # fmt: skip
    if scheme in tp_layers:
        init, cls, options, in_layout, what = tp_layers[scheme]
        model = init()

        def one_layer(g, j):
            return [("", cls.from_full(model, g, j, **options))]

        return Problem(model, one_layer, in_layout, "full", 1, tp, what)
    # sp, dp-tp: transformer blocks under TP (and SP)
    blocks = [TransformerBlock.init(hidden, heads, rng, ffn) for _ in range(layers)]

    def tp_blocks(g, j):
        return [(str(i), ParallelTransformerBlock.from_full(b, g, j, sp, name=f"block{i}"))
                for i, b in enumerate(blocks)]  # fmt: skip

    layout = "seq" if sp else "full"
    what = f"{layers} transformer block(s), {'sequence' if sp else 'tensor'} parallel"
    return Problem(Sequential(*blocks), tp_blocks, layout, layout, dp, tp, what)


def single_device(model, batches, optimizer, loss_fn=mse_loss):
    """The oracle: train a copy of ``model`` on the full batches with numpy alone.

    Returns one dict per step: ``loss``, ``output``, ``input_grad``, ``grads`` (before
    the step) and ``params`` (after it).
    """
    model, optimizer = copy.deepcopy(model), copy.deepcopy(optimizer)
    steps = []
    for x, target in batches:
        y, ctx = model.forward(x)
        loss, dy = loss_fn(y, target)
        dx, grads = model.backward(ctx, dy)
        optimizer.step(model.params, grads)
        params = {k: v.copy() for k, v in model.params.items()}
        steps.append({"loss": float(loss), "output": y, "input_grad": dx, "grads": grads,
                      "params": params})  # fmt: skip
    return steps


def expected_bytes(scheme, *, dp, tp, micro_batch, accumulation, steps, seq, hidden, ffn,
                   layers, local_params, sp=False):  # fmt: skip
    """Bytes each rank should send over the run, by the closed forms; keys as
    :attr:`MeshRun.bytes_by_group`.  ``local_params`` is P of one rank's shard.

    Ring all-reduce sends 2(K-1)/K·N·b per rank, reduce-scatter and all-gather (K-1)/K·N·b
    each; an activation is N = micro_batch·seq·hidden elements.
    """
    out = {}
    if dp > 1:  # the gradient all-reduce, once per step
        out[("dp", "all_reduce")] = steps * 2 * (dp - 1) / dp * local_params * BYTES
    if tp == 1:
        return out
    calls = steps * accumulation  # forward + backward passes of the run
    act = micro_batch * seq * hidden * BYTES  # one (B, S, H) activation
    ar, half = 2 * (tp - 1) / tp, (tp - 1) / tp
    if scheme == "tp-column":  # all-gather Y forward (ffn wide), all-reduce dX backward
        out[("tp", "all_gather")] = calls * half * micro_batch * seq * ffn * BYTES
        out[("tp", "all_reduce")] = calls * ar * act
    elif scheme == "tp-row":
        out[("tp", "all_reduce")] = calls * ar * act
    elif scheme in ("tp-mlp", "tp-attention"):
        out[("tp", "all_reduce")] = calls * 2 * ar * act
    elif sp or scheme == "sp":  # per layer 4 reduce-scatters + 4 all-gathers, and the
        # all-reduce of the 6·hidden LayerNorm and bias gradients that see local tokens
        out[("tp", "reduce_scatter")] = calls * layers * 4 * half * act
        out[("tp", "all_gather")] = calls * layers * 4 * half * act
        out[("tp", "all_reduce")] = calls * layers * ar * 6 * hidden * BYTES
    else:  # TP transformer blocks: four all-reduces per layer
        out[("tp", "all_reduce")] = calls * layers * 4 * ar * act
    return out


@dataclass
class VerifyReport:
    """What :func:`verify` found; ``str()`` is the human report, :meth:`to_dict` the JSON."""

    scheme: str
    config: dict
    description: str
    per_step: list  # per step: losses and max |difference| of each kind
    max_abs_diff: float  # over all steps, outputs, gradients and parameters
    max_rel_diff: float
    match: bool
    dp_replica_diff: float
    tp_replica_diff: float
    bytes_sent: list  # per rank, whole run
    bytes_by_group: dict  # (dimension, collective) -> per rank
    formula_bytes: dict  # (dimension, collective) -> per rank, by the closed forms
    time_s: float
    overlap: list  # per rank: accounting.Overlap
    buckets: list = field(default_factory=list)
    nonfinite: list = field(default_factory=list)  # "step 2 params (cluster)": nan or inf

    @property
    def bytes_by_collective(self):
        """Collective -> bytes sent per rank, summed over mesh dimensions."""
        out = {}
        for (_, name), per_rank in self.bytes_by_group.items():
            total = out.setdefault(name, [0] * len(per_rank))
            for r, b in enumerate(per_rank):
                total[r] += b
        return out

    def to_dict(self):
        return {
            "scheme": self.scheme,
            "config": self.config,
            "model": self.description,
            "match": self.match,
            "non_finite": self.nonfinite,
            "max_abs_diff": self.max_abs_diff,
            "max_rel_diff": self.max_rel_diff,
            "tolerance_rel": TOLERANCE,
            "dp_replica_max_diff": self.dp_replica_diff,
            "tp_replica_max_diff": self.tp_replica_diff,
            "steps": self.per_step,
            "loss_cluster": [s["loss_cluster"] for s in self.per_step],
            "loss_single_device": [s["loss_single_device"] for s in self.per_step],
            "bytes_sent": self.bytes_sent,
            "bytes_by_collective": self.bytes_by_collective,
            "bytes_by_group": {f"{d} {c}": v for (d, c), v in self.bytes_by_group.items()},
            "formula_bytes_per_rank": {f"{d} {c}": v for (d, c), v in self.formula_bytes.items()},
            "gradient_buckets": self.buckets,
            "time_s": self.time_s,
            "comm_s": [o.comm_s for o in self.overlap],
            "overlapped_comm_s": [o.overlapped_s for o in self.overlap],
            "exposed_comm_s": [o.exposed_s for o in self.overlap],
            "compute_s": [o.compute_s for o in self.overlap],
        }

    def __str__(self):
        from .report import report_text

        return report_text(self)


def model_shape(scheme, hidden, ffn, layers):
    """(layers, weights per layer, has attention) of the model ``scheme`` trains.

    >>> model_shape("tp-mlp", 8, 32, 2)
    (1, 512, False)
    """
    per_layer = {
        "tp-column": hidden * ffn,
        "tp-row": hidden * ffn,
        "tp-mlp": 2 * hidden * ffn,
        "tp-attention": 4 * hidden * hidden,
    }.get(scheme, 4 * hidden * hidden + 2 * hidden * ffn)
    n_layers = layers if scheme in ("dp", "sp", "dp-tp") else 1
    return n_layers, per_layer, scheme in ("dp", "tp-attention", "sp", "dp-tp")


def estimate_memory(scheme, *, dp, tp, batch, hidden, heads, seq, ffn, layers, steps):
    """Bytes :func:`verify` needs, about (an upper estimate, float64 throughout).

    Parameters are held by the oracle, by every rank's shard (dp replicas of the model)
    and in the per-step snapshots of both runs (gradients and parameters); activations
    are kept for the backward pass in both runs; the data and the per-step outputs and
    input gradients are stored too.

    >>> estimate_memory("dp", dp=4, tp=1, batch=64, hidden=16, heads=4, seq=8, ffn=64,
    ...                 layers=2, steps=3) < 2**25
    True
    """
    n_layers, per_layer, attention = model_shape(scheme, hidden, ffn, layers)
    params = n_layers * per_layer * (dp + 3 + 4 * steps)
    tokens = batch * seq
    scores = batch * heads * seq * seq * 2 if attention else 0
    activations = 2 * n_layers * (tokens * (6 * hidden + 2 * ffn) + scores)
    widest = max(hidden, ffn)
    stored = steps * tokens * widest * 6  # data (x, target) and both runs' y and dx
    return BYTES * (params + activations + stored)


def check_verify_sizes(*, dp, tp, layers, steps, names=None):
    """Refuse a run past :data:`LIMITS`; ``names`` maps a size to how the user spelled it."""
    names = names or {}
    for key, value in (("ranks", dp * tp), ("layers", layers), ("steps", steps)):
        if value <= LIMITS[key]:
            continue
        if key == "ranks":
            raise ConfigError(
                f"dp × tp = {dp} × {tp} = {value} ranks: more than the {LIMITS[key]} a "
                f"verification runs in seconds; choose dp · tp <= {LIMITS[key]}"
            )
        what = names.get(key, key)
        shown = f"{what} {value}" if what.startswith("-") else f"{what}={value}"
        raise ConfigError(
            f"{shown}: more than the {LIMITS[key]} {key} a verification runs in seconds; "
            f"nearest valid {what} {LIMITS[key]}"
        )


def _nonfinite(array_or_dict):
    """True when any value is nan or inf (a diverged run compares as nan, which is no check)."""
    arrays = array_or_dict.values() if isinstance(array_or_dict, dict) else [array_or_dict]
    return any(not np.all(np.isfinite(np.asarray(a))) for a in arrays)


def _diff(a, b):
    """(max |a - b|, that divided by max |b|) over two arrays or two dicts of arrays.

    The scale is the largest reference value of the whole dict: a gradient that is 0 in
    exact arithmetic (the key bias's, say) is compared with its neighbours' size, not
    with its own rounding noise.
    """
    pairs = [(a[k], b[k]) for k in b] if isinstance(b, dict) else [(a, b)]
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: reported as non-finite
        return _worst(pairs)


def _worst(pairs):
    worst = max(float(np.max(np.abs(np.asarray(x) - y), initial=0.0)) for x, y in pairs)
    scale = max(float(np.max(np.abs(y), initial=0.0)) for _, y in pairs)
    return worst, worst / scale if scale else worst


def _train(problem, dp, tp, batches, micro_batch, accumulation, optimizer, bucket_bytes,
           bandwidth, latency, compute_rate):  # fmt: skip
    cluster = Cluster(topo.switch(dp * tp, bandwidth, latency), compute_rate=compute_rate)
    mesh = DeviceMesh((dp, tp), ("dp", "tp"))
    return train_mesh(cluster, mesh, problem.make_units, batches, problem.in_layout,
                      problem.out_layout, micro_batch, accumulation, optimizer=optimizer,
                      bucket_bytes=bucket_bytes)  # fmt: skip


def verify(scheme, *, dp=None, tp=None, batch=None, hidden=16, heads=4, seq=8, ffn_hidden=None,
           layers=2, steps=3, seed=0, micro_batch=None, accumulation=None, lr=0.1,
           sequence_parallel=False, bucket_bytes=DEFAULT_BUCKET_BYTES, bandwidth="100GB/s",
           latency="5us", compute_rate=100e12):  # fmt: skip
    """Run ``scheme`` on a switch of ``dp·tp`` ranks and on one device; compare.

    Defaults: dp 4 for ``dp``, 2 for ``dp-tp``; tp 4 for the TP schemes and ``sp``, 2
    for ``dp-tp``; batch 64 for ``dp`` (the batch-64, dp=4 example), else 4·dp; ffn hidden
    4·hidden.
    Raises ConfigError for a scheme it does not know or sizes that do not divide.
    """
    if scheme not in SCHEMES:
        raise ConfigError(f"unknown scheme {scheme!r}: choose one of {', '.join(SCHEMES)}")
    if isinstance(lr, bool) or not isinstance(lr, int | float) or not math.isfinite(lr) or lr <= 0:
        raise ConfigError(f"lr={lr!r}: the learning rate must be a finite number > 0, like 0.1")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed={seed!r}: a random seed is a whole number >= 0, like 0")
    dp = dp or {"dp": 4, "dp-tp": 2}.get(scheme, 1)
    tp = tp or {"dp": 1, "dp-tp": 2}.get(scheme, 4)
    if scheme not in ("dp", "dp-tp") and dp != 1:
        raise ConfigError(f"scheme {scheme!r} is tensor parallel only: use dp-tp for dp={dp}")
    if sequence_parallel and scheme not in ("sp", "dp-tp"):
        raise ConfigError(f"sequence parallelism applies to 'sp' and 'dp-tp', not {scheme!r}")
    if scheme == "dp" and tp != 1:
        raise ConfigError(f"scheme 'dp' is data parallel only: use dp-tp for tp={tp}")
    batch = batch or (64 if scheme == "dp" else 4 * dp)
    ffn = ffn_hidden or 4 * hidden
    sp = sequence_parallel or scheme == "sp"
    attention = scheme in ("dp", "tp-attention", "sp", "dp-tp")
    if attention and hidden % heads:
        raise ConfigError(f"heads={heads} must divide hidden={hidden} (head_dim = hidden/heads)")
    # Megatron-LM's rule: tp divides hidden and ffn hidden (and heads, and with SP the sequence)
    check_tp(tp, hidden=hidden, heads=heads if attention else None, ffn_hidden=ffn, seq=seq,
             sequence_parallel=sp)  # fmt: skip
    check_verify_sizes(dp=dp, tp=tp, layers=layers, steps=steps)
    rng = np.random.default_rng(seed)
    problem = _problem(scheme, rng, dp, tp, hidden, heads, ffn, seq, layers, sp)
    if problem.dp * problem.tp != dp * tp:
        raise ConfigError(f"scheme {scheme!r} runs on dp={problem.dp}, tp={problem.tp}")
    in_features = ffn if scheme == "tp-row" else hidden
    out_features = ffn if scheme == "tp-column" else hidden
    batches = [(rng.uniform(-1, 1, (batch, seq, in_features)),
                rng.uniform(-1, 1, (batch, seq, out_features))) for _ in range(steps)]  # fmt: skip
    optimizer = SGD(lr=lr)
    # a diverging run (a huge lr) overflows: the report names the non-finite values instead
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        oracle = single_device(problem.model, batches, optimizer)
        run = _train(problem, dp, tp, batches, micro_batch, accumulation, optimizer,
                     bucket_bytes, bandwidth, latency, compute_rate)  # fmt: skip
    mesh = DeviceMesh((dp, tp), ("dp", "tp"))  # the same grid, for the shard sizes

    per_step, worst_abs, worst_rel, nonfinite = [], 0.0, 0.0, []
    for s, (mine, ref) in enumerate(zip(run.steps, oracle)):
        row = {"step": s + 1, "loss_cluster": mine["loss"], "loss_single_device": ref["loss"]}
        for key in ("output", "input_grad", "grads", "params"):
            a, r = _diff(mine[key], ref[key])
            row[f"max_abs_diff_{key}"] = a
            runs = [who for who, values in (("cluster", mine[key]), ("one device", ref[key]))
                    if _nonfinite(values)]  # fmt: skip
            if runs:  # max() would skip a nan: say so, and never call it a match
                nonfinite.append(f"step {s + 1} {key} ({' and '.join(runs)})")
                worst_abs = worst_rel = math.nan
            elif not math.isnan(worst_abs):
                worst_abs, worst_rel = max(worst_abs, a), max(worst_rel, r)
        per_step.append(row)

    local = sum(v.size for _, u in problem.make_units(mesh.group("tp", 0), 0)
                for v in u.params.values())  # fmt: skip
    formula = expected_bytes(scheme, dp=dp, tp=tp, micro_batch=run.micro_batch,
                             accumulation=run.accumulation, steps=steps, seq=seq, hidden=hidden,
                             ffn=ffn, layers=layers, local_params=local, sp=sp)  # fmt: skip
    config = {"dp": dp, "tp": tp, "batch": batch, "micro_batch": run.micro_batch,
              "accumulation": run.accumulation, "hidden": hidden, "heads": heads,
              "ffn_hidden": ffn, "seq": seq, "layers": layers, "steps": steps, "seed": seed,
              "lr": lr, "sequence_parallel": sp, "bucket_bytes": bucket_bytes,
              "bandwidth": bandwidth, "latency": latency, "compute_rate": compute_rate}  # fmt: skip
    replicas_ok = run.dp_replica_diff == 0.0 and run.tp_replica_diff == 0.0
    return VerifyReport(
        scheme=scheme,
        config=config,
        description=problem.description,
        per_step=per_step,
        max_abs_diff=worst_abs,
        max_rel_diff=worst_rel,
        match=bool(not nonfinite and worst_rel <= TOLERANCE and replicas_ok),
        dp_replica_diff=run.dp_replica_diff,
        tp_replica_diff=run.tp_replica_diff,
        bytes_sent=list(run.result.stats.bytes_sent),
        bytes_by_group=run.bytes_by_group,
        formula_bytes=formula,
        time_s=run.time,
        overlap=run.overlap,
        buckets=run.buckets,
        nonfinite=nonfinite,
    )
