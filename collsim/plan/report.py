"""The planner's answer: a :class:`Report` that prints for people and converts to JSON.

:func:`render` writes a report as text, every number with its unit and every rule with its
numbers (what ``print(report)`` and ``collsim plan`` show); :func:`search_table` writes the
``--search`` table.

``to_dict()`` keys (schema ``collsim.plan/1``): ``valid``, ``violations`` and ``warnings``
(each ``rule``, ``message``, ``hint``), ``notes``, ``suggestions`` (each ``changes`` and a
complete ``config``, best first), ``derived`` (dp, accumulation, ...), ``memory`` (bytes
per GPU: ``params``, ``grads``, ``optimizer``, ``activations``, ``total``,
``activations_per_layer`` for one micro-batch, ...), ``communication`` (per dimension
``tp``/``cp``/``dp``/``pp``: ``bytes_per_rank`` and ``time_s`` per step and ``ops`` by
name), ``compute``, ``scaling`` and ``step_time_s``, plus the ``config`` it answers.
Infinite ratios become ``null``.

Examples
--------
>>> from collsim.plan import plan
>>> report = plan(model="llama2-7b", world_size=8, global_batch=8)
>>> print(render(report).splitlines()[0])
collsim plan: INVALID: 1 rule(s) broken, 0 warning(s)
>>> str(report) == render(report), report.to_dict()["valid"]
(True, False)
"""

import json
import math
from dataclasses import dataclass, field

from ..units import format_rate, format_size, format_time
from .derive import derive
from .models import PRESETS
from .numbers import format_count, format_flops
from .numbers import show as _n
from .suggest import world_note

__all__ = ["Report", "render", "search_table"]

SCHEMA = "collsim.plan/1"


@dataclass
class Report:
    """What :func:`collsim.plan.plan` found out about one configuration."""

    config: object  # PlanConfig
    resolved: object  # the Derived values (report.derived is the same as a dict)
    violations: list
    warnings: list
    memory: dict
    communication: dict
    compute: dict
    scaling: dict
    suggestions: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    @property
    def valid(self):
        return not self.violations

    @property
    def step_time_s(self):
        return self.scaling["step_time_s"]

    @property
    def derived(self):
        d = self.resolved
        return {
            "world_size": d.world,
            "dp": d.dp,
            "dp_replicate": d.dp_replicate,
            "dp_shard": d.dp_shard,
            "shard_degree": d.shard_degree,
            "zero": d.zero,
            "micro_batch": d.micro_batch,
            "accumulation": d.accumulation,
            "global_batch": d.global_batch,
            "params": d.params,
            "params_from_shape": d.params_from_shape,
            "ffn_hidden": d.ffn_hidden,
            "layers_per_stage": d.layers_per_stage,
            "nodes": d.nodes,
            "tokens_per_step": d.tokens_per_step,
            "schedule": d.schedule,
            "element_bytes": d.elem,
        }

    def to_dict(self):
        data = {
            "schema": SCHEMA,
            "valid": self.valid,
            "violations": [f.to_dict() for f in self.violations],
            "warnings": [f.to_dict() for f in self.warnings],
            "notes": list(self.notes),
            "suggestions": [s.to_dict() for s in self.suggestions],
            "derived": self.derived,
            "memory": self.memory,
            "communication": self.communication,
            "compute": self.compute,
            "scaling": self.scaling,
            "step_time_s": self.step_time_s,
            "config": self.config.to_dict(),
        }
        return _finite(data)

    def to_json(self, indent=2):
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def __str__(self):
        return render(self)


def _finite(x):
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


