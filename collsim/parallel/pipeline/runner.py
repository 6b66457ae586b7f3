"""The old home of :func:`run_pipeline`, kept because the lessons import from it.

``run_pipeline``, ``pipeline_step``, ``toy_pipeline``, ``toy_model`` and ``toy_batch`` run
the mesh trainer, which sits above this package (it runs the stage program and schedules
here), so they live in :mod:`collsim.parallel.runs.pipeline`; this module hands them out
from there when first asked for. New code imports them from there.

>>> from collsim.parallel.pipeline.runner import pipeline_step
>>> pipeline_step.__module__
'collsim.parallel.runs.pipeline'
"""

__all__: list[str] = []  # nothing is defined here


def __getattr__(name):
    """A name of :mod:`collsim.parallel.runs.pipeline`'s ``__all__``, imported when first
    used (a module-level import would load the trainer with the pipeline package)."""
    from ..runs import pipeline

    if name in pipeline.__all__:
        return getattr(pipeline, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
