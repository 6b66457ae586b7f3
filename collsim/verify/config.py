"""What a verification runs: one :class:`VerifyConfig`, built once, checked once.

The command line builds it from its flags (with ``names``, so that a refusal says what the
user typed); code builds it from keywords. Every option of every scheme is a field;
``None`` means "the scheme's default". Each check runs once per config:
:attr:`VerifyConfig.sizes` fills in the degrees, batch and widths after the cheap checks (the
command line estimates the run's time and memory from them), then
:attr:`VerifyConfig.resolved` applies every rule (some search a size's divisors, so they come
after that estimate) and gives the :class:`Resolved` that :func:`~collsim.verify.verify` runs.
Both steps' rules, and what they give, are in :mod:`collsim.verify.resolve`.

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

from ..errors import ConfigError
from ..parallel.data import DEFAULT_BUCKET_BYTES
from .context_checks import CONTEXT_SCHEMES
from .moe import MOE_SCHEMES, moe_sizes, refuse_moe_options
from .nd_experts import ND_MOE_OPTIONS, resolve_nd_experts, trainer_config
from .problems import SCHEMES
from .resolve import (
    Resolved,
    Sizes,
    check_numbers,
    context_sizes,
    refuse_training_options,
    resolve_context,
    resolve_training,
    training_sizes,
)

__all__ = ["VerifyConfig", "Sizes", "Resolved", "verify_config", "ALL_SCHEMES"]

ALL_SCHEMES = SCHEMES + CONTEXT_SCHEMES + MOE_SCHEMES


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
    # moe: one MoE layer with expert parallelism
    ep: int | None = None  # expert-parallel ranks (moe: 4; nd: 1, folded over dp x cp x tp);
    # experts must be divisible by it (nd: any MoE option makes the blocks' MLPs MoEs)
    etp: int | None = None  # nd: expert tensor parallelism, each expert's MLP split by
    # columns and rows over etp ranks (default tp, as Megatron-Core); ep x etp | dp·cp·tp
    experts: int | None = None  # routed experts (moe: 8; nd: 2·ep)
    top_k: int | None = None  # experts per token (2)
    capacity_factor: float | None = None  # None: dropless; else ceil(T·k/E·cf) per expert
    drop_policy: str | None = None  # over capacity: "probs" (default) or "position"
    pad_to_capacity: bool = False  # fill every expert's slots to capacity
    routing: str | None = None  # uniform (default), zipf, lognormal, hot, adversarial
    router_score: str | None = None  # "softmax" (default) or "sigmoid"
    dispatcher: str | None = None  # "alltoall" (default) or "allgather" (Megatron-Core's)
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
        if self.scheme in MOE_SCHEMES:
            return moe_sizes(self)
        refuse_moe_options(self, ND_MOE_OPTIONS if self.scheme == "nd" else ())
        if self.scheme in CONTEXT_SCHEMES:
            refuse_training_options(self)
            check_numbers(self)
            return context_sizes(self)
        check_numbers(self)
        return training_sizes(self)

    @cached_property
    def resolved(self):
        """Every default filled in and every rule applied, once: a :class:`Resolved` (for
        moe, its :class:`~collsim.verify.moe.MoESizes`)."""
        if self.scheme in MOE_SCHEMES:
            return self.sizes
        if self.scheme in CONTEXT_SCHEMES:
            resolved = resolve_context(self, self.sizes)
            experts = resolve_nd_experts(self, self.sizes.mesh, ffn=resolved.ffn_hidden)
            if experts is None:
                return resolved
            parallel = trainer_config(resolved.parallel, experts, self.names)
            return dataclasses.replace(resolved, parallel=parallel, experts=experts)
        return resolve_training(self, self.sizes)


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
