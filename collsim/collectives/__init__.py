"""Collectives as schedules: ring, tree, halving-doubling, naive, all-to-all, and NCCL's
algorithms on the hardware presets (the ring on rails, the double binary tree, the 2-D
hierarchical all-reduce, in-switch reduction), with ``auto`` choosing as NCCL's tuner does.

Each algorithm family builds a :class:`~collsim.collectives.schedule.Schedule` (plain
data: who sends which chunks to whom at which step); one executor runs any schedule on
the cluster.  Every transfer it makes carries a :class:`CollectiveStep` tag (which
collective call and step) and its :class:`ChunkMove` (which chunks) as typed records.
Use them as ``cluster.all_reduce(buffers)`` from plain code or as
``yield from rank.all_reduce(x)`` inside a rank program.
"""

from .analytical import AnalyticalPlan, analytical_plan
from .api import CollectiveResult, StepTransfer, StepView, analytical, collective, run_collective
from .auto import AutoChoice, choose
from .executor import REDUCE_OPS, reference
from .formulas import ALGORITHMS, COLLECTIVES, Cost, bus_factor, closed_form
from .hardware_forms import HARDWARE_ALGORITHMS, Fabric, HardwareCost, hardware_cost
from .records import CollectiveStep, is_collective
from .registry import build
from .schedule import ChunkMove, Combine, Schedule, chunk_bounds, contributions

__all__ = [
    "build",
    "collective",
    "run_collective",
    "analytical",
    "analytical_plan",
    "AnalyticalPlan",
    "AutoChoice",
    "choose",
    "hardware_cost",
    "HardwareCost",
    "Fabric",
    "HARDWARE_ALGORITHMS",
    "Combine",
    "reference",
    "closed_form",
    "bus_factor",
    "Cost",
    "CollectiveResult",
    "StepView",
    "StepTransfer",
    "Schedule",
    "ChunkMove",
    "CollectiveStep",
    "is_collective",
    "chunk_bounds",
    "contributions",
    "ALGORITHMS",
    "COLLECTIVES",
    "REDUCE_OPS",
]
