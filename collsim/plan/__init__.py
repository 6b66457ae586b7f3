"""The planner: validate a parallel configuration, explain it, estimate what it costs.

Closed-form, no simulation: it answers at once for any cluster size.  One concept a module
or a subpackage, each importing only those listed before it:

=====================  =====================================================================
concept                what it holds
=====================  =====================================================================
:mod:`.config`         the job: :class:`PlanConfig`, model presets, settings files, what a
                       configuration implies (``derive``), the conversion to the trainer's
                       ``ParallelConfig`` (:meth:`PlanConfig.parallel`)
:mod:`.memory`         memory per GPU: model states (ZeRO) and activations
:mod:`.cost`           communication per parallel dimension, compute, step time
:mod:`.rules`          every rule, checked together, with the nearest valid choices and the
                       nearest complete valid configurations (suggestions)
:mod:`.search`         every valid configuration of a model on a cluster, fastest first
:mod:`.report`         the :class:`Report`, its text and the search table
=====================  =====================================================================

Every closed form is the simulator's own: collective bytes and time from
:mod:`collsim.collectives.formulas`, the pipeline bubble and in-flight micro-batches from
:mod:`collsim.parallel.pipeline.schedules.formulas`.  Models are given as a preset with its
published shape (``model="llama2-7b"``), as a shape, or as a bare parameter count (which
gets the nearest GPT-3 shape, and the report says so).

Sources: Megatron-LM (Shoeybi et al. 2019; Narayanan et al. 2021, "Efficient Large-Scale
Language Model Training on GPU Clusters Using Megatron-LM": parameter constraints, pipeline
schedules, interleaving); Hugging Face Accelerate's ``ParallelismConfig`` (ND-parallel
sizes); Rajbhandari et al. 2020 (ZeRO); Korthikanti et al. 2022 (activation memory).

Examples
--------
Megatron's 784-GPU error: 784 GPUs with tp=8 and pp=4 for a GPT-3 175B-sized model.

>>> from collsim.plan import plan
>>> report = plan(world_size=784, tp=8, pp=4, layers=96, hidden=12288, heads=96,
...               seq=2048, global_batch=1536, micro_batch=1, zero=1)
>>> report.valid, [v.rule for v in report.violations]
(False, ['world_size'])
>>> report.violations[0].message
'world size 784 is not divisible by tp·pp = 8·4 = 32: dp = 784/32 = 24.5 is not a whole number'
>>> report.suggestions[0].describe()
'world_size 784→768'
>>> ok = plan(world_size=768, tp=8, pp=4, layers=96, hidden=12288, heads=96,
...           global_batch=1536, zero=1)
>>> ok.valid, ok.derived["dp"], ok.derived["accumulation"]
(True, 24, 64)
>>> plan(model="llama2-7b", world_size=8, global_batch=8).derived["params"]
6738415616.0
"""

from pathlib import Path

from .config import PRESETS, PlanConfig, derive, load_config, shape_note
from .config import config_from_mapping as _from_mapping
from .cost import Candidate, communication, compute, scaling
from .memory import estimate
from .report import Report
from .rules import Finding, Suggestion, check, suggest
from .search import search, world_note

__all__ = [
    "plan",
    "search",
    "PlanConfig",
    "load_config",
    "as_config",
    "Report",
    "Finding",
    "Suggestion",
    "Candidate",
]


def as_config(config=None, **inputs):
    """A :class:`PlanConfig` from a PlanConfig, a mapping or a TOML/JSON path, with
    ``inputs`` overriding it."""
    if config is None:
        return _from_mapping(inputs)
    if isinstance(config, PlanConfig):
        return config.replace(**inputs) if inputs else config
    if isinstance(config, str | Path):
        return load_config(config, **inputs)
    return _from_mapping({**config, **inputs})


def plan(config=None, /, *, suggestions=5, **inputs):
    """Check and estimate one configuration; returns a :class:`Report`.

    ``config`` is a :class:`PlanConfig`, a mapping or a path to a TOML/JSON file; keyword
    ``inputs`` (any PlanConfig field, e.g. ``world_size=784, tp=8``) override it.
    ``suggestions`` caps how many nearest valid configurations an invalid one gets.
    """
    cfg = as_config(config, **inputs)
    d = derive(cfg)
    mem = estimate(cfg, d)
    violations, warnings = check(cfg, d, mem, explain=True)
    comm = communication(cfg, d)
    comp = compute(cfg, d)
    report = Report(cfg, d, violations, warnings, mem, comm, comp, scaling(cfg, d, comm, comp))
    if cfg.assumed_shape:
        report.notes.append(shape_note(PRESETS[cfg.assumed_shape], d.params) + ".")
    if cfg.dp_replicate is not None or cfg.dp_shard is not None:
        report.notes.append(
            f"Accelerate sizes: dp = dp_replicate·dp_shard = {d.dp_replicate:g}·{d.dp_shard:g} = "
            f"{d.dp:g} and world = dp·tp·cp·pp, as Accelerate's ParallelismConfig defines them "
            "(total_size = dp_replicate·dp_shard·tp·cp; a data-parallel world of "
            "dp_shard·dp_replicate/tp would divide by tp a second time)."
        )
    if violations:
        note = world_note(cfg, d)
        report.notes.extend([note] if note else [])
        report.suggestions.extend(suggest(cfg, top=suggestions) if suggestions else [])
    return report
