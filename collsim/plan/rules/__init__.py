"""The rules of a parallel configuration and the nearest valid choices when one breaks.

Frameworks stop at their first failed assertion; the planner reports all of them, each
with the numbers and a hint naming the nearest valid choices (:mod:`.checks` the rules,
:mod:`.hints` their hints), and suggests complete valid configurations nearest to a broken
one (:mod:`.suggestions`).

=====================  ========  ===========================================================
rule                   kind      what must hold (source)
=====================  ========  ===========================================================
world_size             error     world = tp·pp·cp·dp (Megatron-LM's initialize; cp as in
                                 Megatron-Core's parallel_state)
dp_replicate_shard     error     dp = dp_replicate·dp_shard (Accelerate ParallelismConfig)
accelerate_replicate   error     Accelerate sizes: tp or cp > 1 with dp_replicate > 1 needs
                                 dp_shard > 1 (ParallelismConfig.__post_init__ raises)
global_batch           error     global batch = micro·dp·accumulation (Megatron-LM arguments)
hidden_tp              error     hidden divisible by tp (Megatron-LM arguments)
heads_tp               error     heads divisible by tp (Megatron-LM arguments)
kv_heads_tp            error     key/value heads divisible by tp (Megatron-LM: num_query_groups
                                 % tensor_model_parallel_size == 0)
ffn_tp                 error     ffn hidden divisible by tp (Megatron column split)
pp_layers              error     pp <= layers: every stage needs a layer
layers_pp              warning   layers divisible by pp, else stages are unbalanced (Megatron-LM
                                 requires it unless the stage sizes are given)
layers_vpp             error     with virtual stages v > 1: layers divisible by pp·v
vpp_pp                 error     with v > 1: pp >= 2
vpp_microbatches       error     with v > 1: micro-batches per step a multiple of pp
sp_tp                  error     sequence parallel needs tp > 1 (Korthikanti et al. 2022)
sp_seq                 error     with sp: the sequence a TP group holds (seq/cp) divisible by tp
cp_seq                 error     with cp > 1: seq divisible by 2·cp (load-balanced ring attention)
tp_node                warning   tp <= GPUs per node (Narayanan et al. 2021, §3.3; Accelerate's
                                 ND-parallel guide keeps TP inside a node)
memory                 error     the estimated memory per GPU fits the GPU
bubble                 warning   with pp > 1: at least pp micro-batches per step
zero_unsharded         warning   a ZeRO stage > 0 over a sharding degree of 1 shards nothing
moe_ep_dense           error     ep or etp > 1 needs an MoE model (experts given)
moe_experts_ep         error     experts divisible by ep (Megatron-Core: num_moe_experts %
                                 expert_model_parallel_size == 0)
moe_folding            error     ep·etp divides dp·cp·tp (Megatron-Core's MoE parallel folding:
                                 etp-ep-edp over the ranks of tp-cp-dp, each stage)
moe_sp                 error     ep > 1 with tp > 1 needs sequence parallelism (Megatron-Core)
moe_ffn_etp            error     an expert's ffn hidden divisible by etp (its column/row split)
moe_node               warning   ep·tp <= GPUs per node: the token all-to-all stays on NVLink
=====================  ========  ===========================================================

Examples
--------
Megatron's 784-GPU error is :func:`check`'s example (in :mod:`.checks`); the nearest
valid job is :func:`suggest`'s:

>>> from collsim.plan.config import PlanConfig
>>> cfg = PlanConfig(world_size=12, tp=8, layers=4, hidden=256, heads=8, global_batch=12)
>>> [s.describe() for s in suggest(cfg, top=1)]
['world_size 12→16']
"""

from .checks import RULES, Finding, check, evaluate
from .suggestions import Suggestion, suggest

__all__ = ["RULES", "Finding", "check", "evaluate", "Suggestion", "suggest"]
