"""One scheme alone, run through the mesh trainer: the short entry points.

The mesh trainer (:func:`collsim.parallel.mesh.train`) runs every scheme; the packages below
it (``data/``, ``pipeline/``, ``tensor/``, ``context/``) hold the pieces it runs. The
functions here sit above the trainer and call it with one dimension set:

============================  ===============================================================
module                        what it holds
============================  ===============================================================
:mod:`.data_parallel`         :func:`~.data_parallel.train_data_parallel`: ``dp`` alone
:mod:`.pipeline`              :func:`~.pipeline.run_pipeline` and ``pipeline_step``: ``pp``
                              alone, and the toy transformer and batch of the examples
============================  ===============================================================

>>> from collsim.parallel.runs import pipeline_step
>>> round(pipeline_step("gpipe", stages=2, microbatches=2).bubble_fraction, 12)  # 1/3
0.333333333333
"""

from .data_parallel import DataParallelRun, train_data_parallel
from .pipeline import pipeline_step, run_pipeline, toy_batch, toy_model, toy_pipeline

__all__ = [
    "train_data_parallel",
    "DataParallelRun",
    "run_pipeline",
    "pipeline_step",
    "toy_pipeline",
    "toy_model",
    "toy_batch",
]
