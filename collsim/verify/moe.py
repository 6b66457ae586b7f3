"""``collsim verify moe``: one MoE layer with expert parallelism against the dense layer.

The layer (:class:`collsim.nn.MoE`, SwiGLU experts) and the tokens come from the seed; a
routing generator (:mod:`collsim.parallel.experts.generators`) dials how unevenly they
prefer the experts.  One forward and backward run on ``ep`` ranks of a switch
(:func:`~collsim.parallel.experts.step.expert_parallel_step`) and on one device
(:func:`~collsim.parallel.experts.step.dense_step`); the outputs, the input gradient, the
router's and every expert's gradients are compared, and each rank's dispatch and combine
bytes, read from the trace, are set next to the closed form for the routing that happened.

Examples
--------
>>> report = verify_moe(MoESizes.of(ep=2, experts=4, top_k=2, batch=2, seq=4, hidden=8))
>>> report.match, [load.rows_received > 0 for load in report.loads]
(True, [True, True])
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..errors import ConfigError, nearest_first
from ..nn import MoE, RouterConfig
from ..nn.routing import expert_capacity
from ..parallel.experts.formulas import (
    allgather_bytes,
    combine_bytes,
    counts_bytes,
    dispatch_bytes,
    hierarchical_bytes,
)
from ..parallel.experts.generators import check_routing, routing_prior
from ..parallel.experts.layer import check_dispatcher
from ..parallel.experts.step import dense_step, expert_parallel_step, max_rel_diff
from ..units import parse_rate, parse_time
from .context_checks import as_given, whole
from .moe_report import MoEReport
from .resolve import check_numbers

__all__ = [
    "MOE_SCHEMES",
    "MoESizes",
    "MoEInputs",
    "moe_inputs",
    "moe_sizes",
    "verify_moe",
    "refuse_moe_options",
    "as_flags",
    "MOE_TOLERANCE",
]

MOE_SCHEMES = ("moe",)
MOE_TOLERANCE = 1e-12  # float64; only the router's gradient is summed in another order
# what a check may cost: expert FLOPs of both runs (about 10 s of numpy) and ranks
MAX_EXPERT_FLOPS = 2e10
MAX_EP = 64
MAX_EXPERTS = 512
# options the moe check does not take (it trains nothing and uses no other mesh dimension)
NOT_MOE = (
    "etp",
    "dp",
    "tp",
    "cp",
    "pp",
    "stage",
    "optimizer",
    "micro_batch",
    "accumulation",
    "dp_replicate",
    "dp_shard",
    "variant",
    "layout",
    "causal",
    "lr",
)
MOE_ONLY = (
    "ep",
    "etp",  # nd only: the experts' columns over etp ranks (moe refuses it, NOT_MOE)
    "experts",
    "top_k",
    "capacity_factor",
    "drop_policy",
    "routing",
    "router_score",
    "dispatcher",
)


@dataclass(frozen=True)
class MoESizes:
    """The moe check's sizes and rules, every default filled in."""

    ep: int
    router: RouterConfig
    tokens: int  # all ranks together: batch · seq
    hidden: int
    ffn_hidden: int  # each expert's inner size
    routing: str
    seed: int = 0
    bandwidth: float = 100e9  # bytes/s per link
    latency: float = 5e-6  # s per link
    compute_rate: float = 100e12  # FLOP/s per rank
    dispatcher: str = "alltoall"  # "allgather" (Megatron-Core's other) or "hierarchical"
    gpus_per_node: int | None = None  # None: one switch; else nodes of a two-level topology

    @classmethod
    def of(cls, ep=4, experts=8, top_k=2, batch=None, seq=8, hidden=16, ffn_hidden=None, **rest):
        """Sizes from keywords with the check's defaults (doctests and tests)."""
        router = RouterConfig(experts, top_k, **{k: rest.pop(k) for k in _ROUTER if k in rest})
        batch = 2 * ep if batch is None else batch
        ffn = 2 * hidden if ffn_hidden is None else ffn_hidden
        return cls(ep, router, batch * seq, hidden, ffn, rest.pop("routing", "uniform"), **rest)


_ROUTER = ("score", "normalize", "capacity_factor", "drop_policy", "pad_to_capacity")


