"""The human-readable form of a :class:`~collsim.verify.VerifyReport`.

Units are explicit everywhere: bytes as ``KiB``, times as ``us``, differences as plain
floats (absolute, in the units of the arrays compared).
"""

from ..units import format_size, format_time

__all__ = ["report_text"]

_NAMES = {
    "dp": "data parallel",
    "tp-column": "tensor parallel, column-parallel linear (output all-gathered)",
    "tp-row": "tensor parallel, row-parallel linear (input already split)",
    "tp-mlp": "tensor parallel, Megatron MLP (column -> GELU -> row)",
    "tp-attention": "tensor parallel, attention with heads split",
    "sp": "tensor parallel with sequence parallelism",
    "dp-tp": "data parallel × tensor parallel on a (dp, tp) mesh",
}

_FORMULAS = {
    ("dp", "all_reduce"): "2(K-1)/K·P·b per step",
    ("tp", "all_reduce"): "2(t-1)/t·N·b each",
    ("tp", "all_gather"): "(t-1)/t·N·b each",
    ("tp", "reduce_scatter"): "(t-1)/t·N·b each",
}


def _flops(rate):
    for prefix, factor in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if rate >= factor:
            return f"{rate / factor:.4g} {prefix}FLOP/s"
    return f"{rate:.4g} FLOP/s"


def _size(nbytes):
    return f"{format_size(nbytes)} ({nbytes:,.0f} B)"


def report_text(report):
    c = report.config
    example = ""
    if report.scheme == "dp" and (c["dp"], c["batch"]) == (4, 64):
        example = " (the batch-64, dp=4 example: 16 samples per rank)"
    lines = [
        f"collsim verify {report.scheme}: {_NAMES[report.scheme]}{example}",
        f"  model: {report.description}; hidden {c['hidden']}, heads {c['heads']}, ffn hidden "
        f"{c['ffn_hidden']}, seq {c['seq']}",
        f"  dp {c['dp']} × tp {c['tp']} = {c['dp'] * c['tp']} ranks on one switch "
        f"({c['bandwidth']}, {c['latency']} per link), {_flops(c['compute_rate'])} per rank",
        f"  global batch {c['batch']} = micro batch {c['micro_batch']} × dp {c['dp']} × "
        f"accumulation {c['accumulation']}; {c['steps']} SGD step(s) (lr {c['lr']}), "
        f"random seed {c['seed']}",
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
    lines += ["", "  bytes sent per rank, whole run (mean over ranks; formula)"]
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
    o = report.overlap
    comm = max(x.comm_s for x in o)
    exposed = max(x.exposed_s for x in o)
    lines += [
        "",
        f"  simulated time {format_time(report.time_s)}; busiest rank: compute "
        f"{format_time(max(x.compute_s for x in o))}, communication {format_time(comm)}",
        f"  communication exposed (not hidden behind compute) {format_time(exposed)}, "
        f"overlapped {format_time(max(x.overlapped_s for x in o))}",
    ]
    return "\n".join(lines)
