"""Pipeline schedules as plain data (DESIGN.md, principle 1: algorithms are data).

A schedule lists, per pipeline stage, the passes it runs in order: ``F`` forward, ``BW`` full
backward, or the split backward ``B`` (input gradient) and ``W`` (weight gradient). The
executor runs it on the virtual cluster and measures the bubble from the trace; the closed
forms on `Schedule` are the second oracle.

=============== ================================== =========================== ==============
schedule        builder                            idle time per stage         peak in-flight
=============== ================================== =========================== ==============
``gpipe``       ``gpipe(p, m)``                    (p-1)(t_f+t_b+t_w)          m
``1f1b``        ``one_f_one_b(p, m)``              (p-1)(t_f+t_b+t_w)          min(p-s, m)
``interleaved`` ``interleaved(p, m, v)``           (p-1)(t_f+t_b+t_w)/v        warmup+1 chunks
``zb-h1``       ``zb_h1(p, m)``                    (p-1)(t_f+t_b-t_w)          p
=============== ================================== =========================== ==============

Table notation: ``F3`` / ``B3`` / ``W3`` is micro-batch 3; ``F3.1`` adds the model chunk. The
*bubble fraction* is idle / (idle + m (t_f+t_b+t_w)), i.e. (p-1)/(m+p-1) for gpipe and 1f1b.
The closed forms live in :mod:`~collsim.parallel.pipeline.schedules.formulas` (``bubble_fraction``,
``bubble_time``, ``peak_inflight``), which `Schedule` and the planner both call. When a
stage runs a pass, its compute span carries a `PipelinePass` record (kind, micro-batch, chunk,
stage) that the measurements read; the ``F3`` labels are for display only.

Examples
--------
>>> from collsim.parallel.pipeline.schedules import build_schedule
>>> sched = build_schedule("1f1b", p=4, m=8)
>>> print(sched)
stage 0 | F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7
stage 1 | F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7
stage 2 | F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7
stage 3 | F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7
>>> sched.formula_bubble_fraction()  # (p-1)/(m+p-1) = 3/11
0.2727...
>>> sched.peak_inflight()
(4, 3, 2, 1)
"""

from .builders import SCHEDULE_NAMES, build_schedule, gpipe, interleaved, one_f_one_b, zb_h1
from .formulas import bubble_fraction, bubble_time, peak_inflight
from .layers import split_layers
from .passes import PASS_KINDS, PipelinePass
from .schedule import KINDS, PipeOp, Schedule

__all__ = [
    "KINDS",
    "PipeOp",
    "PipelinePass",
    "PASS_KINDS",
    "Schedule",
    "SCHEDULE_NAMES",
    "build_schedule",
    "gpipe",
    "one_f_one_b",
    "interleaved",
    "zb_h1",
    "split_layers",
    "bubble_fraction",
    "bubble_time",
    "peak_inflight",
]
