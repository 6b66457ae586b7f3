"""Every rule a parallel configuration must satisfy, checked together and explained.

The rules, their kinds and sources are listed in :mod:`collsim.plan.rules`; each check
below yields a :class:`Finding` with the numbers, and a hint from :mod:`.hints` naming the
nearest valid choices.

Examples
--------
>>> from collsim.plan.config import PlanConfig
>>> errors, warnings = check(PlanConfig(world_size=784, tp=8, pp=4, layers=96, hidden=12288,
...                                     heads=96, global_batch=1536, zero=1))
>>> [f.rule for f in errors]
['world_size']
>>> print(errors[0].hint)  # doctest: +ELLIPSIS
keep tp=8: pp must divide 784/8 = 98: pp=1 (dp=98), pp=2 (dp=49), pp=7 (dp=14, uneven), ...
"""

from ...units import format_rate, format_size
from ..config.derived import derive, divisors, show, tp_choices
from ..cost import pipeline_bubble
from ..memory import estimate
from .experts import MOE_RULES, moe_findings
from .finding import Finding
from .hints import batch_hint, memory_hint, world_hint

__all__ = ["Finding", "check", "evaluate", "RULES"]

RULES = (
    "world_size dp_replicate_shard accelerate_replicate global_batch hidden_tp heads_tp "
    "kv_heads_tp ffn_tp pp_layers layers_pp layers_vpp vpp_pp vpp_microbatches sp_tp sp_seq "
    "cp_seq tp_node memory bubble zero_unsharded"
).split() + list(MOE_RULES)


def check(cfg, d=None, mem=None, explain=True):
    """``(errors, warnings)``: lists of :class:`Finding` for ``cfg``.

    ``explain=False`` skips the hints (the search and the suggestions use it for speed).
    """
    d = d or derive(cfg)
    mem = mem or estimate(cfg, d)
    found = []
    for rule in _CHECKS:
        found.extend(rule(cfg, d, mem, explain))
    return [f for f in found if f.severity == "error"], [f for f in found if f.severity != "error"]


def evaluate(cfg):
    """``(errors, warnings, d, mem)`` without hints: the fast path of search and suggest."""
    d = derive(cfg)
    mem = estimate(cfg, d)
    errors, warnings = check(cfg, d, mem, explain=False)
    return errors, warnings, d, mem


def _world(cfg, d, mem, explain):
    q = cfg.tp * cfg.pp * cfg.cp
    accelerate = cfg.dp_replicate is not None or cfg.dp_shard is not None
    if accelerate and cfg.dp is not None and cfg.dp != d.dp:
        parts = f"{cfg.dp_replicate or 1}·{cfg.dp_shard or 1}"
        yield Finding(
            "dp_replicate_shard",
            f"dp = {cfg.dp} but dp_replicate·dp_shard = {parts} = {show(d.dp)} "
            "(Accelerate defines dp = dp_replicate·dp_shard)",
            f"drop dp, or set dp = {show(d.dp)}" if explain else "",
        )
    if accelerate:
        yield from _accelerate(cfg, explain)
    if cfg.world_size is None or (d.whole["dp"] and cfg.world_size == q * d.dp):
        return
    w, names = cfg.world_size, _degree_names(cfg)
    if cfg.dp is not None or accelerate:
        message = (
            f"world size {w} ≠ {names}·dp = {_degrees(cfg)}·{show(d.dp)} = {show(q * d.dp)}: "
            "the GPUs must be exactly the product of the parallel degrees"
        )
    else:
        message = (
            f"world size {w} is not divisible by {names} = {_degrees(cfg)} = {q}: "
            f"dp = {w}/{q} = {show(w / q)} is not a whole number"
        )
    yield Finding("world_size", message, world_hint(cfg, d) if explain else "")


def _accelerate(cfg, explain):
    """Accelerate's own rule for its sizes.

    ``ParallelismConfig.__post_init__`` (huggingface/accelerate,
    src/accelerate/parallelism_config.py) raises "Tensor/Context parallelism (tp/cp_size > 1)
    cannot be used with pure data parallelism (dp_replicate_size > 1 and dp_shard_size ==
    1)": TP and CP compose with FSDP (dp_shard > 1), or with HSDP (both > 1), not with DDP.
    """
    replicate, shard = cfg.dp_replicate or 1, cfg.dp_shard or 1
    if (cfg.tp > 1 or cfg.cp > 1) and replicate > 1 and shard == 1:
        which = " and ".join(f"{n}={v}" for n, v in (("tp", cfg.tp), ("cp", cfg.cp)) if v > 1)
        hint = (
            f"shard: dp_shard={replicate} with dp_replicate=1 (FSDP + TP/CP), or keep the "
            f"replicas and shard within them (dp_shard > 1, HSDP); or drop the replication "
            f"(dp_replicate=1)"
        )
        yield Finding(
            "accelerate_replicate",
            f"dp_replicate={replicate} with dp_shard={shard} and {which}: Accelerate's "
            "ParallelismConfig raises for tensor/context parallelism with pure data "
            "parallelism (dp_replicate_size > 1 and dp_shard_size == 1)",
            hint if explain else "",
        )


