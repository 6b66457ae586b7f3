"""Quantities that follow from a :class:`~collsim.plan.config.PlanConfig`: dp, the batch
triple, the parameter count, layers per stage, the ZeRO sharding group, the pipeline
schedule the closed forms take, and what divides what (the tp values a shape allows).

Values that a broken rule makes fractional (dp = 784 / 32 = 24.5) stay fractional here,
so the rules can show them and the estimates stay indicative; ``whole`` says which are
whole numbers.

Data parallelism, two vocabularies:

* Megatron-LM (Shoeybi et al. 2019; Narayanan et al. 2021): ``world = tp·pp·dp`` (times cp
  with context parallelism).
* Hugging Face Accelerate's ``ParallelismConfig``: ``dp = dp_replicate·dp_shard`` and
  ``world = dp_replicate·dp_shard·tp·cp`` (``ParallelismConfig.total_size``).  A
  data-parallel world size written as ``dp_shard·dp_replicate / tp`` would divide by tp a
  second time; the planner follows Accelerate's definition.

The ZeRO / FSDP sharding group holds the data-parallel ranks and, with context
parallelism, the cp ranks too: they hold the same weights and see different tokens
(Megatron's data-parallel group "with context parallel", Accelerate's ``dp_shard_cp``
mesh).  With cp = 1 the sharding degree is dp, or dp_shard under HSDP.

Examples
--------
>>> from collsim.plan.config import PlanConfig
>>> d = derive(PlanConfig(world_size=784, tp=8, pp=4, layers=96, hidden=12288, heads=96,
...                       global_batch=1536, micro_batch=1))
>>> d.dp, d.accumulation, d.whole["dp"]
(24.5, 62.69387755102041, False)
>>> round(d.params / 1e9, 1)
174.6
>>> show(d.dp), divisors(98)
('24.5', [1, 2, 7, 14, 49, 98])
"""

import math
from dataclasses import dataclass, field

from ...parallel.batch import divisors
from .experts import moe_params

__all__ = [
    "Derived",
    "derive",
    "count_params",
    "element_bytes",
    "pipeline_schedule",
    "divisors",
    "tp_choices",
    "show",
]


@dataclass(frozen=True)
class Derived:
    """What a configuration implies.  Counts are floats when a rule makes them fractional."""

    world: int
    dp: float  # data-parallel degree (replicas of each model shard)
    dp_replicate: float  # HSDP replicas (= dp without Accelerate-style sizes)
    dp_shard: float  # ZeRO/FSDP shards among the dp ranks (= 1 without sharding)
    shard_degree: float  # ranks one ZeRO shard group spans: dp_shard·cp (dp·cp without HSDP)
    zero: int
    schedule: str
    global_batch: float
    micro_batch: float
    accumulation: float  # micro-batches per optimizer step = pipeline micro-batches m
    params: float  # parameter count N used for memory and compute
    params_from_shape: float | None  # N counted from layers/hidden/heads/vocab, if given
    ffn_hidden: int | None
    layers_per_stage: int | None  # layers on the busiest pipeline stage, ⌈L/p⌉
    nodes: float
    tokens_per_step: float  # global batch · sequence length
    elem: int  # bytes of one activation/parameter/gradient element (2 or 4)
    routed_params: float = 0.0  # of params, the MoE layers' routed experts (0: dense)
    active_params: float = 0.0  # parameters one token passes through: the routed top-k of E
    whole: dict = field(default_factory=dict)  # name -> is that derived count whole?


def element_bytes(precision):
    """Bytes of one bf16/fp16 (2) or fp32 (4) element."""
    return 4 if precision == "fp32" else 2


def count_params(
    layers,
    hidden,
    ffn_hidden,
    vocab,
    seq,
    heads=None,
    kv_heads=None,
    gated_mlp=False,
    architecture="gpt",
    head_dim=None,
):
    """Parameters of a decoder-only transformer.

    Per layer: attention Q and output projections 2h², K and V projections 2h·k (k = h·g/a
    for g key/value heads of a; k = h without grouped-query attention), the MLP 2hf (3hf
    gated: gate, up and down), two norms.  ``architecture="gpt"`` (Megatron-LM's GPT) adds
    biases (4h in attention with k = h, f + h in the MLP), LayerNorm weight and bias (2h
    each), learned position embeddings s·h and ties the output layer to the V·h token
    embedding; ``"llama"`` has no biases, RMSNorm (h each), rotary positions (no
    parameters) and a separate V·h output layer.

    With f = 4h a GPT layer has 12h² + 13h parameters (Narayanan et al. 2021, eq. 2).

    >>> count_params(1, 4, 16, 10, 8)  # 12·16 + 13·4 + 40 + 32 + 8
    324
    >>> count_params(32, 4096, 11008, 32000, 4096, 32, 32, True, "llama")  # Llama 2 7B
    6738415616
    """
    h, f = hidden, ffn_hidden
    kv = h * kv_heads // heads if heads and kv_heads else h
    q = h  # the query (and attention output) width: heads · head size
    if head_dim and heads:  # a head size other than h/heads (Qwen3: 128 with h/heads = 64)
        q, kv = heads * head_dim, (kv_heads or heads) * head_dim
    gpt = architecture == "gpt"
    attention = 2 * h * q + 2 * h * kv + (q + h + 2 * kv if gpt else 0)
    mlp = (3 if gated_mlp else 2) * h * f + (((2 if gated_mlp else 1) * f + h) if gpt else 0)
    norms = 4 * h if gpt else 2 * h
    embeddings = vocab * h + (seq * h if gpt else vocab * h)
    return layers * (attention + mlp + norms) + embeddings + (2 * h if gpt else h)


