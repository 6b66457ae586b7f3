"""Expert parallelism: a mixture-of-experts layer's experts sharded over an ``ep`` group.

=====================  ================================================================
module                 what it holds
=====================  ================================================================
:mod:`.dispatch`       the all-to-all dispatcher: counts, tokens (all-to-allv), permutation
:mod:`.layer`          :class:`ExpertParallelMoE`, the rank module of :class:`collsim.nn.MoE`
:mod:`.sync`           which gradients are reduced over which group, and by how much
:mod:`.generators`     routings with the imbalance dialled: uniform, Zipf, log-normal, ...
:mod:`.step`           one forward and backward on a cluster, next to one device
:mod:`.formulas`       dispatch and combine bytes by closed form; the all-gather dispatcher
:mod:`.block_mlp`      the MoE in a transformer block on the mesh, beside tp
:mod:`.folding`        MoE parallel folding: a stage's ranks as etp-ep-edp, the experts' groups
:mod:`.etp`            expert tensor parallelism: each expert's columns and rows over etp ranks
:mod:`.deepep`         DeepEP's normal kernels' bytes, count-only on a hardware preset, its units
=====================  ================================================================
"""

from .dispatch import DispatchLayout, combine, dispatch, expert_slice
from .layer import ExpertParallelMoE

__all__ = ["ExpertParallelMoE", "DispatchLayout", "dispatch", "combine", "expert_slice"]
