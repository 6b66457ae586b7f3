"""Mixture-of-experts models in the planner: which parameters are experts, and how ep and
etp split them.

An MoE layer replaces the dense MLP of a transformer layer by a router (``hidden × E``),
``shared_experts`` always-on experts and ``E`` routed experts, each an MLP of inner size
``moe_ffn_hidden`` (SwiGLU: three matrices, as Mixtral, DeepSeek-V3 and Qwen3-MoE); the
first ``dense_layers`` layers keep their dense MLP (DeepSeek-V3's ``first_k_dense_replace``).
Under Megatron-Core's MoE parallel folding the attention, router and shared experts are
split as dense weights are (tp, pp), and the routed experts over ``ep · etp`` ranks of each
stage (``etp``: expert tensor parallelism, Megatron-Core's default etp = tp), so

    parameters per GPU = dense / (tp · pp) + routed / (ep · etp · pp)

(:func:`params_per_gpu`: the one formula the memory estimate and the reports read).

Examples
--------
>>> routed, added = moe_params(layers=32, hidden=4096, ffn_hidden=14336, gated=True,
...                            experts=8, moe_ffn_hidden=14336, shared=0, dense_layers=0)
>>> round(routed / 1e9, 2), round(added / 1e9, 2)  # Mixtral 8x7B: 8 experts a layer
(45.1, 39.46)
>>> params_per_gpu(dense=1.6e9, routed=45.1e9, tp=1, pp=1, ep=8, etp=1) / 1e9
7.2375
"""

from ...errors import ConfigError

__all__ = [
    "MOE_FIELDS",
    "moe_params",
    "params_per_gpu",
    "expert_shard_degree",
    "check_moe_fields",
]

#: the PlanConfig fields of an MoE model (a preset fills them in)
MOE_FIELDS = ("experts", "top_k", "moe_ffn_hidden", "shared_experts", "dense_layers")


def moe_params(layers, hidden, ffn_hidden, gated, experts, moe_ffn_hidden, shared, dense_layers):
    """``(routed, added)``: the routed experts' parameters of the whole model, and how many
    the MoE layers add to a dense model of the same shape (router, shared and routed experts,
    less the dense MLPs they replace; biases of a GPT-style MLP are left out of both)."""
    matrices = 3 if gated else 2
    moe_layers = layers - dense_layers
    expert = matrices * hidden * moe_ffn_hidden
    routed = moe_layers * experts * expert
    added = moe_layers * (hidden * experts + shared * expert - matrices * hidden * ffn_hidden)
    return float(routed), float(routed + added)


def params_per_gpu(dense, routed, tp, pp, ep, etp):
    """Parameters one GPU holds: the dense part split over tp · pp, the routed experts over
    ep · etp · pp (Megatron-Core's MoE parallel folding)."""
    return dense / (tp * pp) + routed / (ep * etp * pp)


def expert_shard_degree(shard_degree, tp, ep, etp):
    """Ranks a ZeRO shard of the routed experts' state spans: the expert-data-parallel part
    of the shard group, ``shard_degree · tp / (ep · etp)`` (at least 1)."""
    return max(1.0, shard_degree * tp / (ep * etp))


def check_moe_fields(cfg):
    """Refuse MoE settings that cannot describe a model, each by name and value; fill the
    defaults (top-2, the dense ffn size, no shared experts, no dense layers) of an MoE model."""
    set_ = object.__setattr__
    for name in ("shared_experts", "dense_layers"):
        value = getattr(cfg, name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise ConfigError(f"{name} = {value!r} must be a whole number >= 0")
    if cfg.experts is None:
        given = [n for n in MOE_FIELDS[1:] if getattr(cfg, n)]
        if given:
            raise ConfigError(
                f"{given[0]} = {getattr(cfg, given[0])} describes an MoE layer but experts is "
                "not given: set experts (e.g. 8) or an MoE preset (mixtral-8x7b, deepseek-v3, "
                "qwen3-30b-a3b, qwen3-235b-a22b)"
            )
        return
    top_k = min(2, cfg.experts) if cfg.top_k is None else cfg.top_k
    if top_k > cfg.experts:
        raise ConfigError(
            f"top_k = {top_k} is more than experts = {cfg.experts}: a token chooses k distinct "
            f"experts; nearest valid top_k = {cfg.experts}"
        )
    dense = cfg.dense_layers or 0
    if cfg.layers is not None and dense >= cfg.layers:
        raise ConfigError(
            f"dense_layers = {dense} leaves no MoE layer of layers = {cfg.layers}; nearest "
            f"valid dense_layers = {cfg.layers - 1}"
        )
    set_(cfg, "top_k", top_k)
    set_(cfg, "shared_experts", cfg.shared_experts or 0)
    set_(cfg, "dense_layers", dense)
