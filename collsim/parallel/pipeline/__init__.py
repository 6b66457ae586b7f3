"""Pipeline parallelism: schedules as data, their closed forms, the stage program, the runner.

======================  ================================================================
module                  what it holds
======================  ================================================================
:mod:`.schedules`       GPipe, 1F1B, interleaved and ZB-H1 as plain data (`Schedule`),
                        their formulas (bubble, in-flight micro-batches), Megatron's
                        layer split, and the `PipelinePass` record of a pass
:mod:`.stage`           one stage as a rank program: a schedule's passes run for real
:mod:`.result`          what a pipeline run measured, read from the trace
:mod:`.runner`          :func:`run_pipeline` (a pp-only run of the mesh trainer), the toy
                        transformer and batch, and the one-device oracle
======================  ================================================================

>>> from collsim.parallel.pipeline import build_schedule
>>> print(build_schedule("1f1b", p=2, m=2))
stage 0 | F0 F1 B0 B1
stage 1 | F0 B0 F1 B1
"""

from .result import OpSpan, PipelineResult, op_spans
from .runner import (
    chunk_seconds,
    pipeline_step,
    run_pipeline,
    single_device_step,
    split_batch,
    toy_batch,
    toy_model,
)
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
from .stage import PipelineMessage, StageJob, StageOutcome, stage_program

__all__ = [
    "run_pipeline",
    "pipeline_step",
    "PipelineResult",
    "OpSpan",
    "op_spans",
    "single_device_step",
    "split_batch",
    "chunk_seconds",
    "toy_model",
    "toy_batch",
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
