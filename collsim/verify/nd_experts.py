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
>>> resolve_nd_experts(VerifyConfig("nd", ep=2, etp=2), MESH)
Traceback (most recent call last):
...
collsim.errors.ConfigError: ep=2, etp=2: ep · etp = 2·2 = 4 does not divide dp · cp · tp = \
2·1·1 = 2: MoE parallel folding lays etp-ep-edp over the same ranks as tp-cp-dp (the \
planner's rule moe_folding); nearest valid ep=1
"""

from dataclasses import dataclass

from ..errors import ConfigError
from ..nn import MoE, MoEMLP, RouterConfig, Sequential, TransformerBlock
from ..parallel.experts.generators import check_routing, routing_bias
from ..plan.config import PlanConfig, derive
from ..plan.rules.experts import moe_findings
from .context_checks import as_given, flag_name, whole
from .moe import MAX_EXPERTS, MOE_ONLY, as_flags, router_config

__all__ = [
    "NDExperts",
    "ND_MOE_OPTIONS",
    "resolve_nd_experts",
    "trainer_config",
    "moe_blocks",
    "moe_shown",
]

# the moe options nd takes (the dispatcher is the all-to-all one: Megatron-Core's default)
ND_MOE_OPTIONS = tuple(key for key in MOE_ONLY if key != "dispatcher") + ("pad_to_capacity",)
BIAS_STRENGTH = 2.0  # logits the routing generator's popularity adds to the favourite


@dataclass(frozen=True)
class NDExperts:
    """The MoE blocks of an nd check: ep ranks, the router and the routing's imbalance."""

    ep: int  # expert-parallel ranks, folded over dp x cp x tp
    router: RouterConfig  # experts, top-k, score, capacity and drops
    routing: str  # uniform, zipf, lognormal, hot or adversarial (as an expert bias)
    etp: int = 1  # expert tensor parallelism: each expert's columns over etp ranks


def _given(c):
    """The MoE options set (``is``: ``--ep 0`` is set, and refused, though 0 == False)."""
    return [
        key
        for key in ND_MOE_OPTIONS
        if getattr(c, key) is not None and getattr(c, key) is not False
    ]


# the planner's MoE rules the trainer keeps; it runs ep with tp but without sp when etp = tp
# (the etp group's ranks share their tokens) and refuses the rest itself (ParallelConfig)
PLANNER_RULES = ("moe_experts_ep", "moe_folding", "moe_ffn_etp")


def resolve_nd_experts(c, mesh, names=None, ffn=None):
    """The :class:`NDExperts` of ``c`` on ``mesh`` (Accelerate's sizes), or None when no
    MoE option is given (dense blocks).  ``ffn``: an expert's inner size (4·hidden)."""
    names = c.names if names is None else names
    if not _given(c):
        return None
    ep = whole(1 if c.ep is None else c.ep, "ep", names)
    etp = whole(mesh["tp"] if c.etp is None else c.etp, "etp", names)
    experts = whole(2 * ep if c.experts is None else c.experts, "experts", names)
    # the folding first: a huge --ep is refused by name, not by the experts it implies
    _planner_rules(c, mesh, ep, etp, experts, 4 * c.hidden if ffn is None else ffn, names)
    if experts > MAX_EXPERTS:
        raise ConfigError(
            f"{as_given(names, 'experts', experts)}: the check takes at most {MAX_EXPERTS}; "
            f"nearest valid {as_given(names, 'experts', MAX_EXPERTS)}"
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
    return NDExperts(ep, router, routing, etp)


def _planner_rules(c, mesh, ep, etp, experts, ffn, names):
    """Refuse what the planner's MoE rules refuse (:mod:`collsim.plan.rules.experts`, on
    the same sizes), in the user's flags."""
    plan = PlanConfig(
        layers=c.layers,
        hidden=c.hidden,
        heads=c.heads,
        seq=c.seq,
        experts=experts,
        moe_ffn_hidden=ffn,
        tp=mesh["tp"],
        pp=mesh["pp"],
        cp=mesh["cp"],
        dp_replicate=mesh["dp_replicate"],
        dp_shard=mesh["dp_shard"],
        ep=ep,
        etp=etp,
        sp=c.sequence_parallel,
    )
    for finding in moe_findings(plan, derive(plan), explain=True):
        if finding.rule in PLANNER_RULES:
            values = (("ep", ep), ("etp", etp), ("experts", experts))
            given = ", ".join(
                as_given(names, key, value) for key, value in values if getattr(c, key) is not None
            ) or as_given(names, "ep", ep)
            raise ConfigError(
                _in_flags(
                    f"{given}: {finding.message} (the planner's rule {finding.rule}); "
                    f"{finding.hint}",
                    names,
                )
            )


def _in_flags(message, names):
    """The planner's ``ep = 2`` as the user typed it (``--ep 2``), or ``ep=2``."""
    for key in ("etp", "ep", "experts"):
        what = flag_name(names, key)
        spelled = f"{what} " if what.startswith("-") else f"{key}="
        message = message.replace(f"valid {key} = ", f"valid {spelled}")
    return message


def trainer_config(parallel, nd, names):
    """``parallel`` with ``nd``'s ep and etp; what the trainer itself refuses (the tokens an
    etp or ep group would share over tp without sp, HSDP's experts inside a replica) is
    refused in the user's flags."""
    try:
        return parallel.replace(ep=nd.ep, etp=nd.etp)
    except ConfigError as exc:
        given = f"{as_given(names, 'ep', nd.ep)}, {as_given(names, 'etp', nd.etp)}"
        raise ConfigError(f"{given}: a combination the mesh trainer refuses: {exc}") from None


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
        "etp": nd.etp,
        "experts": r.experts,
        "top_k": r.top_k,
        "router_score": r.score,
        "capacity_factor": r.capacity_factor,
        "drop_policy": r.drop_policy,
        "pad_to_capacity": r.pad_to_capacity,
        "routing": nd.routing,
    }
