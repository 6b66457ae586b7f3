"""Nearest valid configurations: what to change, and by how little.

A suggestion is a complete configuration that passes every rule and adds no warning the
original did not have.  It may change the parallel degrees, the micro-batch, the ZeRO
stage, recomputation, sequence parallelism, virtual stages, the world size and the global
batch (never the model or the hardware).  World size and global batch are *repaired*:
when they change, they move to the nearest value that makes the other settings work
(768 GPUs rather than 784; global batch 1568 rather than 1536).

Ranking: fewest settings changed, then the smallest relative change (the sum of
|new - old| / old over changed numbers; a ZeRO stage, a recompute level or a flag counts
0.25 per step), then the shorter estimated step.  The list keeps the best suggestion of
each set of changed settings, so it shows different ways out rather than five variants of
one.

Examples
--------
>>> from collsim.plan.config import PlanConfig
>>> cfg = PlanConfig(world_size=12, tp=8, layers=4, hidden=256, heads=8, global_batch=12)
>>> [s.describe() for s in suggest(cfg, top=2)]  # 16 = 8·2 is 33% away, tp=4 50%
['world_size 12→16', 'tp 8→4']
"""

import itertools
from dataclasses import dataclass

from ...errors import ConfigError
from ..config.derived import derive, divisors, tp_choices
from ..cost import candidate
from .checks import evaluate

__all__ = ["Suggestion", "suggest", "settings_of"]

_CATEGORICAL = {
    "zero": (0, 1, 2, 3),
    "recompute": ("none", "selective", "full"),
    "sp": (False, True),
}
MAX_CHANGES = 4
_ORDER = (
    "world_size",
    "tp",
    "pp",
    "cp",
    "vpp",
    "sp",
    "micro_batch",
    "global_batch",
    "accumulation",
    "zero",
    "recompute",
)
MAX_EVALUATIONS = 20_000  # bounds the suggestion search to about two seconds


@dataclass(frozen=True)
class Suggestion:
    """A valid configuration and the settings it changes (name -> (old, new))."""

    changes: dict
    candidate: object  # cost.Candidate with the configuration and its estimates

    @property
    def config(self):
        return self.candidate.config

    def describe(self):
        return ", ".join(f"{k} {_show(a)}→{_show(b)}" for k, (a, b) in self.changes.items())

    def to_dict(self):
        return {
            "changes": {k: {"from": a, "to": b} for k, (a, b) in self.changes.items()},
            "config": self.candidate.to_dict(),
        }


def _show(x):
    return str(x).lower() if isinstance(x, bool) else str(x)


def settings_of(cfg, d=None):
    """The settings a suggestion may change, as the original resolves them."""
    d = d or derive(cfg)
    micro = int(d.micro_batch) if d.whole["micro_batch"] else (cfg.micro_batch or 1)
    settings = dict(
        tp=cfg.tp,
        pp=cfg.pp,
        cp=cfg.cp,
        vpp=cfg.vpp,
        sp=cfg.sp,
        micro_batch=micro,
        zero=d.zero,
        recompute=cfg.recompute,
        world_size=d.world,
    )
    if cfg.global_batch is not None:
        settings["global_batch"] = cfg.global_batch
    else:
        settings["accumulation"] = cfg.accumulation or 1
    return settings


def suggest(cfg, top=5):
    """Up to ``top`` :class:`Suggestion`, best first (see the module docstring)."""
    d = derive(cfg)
    original = settings_of(cfg, d)
    _, warned, _, _ = evaluate(cfg)
    allowed = {w.rule for w in warned}
    batch = "global_batch" if "global_batch" in original else "accumulation"
    free = [k for k in ("tp", "pp", "cp", "vpp", "sp", "micro_batch", "zero", "recompute")]
    alternatives = {k: _alternatives(cfg, d, original, k) for k in free}
    knobs = [k for k in free if alternatives[k]] + ["world_size", batch]
    accelerate = cfg.dp_replicate is not None or cfg.dp_shard is not None
    best = _accelerate_ways(cfg, allowed) if accelerate else {}
    evaluations = 0
    for level in range(1, MAX_CHANGES + 1):
        for subset in itertools.combinations(knobs, level):
            if any(found <= set(subset) for found in best):
                continue  # a smaller set of changes already works: this one adds nothing
            for settings in _candidates(cfg, original, alternatives, subset):
                evaluations += 1
                if evaluations > MAX_EVALUATIONS:
                    break  # bounded: the best found so far are still the nearest
                found = _check(cfg, original, settings, allowed, accelerate)
                if found and found.rank < best.get(frozenset(subset), _WORST).rank:
                    best[frozenset(subset)] = found
        if len(best) >= top or evaluations > MAX_EVALUATIONS:
            break
    return [s.suggestion for s in sorted(best.values(), key=lambda s: s.rank)[:top]]


@dataclass(frozen=True)
class _Found:
    rank: tuple
    suggestion: object


_WORST = _Found((float("inf"),), None)
_DERIVED = dict(dp=None, dp_replicate=None, dp_shard=None, accumulation=None)


def _check(cfg, original, settings, allowed, accelerate=False):
    changes = {
        k: (original[k], settings[k])
        for k in _ORDER
        if k in settings and settings[k] != original[k]
    }
    if not changes:
        return None
    # Accelerate sizes stay Accelerate sizes: a suggestion must hold under its rules too
    derived = dict(dp=None, accumulation=None) if accelerate else _DERIVED
    try:
        new = cfg.replace(**{**derived, **settings})
    except ConfigError:
        return None
    errors, warnings, d, mem = evaluate(new)
    if errors or any(w.rule not in allowed for w in warnings):
        return None
    found = candidate(new, d, mem, warnings)
    rank = (len(changes), round(_relative(changes), 9), found.step_time_s)
    return _Found(rank, Suggestion(changes, found))


