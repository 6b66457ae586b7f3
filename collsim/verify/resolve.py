"""The rules of ``collsim verify``, applied to a :class:`~collsim.verify.config.VerifyConfig`.

Two steps, each run once per config: the cheap checks (kinds of value, limits, the options a
scheme takes) and the defaults give the run's :class:`Sizes` (enough to estimate its time and
memory); then every rule (some search a size's divisors) gives the :class:`Resolved` that
:func:`~collsim.verify.verify` runs.  Each has a function for the training schemes (dp, tp,
sp, dp-tp, zero, fsdp, hsdp) and one for the context schemes (cp, nd).
"""

from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError
from ..parallel.batch import resolve_batch
from ..parallel.config import ParallelConfig
from ..parallel.context.block import CP_VARIANTS
from ..parallel.context.layouts import CP_LAYOUTS
from ..units import parse_size
from .checks import LIMITS, Sharding, check_arguments, check_sharding, check_verify_sizes
from .context_checks import (
    as_given,
    check_model,
    choice,
    flag_name,
    parallel_config,
    resolve_mesh,
    whole,
)
from .problems import default_batch, default_dp, default_tp

__all__ = [
    "Sizes",
    "Resolved",
    "bucket_bytes",
    "check_numbers",
    "training_sizes",
    "resolve_training",
    "refuse_training_options",
    "context_sizes",
    "resolve_context",
]

# whole numbers >= 1 of every scheme (None: the scheme's default, where it has one)
SIZES = (
    "dp",
    "tp",
    "batch",
    "micro_batch",
    "accumulation",
    "hidden",
    "heads",
    "ffn_hidden",
    "seq",
    "layers",
    "steps",
)
MAX_SEED = 2**128 - 1  # numpy's seeds: whole numbers in [0, 2**128)

# the options only cp and nd take, and the ones they refuse (they train with Adam, one
# micro-batch per pipeline stage)
CONTEXT_ONLY = ("cp", "variant", "layout", "causal", "pp")
NOT_CONTEXT = ("stage", "optimizer", "micro_batch", "accumulation")


@dataclass(frozen=True)
class Sizes:
    """What :attr:`~collsim.verify.config.VerifyConfig.sizes` fills in: the sizes of the run,
    not yet its rules."""

    dp: int  # data-parallel ranks (dp_replicate · dp_shard for nd)
    tp: int
    world: int  # ranks of the cluster
    batch: int  # global batch
    ffn_hidden: int
    lr: float
    optimizer: str  # "adam" or "sgd"
    sharding: Sharding | None = None  # zero, fsdp, hsdp: the sharding options resolved
    mesh: dict = field(default_factory=dict)  # cp, nd: Accelerate's sizes, else empty


@dataclass(frozen=True)
class Resolved:
    """A :class:`~collsim.verify.config.VerifyConfig` with its defaults filled in, after every
    check."""

    parallel: ParallelConfig  # the trainer's layout, micro-batches and buckets
    dp: int  # data-parallel ranks (dp_replicate · dp_shard for nd)
    tp: int
    sequence_parallel: bool  # the activations split by tokens inside tp (scheme sp too)
    batch: int  # global batch
    micro_batch: int  # rows per forward and backward on one rank
    accumulation: int  # micro-batches per optimizer step
    ffn_hidden: int
    lr: float
    optimizer: str  # "adam" or "sgd"
    sharded: bool  # zero, fsdp, hsdp: the model state is sharded (sharding findings)
    gpus_per_node: int | None  # the two-level topology's nodes; None: one switch
    mesh: dict = field(default_factory=dict)  # cp, nd: Accelerate's sizes, else empty
    variant: str | None = None  # cp, nd: "ring" or "all-to-all"
    layout: str | None = None  # cp, nd: "balanced" or "contiguous"
    causal: bool | None = None  # cp, nd
    experts: object = None  # nd with MoE blocks: their NDExperts (ep, router, routing)


def bucket_bytes(value):
    """A bucket size in bytes: a whole number, or a string such as ``"25MiB"``."""
    if isinstance(value, str):
        return parse_size(value)  # a refusal names the string as given
    return int(value) if isinstance(value, np.integer) else value


