"""The report as text: every number with its unit, every rule with its numbers.

:func:`render` writes what ``print(report)`` and ``collsim plan`` show, in sections (header,
findings, memory, communication, time); :func:`format_count` and :func:`format_flops` write
parameter counts and FLOPs as the report, the search table and the memory picture print them.

Examples
--------
>>> from collsim.plan import plan
>>> report = plan(model="llama2-7b", world_size=8, global_batch=8)
>>> print(render(report).splitlines()[0])
collsim plan: INVALID: 1 rule(s) broken, 0 warning(s)
>>> str(report) == render(report)
True
>>> format_count(174.6e9), format_flops(3.3e18), format_flops(1.5e14, per_second=True)
('174.6 B', '3.3 EFLOP', '150 TFLOP/s')
"""

from ... import units
from ...units import format_rate, format_size, format_time
from ..config.derived import show as _n

__all__ = ["render", "format_count", "format_flops"]


def format_count(n):
    """``174.6e9`` -> ``'174.6 B'`` (B = billion, as parameter counts are written)."""
    for prefix, factor in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= factor:
            return f"{n / factor:.4g} {prefix}"
    return f"{n:.4g}"


def format_flops(n, per_second=False):
    """``3.3e18`` -> ``'3.3 EFLOP'``; ``1.5e14, per_second=True`` -> ``'150 TFLOP/s'``
    (rates are :func:`collsim.units.format_flops`'s)."""
    if per_second:
        return units.format_flops(n)
    unit = "FLOP"
    for prefix, factor in (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if abs(n) >= factor:
            return f"{n / factor:.4g} {prefix}{unit}"
    return f"{n:.4g} {unit}"


def render(report):
    """The report as text, in sections: header, findings, memory, communication, time."""
    parts = (_header, _findings, _memory, _comm, _time)
    return "\n".join(line for part in parts for line in part(report))


def _header(r):
    c, d = r.config, r.resolved
    state = "VALID" if r.valid else f"INVALID: {len(r.violations)} rule(s) broken"
    lines = [f"collsim plan: {state}, {len(r.warnings)} warning(s)"]
    degrees = f"tp={c.tp} pp={c.pp} cp={c.cp} dp={_n(d.dp)}"
    if c.dp_replicate is not None or c.dp_shard is not None:
        degrees += f" (dp_replicate={_n(d.dp_replicate)} · dp_shard={_n(d.dp_shard)})"
    extras = [f"ZeRO-{d.zero}", f"recompute {c.recompute}", c.precision, f"schedule {d.schedule}"]
    extras += [f"vpp={c.vpp}"] if c.vpp > 1 else []
    extras += ["sequence parallel"] if c.sp else []
    if c.experts is not None:
        degrees += f" ep={c.ep} etp={c.expert_tp}"
    lines.append(
        f"  cluster   {d.world} GPUs ({_n(d.nodes)} nodes of {c.gpus_per_node}), {degrees}"
    )
    lines.append(f"  training  {', '.join(extras)}")
    model = f"{format_count(d.params)} parameters"
    if c.model:
        model = f"{c.model}, {model}"
    if c.layers and c.hidden:
        kv = f" ({c.kv_groups} kv)" if c.kv_groups != c.heads else ""
        gated = " gated" if c.gated_mlp else ""
        assumed = f", shape of {c.assumed_shape} assumed" if c.assumed_shape else ""
        model += (
            f" ({c.layers} layers, hidden {c.hidden}, {c.heads} heads{kv}, ffn {d.ffn_hidden}"
            f"{gated}, vocab {c.vocab}{assumed})"
        )
    lines.append(f"  model     {model}, sequence {c.seq} tokens")
    if c.experts is not None:
        shared = f" + {c.shared_experts} shared" if c.shared_experts else ""
        dense = f", first {c.dense_layers} layers dense" if c.dense_layers else ""
        lines.append(
            f"  experts   {c.experts} routed{shared} per MoE layer, top-{c.top_k}, expert ffn "
            f"{c.moe_ffn_hidden or d.ffn_hidden}{dense}; {format_count(d.routed_params)} "
            f"parameters in routed experts, {c.experts / c.ep:g} per ep rank"
        )
    lines.append(
        f"  batch     global {_n(d.global_batch)} = micro {_n(d.micro_batch)} · dp {_n(d.dp)}"
        f" · accumulation {_n(d.accumulation)} samples"
    )
    return lines


def _findings(r):
    lines = []
    for title, mark, items in (("Broken rules", "x", r.violations), ("Warnings", "!", r.warnings)):
        if items:
            lines += ["", title]
            for f in items:
                lines.append(f"  [{mark}] {f.rule}: {f.message}")
                if f.hint:
                    lines.append(f"      hint: {f.hint}")
    if r.notes:
        lines += ["", "Note"] + [f"  {n}" for n in r.notes]
    if r.suggestions:
        lines += ["", "Suggestions (complete valid configurations, fewest changes first)"]
        for i, s in enumerate(r.suggestions, 1):
            c, k = s.config, s.candidate
            lines.append(f"  {i}. change {s.describe()}")
            split = ""
            if c.dp_replicate is not None or c.dp_shard is not None:
                split = f" (dp_replicate={c.dp_replicate or 1} · dp_shard={c.dp_shard or 1})"
            lines.append(
                f"     world {c.world_size}: tp={c.tp} pp={c.pp} cp={c.cp} dp={k.dp}{split}, "
                f"micro {c.micro_batch} · accumulation {k.accumulation} = global "
                f"{c.global_batch or c.micro_batch * k.dp * k.accumulation}, "
                f"ZeRO-{c.zero}, "
                f"recompute {c.recompute}{', sp' if c.sp else ''}: "
                f"{format_size(k.memory_total)} per GPU, step {format_time(k.step_time_s)}"
            )
    return lines


def _memory(r):
    m, c, d = r.memory, r.config, r.resolved
    lines = ["", "Memory per GPU (busiest pipeline stage)"]
    if not d.whole["dp"]:
        lines.append(
            f"  (dp = {_n(d.dp)} is not whole: estimates that depend on it are indicative)"
        )
    per = format_count(m["params_per_gpu"])
    shard = f", ZeRO shards over {_n(m['shard_degree'])}" if d.zero else ""
    formula = "N/(tp·pp)"
    if m.get("expert_params_per_gpu"):  # collsim.plan.config.experts.params_per_gpu
        formula = (
            f"dense/(tp·pp) + routed experts/(ep·etp·pp), of which "
            f"{format_count(m['expert_params_per_gpu'])} experts"
        )
    rows = [
        ("parameters", m["params"], f"{per} parameters each ({formula}){shard}"),
        ("gradients", m["grads"], ""),
        (
            "optimizer",
            m["optimizer"],
            "fp32 master copy, Adam m and v" if c.precision != "fp32" else "Adam m and v",
        ),
        ("activations", m["activations"], _activation_note(m)),
        (
            "total",
            m["total"],
            f"of {format_size(m['gpu_memory'])}: "
            + ("fits" if m["fits"] else f"does NOT fit ({format_size(-m['free'])} over)"),
        ),
    ]
    lines += [
        f"  {name:<12}{format_size(value):>12}   {note}".rstrip() for name, value, note in rows
    ]
    return lines


def _activation_note(m):
    if not m["activations_per_layer"]:
        return "not estimated (no layers/hidden/heads)"
    text = (
        f"{format_size(m['activations_per_layer'])} per layer per micro-batch × "
        f"{m['layers_per_stage']} layers × {_n(m['in_flight_microbatches'])} in flight"
    )
    extra = [
        f"{k} {format_size(m['activations_' + k])}"
        for k in ("embedding", "logits")
        if m["activations_" + k]
    ]
    return text + (" + " + " + ".join(extra) if extra else "")


def _comm(r):
    lines = ["", "Communication per step, per GPU (closed forms of collsim.collectives)"]
    for name in ("tp", "cp", "dp", "ep", "pp"):
        dim = r.communication[name]
        if not dim["ops"]:
            lines.append(f"  {name}  -")
            continue
        ranks = dim["group_size"] if name != "pp" else 2
        where = f"{_n(ranks)} ranks, {dim['link']} {format_rate(dim['bandwidth'])}"
        lines.append(
            f"  {name}  {format_size(dim['bytes_per_rank']):>12} in "
            f"{format_time(dim['time_s']):>10}"
            f"   ({where})"
        )
        for op_name, op in dim["ops"].items():
            lines.append(
                f"        {op_name}: {_n(op['calls'])} × {op['collective']} of "
                f"{format_size(op['size_bytes'])} ({format_size(op['bytes_per_call'])} sent each)"
                + (
                    f" over {op['ranks']} ranks, {op['link']}"
                    if op["link"] != dim["link"] or op["ranks"] != dim["group_size"]
                    else ""
                )
            )
    total = r.communication["total"]
    lines.append(
        f"  all {format_size(total['bytes_per_rank']):>12} in {format_time(total['time_s']):>10}"
    )
    return lines


def _time(r):
    comp, s, c, d = r.compute, r.scaling, r.config, r.resolved
    factor = comp["flop_per_token_per_param"]
    lines = ["", "Compute per step"]
    lines.append(
        f"  {factor}·N·tokens = {factor} × {format_count(comp['active_params'])} × "
        f"{format_count(d.tokens_per_step)} tokens "
        f"= {format_flops(comp['flops_per_step'])} over {d.world} GPUs at "
        f"{format_flops(c.compute_rate, True)}: ideal {format_time(comp['ideal_time_s'])} (6·N)"
    )
    if c.experts is not None:  # what N is for a mixture of experts
        lines.append(
            f"  N = the {format_count(comp['active_params'])} parameters a token passes through "
            f"(top-{c.top_k} of {c.experts} routed experts), of {format_count(d.params)}"
        )
    lines.append(
        f"  pipeline bubble {comp['bubble_fraction']:.1%}, layer imbalance ×{comp['imbalance']:.3g}"
        f" → {format_time(comp['time_s'])}"
    )
    lines += ["", "Step time"]
    comm = r.communication["total"]["time_s"]
    lines.append(
        f"  compute {format_time(comp['time_s'])} + communication {format_time(comm)} = "
        f"{format_time(s['step_time_s'])} (nothing overlapped); "
        f"{format_time(s['step_time_overlapped_s'])} with DP traffic hidden behind compute"
    )
    lines.append(
        f"  compute / DP communication = 3·D·BW/(P·b) = "
        f"3 × {format_count(s['tokens_per_dp_rank'])} tokens"
        f" × {format_rate(s['dp_bandwidth'])} / ({format_flops(c.compute_rate, True)} × {d.elem} B)"
        f" = {s['compute_to_communication']:.3g} (6·N·D/P over 2·N·b/BW; > 1: DP can hide "
        "behind compute)"
    )
    lines.append(
        f"  efficiency {s['efficiency']:.1%} of the GPUs' {format_flops(c.compute_rate, True)} "
        f"({s['efficiency_overlapped']:.1%} with DP overlapped)"
    )
    return lines
