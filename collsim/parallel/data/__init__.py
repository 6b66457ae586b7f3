"""Data parallelism and ZeRO/FSDP: one concept, five modules.

The batch-64, dp=4 example: every rank holds the whole model and 16 samples, computes
``g_r = grad L_r`` on them, and an all-reduce (sum, then divide by 4) leaves every rank with
``(g_0 + g_1 + g_2 + g_3) / 4``, exactly the gradient of the mean loss over all 64 samples.
Every rank then takes the same optimizer step, so the replicas stay identical. ZeRO shards
the optimizer state, the gradients and then the parameters over the same ranks.

===================  ========================================================================
module               what it holds
===================  ========================================================================
:mod:`.buckets`      PyTorch DDP's reducer: gradient buckets all-reduced as backward fills them
:mod:`.sharded`      ZeRO stages 1-3: the flat layout, the sharded optimizer step, FSDP units
:mod:`.sync`         one gradient sync per ZeRO stage, as the mesh trainer drives it each step
:mod:`.expert_grads` which group reduces a gradient, the dense one or the experts' edp group
:mod:`.checkpoint`   saving the sharded training state: a full state dict or a sharded one
===================  ========================================================================

These sit below the mesh trainer (:mod:`collsim.parallel.mesh`), which runs them.
:func:`train_data_parallel` (a dp-only run of that trainer) lives above it, in
:mod:`collsim.parallel.runs.data_parallel`; it is named here too, loaded when first asked
for, so ``from collsim.parallel.data import train_data_parallel`` keeps working.
Megatron-LM's batch rule (:func:`resolve_batch`, :func:`shard_rows`) is the trainer's for
every scheme (:mod:`collsim.parallel.batch`) and is named here as well.

>>> from collsim.parallel.data import GradientBuckets, train_data_parallel
>>> GradientBuckets.__module__, train_data_parallel.__module__
('collsim.parallel.data.buckets', 'collsim.parallel.runs.data_parallel')
"""

from ..batch import resolve_batch, shard_rows
from .buckets import DEFAULT_BUCKET_BYTES, GradientBuckets

__all__ = [
    "resolve_batch",
    "shard_rows",
    "GradientBuckets",
    "train_data_parallel",
    "DataParallelRun",
    "DEFAULT_BUCKET_BYTES",
]

# Names that live above the mesh trainer: importing them here at load time would close an
# import circle (the trainer imports this package's modules), so they load on first use.
_ABOVE_THE_TRAINER = {"train_data_parallel", "DataParallelRun"}


def __getattr__(name):
    """``train_data_parallel`` and ``DataParallelRun``, from :mod:`..runs.data_parallel`."""
    if name in _ABOVE_THE_TRAINER:
        from ..runs import data_parallel

        return getattr(data_parallel, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