def _whole_number(value, key, names, minimum, maximum=None):
    """Refuse ``value`` unless a whole number in [minimum, maximum], by flag where given."""
    shown = as_given(names, key, value)
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ConfigError(f"{shown}: must be a whole number")
    if value >= minimum and (maximum is None or value <= maximum):
        return
    nearest = as_given(names, key, minimum if value < minimum else maximum)
    rule = f"must be >= {minimum}" if value < minimum else f"must be <= {maximum:,}"
    raise ConfigError(f"{shown}: {rule}; nearest valid {nearest}")


def check_numbers(c):
    """The sizes, the seed and the switches have the right kind of value, before any rule
    reads them."""
    for key in SIZES:
        value = getattr(c, key)
        if value is not None or key in ("hidden", "heads", "seq", "layers", "steps"):
            _whole_number(value, key, c.names, minimum=1)
    _whole_number(c.seed, "seed", c.names, minimum=0, maximum=MAX_SEED)
    for key in ("sequence_parallel", "reshard_after_forward"):
        if not isinstance(getattr(c, key), bool):
            raise ConfigError(f"{key}={getattr(c, key)!r}: True or False")


def training_sizes(c):
    """dp, tp, sp, dp-tp and the sharding schemes: the options they take, the sharding, the
    defaults and the limits."""
    for key in CONTEXT_ONLY:
        if getattr(c, key) is not None:
            raise ConfigError(
                f"{flag_name(c.names, key)} applies to schemes cp and nd, not to {c.scheme!r}"
            )
    sharding = check_sharding(
        c.scheme,
        dp=c.dp,
        stage=c.stage,
        dp_replicate=c.dp_replicate,
        dp_shard=c.dp_shard,
        prefetch=c.prefetch,
        reshard_after_forward=c.reshard_after_forward,
        gpus_per_node=c.gpus_per_node,
        optimizer=c.optimizer,
        names=c.names,
    )
    optimizer = sharding.optimizer if sharding else "sgd"
    dp = (sharding.dp if sharding else c.dp) or default_dp(c.scheme)
    tp = c.tp or default_tp(c.scheme)
    check_verify_sizes(dp=dp, tp=tp, layers=c.layers, steps=c.steps, names=c.names)
    return Sizes(
        dp=dp,
        tp=tp,
        world=dp * tp,
        batch=c.batch or default_batch(c.scheme, dp),
        ffn_hidden=c.ffn_hidden or 4 * c.hidden,
        lr=c.lr if c.lr is not None else (0.01 if optimizer == "adam" else 0.1),
        optimizer=optimizer,
        sharding=sharding,
    )


def resolve_training(c, sizes):
    """dp, tp, sp, dp-tp and the sharding schemes: the model's splits, the batch's."""
    dp, tp, sharding = sizes.dp, sizes.tp, sizes.sharding
    check_arguments(
        c.scheme,
        dp=dp,
        tp=tp,
        lr=sizes.lr,
        hidden=c.hidden,
        heads=c.heads,
        ffn=sizes.ffn_hidden,
        seq=c.seq,
        sequence_parallel=c.sequence_parallel,
    )
    sp = c.sequence_parallel or c.scheme == "sp"
    parallel = ParallelConfig(
        dp=dp,
        tp=tp,
        sp=sp and tp > 1,  # over one TP rank sequence parallelism splits nothing
        t_f=0.0,  # time comes from the layers' FLOPs at compute_rate, nothing on top
        bucket_bytes=bucket_bytes(c.bucket_bytes),
    )
    if sharding is not None:
        parallel = parallel.replace(
            zero=sharding.stage,
            dp_replicate=sharding.dp_replicate,
            prefetch=c.prefetch,
            reshard_after_forward=c.reshard_after_forward,
        )
    micro, accumulation = resolve_batch(
        sizes.batch, dp, c.micro_batch, c.accumulation, max_dp=LIMITS["ranks"] // tp
    )
    return Resolved(
        parallel=parallel.replace(microbatches=accumulation),  # pp = 1: gradient accumulation
        dp=dp,
        tp=tp,
        sequence_parallel=sp,
        batch=sizes.batch,
        micro_batch=micro,
        accumulation=accumulation,
        ffn_hidden=sizes.ffn_hidden,
        lr=sizes.lr,
        optimizer=sizes.optimizer,
        sharded=sharding is not None,
        gpus_per_node=sharding.gpus_per_node if c.scheme == "hsdp" else None,
    )