def moe_sizes(c):
    """A :class:`~collsim.verify.config.VerifyConfig` of scheme moe checked: the options it
    takes, the divisibility rules (each refusal naming the nearest valid choice) and the
    cost, before anything runs."""
    names = c.names
    for key in NOT_MOE:
        if getattr(c, key) is not None:
            raise ConfigError(
                f"{as_given(names, key, getattr(c, key))} does not apply to scheme 'moe' "
                "(one MoE layer over an ep group, one forward and backward)"
            )
    check_numbers(c)  # the sizes, the seed and the switches have the right kind of value
    ep = whole(4 if c.ep is None else c.ep, "ep", names)
    experts = whole(8 if c.experts is None else c.experts, "experts", names)
    if ep > MAX_EP or experts > MAX_EXPERTS:
        key, value, limit = ("ep", ep, MAX_EP) if ep > MAX_EP else ("experts", experts, 512)
        raise ConfigError(
            f"{as_given(names, key, value)}: the check takes at most {limit}; nearest valid "
            f"{as_given(names, key, limit)}"
        )
    if experts % ep:
        valid = [e for e in range(1, min(experts, MAX_EP) + 1) if experts % e == 0]
        raise ConfigError(
            f"{as_given(names, 'experts', experts)} is not divisible by "
            f"{as_given(names, 'ep', ep)}: each ep rank holds experts/ep whole experts "
            f"(Megatron-Core: num_moe_experts % expert_model_parallel_size == 0); nearest "
            f"valid {as_given(names, 'ep', nearest_first(ep, valid)[0])}"
        )
    top_k = whole(2 if c.top_k is None else c.top_k, "top_k", names)
    if top_k > experts:
        given, most = as_given(names, "top_k", top_k), as_given(names, "top_k", experts)
        raise ConfigError(
            f"{given} is more than {as_given(names, 'experts', experts)}: a token chooses k "
            f"distinct experts; nearest valid {most}"
        )
    batch = whole(2 * ep if c.batch is None else c.batch, "batch", names)
    if batch % ep:
        near = max(ep, round(batch / ep) * ep)
        raise ConfigError(
            f"{as_given(names, 'batch', batch)} does not split over {as_given(names, 'ep', ep)}"
            f": each ep rank routes batch/ep samples of its own; nearest valid "
            f"{as_given(names, 'batch', near)}"
        )
    seq, hidden = whole(c.seq, "seq", names), whole(c.hidden, "hidden", names)
    ffn = whole(2 * hidden if c.ffn_hidden is None else c.ffn_hidden, "ffn_hidden", names)
    try:
        router = router_config(c, experts, top_k)
        routing = check_routing(c.routing or "uniform")
        dispatcher = check_dispatcher(c.dispatcher or "alltoall")
        gpus_per_node = _node_size(c.gpus_per_node, ep, names)
    except ConfigError as exc:
        raise ConfigError(as_flags(str(exc), names)) from None
    tokens = batch * seq
    work = 2 * 2 * 3 * 2 * 3 * tokens * top_k * hidden * ffn * max(1.0, c.capacity_factor or 1)
    if work > MAX_EXPERT_FLOPS:
        raise ConfigError(
            f"{as_given(names, 'batch', batch)} × {as_given(names, 'seq', seq)} tokens, "
            f"{as_given(names, 'hidden', hidden)}, {as_given(names, 'ffn_hidden', ffn)}: about "
            f"{work:.3g} FLOPs of numpy on this machine (more than {MAX_EXPERT_FLOPS:.0e}, "
            "minutes); the check shows the same at the defaults (--hidden 16, --seq 8)"
        )
    return MoESizes(
        ep,
        router,
        tokens,
        hidden,
        ffn,
        routing,
        c.seed,
        parse_rate(c.bandwidth),
        parse_time(c.latency),
        float(c.compute_rate),
        dispatcher,
        gpus_per_node,
    )


def refuse_moe_options(c, takes=()):
    """The moe options set on another scheme (except those it ``takes``), refused by name
    and value."""
    given = [key for key in MOE_ONLY if getattr(c, key) is not None and key not in takes]
    given += ["pad_to_capacity"] if c.pad_to_capacity and "pad_to_capacity" not in takes else []
    if given:
        key = given[0]
        where = "nd" if key == "etp" else "moe"  # expert tensor parallelism runs in the mesh
        raise ConfigError(
            f"{as_given(c.names, key, getattr(c, key))} applies to scheme {where}, not to "
            f"{c.scheme!r}"
        )


