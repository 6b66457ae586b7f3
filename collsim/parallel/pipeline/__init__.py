"""Pipeline parallelism: schedules as data, their closed forms, the stage program.

======================  ================================================================
module                  what it holds
======================  ================================================================
:mod:`.schedules`       GPipe, 1F1B, interleaved and ZB-H1 as plain data (`Schedule`),
                        their formulas (bubble, in-flight micro-batches), Megatron's
                        layer split, and the `PipelinePass` record of a pass
:mod:`.stage`           one stage as a rank program: a schedule's passes run for real
:mod:`.result`          what a pipeline run measured, read from the trace
:mod:`.chunk`           a model chunk: consecutive rank modules run as one piece by a
                        stage, with the hook that hands each final gradient to DDP
:mod:`.runner`          the lessons' old import path of ``run_pipeline`` and
                        ``pipeline_step``, which run the mesh trainer and so live above
                        it, in :mod:`collsim.parallel.runs.pipeline`
======================  ================================================================

>>> from collsim.parallel.pipeline import build_schedule
>>> print(build_schedule("1f1b", p=2, m=2))
stage 0 | F0 F1 B0 B1
stage 1 | F0 B0 F1 B1
"""

from .result import OpSpan, PipelineResult, op_spans
from .schedules import (
    KINDS,
    PASS_KINDS,
    SCHEDULE_NAMES,
    PipelinePass,
    PipeOp,
    Schedule,
    bubble_fraction,
    bubble_time,
    build_schedule,
    gpipe,
    interleaved,
    one_f_one_b,
    peak_inflight,
    split_layers,
    zb_h1,
)
from .stage import (
    PipelineMessage,
    StageJob,
    StageOutcome,
    chunk_seconds,
    pipeline_messages,
    stage_program,
)

__all__ = [
    "PipelineResult",
    "OpSpan",
    "op_spans",
    "chunk_seconds",
    "pipeline_messages",
    "StageJob",
    "StageOutcome",
    "PipelineMessage",
    "stage_program",
    "KINDS",
    "PASS_KINDS",
    "SCHEDULE_NAMES",
    "PipelinePass",
    "PipeOp",
    "Schedule",
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