def derive(cfg):
    """The :class:`Derived` values of ``cfg`` (no rule is checked here)."""
    ffn = cfg.ffn_hidden or (4 * cfg.hidden if cfg.hidden else None)
    shape_params = None
    if cfg.layers and cfg.hidden:
        shape_params = float(
            count_params(
                cfg.layers,
                cfg.hidden,
                ffn,
                cfg.vocab,
                cfg.seq,
                cfg.heads,
                cfg.kv_groups,
                cfg.gated_mlp,
                cfg.architecture,
                cfg.head_dim,
            )
        )
    routed = 0.0
    if shape_params is not None and cfg.experts is not None:
        routed, added = moe_params(
            cfg.layers,
            cfg.hidden,
            ffn,
            cfg.gated_mlp,
            cfg.experts,
            cfg.moe_ffn_hidden or ffn,
            cfg.shared_experts,
            cfg.dense_layers,
        )
        shape_params += added
    params = cfg.params if cfg.params is not None else shape_params

    accelerate = cfg.dp_replicate is not None or cfg.dp_shard is not None
    model_parallel = cfg.tp * cfg.pp * cfg.cp
    if accelerate:
        dp = (cfg.dp_replicate or 1) * (cfg.dp_shard or 1)
    elif cfg.dp is not None:
        dp = cfg.dp
    elif cfg.world_size is not None:
        dp = cfg.world_size / model_parallel
    else:
        dp = 1
    world = cfg.world_size if cfg.world_size is not None else model_parallel * int(dp)
    zero = cfg.zero if cfg.zero is not None else (3 if (cfg.dp_shard or 1) > 1 else 0)
    if accelerate and cfg.dp_shard is not None:
        dp_shard = float(cfg.dp_shard)
    else:
        dp_shard = float(dp) if zero > 0 else 1.0
    dp_replicate = dp / dp_shard
    shard_degree = dp_shard * cfg.cp if zero > 0 else 1.0

    micro, accumulation, global_batch = _batch(cfg, dp)
    schedule = cfg.schedule or ("interleaved" if cfg.vpp > 1 else "1f1b")
    layers_per_stage = math.ceil(cfg.layers / cfg.pp) if cfg.layers else None
    whole = {
        "dp": _is_whole(dp),
        "micro_batch": _is_whole(micro),
        "accumulation": _is_whole(accumulation),
        "global_batch": _is_whole(global_batch),
    }
    return Derived(
        world=world,
        dp=_tidy(dp),
        dp_replicate=_tidy(dp_replicate),
        dp_shard=_tidy(dp_shard),
        shard_degree=_tidy(shard_degree),
        zero=zero,
        schedule=schedule,
        global_batch=_tidy(global_batch),
        micro_batch=_tidy(micro),
        accumulation=_tidy(accumulation),
        params=params,
        params_from_shape=shape_params,
        ffn_hidden=ffn,
        layers_per_stage=layers_per_stage,
        nodes=_tidy(world / cfg.gpus_per_node),
        tokens_per_step=global_batch * cfg.seq,
        elem=element_bytes(cfg.precision),
        whole=whole,
        routed_params=routed if cfg.params is None else 0.0,
        active_params=params - routed + routed * cfg.top_k / cfg.experts if routed else params,
    )


def _batch(cfg, dp):
    """(micro, accumulation, global) from whichever two are given; micro defaults to 1."""
    g, b, m = cfg.global_batch, cfg.micro_batch, cfg.accumulation
    if g is not None and b is None and m is not None:
        return g / (dp * m), m, g
    b = 1 if b is None else b
    if g is not None:
        return b, g / (b * dp), g
    m = 1 if m is None else m
    return b, m, b * dp * m


def _is_whole(x):
    return abs(x - round(x)) < 1e-9 * max(1.0, abs(x))


def _tidy(x):
    """An int when ``x`` is whole (so 24.0 prints as 24), else the float."""
    return int(round(x)) if _is_whole(x) else float(x)


def pipeline_schedule(schedule, vpp):
    """``(name, v)`` for the schedules' formulas: interleaving with v = 1 is plain 1F1B.

    >>> pipeline_schedule("interleaved", 2), pipeline_schedule("interleaved", 1)
    (('interleaved', 2), ('1f1b', 1))
    """
    if schedule == "interleaved" and vpp > 1:
        return "interleaved", vpp
    return ("gpipe" if schedule == "gpipe" else "1f1b"), 1


def tp_choices(cfg, d, limit=None):
    """tp values that divide hidden, heads, key/value heads and ffn hidden, up to ``limit``
    (default: GPUs per node, or the configured tp if larger)."""
    limit = limit or max(cfg.gpus_per_node, cfg.tp)
    if not cfg.hidden:
        return [t for t in divisors(limit)]
    common = math.gcd(cfg.hidden, cfg.heads, cfg.kv_groups, d.ffn_hidden)
    return [t for t in divisors(common) if t <= limit]


def show(x):
    """A derived count as the rules and the report write it: 24 for 24.0, else four
    significant digits (a broken rule leaves dp = 24.5)."""
    return str(int(round(x))) if float(x).is_integer() else f"{x:.4g}"