def _node_size(gpus_per_node, ep, names):
    """None for one switch, else a node size that divides ep (the ranks fill whole nodes)."""
    if gpus_per_node is None:
        return None
    size = whole(gpus_per_node, "gpus_per_node", names)
    if ep % size:
        valid = nearest_first(size, [g for g in range(1, ep + 1) if ep % g == 0])
        raise ConfigError(
            f"{as_given(names, 'gpus_per_node', size)} does not divide "
            f"{as_given(names, 'ep', ep)}: the ep ranks fill whole nodes; nearest valid "
            f"{as_given(names, 'gpus_per_node', valid[0])}"
        )
    return size


def as_flags(message, names):
    """A RouterConfig refusal in the user's words (``--capacity-factor``, not
    ``capacity_factor=``)."""
    for key, flag in (("score", "router_score"),) + tuple((k, k) for k in MOE_ONLY):
        if f"{key}=" in message and flag in names:
            message = message.replace(f"{key}=", f"{names[flag]} ")
    return message


class MoEInputs(NamedTuple):
    """What the check draws from its seed: the layer, the tokens, their targets and the
    routing generator's prior."""

    moe: MoE
    x: np.ndarray  # (T, d)
    target: np.ndarray  # (T, d)
    prior: np.ndarray  # (T, E)


def moe_inputs(sizes):
    """The layer and data of the check ``sizes`` describes, drawn from its seed (the
    pictures of ``collsim viz moe-*`` route the same tokens)."""
    rng = np.random.default_rng(sizes.seed)
    router = sizes.router
    moe = MoE.init(sizes.hidden, sizes.ffn_hidden, router, rng)
    x = rng.normal(size=(sizes.tokens, sizes.hidden))
    target = rng.normal(size=(sizes.tokens, sizes.hidden))
    prior = routing_prior(sizes.routing, sizes.tokens, router.experts, router.top_k, sizes.ep, rng)
    return MoEInputs(moe, x, target, prior)


def verify_moe(sizes):
    """Run the check ``sizes`` describes (a :class:`MoESizes`); a :class:`MoEReport`."""
    router = sizes.router
    moe, x, target, prior = moe_inputs(sizes)
    run = expert_parallel_step(
        moe,
        x,
        target,
        sizes.ep,
        prior,
        bandwidth=sizes.bandwidth,
        latency=sizes.latency,
        compute_rate=sizes.compute_rate,
        dispatcher=sizes.dispatcher,
        gpus_per_node=sizes.gpus_per_node,
    )
    oracle = dense_step(moe, x, target, sizes.ep, prior)
    row_bytes = sizes.hidden * 8  # float64 rows
    per_rank = sizes.tokens // sizes.ep
    routed = (
        dispatch_bytes(run.expert_counts, sizes.ep, row_bytes),
        combine_bytes(run.expert_counts, sizes.ep, row_bytes),
    )
    gathered = allgather_bytes(per_rank, sizes.ep, row_bytes, router.experts)
    ran, other = (gathered, routed) if sizes.dispatcher == "allgather" else (routed, gathered)
    if sizes.dispatcher == "hierarchical":
        ran, other = (
            hierarchical_bytes(
                run.expert_counts,
                run.node_tokens,
                sizes.ep,
                sizes.gpus_per_node or sizes.ep,
                row_bytes,
                router.experts,
            ),
            routed,
        )
    return MoEReport(
        sizes=sizes,
        max_rel_diff=max_rel_diff(run.result, oracle),
        tolerance=MOE_TOLERANCE,
        loads=run.loads,
        dispatch=ran[0],
        combine=ran[1],
        counts_bytes=counts_bytes(router.experts, sizes.ep) if ran is routed else 0,
        inter_node=[load.inter_node_sent for load in run.loads],
        other_bytes=max(other[0].sent),
        capacity=_capacity(sizes),
        time=run.time,
        trace=run.trace,
    )


def _capacity(sizes):
    r = sizes.router
    if r.capacity_factor is None:
        return None
    return expert_capacity(sizes.tokens // sizes.ep, r.top_k, r.experts, r.capacity_factor)


def router_config(c, experts, top_k):
    """The router the VerifyConfig ``c`` asks for: softmax scores, dropless (or dropping by
    probability under a capacity factor) and no padding unless it says otherwise."""
    return RouterConfig(
        experts,
        top_k,
        score=c.router_score or "softmax",
        capacity_factor=c.capacity_factor,
        drop_policy=c.drop_policy or "probs",
        pad_to_capacity=bool(c.pad_to_capacity),
    )
