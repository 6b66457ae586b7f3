"""What :func:`~collsim.verify.verify` found: :class:`VerifyReport` and its printed form.

``str(report)`` is the human report (:func:`report_text`), :meth:`VerifyReport.to_dict` the
JSON that ``collsim verify --json`` prints.  Units are explicit everywhere: bytes as ``KiB``,
times as ``us``, differences as plain floats (absolute, in the units of the arrays compared).

Examples
--------
>>> from collsim.verify import verify
>>> report = verify("tp-row", tp=2, batch=2, hidden=4, ffn_hidden=8, seq=2, steps=1)
>>> str(report).splitlines()[0]
'collsim verify tp-row: tensor parallel, row-parallel linear (input already split)'
>>> report.to_dict()["tolerance_rel"]
1e-09
"""

from dataclasses import dataclass, field

from ..units import format_size, format_time
from .compare import TOLERANCE
from .context_report import context_cluster_line, context_lines
from .sharding import sharding_lines

__all__ = ["VerifyReport", "report_text"]


@dataclass
class VerifyReport:
    """What :func:`~collsim.verify.verify` found; ``str()`` is the human report,
    :meth:`to_dict` the JSON."""

    scheme: str
    config: dict
    description: str
    per_step: list  # per step: losses and max |difference| of each kind
    max_abs_diff: float  # over all steps, outputs, gradients and parameters
    max_rel_diff: float
    match: bool
    dp_replica_diff: float
    tp_replica_diff: float
    bytes_sent: list  # per rank, whole run
    bytes_by_group: dict  # (dimension, collective) -> per rank
    formula_bytes: dict  # (dimension, collective) -> per rank, by the closed forms
    time_s: float
    overlap: list  # per rank: accounting.Overlap
    buckets: list = field(default_factory=list)
    nonfinite: list = field(default_factory=list)  # "step 2 params (cluster)": nan or inf
    sharding: object = None  # zero, fsdp, hsdp: a sharding.ShardingFindings (memory, links)
    context: object = None  # cp, nd: a context.ContextFindings (cp bytes, FLOPs, memory)
    trace: object = field(default=None, repr=False, compare=False)  # the cluster run's

    @property
    def bytes_by_collective(self):
        """Collective -> bytes sent per rank, summed over mesh dimensions."""
        out = {}
        for (_, name), per_rank in self.bytes_by_group.items():
            total = out.setdefault(name, [0] * len(per_rank))
            for r, b in enumerate(per_rank):
                total[r] += b
        return out

    def to_dict(self):
        """The report as plain values (``collsim verify --json``; nan stays nan here)."""
        out = {
            "scheme": self.scheme,
            "config": self.config,
            "model": self.description,
            "match": self.match,
            "non_finite": self.nonfinite,
            "max_abs_diff": self.max_abs_diff,
            "max_rel_diff": self.max_rel_diff,
            "tolerance_rel": TOLERANCE,
            "dp_replica_max_diff": self.dp_replica_diff,
            "tp_replica_max_diff": self.tp_replica_diff,
            "steps": self.per_step,
            "loss_cluster": [s["loss_cluster"] for s in self.per_step],
            "loss_single_device": [s["loss_single_device"] for s in self.per_step],
            "bytes_sent": self.bytes_sent,
            "bytes_by_collective": self.bytes_by_collective,
            "bytes_by_group": {f"{d} {c}": v for (d, c), v in self.bytes_by_group.items()},
            "formula_bytes_per_rank": {f"{d} {c}": v for (d, c), v in self.formula_bytes.items()},
            "gradient_buckets": self.buckets,
            "time_s": self.time_s,
            "comm_s": [o.comm_s for o in self.overlap],
            "overlapped_comm_s": [o.overlapped_s for o in self.overlap],
            "exposed_comm_s": [o.exposed_s for o in self.overlap],
            "compute_s": [o.compute_s for o in self.overlap],
        }
        if self.sharding is not None:  # ZeRO / FSDP / HSDP: memory and link classes
            out["bytes_per_rank"] = list(self.bytes_sent)
            out |= self.sharding.to_dict()
        if self.context is not None:  # cp, nd: cp bytes and FLOPs, memory and link classes
            out["bytes_per_rank"] = list(self.bytes_sent)
            out |= self.context.to_dict()
        return out

    def __str__(self):
        return report_text(self)


