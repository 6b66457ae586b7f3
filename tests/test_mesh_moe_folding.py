"""MoE parallel folding in the mesh trainer: ZeRO-1/2/3 and HSDP with expert parallelism, and
expert tensor parallelism (etp), each equal to the dense single-device MoE.

The stage's ranks fold etp-ep-edp (Megatron-Core): the dense parameters' gradients go over
dp x cp (ZeRO's shard group dp_shard x cp), the experts' over their expert-data-parallel
group of dp·cp·tp/(ep·etp) ranks and nowhere else.  The issue's three gradient bugs are
injected here with ZeRO/FSDP on: the doubled expert gradient, the router partials never
summed, and Megatron-LM's etp > 1 with ep = 1 (issue 1628: experts tagged dense, their
different columns averaged over the dense group).  The per-rank parameter, gradient and
optimizer bytes equal the planner's closed form for the same configuration.
"""

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from test_mesh_moe import FFN, HIDDEN, batch, moe_model, routers

from collsim.collectives.records import CollectiveStep
from collsim.errors import ConfigError
from collsim.network.memory import memory_peaks
from collsim.nn import SGD, Adam
from collsim.parallel.config import ParallelConfig
from collsim.parallel.data import expert_grads
from collsim.parallel.experts.generators import ROUTINGS
from collsim.parallel.mesh import train
from collsim.plan.config.experts import expert_shard_degree, params_per_gpu
from collsim.plan.memory import model_state_bytes


def run(config, experts=4, top_k=2, routing="uniform", seed=3, per_rank=1, steps=2, **router):
    """Two SGD steps of two MoE blocks on ``config`` (seq: balanced cp chunks, split by tp)."""
    model = moe_model(experts, top_k, config.ep, seed, routing, **router)
    samples = config.dp * config.microbatches * per_rank
    seq = 2 * config.cp * config.tp
    batches = [batch(samples, seq, seed + 1 + s) for s in range(steps)]
    return train(model, batches, config, optimizer=SGD(lr=0.1))


SHARDED = [  # (fields, the gradient groups the trace must name)
    ({"dp": 2, "ep": 2, "zero": 1}, {"dp"}),
    ({"dp": 4, "ep": 2, "zero": 2}, {"dp", "edp"}),
    ({"dp": 4, "ep": 2, "zero": 3}, {"dp", "edp"}),
    ({"dp": 4, "ep": 2, "zero": 1, "zero1_gradients": "all_reduce"}, {"dp", "edp"}),
    ({"dp": 4, "ep": 2, "zero": 3, "dp_replicate": 2}, {"dp_shard", "dp_replicate"}),
    ({"dp": 8, "ep": 2, "zero": 3, "dp_replicate": 2}, {"dp_shard", "edp_shard"}),
    ({"dp": 2, "cp": 2, "ep": 2, "zero": 3, "microbatches": 2}, {"dp_cp", "edp"}),
    ({"dp": 2, "pp": 2, "ep": 2, "zero": 2, "microbatches": 2}, {"dp"}),
    ({"dp": 2, "tp": 2, "sp": True, "ep": 2, "etp": 1, "zero": 3}, {"dp", "edp"}),
    ({"dp": 4, "ep": 1, "etp": 2, "zero": 3, "dp_replicate": 2}, {"dp_shard", "edp_replicate"}),
    ({"dp": 4, "ep": 2, "etp": 2, "zero": 2}, {"dp"}),
    ({"dp": 2, "tp": 2, "ep": 2, "zero": 3}, {"dp"}),  # etp = tp: experts' columns over tp
    ({"dp": 4, "ep": 2, "etp": 2, "zero": 3, "recompute": "full"}, {"dp"}),
    ({"dp": 4, "ep": 2, "zero": 3, "prefetch": "both"}, {"dp", "edp"}),  # both flat params
    (
        {"dp": 8, "ep": 2, "zero": 3, "dp_replicate": 2, "reshard_after_forward": False},
        {"dp_shard", "edp_shard", "edp_replicate"},
    ),
]


def _id(value):
    """A parameter's test id; a set's in sorted order, the same in every process (a set's
    own order follows string hashing, which differs between pytest-xdist's workers)."""
    return str(sorted(value)) if isinstance(value, (set, frozenset)) else str(value)


@pytest.mark.parametrize("fields, groups", SHARDED, ids=_id)
def test_zero_and_fsdp_with_ep_and_etp_train_like_one_device(fields, groups):
    result = run(ParallelConfig(**fields))
    assert result.match is True, result.max_error
    assert result.max_error < 1e-10
    assert result.dp_replica_diff == 0.0 and result.tp_replica_diff == 0.0
    synced = {dim for dim, collective in result.bytes_by_group if collective != "send"}
    assert groups <= synced, synced


