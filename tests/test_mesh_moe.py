"""Expert parallelism in the mesh trainer: transformer blocks whose MLP is an MoE train one
step like one device for every (dp, tp, pp, cp, ep) the trainer accepts, up to 16 ranks.

ep is carved from the dp x cp ranks: each group of ep of them splits every MoE layer's
experts and all-to-alls the tokens; the experts' gradients are reduced over the
expert-data-parallel group (scaled by 1/ep), the router's and attention's over dp x cp.
The oracle is the dense single-device model (`collsim.nn.MoEMLP`), routing each rank's
micro-batch on its own as the ranks do, so capacity drops the same tokens.  The two
gradient bugs of the issue (doubled expert gradients with ep = 2, router partials never
summed) are injected and caught by the same property.
"""

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from collsim.collectives.all_to_allv import RaggedTransfer
from collsim.errors import ConfigError
from collsim.nn import MoE, MoEMLP, RouterConfig, Sequential, TransformerBlock
from collsim.parallel.config import ParallelConfig
from collsim.parallel.data import expert_grads
from collsim.parallel.data import sync as data_sync
from collsim.parallel.experts.generators import ROUTINGS, routing_bias
from collsim.parallel.mesh import train

HIDDEN, FFN = 4, 6


def moe_model(experts, top_k, ep, seed, routing="uniform", layers=2, **router):
    """``layers`` pre-LN blocks whose MLP is an MoE, the imbalance set by ``routing``."""
    rng = np.random.default_rng(seed)
    blocks = []
    for _ in range(layers):
        dense = TransformerBlock.init(HIDDEN, 2, rng)
        config = RouterConfig(experts, top_k, **router)
        moe = MoE.init(HIDDEN, FFN, config, rng)
        moe.expert_bias = routing_bias(routing, experts, top_k, ep, rng, strength=2.0)
        blocks.append(TransformerBlock(dense.ln1, dense.attn, dense.ln2, MoEMLP(moe)))
    return Sequential(*blocks)


def batch(samples, seq, seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(samples, seq, HIDDEN)), rng.normal(size=(samples, seq, HIDDEN))


@st.composite
def routers(draw, one_block):
    """RouterConfig keywords: capacity and the load-balancing loss only where a rank's
    tokens are one block of the batch (no cp, no sp), as the one-device check needs."""
    capacity = draw(st.sampled_from([None, 0.5, 1.0, 1.5])) if one_block else None
    return {
        "score": draw(st.sampled_from(["softmax", "sigmoid"])),
        "capacity_factor": capacity,
        "drop_policy": draw(st.sampled_from(["probs", "position"])),
        "pad_to_capacity": capacity is not None and draw(st.booleans()),
        "aux_loss_coeff": draw(st.sampled_from([0.0, 0.1])) if one_block else 0.0,
    }


@st.composite
def meshes(draw):
    dp, cp, tp = (draw(st.sampled_from(v)) for v in ([1, 2, 4], [1, 2], [1, 2]))
    pp = draw(st.sampled_from([p for p in (1, 2) if dp * cp * tp * p <= 16]))
    sp = tp > 1 and draw(st.booleans())
    ep = draw(st.sampled_from([e for e in (1, 2, 4) if (dp * cp) % e == 0]))
    experts = ep * draw(st.sampled_from([1, 2]))
    router = draw(routers(one_block=cp == 1 and not sp))
    return {
        "config": ParallelConfig(
            dp=dp, cp=cp, tp=tp, sp=sp, pp=pp, ep=ep, microbatches=draw(st.sampled_from([1, 2]))
        ),
        "experts": experts,
        "top_k": draw(st.integers(1, min(2, experts))),
        "router": router,
        "routing": draw(st.sampled_from(ROUTINGS)),
        "seed": draw(st.integers(0, 2**16)),
        "per_rank": draw(st.integers(1, 2)),  # samples per replica and micro-batch
    }


def run_case(case):
    config = case["config"]
    model = moe_model(
        case["experts"], case["top_k"], config.ep, case["seed"], case["routing"], **case["router"]
    )
    samples = config.dp * config.microbatches * case["per_rank"]
    seq = 2 * config.cp * config.tp  # balanced cp chunks, each split over tp under sp
    return train(model, [batch(samples, seq, case["seed"] + 1)], config)


@given(meshes())
def test_every_mesh_with_moe_blocks_trains_like_one_device(case):
    result = run_case(case)
    assert result.match is True, result.max_error
    assert result.max_error < 1e-10
    assert result.dp_replica_diff == 0.0  # dense copies and each expert shard's copies agree
    assert result.tp_replica_diff == 0.0  # the MoE's weights agree over tp


