"""``collsim verify nd --ep N``: the N-D mesh with MoE blocks, their experts over ep ranks.

With any MoE option (``--ep``, ``--experts``, ``--top-k``, ``--capacity-factor``, ...) the
nd check trains transformer blocks whose MLP is a mixture of experts
(:class:`collsim.nn.MoEMLP`) and the mesh trainer carves ``ep`` from the dp × cp ranks
(:mod:`collsim.parallel.experts.block_mlp`).  :func:`resolve_nd_experts` applies the rules
(each refusal naming the flag as typed, the rule and the nearest valid choice) before anything
runs; :func:`moe_blocks` builds the model.

Examples
--------
>>> from collsim.verify.config import VerifyConfig
>>> MESH = {"dp_replicate": 1, "dp_shard": 2, "cp": 1, "tp": 1, "pp": 1}
>>> nd = resolve_nd_experts(VerifyConfig("nd", ep=2), MESH)
>>> nd.ep, nd.router.experts, nd.router.top_k, nd.routing
(2, 4, 2, 'uniform')
>>> resolve_nd_experts(VerifyConfig("nd", ep=3), MESH)
Traceback (most recent call last):
...
collsim.errors.ConfigError: ep=3: ep is carved from the dp x cp = 2 ranks, so it must \
divide 2; nearest valid ep=2
"""

from dataclasses import dataclass

from ..errors import ConfigError, nearest_first
from ..nn import MoE, MoEMLP, RouterConfig, Sequential, TransformerBlock
from ..parallel.experts.generators import check_routing, routing_bias
from .context_checks import as_given, flag_name, whole
from .moe import MAX_EXPERTS, MOE_ONLY, as_flags, router_config

__all__ = ["NDExperts", "ND_MOE_OPTIONS", "resolve_nd_experts", "moe_blocks", "moe_shown"]

# the moe options nd takes (the dispatcher is the all-to-all one: Megatron-Core's default)
ND_MOE_OPTIONS = tuple(key for key in MOE_ONLY if key != "dispatcher") + ("pad_to_capacity",)
BIAS_STRENGTH = 2.0  # logits the routing generator's popularity adds to the favourite


@dataclass(frozen=True)
class NDExperts:
    """The MoE blocks of an nd check: ep ranks, the router and the routing's imbalance."""

    ep: int  # expert-parallel ranks, carved from dp x cp
    router: RouterConfig  # experts, top-k, score, capacity and drops
    routing: str  # uniform, zipf, lognormal, hot or adversarial (as an expert bias)


def _given(c):
    """The MoE options set (``is``: ``--ep 0`` is set, and refused, though 0 == False)."""
    return [
        key
        for key in ND_MOE_OPTIONS
        if getattr(c, key) is not None and getattr(c, key) is not False
    ]


def resolve_nd_experts(c, mesh, names=None):
    """The :class:`NDExperts` of ``c`` on ``mesh`` (Accelerate's sizes), or None when no
    MoE option is given (dense blocks)."""
    names = c.names if names is None else names
    if not _given(c):
        return None
    ep = whole(1 if c.ep is None else c.ep, "ep", names)
    carved = mesh["dp_replicate"] * mesh["dp_shard"] * mesh["cp"]
    if carved % ep:
        valid = [e for e in range(1, carved + 1) if carved % e == 0]
        raise ConfigError(
            f"{as_given(names, 'ep', ep)}: ep is carved from the dp x cp = {carved} ranks, so "
            f"it must divide {carved}; nearest valid "
            f"{as_given(names, 'ep', nearest_first(ep, valid)[0])}"
        )
    experts = whole(2 * ep if c.experts is None else c.experts, "experts", names)
    if experts > MAX_EXPERTS:
        raise ConfigError(
            f"{as_given(names, 'experts', experts)}: the check takes at most {MAX_EXPERTS}; "
            f"nearest valid {as_given(names, 'experts', MAX_EXPERTS)}"
        )
    if experts % ep:
        near = max(e for e in range(1, ep + 1) if experts % e == 0 and carved % e == 0)
        raise ConfigError(
            f"{as_given(names, 'experts', experts)} is not divisible by "
            f"{as_given(names, 'ep', ep)}: each ep rank holds experts/ep whole experts "
            f"(Megatron-Core: num_moe_experts % expert_model_parallel_size == 0); nearest "
            f"valid {as_given(names, 'ep', near)}"
        )
    top_k = whole(min(2, experts) if c.top_k is None else c.top_k, "top_k", names)
    split = (
        as_given(names, "cp", mesh["cp"])
        if mesh["cp"] > 1
        else flag_name(names, "sequence_parallel")
        if c.sequence_parallel
        else None
    )
    if c.capacity_factor is not None and split:
        raise ConfigError(
            f"{as_given(names, 'capacity_factor', c.capacity_factor)} with {split}: the "
            "one-device check knows which tokens each rank routes together only when they are "
            "one block of the batch (no cp, no sp); drop "
            f"{flag_name(names, 'capacity_factor')} (dropless)"
        )
    try:
        router = router_config(c, experts, top_k)
        routing = check_routing(c.routing or "uniform")
    except ConfigError as exc:
        raise ConfigError(as_flags(str(exc), names)) from None
    return NDExperts(ep, router, routing)


def moe_blocks(rng, nd, *, hidden, heads, ffn, layers, causal):
    """``layers`` pre-LayerNorm blocks whose MLP is an MoE of ``nd.router`` (SwiGLU experts
    of width ``ffn``), the imbalance of ``nd.routing`` set as the experts' bias."""
    blocks = []
    for _ in range(layers):
        dense = TransformerBlock.init(hidden, heads, rng, ffn, causal=causal)
        moe = MoE.init(hidden, ffn, nd.router, rng)
        experts = nd.router.experts
        moe.expert_bias = routing_bias(
            nd.routing, experts, nd.router.top_k, nd.ep, rng, strength=BIAS_STRENGTH
        )
        blocks.append(TransformerBlock(dense.ln1, dense.attn, dense.ln2, MoEMLP(moe)))
    return Sequential(*blocks)


def moe_shown(nd):
    """What the report lists of the MoE blocks."""
    if nd is None:
        return {"ep": 1}
    r = nd.router
    return {
        "ep": nd.ep,
        "experts": r.experts,
        "top_k": r.top_k,
        "router_score": r.score,
        "capacity_factor": r.capacity_factor,
        "drop_policy": r.drop_policy,
        "pad_to_capacity": r.pad_to_capacity,
        "routing": nd.routing,
    }
