"""The printed part of ``collsim verify cp | nd``: the mesh, cp bytes, FLOPs, memory, links.

:func:`context_lines` sets each rank's context-parallel bytes next to the closed form
(ring attention or all-to-all, :mod:`collsim.parallel.context`) and its attention FLOPs
with their max and min over the mean, which is what the balanced layout evens out, next to
the exact count of the pairs the causal mask keeps
(:func:`~collsim.parallel.context.formulas.causal_balance`): contiguous causal ring
attention leaves the last rank nearly (2·cp−1)/cp times the mean work, exactly that as
the tiles grow.

>>> line = context_cluster_line({"dp_replicate": 1, "dp_shard": 1, "cp": 2, "tp": 1, "pp": 1,
...     "cp_variant": "ring", "cp_layout": "balanced", "causal": True, "mesh_zero": 0,
...     "topology": "switch", "bandwidth": "100GB/s", "latency": "5us"}, "100 TFLOP/s")
>>> line.splitlines()[0]
'  dp_replicate 1 × dp_shard 1 × cp 2 × tp 1 × pp 1 = 2 ranks on one switch (100GB/s, 5us \
per link), 100 TFLOP/s per rank'
"""

from ..parallel.context.formulas import causal_balance
from ..units import format_flops, format_size

__all__ = ["context_cluster_line", "context_lines", "format_flop_count"]

MESH_KEYS = ("dp_replicate", "dp_shard", "cp", "tp", "pp")  # Accelerate's order, then pp
_LAYOUTS = {
    "balanced": "balanced layout (rank i holds chunks i and 2·cp−1−i, as Megatron and Llama 3)",
    "contiguous": "contiguous layout (rank i holds chunk i)",
}
_VARIANTS = {
    "ring": "ring attention (K/V blocks travel cp−1 hops, online softmax)",
    "all-to-all": "all-to-all (DeepSpeed-Ulysses: re-shard by heads and back)",
}
_CLOSED = {
    "ring": ("2(cp−1)/cp·B·S·D·b", "2(2cp−1)/cp·B·S·D·b (K/V cp−1 hops, dK/dV cp hops)"),
    "all-to-all": ("4(cp−1)/cp²·B·S·D·b", "4(cp−1)/cp²·B·S·D·b"),
}


def format_flop_count(flops):
    """A FLOP count in decimal units: ``1.5e6`` -> ``'1.5 MFLOP'``.

    >>> format_flop_count(1.5e6), format_flop_count(0)
    ('1.5 MFLOP', '0 FLOP')
    """
    return format_flops(flops).removesuffix("/s")


def _size(nbytes):
    if abs(nbytes) < 1024:
        return format_size(nbytes)
    return f"{format_size(nbytes)} ({nbytes:,.0f} B)"


def context_cluster_line(c, rate):
    """The mesh and cluster lines of the report, for the report's config ``c``."""
    sizes = [c[k] for k in MESH_KEYS]
    ranks = 1
    for n in sizes:
        ranks *= n
    mesh = " × ".join(f"{k} {n}" for k, n in zip(MESH_KEYS, sizes, strict=True))
    where = f"one switch ({c['bandwidth']}, {c['latency']} per link)"
    if c["topology"] == "hierarchical":
        where = (
            f"{ranks // c['gpus_per_node']} node(s) of {c['gpus_per_node']} GPU(s) "
            f"({c['bandwidth']}, {c['latency']} inside a node, 50GB/s, 5us NICs between "
            "nodes)"
        )
    lines = [f"  {mesh} = {ranks} ranks on {where}, {rate} per rank"]
    sync = (
        "ZeRO-3 (FSDP) over the shard group dp_shard × cp, as Accelerate and Megatron form it"
        if c["mesh_zero"] == 3
        else "plain data parallel: gradients all-reduced over dp × cp"
    )
    if c["cp"] > 1:
        mask = "causal" if c["causal"] else "not causal"
        lines.append(f"  cp: {_VARIANTS[c['cp_variant']]}, {_LAYOUTS[c['cp_layout']]}, {mask}")
    ep, etp = c.get("ep", 1), c.get("etp", 1)
    if ep * etp > 1:
        split = f", each expert's MLP over etp {etp} (columns and rows)" if etp > 1 else ""
        lines.append(
            f"  experts: {c['experts']} per MoE layer over ep {ep}{split} (folded over "
            f"dp × cp × tp), top-{c['top_k']}, {c['router_score']} router, "
            + (
                "dropless"
                if c["capacity_factor"] is None
                else f"capacity factor {c['capacity_factor']} ({c['drop_policy']} drops)"
            )
            + f", {c['routing']} routing; tokens all-to-allv'd over ep"
        )
        edp = c["dp_replicate"] * c["dp_shard"] * c["cp"] * c["tp"] // (ep * etp)
        how = "sharded over them (ZeRO-3)" if c["mesh_zero"] == 3 else "averaged"
        sync += (
            f"; experts' gradients over their expert-data-parallel group (dp·cp·tp/(ep·etp)"
            f" = {edp} ranks), {how}, each first ÷ the ranks' tokens it summed"
        )
    lines.append(f"  gradients: {sync}")
    return "\n".join(lines)