@pytest.mark.parametrize(
    "dp, cp, pp, ep, m, tp, sp",
    [
        (2, 1, 1, 2, 1, 1, False),
        (4, 1, 1, 4, 2, 1, False),
        (4, 1, 2, 2, 1, 1, False),
        (2, 2, 1, 4, 1, 1, False),
        (2, 2, 2, 2, 2, 1, False),
        (8, 1, 2, 8, 1, 1, False),
        (4, 2, 2, 8, 1, 1, False),
        (2, 1, 1, 2, 1, 2, False),
        (2, 1, 2, 2, 2, 2, True),
        (2, 2, 1, 4, 1, 2, True),
        (2, 2, 2, 4, 1, 2, True),
    ],  # the last: 16 ranks
)
@pytest.mark.parametrize("routing", ["uniform", "adversarial"])
def test_each_mesh_and_routing_trains_like_one_device(dp, cp, pp, ep, m, tp, sp, routing):
    config = ParallelConfig(dp=dp, cp=cp, pp=pp, ep=ep, microbatches=m, tp=tp, sp=sp)
    case = {
        "config": config,
        "experts": 2 * ep,
        "top_k": 2,
        "router": {},
        "routing": routing,
        "seed": 3,
        "per_rank": 1,
    }
    result = run_case(case)
    assert result.match is True and result.max_error < 1e-10
    assert result.mesh.size == dp * cp * pp * tp and result.dp_replica_diff == 0.0


def dispatched_to(result):
    """Bytes of token rows each rank received in the forward dispatch."""
    got = {}
    for t in result.trace.transfers:
        if isinstance(t.meta, RaggedTransfer) and t.meta.call == "dispatch":
            got[t.dst] = got.get(t.dst, 0) + t.nbytes
    return got


def test_adversarial_routing_leaves_ranks_with_zero_tokens_and_still_matches():
    config = ParallelConfig(dp=4, ep=4)
    case = {
        "config": config,
        "experts": 4,
        "top_k": 1,
        "router": {},
        "routing": "adversarial",
        "seed": 0,
        "per_rank": 1,
    }
    result = run_case(case)
    assert result.match is True
    received = dispatched_to(result)
    assert set(received) == {0}  # only rank 0 holds the chosen experts; 1, 2, 3 get nothing
    assert received[0] > 0


def test_expert_traffic_stays_in_the_ep_group():
    config = ParallelConfig(dp=4, pp=2, ep=2)
    case = {
        "config": config,
        "experts": 4,
        "top_k": 2,
        "router": {},
        "routing": "uniform",
        "seed": 1,
        "per_rank": 1,
    }
    result = run_case(case)
    pairs = {(t.src, t.dst) for t in result.trace.transfers if isinstance(t.meta, RaggedTransfer)}
    # ranks (stage-major, dp inner): ep groups {0,1}, {2,3}, {4,5}, {6,7}
    assert pairs and all(a // 2 == b // 2 for a, b in pairs)


# --- the two gradient bugs, injected: the property above catches both ---------------


def doubled(grad, shards):
    return grad  # the 1/ep left out: each expert's gradient is ep ranks' worth


def unsummed_router(self, name, grad):
    """The router bucketed with the experts: reduced over the edp group only, so the ep
    group's partial sums are never added together."""
    group = self.expert_buckets if name.endswith("router") else None
    if group is None:
        yield from ORIGINAL_ADD(self, name, grad)
    else:
        yield from group.add(name, grad)


ORIGINAL_ADD = data_sync.DDPSync._add


@pytest.mark.parametrize("bug", ["doubled", "unsummed_router"])
def test_injected_gradient_bugs_are_caught(monkeypatch, bug):
    if bug == "doubled":
        monkeypatch.setattr(expert_grads, "expert_grad_share", doubled)
    else:
        monkeypatch.setattr(data_sync.DDPSync, "_add", unsummed_router)
    config = ParallelConfig(dp=2, ep=2)
    case = {
        "config": config,
        "experts": 4,
        "top_k": 2,
        "router": {},
        "routing": "uniform",
        "seed": 5,
        "per_rank": 1,
    }
    result = run_case(case)
    assert result.match is False
    if bug == "doubled":  # exactly twice one device's expert gradients
        ref = train(moe_model(4, 2, 2, 5), [batch(2, 2, 6)], ParallelConfig())
        got, want = result.grads["0.mlp.w_up"], ref.grads["0.mlp.w_up"]
        assert np.allclose(got, 2 * want, rtol=1e-12, atol=1e-15)


@given(meshes())
def test_the_property_catches_the_doubled_expert_gradient(case):
    assume(case["config"].ep > 1)
    original = expert_grads.expert_grad_share
    expert_grads.expert_grad_share = doubled
    try:
        result = run_case(case)
    finally:
        expert_grads.expert_grad_share = original
    experts_moved = any(
        np.any(result.grads[name]) for name in result.grads if name.endswith("w_down")
    )
    assert result.match is (not experts_moved)


# --- refusals ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields, words",
    [
        ({"dp": 2, "ep": 3}, ["ep x etp = 3 x 1", "dp x cp x tp = 2", "nearest valid ep=2"]),
        ({"dp": 2, "tp": 2, "ep": 2, "etp": 1}, ["etp=1", "sp=False", "nearest valid etp=2"]),
        (
            {"dp": 4, "ep": 4, "zero": 3, "dp_replicate": 2},
            ["ep x etp = 4 x 1", "dp_shard x cp x tp = 2", "nearest valid ep=2"],
        ),
        ({"ep": 0}, ["ep must be an integer >= 1", "0"]),
    ],
)
def test_bad_ep_is_refused_naming_the_value_rule_and_nearest(fields, words):
    with pytest.raises(ConfigError) as info:
        ParallelConfig(**fields)
    for word in words:
        assert word in str(info.value)