# -- the report as text ----------------------------------------------------------------------


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
    rows = [
        ("parameters", m["params"], f"{per} parameters each (N/(tp·pp)){shard}"),
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
    for name in ("tp", "cp", "dp", "pp"):
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
                + (f" over {op['ranks']} ranks, {op['link']}" if op["link"] != dim["link"] else "")
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
        f"  {factor}·N·tokens = {factor} × {format_count(d.params)} × "
        f"{format_count(d.tokens_per_step)} tokens "
        f"= {format_flops(comp['flops_per_step'])} over {d.world} GPUs at "
        f"{format_flops(c.compute_rate, True)}: ideal {format_time(comp['ideal_time_s'])} (6·N)"
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


_COLUMNS = ("#", "tp", "pp", "dp", "micro", "accum", "ZeRO", "recompute", "memory/GPU",
            "activ.", "compute", "TP comm", "comm", "step", "eff.")  # fmt: skip
_WIDTHS = (4, 4, 4, 5, 6, 6, 5, 10, 11, 10, 10, 10, 10, 10, 6)


def model_name(cfg, d):
    """``'llama2-7b (6.738 B parameters)'`` or ``'the 7 B-parameter model'``."""
    if cfg.model:
        return f"{cfg.model} ({format_count(d.params)} parameters)"
    return f"the {format_count(d.params)}-parameter model"


def search_rows(candidates):
    """The printed cells of each candidate, rows identical in every column merged.

    Returns ``(rows, merged)``: a list of (first rank, last rank, cells) and how many
    candidates were folded into an identical earlier row.
    """
    rows, seen, merged = [], {}, 0
    for i, k in enumerate(candidates, 1):
        c = k.config
        cells = (
            c.tp, c.pp, k.dp, c.micro_batch, k.accumulation, c.zero, c.recompute,
            format_size(k.memory_total), format_size(k.activation_bytes),
            format_time(k.compute_time_s), format_time(k.tp_communication_time_s),
            format_time(k.communication_time_s), format_time(k.step_time_s),
            f"{k.efficiency:.0%}",
        )  # fmt: skip
        cells = tuple(str(x) for x in cells)
        if cells in seen:
            merged += 1
            continue
        seen[cells] = True
        rows.append((i, cells))
    return rows, merged


def search_table(cfg, candidates, total):
    """The ``--search`` table: one row per valid configuration, fastest first."""
    d = derive(cfg)
    g = cfg.global_batch if cfg.global_batch is not None else _n(d.global_batch)
    model = model_name(cfg, d)
    head = f"{total} valid configurations of {d.world} GPUs for {model}, global batch {g}"
    shape = _shape_line(cfg, d)
    if not candidates:
        note = world_note(cfg, d, suggestions=False) if cfg.global_batch is not None else None
        return "\n".join([head, shape] + ([note] if note else []))
    lines = [head + f"; the {len(candidates)} fastest by estimated step time:", shape, ""]
    lines.append("".join(f"{c:>{w}}" for c, w in zip(_COLUMNS, _WIDTHS)))
    rows, merged = search_rows(candidates)
    for rank, cells in rows:
        lines.append("".join(f"{str(v):>{w}}" for v, w in zip((rank, *cells), _WIDTHS)))
    lines += [
        "",
        "memory/GPU of the busiest stage, activ. its activations (Korthikanti et al. 2022); "
        "step = compute + communication, nothing overlapped; "
        "eff. = 6·N·tokens / (GPUs · compute rate · step)",
    ]
    if merged:
        lines.append(f"{merged} configuration(s) identical in every column to a row above left out")
    return "\n".join(lines)


def _shape_line(cfg, d):
    """Which shape the estimates use, and where it came from."""
    kv = f", {cfg.kv_groups} kv heads" if cfg.kv_groups != cfg.heads else ""
    gated = ", gated MLP" if cfg.gated_mlp else ""
    text = (
        f"shape: {cfg.layers} layers, hidden {cfg.hidden}, {cfg.heads} heads{kv}, "
        f"ffn {d.ffn_hidden}{gated}, vocab {cfg.vocab}, sequence {cfg.seq}"
    )
    if cfg.model:
        text += f" (preset {cfg.model}: {PRESETS[cfg.model].source})"
    elif cfg.assumed_shape:
        text += (
            f" (assumed: only the parameter count was given; the nearest row of GPT-3's "
            f"Table 2.1, {cfg.assumed_shape}, Brown et al. 2020)"
        )
    return text
