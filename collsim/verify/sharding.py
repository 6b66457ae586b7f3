"""What ``collsim verify zero | fsdp | hsdp`` measures beyond the match: memory and links.

The mixed-precision Adam of the ZeRO paper (Rajbhandari et al. 2020) holds 16 bytes per
parameter: bf16 parameters (2) and gradients (2), fp32 master weights, Adam ``m`` and ``v``
(4 each).  ZeRO stage 1 shards the 12 bytes of optimizer state over the N ranks of the
data-parallel (shard) group, stage 2 the gradients too, stage 3 (FSDP) the parameters as
well, each unit gathered just before its passes and freed after.  HSDP shards inside a node
and replicates across nodes, so the inter-node links carry only the replica all-reduce.

:func:`measure_sharding` reads, from the run's trace, the busiest rank's memory peaks (the
tracker charges every array at its declared precision, :mod:`collsim.network.memory`) and
the bytes per link class (:func:`collsim.parallel.accounting.bytes_by_link_class`), and sets
them next to the formulas of :mod:`.expected`: a :class:`ShardingFindings`.
:func:`sharding_lines` is its part of the printed report.

The bytes on the wire are the float64 arrays the check compares (b = 8 B); memory is
charged at the declared training precisions: the two need not use one b.

Adam's parameters agree with one device's to ~1e-11, not ~1e-16 as SGD's do: a gradient that
is exactly 0 in exact arithmetic (attention's key bias: softmax ignores a shift of all keys)
is rounding noise of ~1e-17, and Adam divides it by its own size (m / (sqrt(v) + eps)), so
the parameter moves by up to lr · noise / eps on each side, differently.
"""

from dataclasses import dataclass

from ..network.memory import busiest, memory_peaks
from ..parallel.accounting import bytes_by_link_class
from ..units import format_size
from .expected import (
    gathered_units,
    hsdp_inter_node_bytes,
    model_state_formula,
    sharded_bytes,
)

__all__ = ["ShardingFindings", "measure_sharding", "padded_params", "sharding_lines", "MODEL_STATE"]

MODEL_STATE = ("params", "grads", "optimizer")  # the ZeRO paper's model states
GATHERED_BYTES = 2  # a gathered unit is bf16, like the parameters


@dataclass
class ShardingFindings:
    """Memory and link bytes of a sharding scheme's run, with their formulas."""

    stage: int
    dp_shard: int  # N: ranks one model is sharded over
    dp_replicate: int  # replicas of the sharded model (1 unless HSDP)
    gpus_per_node: int
    params: int  # Ψ: parameters of one rank's model (tp = 1: the whole model)
    unit_params: list  # Ψ of each unit (a transformer block)
    optimizer_name: str  # "Adam" or "SGD"
    peak: dict  # the busiest rank's MemoryPeak.to_dict()
    peak_rank: int
    peak_per_rank: list  # every rank's MemoryPeak.to_dict()
    formula: object  # expected.ModelStateFormula
    gathered_units: int  # units the schedule holds gathered at its peak, by the formula
    reshard_after_forward: bool  # FSDP: False keeps the gathered units for the backward
    bytes_by_link_class: dict  # {"intra_node": B, "inter_node": B}, summed over ranks
    formula_bytes: dict  # collective -> bytes per rank over the run, by the closed forms
    formula_inter_node: float | None  # HSDP with shards inside nodes: the replica all-reduce

    @property
    def model_state(self):
        """Measured model state of the busiest rank: the peaks of its three categories
        (each held for the whole run, so their peaks add up)."""
        return sum(self.peak[c] for c in MODEL_STATE)

    @property
    def formula_gathered(self):
        """Bytes of the gathered unit(s) the schedule holds at its peak (the largest units)."""
        largest = sorted(self.unit_params, reverse=True)[: self.gathered_units]
        return GATHERED_BYTES * sum(largest) if self.stage == 3 else 0

    def to_dict(self):
        """The ``--json`` keys these schemes add."""
        f = self.formula
        return {
            "bytes_by_link_class": dict(self.bytes_by_link_class),
            "peak_memory": dict(self.peak),
            "peak_memory_rank": self.peak_rank,
            "peak_memory_per_rank": [dict(p) for p in self.peak_per_rank],
            "model_state_bytes": self.model_state,
            "formula_model_state": {
                "params": f.params,
                "grads": f.grads,
                "optimizer": f.optimizer,
                "total": f.total,
                "formula": f.text,
            },
            "formula_gathered_params": self.formula_gathered,
            "formula_bytes_by_collective": dict(self.formula_bytes),
            "formula_inter_node_bytes": self.formula_inter_node,
            "params_per_rank": self.params,
            "stage": self.stage,
            "dp_shard": self.dp_shard,
            "dp_replicate": self.dp_replicate,
            "gpus_per_node": self.gpus_per_node,
        }