def stage_index(config, rank):
    """``(stage, index in the stage's (dp, cp, tp) order)``, written from the mesh's layout."""
    per_stage = config.dp * config.cp * config.tp
    return rank // per_stage, rank % per_stage


@pytest.mark.parametrize(
    "fields",
    [
        {"dp": 8, "ep": 2, "zero": 3, "dp_replicate": 2},
        {"dp": 8, "ep": 2, "etp": 2, "zero": 2},
        {"dp": 2, "cp": 2, "tp": 2, "sp": True, "ep": 2, "etp": 1, "zero": 3},
        {"dp": 4, "pp": 2, "ep": 2, "zero": 0},
    ],
    ids=str,
)
def test_each_gradient_sync_stays_in_the_group_its_parameters_live_on(fields):
    """Megatron-Core's folding, by hand: stage index i is etp rank i % etp, ep rank
    (i // etp) % ep; the ranks holding the same expert slice agree on i mod ep·etp.  Every
    expert-gradient transfer joins two such ranks of one stage, and every dense one two
    ranks of one stage and tp coordinate."""
    config = ParallelConfig(**fields)
    result = run(config)
    assert result.match is True
    block = config.ep * config.expert_tp
    seen = set()
    for t in result.trace.transfers:
        if not isinstance(t.tag, CollectiveStep) or t.tag.dim is None:
            continue
        (s1, i1), (s2, i2) = stage_index(config, t.src), stage_index(config, t.dst)
        if t.tag.dim.startswith("edp"):
            seen.add("experts")
            assert s1 == s2 and i1 % block == i2 % block, (t.src, t.dst)
        elif t.tag.dim.startswith("dp"):
            seen.add("dense")
            assert s1 == s2 and i1 % config.tp == i2 % config.tp, (t.src, t.dst)
    assert seen == {"experts", "dense"}


@pytest.mark.parametrize(
    "fields, form",
    [
        ({"dp": 2, "tp": 2, "ep": 2}, ("etp", "all_reduce")),  # tp ranks share their tokens
        ({"dp": 4, "ep": 1, "etp": 2}, ("etp", "all_to_allv")),  # each its own: gather, scatter
        ({"dp": 2, "tp": 2, "sp": True, "ep": 2}, ("etp", "all_to_allv")),
    ],
    ids=str,
)
def test_etp_exchanges_the_expert_outputs_the_way_the_tokens_are_held(fields, form):
    result = run(ParallelConfig(**fields))
    assert result.match is True
    assert form in result.bytes_by_group, sorted(result.bytes_by_group)


def test_adversarial_routing_with_fsdp_and_etp_leaves_ranks_without_tokens_and_matches():
    config = ParallelConfig(dp=8, ep=2, etp=2, zero=3, dp_replicate=2)
    result = run(config, experts=4, top_k=1, routing="adversarial")
    assert result.match is True
    received = {}
    for t in result.trace.transfers:
        if getattr(t.meta, "call", None) == "dispatch":
            received[t.dst] = received.get(t.dst, 0) + t.nbytes
    assert received and set(range(config.world_size)) - set(received)  # some get none


# --- the bugs, injected with ZeRO/FSDP on -----------------------------------------------------


def megatron_1628(name, me):
    """Megatron-Core before the fix: experts synced as experts only when ep > 1."""
    return name in me.expert_names and me.experts.ep.size > 1


def router_with_experts(name, me):
    """The router synced over the experts' edp group: the ep group's partials never summed."""
    return name in me.expert_names or name.endswith("router")


BUGS = {
    "doubled": ("expert_grad_share", lambda grad, shards: grad),
    "unsummed_router": ("is_expert_gradient", router_with_experts),
    "megatron_1628": ("is_expert_gradient", megatron_1628),
}


@pytest.mark.parametrize(
    "bug, fields",
    [
        ("doubled", {"dp": 2, "ep": 2, "zero": 1}),
        ("doubled", {"dp": 4, "ep": 2, "zero": 2}),
        ("doubled", {"dp": 4, "ep": 2, "zero": 3, "dp_replicate": 2}),
        ("doubled", {"dp": 4, "ep": 1, "etp": 2, "zero": 3}),
        ("unsummed_router", {"dp": 2, "ep": 2, "zero": 1}),
        ("unsummed_router", {"dp": 4, "ep": 2, "zero": 3}),
        ("unsummed_router", {"dp": 4, "ep": 2, "zero": 3, "dp_replicate": 2}),
        ("megatron_1628", {"dp": 4, "ep": 1, "etp": 2}),
        ("megatron_1628", {"dp": 4, "ep": 1, "etp": 2, "zero": 3}),
        ("megatron_1628", {"dp": 2, "cp": 2, "ep": 1, "etp": 2, "zero": 2}),
    ],
    ids=str,
)
def test_injected_gradient_bugs_are_caught_with_sharding_on(monkeypatch, bug, fields):
    config = ParallelConfig(**fields)
    assert run(config).match is True
    monkeypatch.setattr(expert_grads, *BUGS[bug])
    assert run(config).match is False