def test_experts_not_divisible_by_ep_are_refused():
    model = moe_model(experts=3, top_k=1, ep=2, seed=0)
    with pytest.raises(ConfigError, match="experts=3 is not divisible by ep=2.*nearest valid ep=1"):
        train(model, [batch(2, 2, 0)], ParallelConfig(dp=2, ep=2))


@pytest.mark.parametrize("split", [{"cp": 2, "ep": 2}, {"tp": 2, "sp": True}])
def test_capacity_where_a_ranks_tokens_are_not_one_block_is_refused(split):
    model = moe_model(experts=2, top_k=1, ep=2, seed=0, capacity_factor=1.0)
    name = "cp=2" if "cp" in split else "sp=True"
    with pytest.raises(ConfigError, match=f"capacity_factor=1.0.*{name}.*capacity_factor=None"):
        train(model, [batch(1, 4, 0)], ParallelConfig(**split))


def test_the_load_balancing_loss_is_scaled_per_micro_batch(monkeypatch):
    """Its gradient enters inside backward, past the micro-batch's 1/m loss scale (Megatron's
    MoEAuxLossAutoScaler): unscaled, m = 2 micro-batches count it twice."""
    from collsim.parallel.experts import block_mlp

    config = ParallelConfig(dp=2, ep=2, microbatches=2)
    case = {
        "config": config,
        "experts": 4,
        "top_k": 2,
        "routing": "zipf",
        "seed": 4,
        "per_rank": 1,
        "router": {"aux_loss_coeff": 0.1},
    }
    assert run_case(case).match is True
    original = block_mlp.ExpertParallelMLP.__init__

    def unscaled(self, layer, name="mlp", partial=False, aux_scale=1.0):
        original(self, layer, name, partial, 1.0)

    monkeypatch.setattr(block_mlp.ExpertParallelMLP, "__init__", unscaled)
    assert run_case(case).match is False


def test_the_load_balancing_loss_under_sp_is_refused_naming_it():
    model = moe_model(experts=2, top_k=1, ep=1, seed=0, aux_loss_coeff=0.01)
    with pytest.raises(ConfigError, match="aux_loss_coeff=0.01 under sp=True.*aux_loss_coeff=0"):
        train(model, [batch(1, 4, 0)], ParallelConfig(tp=2, sp=True))


def test_under_sp_the_moe_gradients_are_summed_over_tp(monkeypatch):
    """Each tp rank routes its own tokens: leave the MoE's partial sums unsummed over tp
    (as the dense MLP's are) and the check fails."""
    from collsim.parallel.experts import block_mlp

    def whole(self, layer, name="mlp", partial=False, aux_scale=1.0):
        original(self, layer, name, False, aux_scale)

    original = block_mlp.ExpertParallelMLP.__init__
    config = ParallelConfig(dp=2, tp=2, sp=True, ep=2)
    case = {
        "config": config,
        "experts": 4,
        "top_k": 2,
        "router": {},
        "routing": "uniform",
        "seed": 2,
        "per_rank": 1,
    }
    assert run_case(case).match is True
    monkeypatch.setattr(block_mlp.ExpertParallelMLP, "__init__", whole)
    assert run_case(case).match is False
