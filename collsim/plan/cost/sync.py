"""The gradient sync over data parallelism and MoE's token all-to-all over ep, per step.

The dense part of the model syncs over dp × cp (or ZeRO's shard group, with HSDP's replica
all-reduce); the routed experts over their expert-data-parallel group; the tokens cross the
ep group four times a MoE layer and micro-batch.  Sizes per GPU come from
:func:`collsim.plan.config.experts.params_per_gpu`, the planner's one formula for them.
"""

from ..config.experts import expert_shard_degree, params_per_gpu
from .ops import add_op as _add
from .ops import dimension as _dimension

__all__ = ["data_parallel", "expert_parallel"]


def data_parallel(cfg, d, m):
    """The gradient sync: the dense part over dp x cp (or the shard group), the routed
    experts' over their expert-data-parallel group (:mod:`.config.experts`)."""
    dense = d.params - d.routed_params
    per_gpu = params_per_gpu(dense, d.routed_params, cfg.tp, cfg.pp, cfg.ep, cfg.expert_tp)
    experts = per_gpu - dense / (cfg.tp * cfg.pp)
    sharded = d.zero > 0 and d.shard_degree > 1
    group = d.shard_degree if sharded else d.dp * cfg.cp
    dim = _dimension(cfg, group, cfg.tp)
    grads = dense / (cfg.tp * cfg.pp) * d.elem  # bf16 (or fp32) gradients and parameters
    _sync(dim, "", grads, group, sharded, d, m)
    if sharded and d.dp_replicate > 1:  # HSDP: the shards' replicas all-reduce
        replica = _dimension(cfg, d.dp_replicate, cfg.tp * cfg.cp * d.dp_shard)
        _add(
            dim,
            "replica_all_reduce",
            "all_reduce",
            grads / d.shard_degree,
            m if d.zero >= 2 else 1,
            ranks=d.dp_replicate,
            link=replica,
        )
        dim["replicate_link"] = replica["link"]
    if experts:
        edp = expert_shard_degree(d.dp * cfg.cp, cfg.tp, cfg.ep, cfg.expert_tp)
        link = _dimension(cfg, edp, cfg.ep * cfg.expert_tp)
        _sync(dim, "expert_", experts * d.elem, edp, sharded, d, m, link)
    return dim


def _sync(dim, prefix, size, group, sharded, d, m, link=None):
    """Charge one group's gradient sync (and ZeRO's gathers) of ``size`` bytes to ``dim``."""
    ranks = {"ranks": group, "link": link}
    if group == 1:
        return
    if not sharded:
        _add(dim, f"{prefix}gradient_all_reduce", "all_reduce", size, 1, **ranks)
        return
    per_micro = m if d.zero >= 2 else 1
    if d.zero == 3:
        _add(dim, f"{prefix}param_all_gather_forward", "all_gather", size, m, **ranks)
        _add(dim, f"{prefix}param_all_gather_backward", "all_gather", size, m, **ranks)
    _add(dim, f"{prefix}gradient_reduce_scatter", "reduce_scatter", size, per_micro, **ranks)
    if d.zero in (1, 2):
        _add(dim, f"{prefix}param_all_gather", "all_gather", size, 1, **ranks)


def expert_parallel(cfg, d, m, act, full):
    """MoE's token all-to-all over ep: dispatch and combine, forward and backward (and the
    forward again under full recomputation), in every MoE layer of the stage; each sends
    a micro-batch's ``top_k`` copies of its tokens, (ep-1)/ep of them to other ranks, as
    uniform routing does (Megatron-Core's all-to-all dispatcher)."""
    dim = _dimension(cfg, cfg.ep, cfg.expert_tp)
    if cfg.experts is None or cfg.ep == 1 or not (cfg.layers and cfg.hidden):
        return dim
    moe_layers = (cfg.layers - cfg.dense_layers) / cfg.pp
    passes = 4 + (2 if full else 0)
    size = act / cfg.tp * cfg.top_k if cfg.sp else act * cfg.top_k  # sp: each tp rank's own
    _add(dim, "token_all_to_all", "all_to_all", size, passes * moe_layers * m, algorithm="direct")
    return dim
