"""SGD and Adam against their formulas worked by hand, and a tiny end-to-end training run."""

import numpy as np
import pytest

from collsim.errors import ConfigError
from collsim.nn import (
    GELU,
    SGD,
    Adam,
    Linear,
    Sequential,
    TransformerBlock,
    cross_entropy_loss,
    mse_loss,
)


def test_sgd_without_momentum():
    params = {"w": np.array([1.0, -2.0]), "b": np.array([0.5])}
    w = params["w"]
    SGD(lr=0.5).step(params, {"w": np.array([0.2, 0.4]), "b": np.array([-1.0])})
    assert params["w"] is w  # in place
    np.testing.assert_allclose(params["w"], [1.0 - 0.1, -2.0 - 0.2])
    np.testing.assert_allclose(params["b"], [1.0])


def test_sgd_with_momentum_by_hand():
    params = {"w": np.array([1.0])}
    opt = SGD(lr=0.1, momentum=0.9)
    opt.step(params, {"w": np.array([2.0])})  # buf = 2
    np.testing.assert_allclose(params["w"], [1.0 - 0.1 * 2.0])
    opt.step(params, {"w": np.array([-1.0])})  # buf = 0.9 * 2 - 1 = 0.8
    np.testing.assert_allclose(params["w"], [0.8 - 0.1 * 0.8])
    np.testing.assert_allclose(opt.state["w"]["momentum_buffer"], [0.8])


def test_adam_first_step_moves_by_lr_times_sign():
    rng = np.random.default_rng(0)
    start = rng.uniform(-1, 1, size=(3, 4))
    grad = rng.uniform(-1, 1, size=(3, 4))
    params = {"w": start.copy()}
    Adam(lr=1e-3).step(params, {"w": grad})
    np.testing.assert_allclose(params["w"] - start, -1e-3 * np.sign(grad), rtol=1e-6)


def test_adam_second_step_by_hand():
    lr, b1, b2, eps = 0.1, 0.9, 0.999, 1e-8
    params = {"w": np.array([0.0])}
    opt = Adam(lr=lr, betas=(b1, b2), eps=eps)
    g1, g2 = 1.0, 3.0
    opt.step(params, {"w": np.array([g1])})
    opt.step(params, {"w": np.array([g2])})
    step1 = lr * g1 / (abs(g1) + eps)  # m_hat = g1, sqrt(v_hat) = |g1|
    m = (1 - b1) * (b1 * g1 + g2)
    v = (1 - b2) * (b2 * g1**2 + g2**2)
    step2 = lr * (m / (1 - b1**2)) / (np.sqrt(v / (1 - b2**2)) + eps)
    np.testing.assert_allclose(params["w"], [-step1 - step2], rtol=1e-12)
    assert opt.state["w"]["step"] == 2


@pytest.mark.parametrize("make", [lambda: SGD(0.1, momentum=0.5), lambda: Adam(0.01)])
def test_optimizers_are_deterministic_and_skip_params_without_grads(make):
    def run():
        rng = np.random.default_rng(1)
        params = {"a": rng.normal(size=3), "frozen": np.ones(2)}
        opt = make()
        for _ in range(5):
            opt.step(params, {"a": rng.normal(size=3)})
        return params

    first, second = run(), run()
    np.testing.assert_array_equal(first["a"], second["a"])
    np.testing.assert_array_equal(first["frozen"], np.ones(2))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: SGD(0.1).step({"w": np.zeros(2)}, {"v": np.zeros(2)}), "'v' has no parameter"),
        (lambda: Adam(0.1).step({"w": np.zeros(2)}, {"w": np.zeros(3)}), r"\(3,\).*\(2,\)"),
        (lambda: SGD(-0.1), "lr"),
        (lambda: SGD(0.1, momentum=1.0), "momentum"),
        (lambda: Adam(0.1, betas=(0.9, 1.5)), "beta2"),
    ],
)
def test_optimizer_errors(call, match):
    with pytest.raises(ConfigError, match=match):
        call()


def test_a_tiny_regression_trains():
    rng = np.random.default_rng(2)
    model = Sequential(Linear.init(2, 16, rng), GELU(), Linear.init(16, 1, rng))
    x = rng.uniform(-1, 1, size=(64, 2))
    target = np.sin(2 * x[:, :1]) * x[:, 1:]
    opt = Adam(lr=0.02)
    first = None
    for _ in range(200):
        y, ctx = model.forward(x)
        loss, dy = mse_loss(y, target)
        first = loss if first is None else first
        opt.step(model.params, model.backward(ctx, dy)[1])
    assert loss < 0.1 * first


def test_a_transformer_block_learns_to_copy_the_previous_token():
    """Causal attention plus position embeddings can look back one position: it learns."""
    rng = np.random.default_rng(3)
    V, D, T = 4, 16, 6
    embed, positions = rng.normal(size=(V, D)), rng.normal(size=(T, D))  # fixed, not trained
    model = Sequential(TransformerBlock.init(D, 2, rng), Linear.init(D, V, rng))
    opt = Adam(lr=1e-2)
    losses = []
    for _ in range(100):
        tokens = rng.integers(0, V, size=(8, T))
        logits, ctx = model.forward(embed[tokens] + positions)  # (B, T, V)
        loss, dlogits = cross_entropy_loss(logits[:, 1:], tokens[:, :-1])
        dfull = np.zeros_like(logits)
        dfull[:, 1:] = dlogits
        opt.step(model.params, model.backward(ctx, dfull)[1])
        losses.append(loss)
    assert np.mean(losses[-10:]) < 0.01 * np.log(V)  # from chance, log V
