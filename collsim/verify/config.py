"""What a verification runs: one :class:`VerifyConfig`, built once, checked once.

The command line builds it from its flags (with ``names``, so that a refusal says what the
user typed); code builds it from keywords. Every option of every scheme is a field;
``None`` means "the scheme's default". Each check runs once per config:
:attr:`VerifyConfig.sizes` fills in the degrees, batch and widths after the cheap checks (the
command line estimates the run's time and memory from them), then
:attr:`VerifyConfig.resolved` applies every rule (some search a size's divisors, so they come
after that estimate) and gives the :class:`Resolved` that :func:`~collsim.verify.verify` runs.

Examples
--------
>>> config = VerifyConfig("zero", stage=2, hidden=8)
>>> config.sizes.dp, config.sizes.batch, config.sizes.optimizer
(4, 16, 'adam')
>>> config.resolved.parallel.zero, config.resolved.micro_batch
(2, 4)
>>> VerifyConfig("fsdp", stage=2).resolved
Traceback (most recent call last):
...
collsim.errors.ConfigError: stage applies to zero, not to scheme 'fsdp'
>>> verify_config("dp", {"hiden": 8})
Traceback (most recent call last):
...
collsim.errors.ConfigError: verify has no option 'hiden'; nearest valid option 'hidden'
"""

import dataclasses
import difflib
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..errors import ConfigError
from ..parallel.batch import resolve_batch
from ..parallel.config import ParallelConfig
from ..parallel.context.block import CP_VARIANTS
from ..parallel.context.layouts import CP_LAYOUTS
from ..parallel.data import DEFAULT_BUCKET_BYTES
from ..units import parse_size
from .checks import LIMITS, Sharding, check_arguments, check_sharding, check_verify_sizes
from .context_checks import (
    CONTEXT_SCHEMES,
    as_given,
    check_model,
    choice,
    flag_name,
    parallel_config,
    resolve_mesh,
    whole,
)
from .problems import SCHEMES, default_batch, default_dp, default_tp

__all__ = ["VerifyConfig", "Sizes", "Resolved", "verify_config", "ALL_SCHEMES"]

ALL_SCHEMES = SCHEMES + CONTEXT_SCHEMES

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
class VerifyConfig:
    """One verification: the scheme and every option, ``None`` for the scheme's default."""

    scheme: str = "dp"  # dp, tp-column, tp-row, tp-mlp, tp-attention, sp, dp-tp, zero, ...
    # parallelism and batch
    dp: int | None = None  # data-parallel degree: 4 for dp, zero, fsdp; 2 for dp-tp; 1 for cp
    tp: int | None = None  # tensor-parallel degree: 4 for the TP schemes and sp; 2 for dp-tp
    sequence_parallel: bool = False  # dp-tp, nd: split the activations by tokens inside tp
    batch: int | None = None  # global batch: 64 for dp; 2·dp·pp for cp, nd; else 4·dp
    micro_batch: int | None = None  # samples per forward/backward (default: from the batch)
    accumulation: int | None = None  # micro-batches per optimizer step (default 1)
    # model and training
    hidden: int = 16  # hidden size
    heads: int = 4  # attention heads
    seq: int = 8  # sequence length
    ffn_hidden: int | None = None  # MLP inner size: 4·hidden
    layers: int = 2  # transformer blocks
    steps: int = 3  # optimizer steps
    seed: int = 0  # random seed of the weights and the data, >= 0
    lr: float | None = None  # learning rate: 0.1 for SGD, 0.01 for Adam
    # zero, fsdp, hsdp: sharding the model state
    stage: int | None = None  # zero: ZeRO stage 1, 2 or 3 (1); fsdp and hsdp are stage 3
    optimizer: str | None = None  # "adam" (default) or "sgd"; the other schemes train SGD
    reshard_after_forward: bool = True  # fsdp, hsdp: free gathered units after each pass
    prefetch: str = "none"  # fsdp, hsdp: none, forward, backward or both
    dp_replicate: int | None = None  # hsdp, nd: replicas of the model (2 for hsdp, 1 for nd)
    dp_shard: int | None = None  # hsdp, nd: ranks a replica is sharded over (2; 1 for nd)
    gpus_per_node: int | None = None  # hsdp, cp, nd: nodes of a two-level topology
    # cp, nd: context parallelism and the N-D mesh
    cp: int | None = None  # ranks a sequence is split over: 2 for cp, 1 for nd
    variant: str | None = None  # "ring" (default) or "all-to-all" (DeepSpeed-Ulysses)
    layout: str | None = None  # "balanced" (default) or "contiguous"
    causal: bool | None = None  # causal attention (default True)
    pp: int | None = None  # nd: pipeline stages (1)
    # the cluster
    bucket_bytes: int | str = DEFAULT_BUCKET_BYTES  # DP gradient bucket: bytes, or "25MiB"
    bandwidth: str | float = "100GB/s"  # per link (inside a node)
    latency: str | float = "5us"  # per link (inside a node)
    compute_rate: float = 100e12  # FLOP/s per rank
    # option -> how the user spelled it ({"stage": "--stage"}), for the refusals
    names: dict = field(default_factory=dict, compare=False, repr=False)

    def replace(self, **changes):
        """A copy with ``changes`` (checked anew when read)."""
        return dataclasses.replace(self, **changes)

    @cached_property
    def sizes(self):
        """The degrees, batch and widths with their defaults, after the cheap checks (kinds
        of value, limits, the options the scheme takes): a :class:`Sizes`, enough to
        estimate the time and memory of the run before any rule that searches for choices."""
        if self.scheme not in ALL_SCHEMES:
            near = difflib.get_close_matches(str(self.scheme), ALL_SCHEMES, n=1, cutoff=0)[0]
            raise ConfigError(
                f"unknown scheme {self.scheme!r}: choose one of "
                f"{', '.join(ALL_SCHEMES)}; nearest valid {near!r}"
            )
        if self.scheme in CONTEXT_SCHEMES:
            _refuse_training_options(self)
            _check_numbers(self)
            return _context_sizes(self)
        _check_numbers(self)
        return _training_sizes(self)

    @cached_property
    def resolved(self):
        """Every default filled in and every rule applied, once: a :class:`Resolved`."""
        if self.scheme in CONTEXT_SCHEMES:
            return _resolve_context(self, self.sizes)
        return _resolve_training(self, self.sizes)


@dataclass(frozen=True)
class Sizes:
    """What :attr:`VerifyConfig.sizes` fills in: the sizes of the run, not yet its rules."""

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
    """A :class:`VerifyConfig` with its defaults filled in, after every check."""

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


def verify_config(config, options):
    """``config`` as a :class:`VerifyConfig`: one as it is (with ``options`` replaced), or a
    scheme's name with ``options`` for its fields; an unknown option is refused by name."""
    known = [f.name for f in dataclasses.fields(VerifyConfig)]
    for key in options:
        if key not in known:
            near = difflib.get_close_matches(key, known, n=1, cutoff=0)[0]
            raise ConfigError(f"verify has no option {key!r}; nearest valid option {near!r}")
    if isinstance(config, VerifyConfig):
        return config.replace(**options) if options else config
    if "scheme" in options:
        raise ConfigError(f"give the scheme once: {config!r} or scheme={options['scheme']!r}")
    return VerifyConfig(config, **options)


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


def _check_numbers(c):
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


def _training_sizes(c):
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


def _resolve_training(c, sizes):
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


def _refuse_training_options(c):
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


def _context_sizes(c):
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
    check_verify_sizes(dp=dp, tp=1, layers=c.layers, steps=c.steps, names=names)
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


def _resolve_context(c, sizes):
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
