"""The planner's inputs: one frozen dataclass with commented defaults, validated and bounded.

Everything is in SI base units inside (bytes, bytes/s, seconds, FLOP/s); human strings
(``"80GiB"``, ``"300GB/s"``, ``"2us"``, ``"150TFLOP/s"``, ``"175B"`` parameters) are
accepted and parsed when a :class:`PlanConfig` is made (:mod:`~collsim.plan.config.values`
reads and bounds each one).  A model is a preset (``model``,
:mod:`~collsim.plan.config.presets`), a complete shape, or a bare ``params`` that gets the
nearest GPT-3 shape.  Files are read by :mod:`~collsim.plan.config.files`.

:meth:`PlanConfig.parallel` converts a plan into the mesh trainer's
:class:`~collsim.parallel.config.ParallelConfig`.

Examples
--------
>>> cfg = PlanConfig(layers=2, hidden=64, heads=4, gpu_memory="16GiB", compute_rate="10TFLOP/s")
>>> cfg.gpu_memory, cfg.compute_rate
(17179869184, 10000000000000.0)
>>> PlanConfig(params="7B").params
7000000000.0
>>> PlanConfig(tp=0)
Traceback (most recent call last):
...
collsim.errors.ConfigError: tp = 0 must be a whole number >= 1
>>> PlanConfig(params="7B", world_size=2**62)
Traceback (most recent call last):
...
collsim.errors.ConfigError: world_size = 4611686018427387904 is above the planner's limit ...
"""

import dataclasses
from dataclasses import dataclass

from ...errors import ConfigError
from ...units import parse_rate, parse_size, parse_time
from .derived import divisors
from .experts import check_moe_fields
from .presets import SHAPE_FIELDS, assumed_shape, preset
from .trainer import parallel_config
from .values import (
    ARCHITECTURES,
    MAX_PARAMS,
    MAXIMA,
    POSITIVE_INTS,
    PRECISIONS,
    RECOMPUTE,
    SCHEDULES,
    choice,
    flag,
    parse_count,
    parse_flops,
    parsed,
    whole,
)

__all__ = ["PlanConfig", "DEFAULT_VOCAB", "DEFAULT_SEQ"]

DEFAULT_VOCAB = 51200
DEFAULT_SEQ = 2048
_RULE_FIELDS = ("layers", "hidden", "heads", "model")


