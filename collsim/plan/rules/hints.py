"""The hints of the rules: the nearest valid choices, found by arithmetic or a few trials.

:func:`world_hint` lists the pp (or tp) values that divide what the other degrees leave of
the world and the nearest world sizes; :func:`batch_hint` the global batches and
micro-batches that divide; :func:`memory_hint` the single changes (a ZeRO stage,
recomputation, sequence parallelism, micro-batch 1) that make the memory fit.  Complete
valid configurations are :mod:`~collsim.plan.rules.suggestions`' work.

Examples
--------
>>> from collsim.plan.config import PlanConfig, derive
>>> cfg = PlanConfig(world_size=8, dp=8, layers=2, hidden=64, heads=4, global_batch=12)
>>> print(batch_hint(cfg, derive(cfg)))
dp=8 must divide the global batch 12; global batches that work with micro-batch 1 and
dp=8: 8 (accumulation 1) or 16 (accumulation 2)
"""

from ...units import format_size
from ..config.derived import derive, divisors, tp_choices
from ..memory import estimate

__all__ = ["world_hint", "batch_hint", "memory_hint"]


def world_hint(cfg, d):
    w, tp, pp, cp = cfg.world_size, cfg.tp, cfg.pp, cfg.cp
    parts = []
    cp_txt = f"·{cp}" if cp > 1 else ""
    if w % (tp * cp) == 0:
        rest = w // (tp * cp)
        options, too_deep = [], []
        for p in divisors(rest):
            if cfg.layers and p > cfg.layers:
                too_deep.append(str(p))
                continue
            uneven = ", uneven" if cfg.layers and cfg.layers % p else ""
            options.append(f"pp={p} (dp={rest // p}{uneven})")
        text = f"keep tp={tp}: pp must divide {w}/{tp}{cp_txt} = {rest}: " + ", ".join(options)
        if too_deep:
            text += f"; pp={', '.join(too_deep)} would exceed the {cfg.layers} layers"
        parts.append(text)
    else:
        parts.append(f"tp={tp} does not divide {w} either")
    if w % (pp * cp) == 0:
        rest = w // (pp * cp)
        tps = [t for t in tp_choices(cfg, d, limit=max(rest, 1)) if rest % t == 0 and t != tp]
        if tps:
            shown = ", ".join(f"tp={t} (dp={rest // t})" for t in tps[:6])
            parts.append(f"keep pp={pp}: {shown}")
    q = tp * pp * cp
    lower, upper = (w // q) * q, (w // q + 1) * q
    near = [f"{x} GPUs (dp={x // q})" for x in (lower, upper) if x > 0]
    parts.append("or use " + " or ".join(near))
    return "; ".join(parts)


def batch_hint(cfg, d):
    g, dp = cfg.global_batch, int(d.dp)
    b = int(d.micro_batch) if d.whole["micro_batch"] else 1
    step = b * dp
    lower, upper = (g // step) * step, (g // step + 1) * step
    near = " or ".join(f"{x} (accumulation {x // step})" for x in (lower, upper) if x > 0)
    text = f"global batches that work with micro-batch {b} and dp={dp}: {near}"
    if g % dp:
        return f"dp={dp} must divide the global batch {g}; {text}"
    micros = ", ".join(f"{x} (accumulation {g // dp // x})" for x in divisors(g // dp)[:8])
    return f"{text}; or keep {g} with micro-batch {micros}"


def memory_hint(cfg):
    """Single changes that would make the memory fit."""
    tries = [{"zero": z} for z in (1, 2, 3) if z > (derive(cfg).zero)]
    tries += [{"recompute": r} for r in ("selective", "full") if r != cfg.recompute]
    if cfg.tp > 1 and not cfg.sp:
        tries.append({"sp": True})
    if cfg.micro_batch and cfg.micro_batch > 1:
        tries.append({"micro_batch": 1})
    fits = []
    for change in tries:
        try:
            keep_global = "micro_batch" in change and cfg.global_batch is not None
            other = cfg.replace(**change, **({"accumulation": None} if keep_global else {}))
        except ValueError:
            continue
        total = estimate(other, derive(other))
        if total["fits"]:
            what = ", ".join(f"{k}={v}" for k, v in change.items())
            fits.append(f"{what} ({format_size(total['total'])})")
    if fits:
        return "fits with " + "; or ".join(fits)
    return (
        "no single change fits: shard more (zero, tp, pp) and recompute activations; "
        "see the suggestions"
    )