_NAMES = {
    "dp": "data parallel",
    "tp-column": "tensor parallel, column-parallel linear (output all-gathered)",
    "tp-row": "tensor parallel, row-parallel linear (input already split)",
    "tp-mlp": "tensor parallel, Megatron MLP (column -> GELU -> row)",
    "tp-attention": "tensor parallel, attention with heads split",
    "sp": "tensor parallel with sequence parallelism",
    "dp-tp": "data parallel × tensor parallel on a (dp, tp) mesh",
    "fsdp": "FSDP: ZeRO stage 3 with PyTorch's knobs (parameters, gradients and optimizer "
    "state sharded)",
    "hsdp": "HSDP: ZeRO-3 inside each node's shard group, replicated across nodes",
    "cp": "context parallel: the sequence split over the cp ranks, attention across them",
    "nd": "the N-D mesh: dp_replicate × dp_shard × cp × tp (Accelerate's order), × pp",
}

_STAGES = {
    1: "ZeRO stage 1 (Rajbhandari et al. 2020): optimizer state sharded",
    2: "ZeRO stage 2 (Rajbhandari et al. 2020): optimizer state and gradients sharded",
    3: "ZeRO stage 3 (Rajbhandari et al. 2020): optimizer state, gradients and parameters sharded",
}

_FORMULAS = {
    ("dp", "all_reduce"): "2(K-1)/K·P·b per step",
    ("tp", "all_reduce"): "2(t-1)/t·N·b each",
    ("tp", "all_gather"): "(t-1)/t·N·b each",
    ("tp", "reduce_scatter"): "(t-1)/t·N·b each",
    ("cp", "send"): "ring attention, per rank below",
    ("cp", "all_to_all"): "DeepSpeed-Ulysses, per rank below",
}


def _flops(rate):
    for prefix, factor in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if rate >= factor:
            return f"{rate / factor:.4g} {prefix}FLOP/s"
    return f"{rate:.4g} FLOP/s"


def _size(nbytes):
    return f"{format_size(nbytes)} ({nbytes:,.0f} B)"


def report_text(report):
    """The human report of a :class:`VerifyReport` (what ``collsim verify`` prints)."""
    c = report.config
    example = ""
    if report.scheme == "dp" and (c["dp"], c["batch"]) == (4, 64):
        example = " (the batch-64, dp=4 example: 16 samples per rank)"
    name = _STAGES[c["zero"]] if report.scheme == "zero" else _NAMES[report.scheme]
    lines = [
        f"collsim verify {report.scheme}: {name}{example}",
        f"  model: {report.description}; hidden {c['hidden']}, heads {c['heads']}, ffn hidden "
        f"{c['ffn_hidden']}, seq {c['seq']}",
        _cluster_line(c),
        f"  global batch {c['batch']} = micro batch {c['micro_batch']} × dp {c['dp']} × "
        f"accumulation {c['accumulation']}; {c['steps']} {c.get('optimizer', 'SGD')} step(s) "
        f"(lr {c['lr']}), random seed {c['seed']}",
        "",
        "  step  loss (cluster)  loss (1 device)  max|Δ| output  max|Δ| dX  max|Δ| grads  "
        "max|Δ| params",
    ]
    for s in report.per_step:
        lines.append(
            f"  {s['step']:>4}  {s['loss_cluster']:<14.10f}  {s['loss_single_device']:<15.10f}"
            f"  {s['max_abs_diff_output']:<13.3g}  {s['max_abs_diff_input_grad']:<9.3g}"
            f"  {s['max_abs_diff_grads']:<12.3g}  {s['max_abs_diff_params']:.3g}"
        )
    verdict = "MATCH" if report.match else "MISMATCH"
    lines += [
        "",
        f"  max abs diff {report.max_abs_diff:.3g} (relative {report.max_rel_diff:.3g}, "
        f"tolerance 1e-9): {verdict}",
    ]
    if report.nonfinite:
        shown = "; ".join(report.nonfinite[:2])
        more = f" and {len(report.nonfinite) - 2} more" if len(report.nonfinite) > 2 else ""
        lines.append(
            f"  non-finite values (nan or inf), which no comparison can check: {shown}{more}"
            f"\n  training diverged: try a smaller lr than {c['lr']}"
        )
    if c["dp"] > 1:
        lines.append(
            f"  data-parallel replicas after the last step differ by at most "
            f"{report.dp_replica_diff:g} (identical when 0)"
        )
    if c["tp"] > 1:
        lines.append(
            f"  replicated parameters (LayerNorm, row bias) across each TP group differ by at "
            f"most {report.tp_replica_diff:g}"
        )
    if report.sharding is not None:
        lines += sharding_lines(report.sharding, report.bytes_by_collective, report.bytes_sent)
    elif report.context is not None:
        lines += _group_bytes_lines(report) + context_lines(report.context, report.config)
    else:
        lines += _group_bytes_lines(report)
    return "\n".join(lines + _time_lines(report))