def _degree_names(cfg):
    return "tp·pp·cp" if cfg.cp > 1 else "tp·pp"


def _degrees(cfg):
    return f"{cfg.tp}·{cfg.pp}·{cfg.cp}" if cfg.cp > 1 else f"{cfg.tp}·{cfg.pp}"


def _batch(cfg, d, mem, explain):
    if not d.whole["dp"] or cfg.global_batch is None:
        return  # a fractional dp is the world_size rule's to explain
    g, dp = cfg.global_batch, int(d.dp)
    given = (cfg.micro_batch, cfg.accumulation)
    if None not in given and g != cfg.micro_batch * dp * cfg.accumulation:
        b, m = given
        message = f"global batch {g} ≠ micro·dp·accumulation = {b}·{dp}·{m} = {b * dp * m}"
    elif not d.whole["accumulation"]:
        b = d.micro_batch
        message = (
            f"global batch {g} = micro·dp·accumulation: accumulation = {g}/({show(b)}·{dp}) "
            f"= {show(d.accumulation)} is not a whole number"
        )
    elif not d.whole["micro_batch"]:
        m = d.accumulation
        message = (
            f"global batch {g} = micro·dp·accumulation: micro-batch = {g}/({dp}·{show(m)}) "
            f"= {show(d.micro_batch)} is not a whole number"
        )
    else:
        return
    yield Finding("global_batch", message, batch_hint(cfg, d) if explain else "")


def _tensor(cfg, d, mem, explain):
    if cfg.tp == 1 or not cfg.hidden:
        return
    t = cfg.tp
    why = {
        "hidden_tp": ("hidden", cfg.hidden, "each TP rank takes an equal slice of the hidden size"),
        "heads_tp": ("heads", cfg.heads, "attention heads are split whole across the TP ranks"),
        "kv_heads_tp": (
            "kv heads",
            cfg.kv_groups,
            "each TP rank holds whole key/value heads (Megatron's num_query_groups)",
        ),
        "ffn_tp": ("ffn hidden", d.ffn_hidden, "the MLP's column-parallel weight splits it"),
    }
    hint = ""
    if cfg.kv_groups == cfg.heads:
        del why["kv_heads_tp"]  # the same number as heads: one finding is enough
    for rule, (name, value, reason) in why.items():
        if value % t:
            if explain and not hint:
                hint = "tp values that divide hidden, heads and ffn hidden: " + ", ".join(
                    f"tp={x}" for x in tp_choices(cfg, d)
                )
            ratio = f"{value}/{t} = {show(value / t)}"
            message = f"{name} {value} is not divisible by tp={t} ({ratio}): {reason}"
            yield Finding(rule, message, hint)


