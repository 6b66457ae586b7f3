"""The ``--search`` table: one row per valid configuration, fastest first.

Rows identical in every printed column are merged (:func:`search_rows`); with no valid
configuration the table says why in plain words (:func:`collsim.plan.search.world_note`).

Examples
--------
>>> from collsim.plan import PlanConfig, search
>>> cfg = PlanConfig(world_size=8, layers=4, hidden=256, heads=8, global_batch=16, seq=512,
...                  gpu_memory="1GiB")
>>> print(search_table(cfg, search(cfg, top=2), 2).splitlines()[0])
2 valid configurations of 8 GPUs for the ... model, global batch 16; the 2 fastest by ...
"""

from ...units import format_size, format_time
from ..config.derived import derive
from ..config.derived import show as _n
from ..config.presets import PRESETS
from ..search import world_note
from .text import format_count

__all__ = ["search_table", "search_rows", "model_name"]

_COLUMNS = (
    "#",
    "tp",
    "pp",
    "dp",
    "micro",
    "accum",
    "ZeRO",
    "recompute",
    "memory/GPU",
    "activ.",
    "compute",
    "TP comm",
    "comm",
    "step",
    "eff.",
)
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
            c.tp,
            c.pp,
            k.dp,
            c.micro_batch,
            k.accumulation,
            c.zero,
            c.recompute,
            format_size(k.memory_total),
            format_size(k.activation_bytes),
            format_time(k.compute_time_s),
            format_time(k.tp_communication_time_s),
            format_time(k.communication_time_s),
            format_time(k.step_time_s),
            f"{k.efficiency:.0%}",
        )
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