def refuse_training_options(c):
    """cp and nd train with Adam, one micro-batch per pipeline stage, ZeRO-3 by the mesh."""
    for key in NOT_CONTEXT:
        if getattr(c, key) is not None:
            raise ConfigError(
                f"{flag_name(c.names, key)} does not apply to scheme {c.scheme!r} "
                "(cp and nd train with Adam, one micro-batch per pipeline "
                "stage)"
            )
    if c.prefetch != "none" or not c.reshard_after_forward:
        key = "prefetch" if c.prefetch != "none" else "reshard_after_forward"
        raise ConfigError(
            f"{flag_name(c.names, key)} applies to fsdp and hsdp, not to scheme {c.scheme!r}"
        )


def context_sizes(c):
    """cp and nd: Accelerate's sizes, the defaults and the limits."""
    names = c.names
    mesh = resolve_mesh(
        c.scheme,
        cp=c.cp,
        dp=c.dp,
        dp_replicate=c.dp_replicate,
        dp_shard=c.dp_shard,
        tp=c.tp,
        pp=c.pp,
        names=names,
    )
    dp = mesh["dp_replicate"] * mesh["dp_shard"]
    given = " × ".join(as_given(names, k, mesh[k]) for k in ("dp_replicate", "dp_shard"))
    check_verify_sizes(
        dp=dp, tp=1, layers=c.layers, steps=c.steps, names=names, ranks_given=f"dp = {given}"
    )
    return Sizes(
        dp=dp,
        tp=mesh["tp"],
        world=int(np.prod(list(mesh.values()))),
        batch=2 * dp * mesh["pp"] if c.batch is None else c.batch,
        ffn_hidden=c.ffn_hidden or 4 * c.hidden,
        lr=0.01 if c.lr is None else c.lr,
        optimizer="adam",
        mesh=mesh,
    )


def resolve_context(c, sizes):
    """cp and nd: the variant and layout, the model's splits, the trainer's own refusals,
    the nodes and the batch."""
    names, mesh = c.names, sizes.mesh
    variant = choice("ring" if c.variant is None else c.variant, "variant", CP_VARIANTS, names)
    layout = choice("balanced" if c.layout is None else c.layout, "layout", CP_LAYOUTS, names)
    causal = True if c.causal is None else c.causal
    if not isinstance(causal, bool):
        raise ConfigError(f"causal={causal!r}: True or False")
    sp = c.sequence_parallel
    if sp and mesh["tp"] == 1:
        raise ConfigError(
            f"{flag_name(names, 'sp')} (sequence parallelism) splits inside tp: it "
            f"needs {flag_name(names, 'tp')} >= 2, got {mesh['tp']}"
        )
    ffn, dp_total = sizes.ffn_hidden, sizes.dp
    check_model(
        mesh,
        variant=variant,
        layout=layout,
        hidden=c.hidden,
        heads=c.heads,
        ffn=ffn,
        seq=c.seq,
        layers=c.layers,
        sp=sp,
        names=names,
    )
    check_arguments(
        "dp",
        dp=dp_total,
        tp=1,
        lr=sizes.lr,
        hidden=c.hidden,
        heads=c.heads,
        ffn=ffn,
        seq=c.seq,
        sequence_parallel=False,
    )
    m = mesh["pp"]  # micro-batches: one per stage fills the pipeline, 1 without one
    parallel = parallel_config(
        mesh, variant=variant, layout=layout, microbatches=m, names=names
    ).replace(sp=sp)
    world = sizes.world
    given_nodes = c.gpus_per_node is not None
    nodes = whole(c.gpus_per_node, "gpus_per_node", names) if given_nodes else world
    if world % nodes:
        near = max(d for d in range(1, min(nodes, world) + 1) if world % d == 0)
        raise ConfigError(
            f"{as_given(names, 'gpus_per_node', nodes)}: the {world} ranks fill "
            f"whole nodes, so it must divide {world}; nearest valid "
            f"{flag_name(names, 'gpus_per_node')} {near}"
        )
    batch = sizes.batch
    rows, _ = resolve_batch(batch, dp_total, None, m, max_dp=LIMITS["ranks"] * dp_total // world)
    return Resolved(
        parallel=parallel,
        dp=dp_total,
        tp=mesh["tp"],
        sequence_parallel=sp,
        batch=batch,
        micro_batch=rows,
        accumulation=m,
        ffn_hidden=ffn,
        lr=sizes.lr,
        optimizer="adam",
        sharded=False,
        gpus_per_node=nodes if given_nodes else None,
        mesh=mesh,
        variant=variant,
        layout=layout,
        causal=causal,
    )
