"""``collsim plan --search``: every valid configuration of a model on a cluster, fastest first.

For a fixed world size, global batch and model, the search tries every tp (dividing the
hidden size, the heads, the key/value heads and the ffn size), every pp (dividing what tp
leaves), the dp that follows, every micro-batch size dividing global/dp, every ZeRO stage
and every recompute choice; keeps those that pass every rule of :mod:`collsim.plan.rules`
(memory included) and ranks them by estimated step time, each a
:class:`~collsim.plan.cost.Candidate`.  cp, vpp, sequence parallelism (when tp > 1),
precision and schedule stay as given.  Data parallelism is Megatron-style here (ZeRO shards
over all of dp; no HSDP split).  When nothing works at a world size and global batch,
:func:`world_note` says why in plain words (the report and the search table print it).

Every figure it ranks on is estimated from the model's shape (a preset, the given shape,
or the GPT-3 shape a bare parameter count gets, see :mod:`collsim.plan.config.presets`), so
activation memory and TP traffic are never silently left out.  The search is bounded up
front: more than :data:`MAX_EVALUATIONS` configurations to try is refused before any work,
with the count and the bound named.

``recommended=True`` (the default) also follows Megatron-LM's recommendations: tp within a
node and pp dividing the layers, so no configuration it returns carries those warnings.

Examples
--------
>>> from collsim.plan.config import PlanConfig
>>> cfg = PlanConfig(world_size=8, layers=4, hidden=256, heads=8, global_batch=16, seq=512,
...                  gpu_memory="1GiB")
>>> best = search(cfg)[0]
>>> best.config.tp * best.config.pp * best.dp
8
"""

import math

from ..errors import ConfigError
from .config.derived import derive, divisors, tp_choices
from .cost import candidate
from .memory import estimate
from .rules.checks import evaluate

__all__ = ["search", "shapes", "bound", "world_note", "factor", "MAX_EVALUATIONS"]


def search(cfg, *, top=None, limit=None, recommended=True, progress=None):
    """Valid configurations of ``cfg``'s model, world size and global batch, fastest first.

    ``top`` keeps the best ``top``; ``limit`` stops after finding that many (unranked
    beyond them, for "does any exist?").  ``progress(done, total)`` is called as the
    (tp, pp) pairs are worked through.
    """
    for name, value in (("top", top), ("limit", limit)):
        whole = isinstance(value, int) and not isinstance(value, bool)
        if value is not None and (not whole or value < 0):
            raise ConfigError(f"{name} = {value!r} must be a whole number >= 0 (0 or None: all)")
    d0 = derive(cfg)
    world = d0.world
    if cfg.global_batch is not None:
        g = cfg.global_batch
    elif d0.whole["global_batch"] and d0.whole["dp"]:
        g = int(d0.global_batch)
    else:
        raise ConfigError("the search needs a global batch: give global_batch")
    base = cfg.replace(
        dp=None,
        dp_replicate=None,
        dp_shard=None,
        world_size=world,
        global_batch=g,
        accumulation=None,
    )
    pairs = shapes(cfg, d0, world, recommended)
    bound(cfg, pairs, world, g)
    found = []
    for done, (tp, pp) in enumerate(pairs, 1):
        found.extend(_micro_batches(base, tp, pp, world, g, recommended))
        if progress:
            progress(done, len(pairs))
        if limit and len(found) >= limit:
            break
    found.sort(key=lambda c: (c.step_time_s, c.memory_total))
    return found[:top] if top else found


MAX_EVALUATIONS = 50_000  # a few seconds at the planner's ~10-20k evaluations per second