@dataclass(frozen=True)
class PlanConfig:
    """A training job to plan: model, cluster, parallelism, batch and training choices.

    Any field may be left at its default; ``None`` means "derive it from the others".
    """

    # --- model: a preset (model), the shape (layers/hidden/heads), or params alone ------
    model: str | None = None  # preset name, e.g. "llama2-7b" (collsim.plan.config.PRESETS)
    layers: int | None = None  # transformer layers L
    hidden: int | None = None  # hidden size h
    heads: int | None = None  # attention heads a
    kv_heads: int | None = None  # key/value heads g (grouped-query attention); None = heads
    head_dim: int | None = None  # size of one attention head; None = hidden / heads
    ffn_hidden: int | None = None  # MLP inner size f; None = 4·hidden as in GPT
    gated_mlp: bool | None = None  # SwiGLU MLP (3 matrices h×f); None = False (the preset's)
    architecture: str | None = None  # "gpt" or "llama" (see presets.py); None = "gpt"
    vocab: int | None = None  # vocabulary V; None = 51200 (GPT-2's 50257 padded, as Megatron)
    seq: int | None = None  # sequence length s, tokens per sample; None = 2048
    params: float | None = None  # parameter count N; None = counted from the shape
    assumed_shape: str | None = None  # set by the planner: the GPT-3 row a bare params got
    # --- mixture of experts (Megatron-Core's --num-experts ...); experts None = dense -------
    experts: int | None = None  # routed experts E per MoE layer
    top_k: int | None = None  # experts each token goes to (--moe-router-topk); None = min(2, E)
    moe_ffn_hidden: int | None = None  # an expert's MLP inner size; None = ffn_hidden
    shared_experts: int | None = None  # always-on experts per MoE layer (DeepSeek: 1); None = 0
    dense_layers: int | None = None  # first layers with a dense MLP (DeepSeek-V3: 3); None = 0
    # --- cluster ----------------------------------------------------------------------
    world_size: int | None = None  # GPUs in the job; None = tp·pp·cp·dp
    gpus_per_node: int = 8  # GPUs sharing the fast intra-node links (NVLink/NVSwitch)
    gpu_memory: int = 80 * 2**30  # bytes per GPU (an 80 GB A100/H100)
    compute_rate: float = 150e12  # FLOP/s one GPU achieves (about half an A100's bf16 peak)
    intra_bandwidth: float = 300e9  # bytes/s per direction between GPUs of one node
    inter_bandwidth: float = 25e9  # bytes/s per GPU between nodes (200 Gb/s InfiniBand)
    intra_latency: float = 2e-6  # s, α of one intra-node step
    inter_latency: float = 5e-6  # s, α of one inter-node step
    # --- parallelism --------------------------------------------------------------------
    tp: int = 1  # tensor-parallel degree t (Megatron column/row split of each layer)
    pp: int = 1  # pipeline stages p
    dp: int | None = None  # data-parallel degree; None = world / (tp·pp·cp)
    cp: int = 1  # context-parallel degree (sequence split across GPUs, ring attention)
    ep: int = 1  # expert-parallel degree: each MoE layer's experts split over ep GPUs
    etp: int | None = None  # expert tensor parallelism; None = tp (Megatron-Core's default)
    vpp: int = 1  # virtual pipeline stages v per GPU (interleaved 1F1B when > 1)
    sp: bool = False  # Megatron sequence parallelism (needs tp > 1)
    zero: int | None = None  # ZeRO stage 0-3 (3 = FSDP); None = 0, or 3 with dp_shard > 1
    dp_replicate: int | None = None  # Accelerate dp_replicate_size (HSDP replicas)
    dp_shard: int | None = None  # Accelerate dp_shard_size (FSDP shards)
    # --- batch: any two of global/micro/accumulation determine the third --------------
    global_batch: int | None = None  # samples per optimizer step
    micro_batch: int | None = None  # samples per forward/backward on one replica
    accumulation: int | None = None  # micro-batches per step (gradient accumulation)
    # --- training ------------------------------------------------------------------------
    recompute: str = "none"  # activation recomputation: none, selective or full
    precision: str = "bf16"  # bf16/fp16 mixed precision with Adam, or plain fp32
    schedule: str | None = None  # gpipe, 1f1b, interleaved; None = 1f1b (interleaved if vpp > 1)

    def __post_init__(self):
        set_ = object.__setattr__
        _fill_shape(self)
        given_memory = self.gpu_memory
        set_(self, "gpu_memory", parsed("gpu_memory", given_memory, parse_size))
        if self.gpu_memory == 0:
            raise ConfigError(f"gpu_memory = {given_memory!r} must be more than 0 bytes")
        for name in ("intra_bandwidth", "inter_bandwidth"):
            set_(self, name, parsed(name, getattr(self, name), parse_rate))
        for name in ("intra_latency", "inter_latency"):
            set_(self, name, parsed(name, getattr(self, name), parse_time))
        set_(self, "compute_rate", parsed("compute_rate", self.compute_rate, parse_flops))
        if self.params is not None:
            set_(self, "params", parsed("params", self.params, parse_count))
        for name in POSITIVE_INTS:
            value = getattr(self, name)
            if value is not None:
                set_(self, name, whole(name, value, MAXIMA[name]))
        set_(self, "sp", flag("sp", self.sp))
        if self.zero is not None:
            zero = 3 if isinstance(self.zero, str) and self.zero.lower() == "fsdp" else self.zero
            if isinstance(zero, bool) or zero not in (0, 1, 2, 3):
                raise ConfigError(
                    f"zero = {self.zero!r} must be a ZeRO stage 0, 1, 2 or 3 (or 'fsdp')"
                )
            set_(self, "zero", int(zero))
        _choose(self, "recompute", RECOMPUTE)
        _choose(self, "precision", PRECISIONS)
        if self.schedule is not None:
            _choose(self, "schedule", SCHEDULES)
        set_(self, "gated_mlp", flag("gated_mlp", self.gated_mlp))
        _choose(self, "architecture", ARCHITECTURES)
        if self.params is None and (self.layers is None or self.hidden is None):
            raise ConfigError(
                "the model is not described: give model (e.g. 'llama2-7b'), params "
                "(e.g. '7B') or layers, hidden and heads"
            )
        if self.hidden is not None and self.heads is None:
            raise ConfigError(f"hidden = {self.hidden} needs heads too (the attention head count)")
        shape = {k: getattr(self, k) for k in ("layers", "hidden", "heads")}
        if None in shape.values() and any(v is not None for v in shape.values()):
            given = ", ".join(f"{k} = {v}" for k, v in shape.items() if v is not None)
            missing = " and ".join(k for k, v in shape.items() if v is None)
            raise ConfigError(
                f"{given} given without {missing}: a shape needs layers, hidden and heads "
                "(or a model preset; params alone gets the nearest GPT-3 shape), else "
                "activation memory and TP traffic cannot be estimated"
            )
        if self.kv_heads is not None and self.heads and self.heads % self.kv_heads:
            fits = divisors(self.heads)
            near = min(fits, key=lambda g: (abs(g - self.kv_heads), g))
            raise ConfigError(
                f"kv_heads = {self.kv_heads} must divide heads = {self.heads} (each key/value "
                f"head serves heads/kv_heads query heads); nearest valid choice: {near}"
            )
        if self.kv_heads is not None and self.heads is None:
            raise ConfigError(f"kv_heads = {self.kv_heads} needs heads too")
        check_moe_fields(self)

    @property
    def expert_tp(self):
        """Expert tensor parallelism: ``etp``, or ``tp`` when not given (Megatron-Core)."""
        return self.tp if self.etp is None else self.etp

    @property
    def kv_groups(self):
        """Key/value heads g: ``kv_heads``, or ``heads`` without grouped-query attention."""
        return self.kv_heads or self.heads

    def replace(self, **changes):
        """A copy with some inputs changed (validated again).

        Changing any shape setting drops an assumed shape (the new shape is the user's).
        """
        if self.assumed_shape and any(k in _RULE_FIELDS for k in changes):
            changes.setdefault("assumed_shape", None)
        if "model" in changes and changes["model"] != self.model:
            # a new preset brings its whole shape
            changes = {**dict.fromkeys(SHAPE_FIELDS), **changes}
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        """The inputs as plain data, in base units."""
        return dataclasses.asdict(self)

    def parallel(self, **overrides):
        """The mesh trainer's :class:`~collsim.parallel.config.ParallelConfig` for this plan.

        dp, tp, pp, vpp and sp keep their names; ``microbatches`` is the accumulation
        (Megatron's ``num_microbatches``) and ``schedule`` the plan's, derived as the
        planner derives them.  ``overrides`` set any ParallelConfig field (pass times
        ``t_f``/``t_b``/``t_w``, ``bucket_bytes``, or a schedule).  A plan the trainer cannot
        run (selective recomputation, sp with cp and tp) or whose counts are not whole
        raises a ConfigError naming the value.

        >>> cfg = PlanConfig(world_size=8, tp=2, pp=2, layers=4, hidden=64, heads=4,
        ...                  global_batch=8)
        >>> p = cfg.parallel(t_f=0.002)
        >>> p.dp, p.tp, p.pp, p.microbatches, p.schedule, p.t_f
        (2, 2, 2, 4, '1f1b', 0.002)
        """
        return parallel_config(self, **overrides)