def _accelerate_ways(cfg, allowed):
    """For Accelerate sizes: shard instead of replicating, HSDP, or drop the replication.

    The ways out of Accelerate's "TP/CP with pure data parallelism" rule, each kept only if
    it passes every rule; the world size follows dp_replicate·dp_shard·tp·cp·pp.
    """
    r, s = cfg.dp_replicate or 1, cfg.dp_shard or 1
    q = cfg.tp * cfg.pp * cfg.cp
    ways = [dict(dp_replicate=1, dp_shard=r * s)]  # FSDP (+ TP/CP) over the same GPUs
    ways += [dict(dp_replicate=r // k, dp_shard=s * k) for k in divisors(r) if 1 < k < r]
    ways.append(dict(dp_replicate=1, dp_shard=s, world_size=s * q))  # drop the replication
    found = {}
    for i, way in enumerate(ways):
        sizes = dict(way, world_size=way.get("world_size", cfg.world_size))
        try:
            # dp_shard > 1 means FSDP (ZeRO-3) in Accelerate unless a stage was given
            new = cfg.replace(**sizes, dp=None, zero=None if not cfg.zero else cfg.zero)
            new = new.replace(zero=derive(new).zero, micro_batch=cfg.micro_batch or 1)
        except ConfigError:
            continue
        errors, warnings, d, mem = evaluate(new)
        if errors or any(w.rule not in allowed for w in warnings):
            continue
        old = dict(dp_replicate=r, dp_shard=s, world_size=cfg.world_size)
        changes = {k: (old[k], v) for k, v in sizes.items() if v != old[k]}
        if not changes:
            continue
        rank = (len(changes), round(_relative(changes), 9), 0.0)
        # the key keeps each way apart (two of them change the same two sizes)
        key = frozenset(changes) | {f"accelerate way {i}"}
        found[key] = _Found(rank, Suggestion(changes, candidate(new, d, mem, warnings)))
    return found


def _relative(changes):
    total = 0.0
    for name, (old, new) in changes.items():
        if name in _CATEGORICAL:
            order = _CATEGORICAL[name]
            total += 0.25 * abs(order.index(new) - order.index(old))
        else:
            total += abs(new - old) / old
    return total


def _alternatives(cfg, d, original, knob):
    """Values other than the original that ``knob`` may take on its own."""
    old = original[knob]
    if knob == "tp":
        values = tp_choices(cfg, d, limit=max(cfg.gpus_per_node, cfg.tp))
    elif knob == "pp":
        values = divisors(cfg.layers) if cfg.layers else [1, 2, 4, 8, 16, 32, 64]
    elif knob == "cp":
        values = (
            [1] + [c for c in (2, 4, 8, 16, 32) if c <= 2 * old and cfg.seq % (2 * c) == 0]
            if old > 1
            else []
        )
    elif knob == "vpp":
        values = [1]
    elif knob == "micro_batch":
        values = sorted({1, 2, 4, 8, max(1, old // 2), old * 2})
    else:
        values = _CATEGORICAL[knob]
    return [v for v in values if v != old]


def _candidates(cfg, original, alternatives, subset):
    """Full settings dicts that change exactly the knobs in ``subset``."""
    free = [k for k in subset if k in alternatives]
    for values in itertools.product(*(alternatives[k] for k in free)):
        settings = dict(original, **dict(zip(free, values)))
        worlds = (
            _repair_world(settings, original)
            if "world_size" in subset
            else [settings["world_size"]]
        )
        for world in worlds:
            settings = dict(settings, world_size=world)
            if "global_batch" in subset:
                for g in _repair_global(settings, original):
                    yield dict(settings, global_batch=g)
            elif "accumulation" in subset:
                for m in _repair_accumulation(settings, original):
                    yield dict(settings, accumulation=m)
            else:
                yield settings


def _repair_world(s, original):
    """The nearest world sizes below and above the original that these degrees allow."""
    q = s["tp"] * s["pp"] * s["cp"]
    w0 = original["world_size"]
    g, micro = s.get("global_batch"), s["micro_batch"]

    def works(dp):
        if g is None:
            return True
        if g % (micro * dp):
            return False
        return s["vpp"] == 1 or (g // (micro * dp)) % s["pp"] == 0

    # dp must divide the global batch (over the micro-batch): try only those divisors, so the
    # repair costs a few hundred checks even for a million GPUs
    if g is not None:
        dps = divisors(g // micro) if g % micro == 0 else []
    else:
        dps = [dp for dp in (w0 // q - 1, w0 // q, w0 // q + 1) if dp > 0]
    lower = [dp for dp in dps if q * dp < w0 and works(dp)]
    upper = [dp for dp in dps if w0 < q * dp <= 4 * w0 + q and works(dp)]
    below = q * max(lower) if lower else None
    above = q * min(upper) if upper else None
    return [w for w in (below, above) if w]


def _repair_global(s, original):
    q = s["tp"] * s["pp"] * s["cp"]
    if s["world_size"] % q:
        return []
    step = s["micro_batch"] * (s["world_size"] // q) * (s["pp"] if s["vpp"] > 1 else 1)
    g0 = original["global_batch"]
    return [g for g in ((g0 // step) * step, (g0 // step + 1) * step) if g > 0 and g != g0]


def _repair_accumulation(s, original):
    if s["vpp"] == 1:
        return []
    m0, p = original["accumulation"], s["pp"]
    return [m for m in ((m0 // p) * p, (m0 // p + 1) * p) if m > 0 and m != m0]
