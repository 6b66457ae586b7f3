"""The numpy MoE layer (collsim.nn.moe, collsim.nn.routing): routing by hand, capacity as
Megatron-Core defines it, and forward/backward against finite differences in float64."""

import math

import numpy as np
import pytest

from collsim.errors import ConfigError
from collsim.nn import MoE, RouterConfig, route
from collsim.nn.routing import aux_loss, expert_capacity, updated_expert_bias

CONFIGS = {
    "softmax-renormalised": RouterConfig(4, 2),
    "softmax-switch-aux": RouterConfig(4, 2, normalize=False, aux_loss_coeff=0.1),
    "sigmoid-aux": RouterConfig(4, 2, score="sigmoid", aux_loss_coeff=0.1),
    "group-limited": RouterConfig(8, 2, score="sigmoid", groups=4, topk_groups=2),
    "capacity-position": RouterConfig(
        4, 2, capacity_factor=0.5, drop_policy="position", aux_loss_coeff=0.1
    ),
    "capacity-probs-padded": RouterConfig(4, 2, capacity_factor=0.5, pad_to_capacity=True),
    "top1-padded": RouterConfig(4, 1, capacity_factor=1.5, pad_to_capacity=True, normalize=False),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_backward_matches_finite_differences(name):
    config = CONFIGS[name]
    rng = np.random.default_rng(1)
    layer = MoE.init(5, 6, config, rng)
    x, w = rng.normal(size=(8, 5)), rng.normal(size=(8, 5))

    def loss(x):
        y, ctx = layer.forward(x, ranks=2)
        return float((w * y).sum() + ctx["aux_loss"])

    y, ctx = layer.forward(x, ranks=2)
    dx, grads = layer.backward(ctx, w)
    eps = 1e-6
    numeric = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[index] = eps
        numeric[index] = (loss(x + step) - loss(x - step)) / (2 * eps)
    np.testing.assert_allclose(dx, numeric, atol=1e-7)
    for key, param in layer.params.items():
        for index in np.ndindex(param.shape):
            old = param[index]
            param[index] = old + eps
            up = loss(x)
            param[index] = old - eps
            down = loss(x)
            param[index] = old
            assert grads[key][index] == pytest.approx((up - down) / (2 * eps), abs=1e-7), key


def test_routing_by_hand():
    logits = np.log(np.array([[0.5, 0.3, 0.1, 0.1], [0.1, 0.2, 0.3, 0.4]]))
    routing = route(logits, RouterConfig(4, 2))
    assert routing.selected.tolist() == [[0, 1], [3, 2]]
    np.testing.assert_allclose(routing.gates, [[0.5 / 0.8, 0.3 / 0.8], [0.4 / 0.7, 0.3 / 0.7]])
    switch = route(logits, RouterConfig(4, 2, normalize=False))
    np.testing.assert_allclose(switch.gates, [[0.5, 0.3], [0.4, 0.3]])


def test_expert_bias_moves_the_choice_not_the_gate():
    logits = np.log(np.array([[0.5, 0.3, 0.2]]))
    config = RouterConfig(3, 1, normalize=False)
    routing = route(logits, config, expert_bias=np.array([0.0, 0.0, 0.5]))
    assert routing.selected.tolist() == [[2]]
    assert routing.gates[0, 0] == pytest.approx(0.2)  # the score, without the bias


def test_group_limited_routing_keeps_to_the_best_groups():
    # two groups of two; group 1 holds the best single expert (0.35) but group 0 the best
    # pair (0.3 + 0.3); one group may be chosen, so both picks come from group 0
    scores = np.array([[0.3, 0.3, 0.35, 0.05]])
    config = RouterConfig(4, 2, normalize=False, groups=2, topk_groups=1)
    assert route(np.log(scores), config).selected.tolist() == [[0, 1]]
    assert route(np.log(scores), RouterConfig(4, 2, normalize=False)).selected.tolist() == [[2, 0]]


def test_capacity_is_megatron_core_get_capacity():
    # get_capacity(num_tokens=tokens*topk, num_experts, capacity_factor) = ceil(n / E * cf)
    assert expert_capacity(16, 2, 8, 1.25) == 5
    assert expert_capacity(10, 2, 8, 1.0) == 3  # 2.5 rounds up
    assert expert_capacity(3, 1, 4, 1.0) == math.ceil(3 / 4) == 1


def test_drop_policies_by_hand():
    # four tokens all prefer expert 0; capacity ceil(4·1/2·0.5) = 1
    logits = np.array([[1.0, 0.0], [3.0, 0.0], [2.0, 0.0], [4.0, 0.0]])
    by_probs = route(logits, RouterConfig(2, 1, capacity_factor=0.5, normalize=False))
    assert by_probs.capacity == 1
    assert by_probs.kept[:, 0].tolist() == [False, False, False, True]  # the highest gate
    by_position = route(
        logits, RouterConfig(2, 1, capacity_factor=0.5, drop_policy="position", normalize=False)
    )
    assert by_position.kept[:, 0].tolist() == [True, False, False, False]  # the first token
    assert by_position.dropped == 3


def test_dropped_token_passes_through_the_residual_only():
    rng = np.random.default_rng(0)
    layer = MoE.init(4, 4, RouterConfig(2, 1, capacity_factor=0.5, drop_policy="position"), rng)
    x = rng.normal(size=(4, 4))
    prior = np.array([[9.0, 0.0]] * 4)  # every token to expert 0: one slot, three dropped
    y, ctx = layer.forward(x, prior=prior)
    assert ctx["routing"].dropped == 3
    np.testing.assert_array_equal(y[1:], x[1:])
    assert not np.array_equal(y[0], x[0])


def test_padding_fills_each_expert_to_capacity():
    logits = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    routing = route(logits, RouterConfig(2, 1, capacity_factor=1.0, pad_to_capacity=True))
    assert routing.capacity == 2
    assert routing.counts(1).tolist() == [[2, 2]]  # expert 1: its token and one padding
    assert sorted(routing.slot_gate[routing.slot_choice < 0]) == [0.0]


def test_aux_loss_is_switch_form():
    # Switch Transformer eq. 4: alpha·N·Σ f_i·P_i; all tokens to expert 0 with P_0 = p
    logits = np.array([[2.0, 0.0], [2.0, 0.0]])
    config = RouterConfig(2, 1, aux_loss_coeff=0.01, normalize=False)
    p = 1 / (1 + math.exp(-2.0))
    assert aux_loss(route(logits, config), config)[0] == pytest.approx(0.01 * 2 * (1.0 * p))


def test_expert_bias_update_is_sign_of_load_error():
    np.testing.assert_allclose(updated_expert_bias([0.1, 0.0], [3, 1], 0.01), [0.09, 0.01])


@pytest.mark.parametrize(
    "options, words",
    [
        ({"experts": 4, "top_k": 5}, ["top_k=5", "nearest valid top_k=4"]),
        ({"experts": 6, "groups": 4}, ["groups=4", "nearest valid groups=3"]),
        ({"experts": 4, "score": "softmx"}, ["'softmx'", "nearest valid 'softmax'"]),
        ({"experts": 4, "capacity_factor": -1.0}, ["capacity_factor=-1.0"]),
        ({"experts": 4, "drop_policy": "prob"}, ["'prob'", "'probs'"]),
    ],
)
def test_router_config_refusals_name_the_value(options, words):
    with pytest.raises(ConfigError) as info:
        RouterConfig(**options)
    for word in words:
        assert word in str(info.value)


def test_the_bias_update_evens_a_skewed_router_out():
    # every token's logits favour expert 0 by 1.5; DeepSeek-V3's bias, moved by the sign
    # of each expert's load error, steers the choice back towards balance
    rng = np.random.default_rng(0)
    config = RouterConfig(4, 1, score="sigmoid")
    logits = rng.normal(0, 0.5, size=(256, 4)) + np.array([1.5, 0.0, 0.0, 0.0])
    bias = np.zeros(4)

    def loads(bias):
        return route(logits, config, expert_bias=bias).tokens_per_expert[0]

    before = loads(bias)  # [247, 3, 2, 4]
    for _ in range(100):
        bias = updated_expert_bias(bias, loads(bias), rate=0.01)
    after = loads(bias)  # [51, 63, 71, 71]
    assert before.max() / before.mean() > 3 and after.max() / after.mean() < 1.3
    biased = route(logits, config, expert_bias=bias)  # the gates stay the unbiased scores
    chosen = np.take_along_axis(biased.scores, biased.selected, axis=-1)
    np.testing.assert_array_equal(biased.gates, chosen / chosen.sum(axis=-1, keepdims=True))