def bound(cfg, pairs, world, g):
    """Refuse, before any work, a search that would evaluate more than MAX_EVALUATIONS."""
    total = 0
    for tp, pp in pairs:
        dp = world // (tp * pp * cfg.cp)
        if g % dp == 0:
            total += len(divisors(g // dp)) * (4 if dp * cfg.cp > 1 else 1) * 3
    if total > MAX_EVALUATIONS:
        raise ConfigError(
            f"the search over {world} GPUs and global batch {g} would evaluate {total} "
            f"configurations ({len(pairs)} (tp, pp) shapes × micro-batches × ZeRO × "
            f"recompute), more than its bound of {MAX_EVALUATIONS}; plan one configuration "
            "(without --search), or search a smaller world size or global batch"
        )
    return total


def shapes(cfg, d, world, recommended):
    """(tp, pp) pairs to try."""
    if world % cfg.cp:
        return []
    limit = cfg.gpus_per_node if recommended else world
    pairs = []
    for tp in tp_choices(cfg, d, limit=limit):
        if (world // cfg.cp) % tp:
            continue
        for pp in divisors(world // (cfg.cp * tp)):
            if cfg.layers and pp > cfg.layers:
                break
            if recommended and cfg.layers and cfg.layers % (pp * cfg.vpp):
                continue
            pairs.append((tp, pp))
    return pairs


def _micro_batches(base, tp, pp, world, g, recommended):
    dp = world // (tp * pp * base.cp)
    if g % dp:
        return []
    found = []
    for micro in divisors(g // dp):
        shape = dict(tp=tp, pp=pp, sp=base.sp and tp > 1, micro_batch=micro)
        lightest = base.replace(**shape, zero=3, recompute="full")
        if not estimate(lightest, derive(lightest))["fits"]:
            break  # a larger micro-batch needs even more activation memory
        zeros = (0, 1, 2, 3) if dp * base.cp > 1 else (0,)
        for zero in zeros:
            for recompute in ("none", "selective", "full"):
                cfg = base.replace(**shape, zero=zero, recompute=recompute)
                errors, warnings, d, mem = evaluate(cfg)
                if errors or (recommended and _unrecommended(warnings)):
                    continue
                found.append(candidate(cfg, d, mem, warnings))
    return found


def _unrecommended(warnings):
    return any(w.rule in ("tp_node", "layers_pp") for w in warnings)


def world_note(cfg, d=None, suggestions=True):
    """A plain sentence when no configuration of this world size and global batch works.

    "No configuration" means: no tp, pp, micro-batch, ZeRO stage or recompute choice, with
    cp, vpp and sequence parallelism as given or switched off, passes every rule.
    """
    d = d or derive(cfg)
    try:
        if cfg.global_batch is None or _any_at_world(cfg, recommended=True):
            return None
        uneven = _any_at_world(cfg, recommended=False)
    except ConfigError:  # the search is larger than its bound: say nothing rather than guess
        return None
    w, g = d.world, cfg.global_batch
    dps = sorted(
        {w // (t * p * v.cp) for v in _variants(cfg) for t, p in shapes(v, d, w, recommended=True)}
    )
    text = f"No configuration of {w} GPUs works for this model with global batch {g}"
    if dps and all(g % x for x in dps):
        common = math.gcd(*dps)
        text += (
            f": the data-parallel degrees {w} GPUs allow (tp dividing the heads and hidden size "
            f"within a node, pp dividing the {cfg.layers} layers) are "
            f"dp ∈ {{{', '.join(map(str, dps))}}}, "
            f"and global batch = micro·dp·accumulation needs dp to divide {g}"
        )
        if common > 1 and g % common:
            text += (
                f"; every one of them is a multiple of {common} = {factor(common)}, "
                f"and {g} = {factor(g)} is not"
            )
    else:
        text += " that passes every rule (tp, pp, micro-batch, ZeRO stage and recompute all tried)"
    text += "."
    if uneven:
        c = uneven.config
        why = []
        if cfg.layers and cfg.layers % (c.pp * c.vpp):
            why.append(f"{cfg.layers} layers split unevenly over {c.pp * c.vpp} stages")
        if c.tp > cfg.gpus_per_node:
            why.append("TP across nodes")
        text += (
            f" Only configurations against Megatron-LM's recommendations would run, e.g. tp={c.tp} "
            f"pp={c.pp} dp={uneven.dp} ({' and '.join(why)}); the planner does not suggest them."
        )
    return text + (
        " The suggestions change the world size or the global batch." if suggestions else ""
    )


def _variants(cfg):
    """cfg with cp, vpp and sp as given or switched off (the search holds them fixed)."""
    seen = []
    for cp in dict.fromkeys((cfg.cp, 1)):
        for vpp in dict.fromkeys((cfg.vpp, 1)):
            for sp in dict.fromkeys((cfg.sp, False)):
                seen.append(cfg.replace(cp=cp, vpp=vpp, sp=sp, schedule=None))
    return seen


def _any_at_world(cfg, recommended):
    for variant in _variants(cfg):
        found = search(variant, limit=1, recommended=recommended)
        if found:
            return found[0]
    return None


def factor(n):
    """Prime factorization as text: ``1536`` -> ``'2^9·3'``.

    >>> factor(1536), factor(784)
    ('2^9·3', '2^4·7^2')
    """
    parts, p = [], 2
    while p * p <= n:
        k = 0
        while n % p == 0:
            n, k = n // p, k + 1
        if k:
            parts.append(f"{p}^{k}" if k > 1 else str(p))
        p += 1
    if n > 1:
        parts.append(str(n))
    return "·".join(parts)