def _choose(cfg, name, choices):
    object.__setattr__(cfg, name, choice(name, getattr(cfg, name), choices))


def _fill_shape(cfg):
    """Fill the shape from the preset, or from the GPT-3 row nearest a bare params."""
    set_ = object.__setattr__
    if cfg.model is not None:
        row = preset(cfg.model)
        if cfg.params is not None:
            raise ConfigError(
                f"give model ({cfg.model!r}) or params ({cfg.params!r}), not both: the preset's "
                "shape already counts the parameters"
            )
        set_(cfg, "model", row.name)
        set_(cfg, "assumed_shape", None)
        for name, value in row.fields().items():
            if getattr(cfg, name) is None:
                set_(cfg, name, value)
    elif cfg.assumed_shape is not None or (
        cfg.params is not None and cfg.layers is None and cfg.hidden is None and cfg.heads is None
    ):
        params = parsed("params", cfg.params, parse_count) if cfg.params is not None else None
        if params is None:
            set_(cfg, "assumed_shape", None)
        else:
            row = assumed_shape(min(params, MAX_PARAMS))
            for name in ("layers", "hidden", "heads"):
                set_(cfg, name, getattr(row, name))
            set_(cfg, "assumed_shape", row.name)
    for name, default in (("vocab", DEFAULT_VOCAB), ("seq", DEFAULT_SEQ)):
        if getattr(cfg, name) is None:
            set_(cfg, name, default)
    if cfg.gated_mlp is None:
        set_(cfg, "gated_mlp", False)
    if cfg.architecture is None:
        set_(cfg, "architecture", "gpt")
