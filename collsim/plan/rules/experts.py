"""Megatron-Core's rules for expert parallelism (its ``arguments.py`` and MoE parallel folding).

Under folding the attention uses tp-cp-dp-pp and the MoE layers etp-ep-edp-pp over the same
ranks of a stage, so ``ep · etp`` must divide ``dp · cp · tp``; each ep rank holds E/ep whole
experts; with ep and tp both > 1 Megatron-Core requires sequence parallelism (the MoE layer
takes each tp rank's own tokens); and the all-to-all of ep, with tp's all-reduces, is fast
only inside the NVLink domain (a warning).  Each finding names the value, the rule and the
nearest valid choice.

Examples
--------
>>> from collsim.plan.config import PlanConfig, derive
>>> cfg = PlanConfig(model="mixtral-8x7b", world_size=16, ep=3, global_batch=16)
>>> [f.message for f in moe_findings(cfg, derive(cfg), True)][0]  # doctest: +ELLIPSIS
'experts = 8 is not divisible by ep = 3: each ep rank holds E/ep whole experts ...'
"""

from ..config.derived import divisors, show
from .finding import Finding

__all__ = ["moe_findings", "MOE_RULES"]

MOE_RULES = ("moe_ep_dense", "moe_experts_ep", "moe_folding", "moe_sp", "moe_ffn_etp", "moe_node")


def _nearest(value, valid):
    return min(valid, key=lambda v: (abs(v - value), v)) if valid else 1


def moe_findings(cfg, d, explain=True):
    """The :class:`Finding` of every MoE rule ``cfg`` breaks (derived values ``d``)."""
    ep, etp = cfg.ep, cfg.expert_tp
    folded = d.dp * cfg.cp * cfg.tp  # the ranks of one stage, where ep x etp is folded
    if cfg.experts is None:
        if ep > 1 or (cfg.etp or 1) > 1:
            name, value = ("ep", ep) if ep > 1 else ("etp", cfg.etp)
            yield Finding(
                "moe_ep_dense",
                f"{name} = {value} splits experts, but the model is dense (experts not given)",
                "set experts (e.g. experts=8) or an MoE preset (mixtral-8x7b, deepseek-v3, "
                f"qwen3-30b-a3b, qwen3-235b-a22b); nearest valid {name} = 1",
            )
        return
    if cfg.experts % ep:
        fits = [e for e in divisors(cfg.experts) if _whole(folded / (e * etp))]
        yield Finding(
            "moe_experts_ep",
            f"experts = {cfg.experts} is not divisible by ep = {ep}: each ep rank holds E/ep "
            "whole experts (Megatron-Core: num_moe_experts % expert_model_parallel_size == 0)",
            f"nearest valid ep = {_nearest(ep, fits)}" if explain else "",
        )
    if not _whole(folded / (ep * etp)):
        fits = [e for e in divisors(cfg.experts) if _whole(folded / (e * etp))]
        yield Finding(
            "moe_folding",
            f"ep · etp = {ep}·{etp} = {ep * etp} does not divide dp · cp · tp = "
            f"{show(d.dp)}·{cfg.cp}·{cfg.tp} = {show(folded)}: MoE parallel folding lays "
            "etp-ep-edp over the same ranks as tp-cp-dp",
            f"nearest valid ep = {_nearest(ep, fits)}" if explain else "",
        )
    if ep > 1 and cfg.tp > 1 and not cfg.sp:
        yield Finding(
            "moe_sp",
            f"ep = {ep} with tp = {cfg.tp} needs sequence parallelism (Megatron-Core refuses "
            "expert and tensor parallelism without it): each tp rank routes its own tokens",
            "set sp (--sp), or tp = 1",
        )
    moe_ffn = cfg.moe_ffn_hidden or d.ffn_hidden
    if moe_ffn and moe_ffn % etp:
        valid = [e for e in divisors(moe_ffn) if e <= max(etp, 1) * 2]
        yield Finding(
            "moe_ffn_etp",
            f"an expert's ffn hidden {moe_ffn} is not divisible by etp = {etp} (the expert "
            "MLP is split by columns and rows over etp)",
            f"nearest valid etp = {_nearest(etp, valid)}" if explain else "",
        )
    if ep * cfg.tp > cfg.gpus_per_node:
        yield Finding(
            "moe_node",
            f"ep · tp = {ep}·{cfg.tp} = {ep * cfg.tp} > {cfg.gpus_per_node} GPUs per node: the "
            "token all-to-all of every MoE layer (dispatch and combine, forward and backward) "
            "crosses the inter-node network",
            f"keep ep · tp ≤ {cfg.gpus_per_node} (ep = {max(1, cfg.gpus_per_node // cfg.tp)})",
            "warning",
        )


def _whole(x):
    return abs(x - round(x)) < 1e-9 and round(x) >= 1