def test_fsdp_with_the_doubled_bug_gives_exactly_twice_the_expert_gradients(monkeypatch):
    monkeypatch.setattr(expert_grads, *BUGS["doubled"])
    model, data = moe_model(4, 2, 2, 3), [batch(2, 2, 4)]
    result = train(model, data, ParallelConfig(dp=2, ep=2, zero=3), optimizer=SGD(lr=0.1))
    one = train(model, data, ParallelConfig(), optimizer=SGD(lr=0.1))
    got, want = result.grads["0.mlp.w_up"], one.grads["0.mlp.w_up"]
    assert np.allclose(got, 2 * want, rtol=1e-12, atol=1e-15)


@st.composite
def folded_meshes(draw):
    dp, cp, tp = (draw(st.sampled_from(v)) for v in ([1, 2, 4], [1, 2], [1, 2]))
    pp = draw(st.sampled_from([p for p in (1, 2) if dp * cp * tp * p <= 16]))
    sp = tp > 1 and draw(st.booleans())
    per_stage = dp * cp * tp
    etp = draw(st.sampled_from([e for e in (1, 2) if per_stage % e == 0]))
    eps = [e for e in (1, 2, 4) if per_stage % (e * etp) == 0]
    if tp > 1 and not sp and etp < tp:
        eps = [1]  # an ep group across tp ranks holding the same tokens needs sp
    ep = draw(st.sampled_from(eps))
    zero = draw(st.sampled_from([0, 1, 2, 3]))
    replicas = [r for r in (1, 2) if dp % r == 0 and (r == 1 or zero == 3)]
    dp_replicate = draw(st.sampled_from(replicas))
    assume((dp // dp_replicate) * cp * tp % (ep * etp) == 0 or dp_replicate == 1)
    router = draw(routers(one_block=cp == 1 and not sp))
    config = ParallelConfig(
        dp=dp,
        cp=cp,
        tp=tp,
        sp=sp,
        pp=pp,
        ep=ep,
        etp=etp,
        zero=zero,
        dp_replicate=dp_replicate,
        microbatches=draw(st.sampled_from([1, 2])),
    )
    experts = ep * draw(st.sampled_from([1, 2]))
    return {
        "config": config,
        "experts": experts,
        "top_k": draw(st.integers(1, min(2, experts))),
        "routing": draw(st.sampled_from(ROUTINGS)),
        "seed": draw(st.integers(0, 2**16)),
        "per_rank": draw(st.integers(1, 2)),
        **router,
    }


@given(folded_meshes())
def test_every_folded_mesh_with_sharding_trains_like_one_device(case):
    case = dict(case)
    result = run(case.pop("config"), steps=1, **case)
    assert result.match is True, result.max_error
    assert result.dp_replica_diff == 0.0 and result.tp_replica_diff == 0.0


@given(folded_meshes())
def test_the_property_catches_the_doubled_expert_gradient_with_sharding_on(case):
    config = case["config"]
    assume(expert_grads_are_scaled(config))
    original = expert_grads.expert_grad_share
    expert_grads.expert_grad_share = BUGS["doubled"][1]
    try:
        args = {k: v for k, v in case.items() if k != "config"}
        result = run(config, steps=1, **args)
    finally:
        expert_grads.expert_grad_share = original
    moved = any(np.any(result.grads[name]) for name in result.grads if name.endswith("w_down"))
    assert result.match is (not moved)


@st.composite
def megatron_1628_meshes(draw):
    """Meshes where ep = 1 and the experts' edp group is not the dense group: etp folded over
    data or context-parallel ranks (etp > tp), or inside tp under sp (etp < tp)."""
    dp, cp, tp = (draw(st.sampled_from(v)) for v in ([2, 4], [1, 2], [1, 2]))
    etp = 1 if tp == 2 else 2  # FFN = 6 splits over 2 columns at most; etp != tp
    sp = tp > 1  # without sp an etp inside tp shares its tokens: the bug hides (copies agree)
    zero = draw(st.sampled_from([0, 1, 2, 3]))
    config = ParallelConfig(dp=dp, cp=cp, tp=tp, sp=sp, ep=1, etp=etp, zero=zero)
    return {
        "config": config,
        "experts": draw(st.sampled_from([2, 4])),
        "top_k": draw(st.sampled_from([1, 2])),
        "routing": draw(st.sampled_from(ROUTINGS)),
        "seed": draw(st.integers(0, 2**16)),
    }


@given(megatron_1628_meshes())
def test_the_property_catches_megatron_1628_experts_synced_as_dense_when_ep_is_1(case):
    args = {k: v for k, v in case.items() if k != "config"}
    assert run(case["config"], steps=1, **args).match is True
    original = expert_grads.is_expert_gradient
    expert_grads.is_expert_gradient = megatron_1628
    try:
        result = run(case["config"], steps=1, **args)
    finally:
        expert_grads.is_expert_gradient = original
    assert result.match is False


def expert_grads_are_scaled(config):
    """Whether the experts' gradient share differs from 1 (else no bug to see)."""
    from collsim.parallel.experts.folding import expert_token_shards

    return expert_token_shards(config.ep, config.expert_tp, config.tp, config.sp) != 1


# --- memory: measured model state against the planner's closed form ---------------------------


def parameter_counts(model):
    """``(dense, routed)`` parameters of the whole model, counted from its arrays."""
    routed = sum(
        layer.mlp.moe.experts.params[k].size
        for layer in model
        for k in ("w_gate", "w_up", "w_down")
    )
    total = sum(a.size for layer in model for a in layer.params.values())
    return total - routed, routed


@pytest.mark.parametrize(
    "fields",
    [
        {"dp": 4, "ep": 2, "zero": 0},
        {"dp": 4, "ep": 2, "zero": 1},
        {"dp": 4, "ep": 2, "zero": 2},
        {"dp": 4, "ep": 2, "zero": 3},
        {"dp": 8, "ep": 2, "zero": 3, "dp_replicate": 2},
        {"dp": 4, "ep": 2, "etp": 2, "zero": 3},
        {"dp": 4, "ep": 1, "etp": 2, "zero": 2},
        {"dp": 2, "cp": 2, "ep": 2, "zero": 3},
        {"dp": 4, "ep": 4, "zero": 3},
    ],
    ids=str,
)
def test_measured_model_state_equals_the_planners_closed_form(fields):
    """Per rank, bf16 parameters and gradients and Adam's 12 B of fp32 state, as the
    trainer's memory tracker measured them, equal the planner's formulas: dense/(tp·pp) and
    routed/(ep·etp·pp) parameters (params_per_gpu), the dense state sharded over
    dp_shard·cp, the experts' over dp_shard·cp·tp/(ep·etp) (expert_shard_degree)."""
    config = ParallelConfig(**fields)
    model = moe_model(4, 2, config.ep, 0)
    samples, seq = config.dp * config.microbatches, 2 * config.cp * config.tp
    result = train(model, [batch(samples, seq, 1)], config, optimizer=Adam(lr=0.01))
    dense, routed = parameter_counts(model)
    assert (dense, routed) == (
        2 * (4 * HIDDEN + 4 * HIDDEN * HIDDEN + 4 * HIDDEN + HIDDEN * 4),
        2 * 4 * 3 * HIDDEN * FFN,
    )  # by hand: norms, attention, router
    tp, pp, ep, etp = config.tp, config.pp, config.ep, config.expert_tp
    shard = config.dp_shard * config.cp if config.zero else 1
    expert_share = params_per_gpu(dense, routed, tp, pp, ep, etp) - dense / (tp * pp)
    want = [
        a + b
        for a, b in zip(
            model_state_bytes(dense / (tp * pp), config.zero, shard),
            model_state_bytes(expert_share, config.zero, expert_shard_degree(shard, tp, ep, etp)),
        )
    ]
    assert all(float(w).is_integer() for w in want)  # sizes with no padding to a shard
    for peak in memory_peaks(result.trace, config.world_size):
        got = [peak.by_category[c] for c in ("params", "grads", "optimizer")]
        assert got == want, (peak.rank, got, want)


def test_checkpointing_experts_is_refused_by_name():
    with pytest.raises(ConfigError, match="state_dict='full' with MoE layers.*state_dict=None"):
        train(
            moe_model(4, 2, 2, 0),
            [batch(4, 2, 1)],
            ParallelConfig(dp=4, ep=2, zero=3),
            optimizer=Adam(lr=0.01),
            state_dict="full",
        )
