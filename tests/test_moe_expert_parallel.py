"""Expert parallelism equals the dense single-device MoE, forward and backward, for every
ep, routing and capacity rule; the injected gradient-reduction bugs are caught; the bytes
and the exchange's structure are the routing's closed form."""

import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from collsim.collectives.all_to_allv import RaggedTransfer
from collsim.nn import MoE, RouterConfig
from collsim.parallel.experts.formulas import (
    combine_bytes,
    dispatch_bytes,
    hierarchical_bytes,
    rank_counts,
)
from collsim.parallel.experts.generators import ROUTINGS, routing_prior
from collsim.parallel.experts.step import dense_step, expert_parallel_step, max_rel_diff
from collsim.parallel.experts.sync import EXPERT_KEYS

TOLERANCE = 1e-12  # float64: the router's gradient is summed in another order on the ring


@st.composite
def cases(draw, eps=(1, 2, 4, 8)):
    ep = draw(st.sampled_from(eps))
    experts = ep * draw(st.sampled_from([1, 2]))
    top_k = draw(st.integers(1, min(3, experts)))
    capacity = draw(st.sampled_from([None, 0.5, 1.0, 1.25, 2.0]))
    config = RouterConfig(
        experts,
        top_k,
        score=draw(st.sampled_from(["softmax", "sigmoid"])),
        normalize=draw(st.booleans()),
        capacity_factor=capacity,
        drop_policy=draw(st.sampled_from(["probs", "position"])),
        pad_to_capacity=capacity is not None and draw(st.booleans()),
        aux_loss_coeff=draw(st.sampled_from([0.0, 0.01])),
    )
    return {
        "config": config,
        "ep": ep,
        "tokens": ep * draw(st.integers(1, 4)),
        "routing": draw(st.sampled_from(ROUTINGS)),
        "seed": draw(st.integers(0, 2**16)),
        "hidden": draw(st.integers(1, 5)),
        "dispatcher": draw(st.sampled_from(["alltoall", "allgather", "hierarchical"])),
        "gpus_per_node": draw(st.sampled_from([g for g in (1, 2, 4, 8) if ep % g == 0])),
        "ffn": draw(st.integers(1, 6)),
    }


def problem(case):
    rng = np.random.default_rng(case["seed"])
    config, T = case["config"], case["tokens"]
    d, f = case.get("hidden", 4), case.get("ffn", 6)
    moe = MoE.init(d, f, config, rng)
    x, target = rng.normal(size=(T, d)), rng.normal(size=(T, d))
    prior = routing_prior(case["routing"], T, config.experts, config.top_k, case["ep"], rng)
    return moe, x, target, prior


def ep_error(case, **options):
    moe, x, target, prior = problem(case)
    dispatcher, nodes = case.get("dispatcher", "alltoall"), case.get("gpus_per_node")
    run = expert_parallel_step(
        moe, x, target, case["ep"], prior, dispatcher=dispatcher, gpus_per_node=nodes, **options
    )
    return max_rel_diff(run.result, dense_step(moe, x, target, case["ep"], prior))


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_expert_parallel_equals_dense(case):
    assert ep_error(case) < TOLERANCE


@pytest.mark.parametrize("ep", [2, 4, 8])
def test_ranks_that_receive_no_tokens(ep):
    case = {
        "config": RouterConfig(2 * ep, 2, capacity_factor=1.0),
        "ep": ep,
        "tokens": 2 * ep,
        "routing": "adversarial",
        "seed": 3,
    }
    moe, x, target, prior = problem(case)
    run = expert_parallel_step(moe, x, target, ep, prior)
    received = [load.rows_received for load in run.loads]
    assert received[0] > 0 and received[1:] == [0] * (ep - 1)
    assert max_rel_diff(run.result, dense_step(moe, x, target, ep, prior)) < TOLERANCE
    for key in EXPERT_KEYS:  # the idle ranks' experts get exactly zero gradient
        per = run.result.grads[key].shape[0] // ep
        assert not run.result.grads[key][per:].any()


def experts_not_divided(rank, layer, grads):
    """The doubled-gradient bug: experts reduced over their expert-data-parallel group
    only, as if each had seen one rank's tokens (torchtitan-style, EP = 2 gives 2x)."""
    router = yield from rank.all_reduce(grads["router"], group=layer.group, op="avg")
    return {"router": router} | {key: grads[key] for key in EXPERT_KEYS}


def router_unsummed(rank, layer, grads):
    """The unsummed-router bug: each rank keeps its own partial router gradient."""
    yield from ()  # communicates nothing
    return {"router": grads["router"]} | {key: grads[key] / layer.ep for key in EXPERT_KEYS}


@pytest.mark.parametrize("broken", [experts_not_divided, router_unsummed])
def test_the_property_catches_a_broken_gradient_reduction(broken):
    found = find(
        cases(eps=(2, 4, 8)),
        lambda case: ep_error(case, sync=broken) > TOLERANCE,
        settings=settings(max_examples=25, database=None),
    )
    assert found["ep"] >= 2