def padded_params(unit_params, stage, shards):
    """Elements the collectives move: each flat buffer padded with zeros to a multiple of
    ``shards``, as PyTorch FSDP pads its flat parameters (per unit for stage 3, the whole
    model for stages 1-2); Ψ itself when ``shards`` divides it.

    >>> padded_params([10, 10], stage=3, shards=4), padded_params([10, 10], stage=1, shards=4)
    (24, 20)
    """
    if stage == 3:
        return sum(-(-u // shards) * shards for u in unit_params)
    return -(-sum(unit_params) // shards) * shards


def measure_sharding(
    trace,
    *,
    n_ranks,
    stage,
    dp_shard,
    dp_replicate,
    gpus_per_node,
    unit_params,
    optimizer_bytes,
    optimizer_name,
    steps,
    accumulation,
    reshard_after_forward,
    prefetch,
):
    """The :class:`ShardingFindings` of a run's ``trace`` on ``n_ranks`` ranks."""
    peaks = memory_peaks(trace, n_ranks)
    top = busiest(peaks)
    params = sum(unit_params)
    moved = padded_params(unit_params, stage, dp_shard)
    formula_bytes = sharded_bytes(
        stage=stage,
        dp_shard=dp_shard,
        dp_replicate=dp_replicate,
        params=moved,
        steps=steps,
        accumulation=accumulation,
        reshard_after_forward=reshard_after_forward,
    )
    inter = None
    if dp_replicate > 1 and gpus_per_node == dp_shard:
        inter = hsdp_inter_node_bytes(
            dp_shard=dp_shard,
            dp_replicate=dp_replicate,
            params=moved,
            steps=steps,
            accumulation=accumulation,
        )
    elif n_ranks <= gpus_per_node:  # one node: nothing crosses
        inter = 0
    return ShardingFindings(
        stage=stage,
        dp_shard=dp_shard,
        dp_replicate=dp_replicate,
        gpus_per_node=gpus_per_node,
        params=params,
        unit_params=list(unit_params),
        optimizer_name=optimizer_name,
        peak=top.to_dict(),
        peak_rank=top.rank,
        peak_per_rank=[p.to_dict() for p in peaks],
        formula=model_state_formula(params, stage, dp_shard, optimizer_bytes),
        gathered_units=gathered_units(len(unit_params), reshard_after_forward, prefetch),
        reshard_after_forward=reshard_after_forward,
        bytes_by_link_class=bytes_by_link_class(trace, gpus_per_node),
        formula_bytes=formula_bytes,
        formula_inter_node=inter,
    )


def _size(nbytes):
    if abs(nbytes) < 1024:  # "872 B": no second spelling of the same number
        return format_size(nbytes)
    return f"{format_size(nbytes)} ({nbytes:,.0f} B)"


_PARTS = {  # category -> (shown as, formula per stage 0..3; k the optimizer's bytes)
    "params": ("parameters (bf16)", ("2Ψ", "2Ψ", "2Ψ", "2Ψ/N")),
    "grads": ("gradients (bf16)", ("2Ψ", "2Ψ", "2Ψ/N", "2Ψ/N")),
    "optimizer": ("optimizer (fp32)", ("kΨ", "kΨ/N", "kΨ/N", "kΨ/N")),
}


def _how(stage, collective, reshard_after_forward):
    """How the closed form of ``collective`` reads under ZeRO ``stage``."""
    per_call = "(N-1)/N·Ψ·b"
    if collective == "all_reduce":
        return "2(R-1)/R·(Ψ/N)·b per micro-batch: the shard, across the replicas"
    if stage == 3 and collective == "all_gather":
        times = "2 ×" if reshard_after_forward else "1 ×"
        when = "before forward, backward" if reshard_after_forward else "before the forward"
        return f"{times} {per_call} per micro-batch ({when})"
    if stage == 1 or collective == "all_gather":
        return f"{per_call} per step"
    return f"{per_call} per micro-batch"


_TOTALS = {
    1: "2Ψ(N-1)/N·b per step, as DDP's all-reduce",
    2: "2Ψ(N-1)/N·b per step, as DDP's all-reduce",
    3: "3Ψ(N-1)/N·b per step: 1.5 × DDP's 2Ψ(N-1)/N·b",
}


def sharding_lines(s, bytes_by_collective, bytes_sent):
    """The memory and link lines of the printed report, for :class:`ShardingFindings` ``s``
    and the measured bytes (collective -> per rank; per rank in all)."""
    return _memory_lines(s) + _bytes_lines(s, bytes_by_collective, bytes_sent)


def _memory_lines(s):
    k = {"Adam": 12, "SGD": 4}.get(s.optimizer_name, 12)
    f = s.formula
    shown = {"params": f.params, "grads": f.grads, "optimizer": f.optimizer}
    lines = [
        "",
        f"  peak memory of the busiest rank (rank {s.peak_rank}); Ψ = {s.params:,} parameters, "
        f"N = {s.dp_shard} ranks in the shard group",
        f"  (ZeRO paper: bf16 parameters and gradients 2 B each, fp32 master weights"
        f"{', Adam m and v' if k == 12 else ''} {k} B per parameter)",
    ]
    padded = padded_params(s.unit_params, s.stage, s.dp_shard)
    if padded != s.params:
        lines.append(
            f"  (Ψ is not a multiple of N: the shards hold {padded:,} elements, "
            "zero-padded as FSDP pads, so the formula is not exact)"
        )
    for category in MODEL_STATE:
        name, how = _PARTS[category]
        how = how[s.stage].replace("k", str(k))
        lines.append(
            f"    {name:<20} {_size(s.peak[category]):<24} formula {how:<6} "
            f"{_size(shown[category])}"
        )
    verdict = "equal" if s.model_state == f.total else "DIFFERENT"
    lines.append(
        f"    {'model state':<20} {_size(s.model_state):<24} formula {f.text} = "
        f"{_size(f.total)}: {verdict}"
    )
    if s.stage == 3:
        units = "unit" if s.gathered_units == 1 else "units"
        lines.append(
            f"    {'gathered parameters':<20} {_size(s.peak['gathered_params']):<24} "
            f"formula {s.gathered_units} {units} held × 2 B × Ψ_unit = "
            f"{_size(s.formula_gathered)}"
        )
    for category in ("activations", "comm_buffers"):
        lines.append(f"    {category.replace('_', ' '):<20} {_size(s.peak[category])}")
    lines.append(
        f"    {'total (peak of sum)':<20} {_size(s.peak['total']):<24} unsharded "
        f"model state: {4 + k}Ψ = {_size((4 + k) * s.params)}"
    )
    return lines


def _bytes_lines(s, bytes_by_collective, bytes_sent):
    n = len(bytes_sent)
    lines = [
        "",
        "  bytes sent per rank, whole run (mean over ranks; formula, b = 8 B: the "
        "float64 arrays compared)",
    ]
    for name in sorted(set(bytes_by_collective) | set(s.formula_bytes)):
        measured = sum(bytes_by_collective.get(name, [0] * n)) / n
        formula = s.formula_bytes.get(name)
        how = _how(s.stage, name, s.reshard_after_forward)
        shown = "" if formula is None else f"   formula {_size(formula)}  {how}"
        lines.append(f"    {name:<15} {_size(measured):<24}{shown}")
    lines.append(f"    total per rank: {', '.join(format_size(b) for b in bytes_sent)}")
    if s.dp_replicate == 1 and (s.stage < 3 or s.reshard_after_forward):
        total = sum(s.formula_bytes.values())
        lines.append(f"    formula total {_size(total)}: {_TOTALS[s.stage]}")
    links = s.bytes_by_link_class
    lines += [
        f"  bytes by link class, summed over ranks (nodes of {s.gpus_per_node} GPU(s)):",
        f"    intra-node {_size(links['intra_node'])}, inter-node {_size(links['inter_node'])}",
    ]
    if s.formula_inter_node is not None and s.dp_replicate > 1:
        verdict = "equal" if links["inter_node"] == s.formula_inter_node else "DIFFERENT"
        lines.append(
            f"    inter-node formula: the replica all-reduce alone, 2(R-1)·Ψ·b per "
            f"step = {_size(s.formula_inter_node)}: {verdict}"
        )
    return lines