def _pipeline(cfg, d, mem, explain):
    p, v, layers = cfg.pp, cfg.vpp, cfg.layers
    if layers and p > layers:
        hint = "pp values that divide the layers: " + ", ".join(map(str, divisors(layers)))
        yield Finding(
            "pp_layers",
            f"pp={p} > {layers} layers: every stage needs at least one layer",
            hint if explain else "",
        )
    elif layers and v == 1 and layers % p:
        few, many = layers // p, layers // p + 1
        near = ", ".join(f"pp={x}" for x in divisors(layers) if x <= 2 * p)
        yield Finding(
            "layers_pp",
            f"{layers} layers do not divide evenly into pp={p} stages: "
            f"{layers % p} stages get {many} layers and {p - layers % p} get {few}, "
            "and the slowest stage paces the pipeline",
            f"pp values that divide {layers}: {near} (uneven stages run, but the slowest sets "
            "the pace)"
            if explain
            else "",
            "warning",
        )
    if v > 1 and p < 2:
        yield Finding(
            "vpp_pp",
            f"vpp={v} needs pp ≥ 2 (pp={p}): interleaving splits each GPU's "
            "stage into virtual stages of one pipeline",
            "set pp ≥ 2 or vpp=1" if explain else "",
        )
    if v > 1 and layers and layers % (p * v):
        ok = [x for x in divisors(layers // p) if x > 1] if layers % p == 0 else []
        hint = (
            f"vpp values that divide {layers}/{p}: {', '.join(map(str, ok))}" if ok else "set vpp=1"
        )
        yield Finding(
            "layers_vpp",
            f"{layers} layers are not divisible by pp·vpp = {p}·{v} = {p * v}: "
            f"each virtual stage holds layers/(pp·vpp) layers",
            hint if explain else "",
        )
    m = d.accumulation
    if v > 1 and p > 1 and d.whole["dp"] and d.whole["accumulation"] and m % p:
        lower, upper = (int(m) // p) * p, (int(m) // p + 1) * p
        near = " or ".join(str(x) for x in (lower, upper) if x > 0)
        yield Finding(
            "vpp_microbatches",
            f"with vpp={v}, the {show(m)} micro-batches per step must be a "
            f"multiple of pp={p} (interleaved 1F1B runs them in groups of pp)",
            f"accumulation {near}" if explain else "",
        )
    if p > 1 and m < p:
        form = "(p-1)/(v·m+p-1)" if d.schedule == "interleaved" and v > 1 else "(p-1)/(m+p-1)"
        yield Finding(
            "bubble",
            f"only {show(m)} micro-batches per step for pp={p} stages: the pipeline "
            f"never fills and the bubble is {form} = {pipeline_bubble(cfg, d):.0%} of the step",
            f"use at least {p} micro-batches per step (accumulation ≥ {p})" if explain else "",
            "warning",
        )


def _sequence(cfg, d, mem, explain):
    if cfg.sp and cfg.tp == 1:
        yield Finding(
            "sp_tp",
            "sequence parallelism needs tp > 1 (tp=1): it splits the layer-norm "
            "and dropout activations across the tensor-parallel group",
            "set tp ≥ 2 or drop sp",
        )
    local = cfg.seq / cfg.cp
    if cfg.sp and cfg.tp > 1 and local % cfg.tp:
        name = f"seq/cp = {cfg.seq}/{cfg.cp} = {show(local)}" if cfg.cp > 1 else f"seq {cfg.seq}"
        step = cfg.tp * cfg.cp
        near = " or ".join(
            str(x) for x in ((cfg.seq // step) * step, (cfg.seq // step + 1) * step) if x
        )
        yield Finding(
            "sp_seq",
            f"with sequence parallelism {name} must be divisible by tp={cfg.tp}",
            f"sequence lengths that work: {near}" if explain else "",
        )
    if cfg.cp > 1 and cfg.seq % (2 * cfg.cp):
        step = 2 * cfg.cp
        near = " or ".join(
            str(x) for x in ((cfg.seq // step) * step, (cfg.seq // step + 1) * step) if x
        )
        cps = [c for c in (1, 2, 4, 8, 16, 32) if cfg.seq % (2 * c) == 0 or c == 1]
        yield Finding(
            "cp_seq",
            f"seq {cfg.seq} is not divisible by 2·cp = {step}: load-balanced ring "
            f"attention cuts the sequence into 2·cp chunks",
            f"seq {near}, or cp in {', '.join(map(str, cps))}" if explain else "",
        )


def _placement(cfg, d, mem, explain):
    if cfg.tp > cfg.gpus_per_node:
        yield Finding(
            "tp_node",
            f"tp={cfg.tp} > {cfg.gpus_per_node} GPUs per node: the all-reduces TP runs in every "
            f"layer (4 per layer per micro-batch) would cross the inter-node network "
            f"({format_rate(cfg.inter_bandwidth)} instead of {format_rate(cfg.intra_bandwidth)})",
            f"keep tp ≤ {cfg.gpus_per_node} and put the rest into pp or dp (Narayanan et al. "
            "2021, §3.3)",
            "warning",
        )
    if d.zero > 0 and d.shard_degree == 1:
        yield Finding(
            "zero_unsharded",
            f"ZeRO stage {d.zero} over a sharding degree of 1 shards nothing",
            "it only pays off with dp (or dp_shard) > 1",
            "warning",
        )


def _memory(cfg, d, mem, explain):
    if mem["fits"]:
        return
    parts = ", ".join(
        f"{k} {format_size(mem[k])}" for k in ("params", "grads", "optimizer", "activations")
    )
    message = (
        f"needs {format_size(mem['total'])} per GPU > {format_size(cfg.gpu_memory)} of GPU "
        f"memory ({parts})"
    )
    yield Finding("memory", message, memory_hint(cfg) if explain else "")


def _experts(cfg, d, mem, explain):
    yield from moe_findings(cfg, d, explain)


_CHECKS = (_world, _batch, _tensor, _pipeline, _sequence, _placement, _experts, _memory)
