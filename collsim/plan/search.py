"""``collsim plan --search``: every valid configuration of a model on a cluster, fastest first.

For a fixed world size, global batch and model, the search tries every tp (dividing the
hidden size, the heads, the key/value heads and the ffn size), every pp (dividing what tp
leaves), the dp that follows, every micro-batch size dividing global/dp, every ZeRO stage
and every recompute choice; keeps those that pass every rule of :mod:`collsim.plan.rules`
(memory included) and ranks them by estimated step time.  cp, vpp, sequence parallelism
(when tp > 1), precision and schedule stay as given.  Data parallelism is Megatron-style
here (ZeRO shards over all of dp; no HSDP split).

Every figure it ranks on is estimated from the model's shape (a preset, the given shape,
or the GPT-3 shape a bare parameter count gets, see :mod:`collsim.plan.models`), so
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

from dataclasses import dataclass

from ..errors import ConfigError
from .cost import communication, compute, scaling
from .derive import derive
from .memory import estimate
from .numbers import divisors, tp_choices
from .rules import check

__all__ = ["Candidate", "search", "evaluate", "candidate", "shapes", "bound", "MAX_EVALUATIONS"]


@dataclass(frozen=True)
class Candidate:
    """One valid configuration with its estimates."""

    config: object  # PlanConfig
    dp: int
    accumulation: int
    memory_total: float  # bytes per GPU
    compute_time_s: float
    communication_time_s: float
    activation_bytes: float  # the activation part of memory_total
    tp_communication_time_s: float  # the tensor-parallel part of communication_time_s
    step_time_s: float
    efficiency: float
    warnings: tuple = ()  # rule ids of the warnings it raises

    def to_dict(self):
        c = self.config
        return {
            "world_size": c.world_size,
            "tp": c.tp,
            "pp": c.pp,
            "dp": self.dp,
            "cp": c.cp,
            "vpp": c.vpp,
            "sp": c.sp,
            "micro_batch": c.micro_batch,
            "accumulation": self.accumulation,
            "global_batch": c.global_batch,
            "zero": c.zero,
            "recompute": c.recompute,
            "memory_total": self.memory_total,
            "activation_bytes": self.activation_bytes,
            "compute_time_s": self.compute_time_s,
            "communication_time_s": self.communication_time_s,
            "tp_communication_time_s": self.tp_communication_time_s,
            "step_time_s": self.step_time_s,
            "efficiency": self.efficiency,
            "warnings": list(self.warnings),
        }


def evaluate(cfg):
    """``(errors, warnings, d, mem)`` without hints: the fast path of search and suggest."""
    d = derive(cfg)
    mem = estimate(cfg, d)
    errors, warnings = check(cfg, d, mem, explain=False)
    return errors, warnings, d, mem


def candidate(cfg, d, mem, warnings=()):
    """A :class:`Candidate` with the cost estimates of an already valid ``cfg``."""
    comm = communication(cfg, d)
    comp = compute(cfg, d)
    scale = scaling(cfg, d, comm, comp)
    return Candidate(
        config=cfg,
        dp=int(d.dp),
        accumulation=int(d.accumulation),
        memory_total=mem["total"],
        compute_time_s=comp["time_s"],
        communication_time_s=comm["total"]["time_s"],
        activation_bytes=mem["activations"],
        tp_communication_time_s=comm["tp"]["time_s"],
        step_time_s=scale["step_time_s"],
        efficiency=scale["efficiency"],
        warnings=tuple(w.rule for w in warnings),
    )


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