def context_lines(f, c):
    """The cp bytes, attention FLOPs, memory and link lines for findings ``f``."""
    lines = []
    if c["cp"] > 1:
        lines += _bytes_lines(f, c) + _flops_lines(f, c)
    lines += _memory_lines(f)
    links = f.bytes_by_link_class
    lines += [
        "",
        f"  bytes by link class, summed over ranks (nodes of {f.gpus_per_node} GPU(s)):"
        f" intra-node {_size(links['intra_node'])}, inter-node "
        f"{_size(links['inter_node'])}",
    ]
    return lines


def _bytes_lines(f, c):
    forward, backward = _CLOSED[f.variant]
    per = f.formula_cp_bytes_per_layer
    lines = [
        "",
        f"  context-parallel bytes sent per rank ({f.cp_collective}), whole run, next to "
        "the closed form (b = 8 B: the float64 arrays compared)",
    ]
    for r, (got, want) in enumerate(zip(f.cp_bytes_per_rank, f.formula_cp_bytes, strict=True)):
        verdict = "equal" if got == want else "DIFFERENT"
        lines.append(f"    rank {r:<3} {_size(got):<24} formula {_size(want)}: {verdict}")
    lines += [
        f"    closed form per layer and micro-batch (B {c['micro_batch']}, S {c['seq']}, "
        f"D {_width(c)}): forward {forward} = {_size(per['forward'])}, backward "
        f"{backward} = {_size(per['backward'])}",
        "    times the rank's layers × micro-batches × steps",
    ]
    return lines


def _width(c):
    """The K/V width D a rank sends: its tp share of the heads."""
    if c["tp"] == 1:
        return f"{c['hidden']}"
    return f"= hidden/tp = {c['hidden'] // c['tp']}"


def _flops_lines(f, c):
    flops = f.attention_flops_per_rank
    mean = sum(flops) / len(flops)
    cp = c["cp"]
    lines = [
        "",
        "  attention FLOPs per rank, whole run (QKᵀ, softmax, PV and their backward; "
        "projections excluded)",
    ]
    for r, n in enumerate(flops):
        ratio = n / mean if mean else 1.0
        lines.append(f"    rank {r:<3} {format_flop_count(n):<14} {ratio:.4f} × the mean")
    measured = f"    max/mean {f.flops_max_over_mean:.4f}, min/mean {min(flops) / mean:.4f}"
    if f.variant == "all-to-all":
        lines.append(
            f"{measured} (expected 1: the dense kernel scores all S² keys on every "
            f"rank's heads); mean {format_flop_count(mean)}"
        )
        return lines
    exact = causal_balance(c["seq"], cp, f.layout, f.causal)
    lines.append(f"{measured}; mean {format_flop_count(mean)}")
    what = "the pairs a causal mask keeps, diagonal included" if f.causal else "every pair"
    lines.append(
        f"    expected, counting {what}: max/mean {exact.max_over_mean:.4f}, min/mean "
        f"{exact.min_over_mean:.4f}"
    )
    if f.causal and f.layout == "contiguous":
        lines.append(
            f"    as the tiles grow: (2·cp−1)/cp = {exact.max_limit:.4g} and 1/(2·cp) = "
            f"{exact.min_limit:.4g}, the large-sequence limit"
        )
    return lines


def _memory_lines(f):
    p = f.peak
    parts = ", ".join(
        f"{k.replace('_', ' ')} {format_size(p[k])}"
        for k in ("params", "grads", "optimizer", "gathered_params", "activations", "comm_buffers")
        if k in p
    )
    return [
        "",
        f"  peak memory of the busiest rank (rank {f.peak_rank}): {_size(p['total'])} "
        "(peak of the sum; at the declared training precisions)",
        f"    {parts}",
    ]
