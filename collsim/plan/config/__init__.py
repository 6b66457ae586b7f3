"""The job description: what to plan, read from arguments, a mapping or a settings file.

=====================  =====================================================================
module                 what it holds
=====================  =====================================================================
:mod:`.job`            :class:`PlanConfig`, the frozen dataclass of every input with
                       commented defaults (model, cluster, parallelism, batch, training)
:mod:`.values`         reading and bounding one input (``"175B"``, ``"150TFLOP/s"``, counts
                       up to :data:`MAXIMA`, choices)
:mod:`.presets`        model presets with their published shapes; the GPT-3 shape a bare
                       parameter count gets
:mod:`.files`          TOML/JSON settings files, Megatron-LM and Accelerate spellings
:mod:`.derived`        what a configuration implies (dp, the batch split, the parameter
                       count, the schedule) and what divides what
:mod:`.trainer`        the conversion to the mesh trainer's ``ParallelConfig``
=====================  =====================================================================

Examples
--------
>>> cfg = config_from_mapping({"model": "llama2-7b", "tensor_model_parallel_size": 2})
>>> cfg.tp, cfg.layers, derive(cfg.replace(world_size=8)).dp
(2, 32, 4)
"""

from .derived import (
    Derived,
    count_params,
    derive,
    divisors,
    element_bytes,
    pipeline_schedule,
    show,
    tp_choices,
)
from .files import ALIASES, config_from_mapping, load_config
from .job import PlanConfig
from .presets import GPT3_ROWS, PRESETS, SHAPE_FIELDS, ModelShape, assumed_shape, preset, shape_note
from .values import ARCHITECTURES, MAXIMA, RECOMPUTE, SCHEDULES, parse_count, parse_flops

__all__ = [
    "PlanConfig",
    "load_config",
    "config_from_mapping",
    "ALIASES",
    "PRESETS",
    "GPT3_ROWS",
    "SHAPE_FIELDS",
    "ModelShape",
    "preset",
    "assumed_shape",
    "shape_note",
    "Derived",
    "derive",
    "count_params",
    "element_bytes",
    "pipeline_schedule",
    "divisors",
    "tp_choices",
    "show",
    "ARCHITECTURES",
    "MAXIMA",
    "RECOMPUTE",
    "SCHEDULES",
    "parse_count",
    "parse_flops",
]