def test_the_doubled_gradient_is_exactly_ep_times():
    case = {"config": RouterConfig(4, 2), "ep": 2, "tokens": 8, "routing": "uniform", "seed": 1}
    moe, x, target, prior = problem(case)
    right = expert_parallel_step(moe, x, target, 2, prior).result.grads
    doubled = expert_parallel_step(moe, x, target, 2, prior, sync=experts_not_divided).result
    for key in EXPERT_KEYS:
        np.testing.assert_array_equal(doubled.grads[key], 2 * right[key])
    np.testing.assert_array_equal(doubled.grads["router"], right["router"])


@settings(max_examples=10)
@given(cases(eps=(2, 3, 4, 6)))
def test_bytes_and_exchange_are_the_routings_closed_form(case):
    moe, x, target, prior = problem(case)
    ep = case["ep"]
    run = expert_parallel_step(moe, x, target, ep, prior)
    row_bytes = case["hidden"] * 8  # float64 rows
    out = dispatch_bytes(run.expert_counts, ep, row_bytes)
    back = combine_bytes(run.expert_counts, ep, row_bytes)
    for load in run.loads:
        r = load.rank
        assert (load.dispatch_sent, load.dispatch_received) == (out.sent[r], out.received[r])
        assert (load.combine_sent, load.combine_received) == (back.sent[r], back.received[r])
    # who sent how many rows to whom, from the trace's typed records
    rows = np.zeros((ep, ep), dtype=int)
    for t in run.trace.transfers:
        if isinstance(t.meta, RaggedTransfer) and t.meta.call == "dispatch":
            rows[t.src, t.dst] += len(t.meta.move.rows)
    want = np.array(rank_counts(run.expert_counts, ep))
    np.fill_diagonal(want, 0)
    assert rows.tolist() == want.tolist()
    # every choice either reached an expert or was dropped
    kept = sum(load.rows_received for load in run.loads)
    dropped = sum(load.dropped for load in run.loads)
    padding = kept - (case["tokens"] * moe.config.top_k - dropped)
    assert padding >= 0 and (padding == 0 or moe.config.pad_to_capacity)
    # the hierarchical dispatcher: once a token and node across, once a slot inside it
    G = case["gpus_per_node"]
    two = expert_parallel_step(
        moe, x, target, ep, prior, dispatcher="hierarchical", gpus_per_node=G
    )
    out, back = hierarchical_bytes(
        two.expert_counts, two.node_tokens, ep, G, row_bytes, moe.config.experts
    )
    for load in two.loads:
        r = load.rank
        assert (load.dispatch_sent, load.dispatch_received) == (out.sent[r], out.received[r])
        assert (load.combine_sent, load.combine_received) == (back.sent[r], back.received[r])
    # the all-gather dispatcher moves every token and its routing maps, whatever the routing
    gathered = expert_parallel_step(moe, x, target, ep, prior, dispatcher="allgather")
    per_rank, width = case["tokens"] // ep, case["hidden"] + 2 * moe.config.experts
    for load in gathered.loads:
        assert load.dispatch_sent == load.dispatch_received == (ep - 1) * per_rank * width * 8
        assert load.combine_sent == load.combine_received == (ep - 1) * per_rank * row_bytes


def test_same_inputs_same_trace():
    case = {
        "config": RouterConfig(8, 2, capacity_factor=1.0),
        "ep": 4,
        "tokens": 16,
        "routing": "zipf",
        "seed": 5,
    }
    runs = [expert_parallel_step(*problem(case)[:3], 4, problem(case)[3]) for _ in range(2)]
    first, second = (
        [(t.src, t.dst, t.tag, t.nbytes, t.start, t.end, t.meta) for t in run.trace.transfers]
        + [(c.rank, c.start, c.end, c.meta) for c in run.trace.computes]
        for run in runs
    )
    assert first == second and len(first) > 0
    np.testing.assert_array_equal(runs[0].result.dx, runs[1].result.dx)


def test_the_rank_module_follows_the_protocol():
    from collsim.parallel.experts import ExpertParallelMoE
    from collsim.parallel.modules import RankModule
    from collsim.runtime.group import Group

    moe = MoE.init(4, 6, RouterConfig(4, 2), np.random.default_rng(0))
    layer = ExpertParallelMoE.from_full(moe, Group([0, 1]), 1)
    assert isinstance(layer, RankModule)
    np.testing.assert_array_equal(layer.params["w_up"], moe.experts.w_up[2:])
    assert layer.shard_axes == {"router": None, "w_gate": 0, "w_up": 0, "w_down": 0}


def test_hierarchical_dispatch_crosses_nodes_once_a_token():
    # top-4 of 8 experts on 2 nodes of 2 GPUs: a token's 4 experts span at most 2 nodes, so
    # the flat all-to-all sends up to 4 rows across where the two-level one sends 1 (wider)
    case = {
        "config": RouterConfig(8, 4),
        "ep": 4,
        "tokens": 32,
        "routing": "uniform",
        "seed": 2,
        "hidden": 64,
    }
    moe, x, target, prior = problem(case)
    flat = expert_parallel_step(moe, x, target, 4, prior, gpus_per_node=2)
    two = expert_parallel_step(moe, x, target, 4, prior, gpus_per_node=2, dispatcher="hierarchical")
    crossed = [sum(load.inter_node_sent for load in run.loads) for run in (flat, two)]
    assert crossed[1] < 0.7 * crossed[0]
    assert max_rel_diff(two.result, dense_step(moe, x, target, 4, prior)) < TOLERANCE