def _cluster_line(c):
    if "cp_variant" in c:  # cp, nd: the whole mesh
        return context_cluster_line(c, _flops(c["compute_rate"]))
    where = f"one switch ({c['bandwidth']}, {c['latency']} per link)"
    if c.get("topology") == "hierarchical":
        nodes = c["dp"] * c["tp"] // c["gpus_per_node"]
        where = (
            f"{nodes} node(s) of {c['gpus_per_node']} GPU(s) ({c['bandwidth']}, "
            f"{c['latency']} per link inside a node,\n  50GB/s, 5us NICs between nodes)"
        )
    head = f"  dp {c['dp']} × tp {c['tp']} = {c['dp'] * c['tp']} ranks on {where}, "
    head += f"{_flops(c['compute_rate'])} per rank"
    if "zero" not in c:
        return head
    knobs = f"dp_replicate {c['dp_replicate']} × dp_shard {c['dp_shard']}"
    if c["zero"] == 3:
        knobs += f"; reshard_after_forward {c['reshard_after_forward']}, prefetch {c['prefetch']}"
    return f"{head}\n  ZeRO stage {c['zero']}: {knobs}"


def _group_bytes_lines(report):
    c = report.config
    lines = ["", "  bytes sent per rank, whole run (mean over ranks; formula)"]
    n = len(report.bytes_sent)
    for key, per_rank in sorted(report.bytes_by_group.items(), key=str):
        measured = sum(per_rank) / n
        formula = report.formula_bytes.get(key)
        how = _FORMULAS.get(key, "")
        if c["sequence_parallel"] and key == ("tp", "all_reduce"):
            how = "2(t-1)/t·6H·b: LayerNorm and bias gradients of local tokens"
        shown = "" if formula is None else f"   formula {_size(formula)}  {how}"
        dim, name = key
        lines.append(f"    {dim or '-':>2} {name:<15} {_size(measured):<24}{shown}")
    lines.append(f"    total per rank: {', '.join(format_size(b) for b in report.bytes_sent)}")
    if report.buckets and c["dp"] > 1:
        lines.append(f"    gradient buckets (elements, last layers first): {report.buckets}")
    return lines


def _time_lines(report):
    o = report.overlap
    comm = max(x.comm_s for x in o)
    exposed = max(x.exposed_s for x in o)
    return [
        "",
        f"  simulated time {format_time(report.time_s)}; busiest rank: compute "
        f"{format_time(max(x.compute_s for x in o))}, communication {format_time(comm)}",
        f"  communication exposed (not hidden behind compute) {format_time(exposed)}, "
        f"overlapped {format_time(max(x.overlapped_s for x in o))}",
    ]
