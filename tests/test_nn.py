"""collsim.nn against finite differences, and the functional (micro-batch) contract.

Gradient checks use central differences in float64 with step h = 1e-6; the
relative error ``|a - n| / max(|a| + |n|, 1)`` (Frobenius norms) must be below 1e-6.
The truncation error is O(h**2) ~ 1e-12 and the rounding error ~ 1e-16 / h ~ 1e-10,
so a real bug (errors of order 1) cannot hide under that tolerance.
"""

import numpy as np
import pytest

from collsim.errors import ConfigError
from collsim.nn import (
    GELU,
    MLP,
    LayerNorm,
    Linear,
    MultiHeadAttention,
    ReLU,
    Sequential,
    TransformerBlock,
    cross_entropy_loss,
    ctx_nbytes,
    mse_loss,
)

H = 1e-6  # finite-difference step
TOL = 1e-6  # relative error allowed between analytic and numeric gradients


def uniform(rng, *shape):
    return rng.uniform(-1.0, 1.0, size=shape)


def numeric_grad(f, array):
    """Central differences of the scalar ``f()`` with respect to each entry of ``array``.

    ``array`` is perturbed in place (and restored), so it can be a module's own param.
    """
    grad = np.zeros_like(array)
    for idx in np.ndindex(array.shape):
        old = array[idx]
        array[idx] = old + H
        f_plus = f()
        array[idx] = old - H
        f_minus = f()
        array[idx] = old
        grad[idx] = (f_plus - f_minus) / (2 * H)
    return grad


def rel_error(a, b):
    """Relative error, measured against 1 when both are ~0 (then it is an absolute error).

    Some gradients are exactly zero: adding ``bk`` shifts every score of a query by
    the same amount, which softmax ignores, so ``d loss / d bk = 0``.
    """
    return np.linalg.norm(a - b) / max(np.linalg.norm(a) + np.linalg.norm(b), 1.0)


# ---- module factories: random params (biases too, so every path is exercised) ----


def make_linear(rng, d_in=3, d_out=4, bias=True):
    return Linear(uniform(rng, d_in, d_out), uniform(rng, d_out) if bias else None)


def make_layernorm(rng, d=4):
    return LayerNorm(1.0 + 0.5 * uniform(rng, d), uniform(rng, d))


def make_attention(rng, d_model=4, n_heads=2, head_dim=3, causal=True, bias=True):
    inner = n_heads * head_dim
    b = (lambda n: uniform(rng, n)) if bias else (lambda n: None)
    return MultiHeadAttention(
        uniform(rng, d_model, inner),
        uniform(rng, d_model, inner),
        uniform(rng, d_model, inner),
        uniform(rng, inner, d_model),
        n_heads,
        bq=b(inner),
        bk=b(inner),
        bv=b(inner),
        bo=b(d_model),
        causal=causal,
    )


def make_mlp(rng, d=4, hidden=6):
    return MLP(make_linear(rng, d, hidden), make_linear(rng, hidden, d))


def make_block(rng, d=4, causal=True):
    return TransformerBlock(
        make_layernorm(rng, d),
        make_attention(rng, d_model=d, n_heads=2, head_dim=2, causal=causal),
        make_layernorm(rng, d),
        make_mlp(rng, d),
    )


def make_sequential(rng):
    return Sequential(
        make_linear(rng, 4, 5), ReLU(), make_layernorm(rng, 5), make_linear(rng, 5, 4)
    )


# (name, factory, input shape): every module in the kit
MODULES = [
    ("linear", make_linear, (2, 3)),
    ("linear_nobias_3d", lambda rng: make_linear(rng, bias=False), (2, 2, 3)),
    ("linear_1d", make_linear, (3,)),
    ("relu", lambda rng: ReLU(), (3, 4)),
    ("gelu", lambda rng: GELU(), (2, 3, 4)),
    ("layernorm", make_layernorm, (2, 3, 4)),
    ("attention_causal", make_attention, (2, 3, 4)),
    ("attention_full", lambda rng: make_attention(rng, causal=False), (2, 3, 4)),
    ("attention_nobias", lambda rng: make_attention(rng, bias=False), (1, 4, 4)),
    ("attention_one_head", lambda rng: make_attention(rng, n_heads=1), (2, 3, 4)),
    ("mlp", make_mlp, (2, 3, 4)),
    ("block_causal", make_block, (2, 3, 4)),
    ("block_full", lambda rng: make_block(rng, causal=False), (2, 3, 4)),
    ("sequential", make_sequential, (3, 4)),
]
MODULE_IDS = [m[0] for m in MODULES]


@pytest.mark.parametrize(("name", "factory", "shape"), MODULES, ids=MODULE_IDS)
def test_module_gradients_match_finite_differences(name, factory, shape):
    rng = np.random.default_rng(0)
    module = factory(rng)
    x = uniform(rng, *shape)
    y, ctx = module.forward(x)
    assert y.shape == module.output_shape(shape)
    dy = uniform(rng, *y.shape)
    dx, grads = module.backward(ctx, dy)

    def f():  # a scalar whose gradient at y is dy
        return np.sum(module.forward(x)[0] * dy)

    assert dx.shape == x.shape
    assert rel_error(dx, numeric_grad(f, x)) < TOL
    assert list(grads) == list(module.params)
    for key, param in module.params.items():
        assert grads[key].shape == param.shape, key
        assert rel_error(grads[key], numeric_grad(f, param)) < TOL, key


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_mse_gradient_matches_finite_differences(reduction):
    rng = np.random.default_rng(1)
    pred, target = uniform(rng, 3, 4), uniform(rng, 3, 4)
    loss, dpred = mse_loss(pred, target, reduction=reduction)
    numeric = numeric_grad(lambda: mse_loss(pred, target, reduction=reduction)[0], pred)
    assert rel_error(dpred, numeric) < TOL
    n = pred.size if reduction == "mean" else 1
    assert np.isclose(loss, np.sum((pred - target) ** 2) / n)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy_gradient_matches_finite_differences(reduction):
    rng = np.random.default_rng(2)
    logits = 3 * uniform(rng, 2, 3, 5)  # (B, T, vocab)
    targets = rng.integers(0, 5, size=(2, 3))
    loss, dlogits = cross_entropy_loss(logits, targets, reduction=reduction)
    f = lambda: cross_entropy_loss(logits, targets, reduction=reduction)[0]  # noqa: E731
    assert rel_error(dlogits, numeric_grad(f, logits)) < TOL
    # against the textbook formula -log softmax(logits)[target]
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    picked = np.take_along_axis(probs, targets[..., None], axis=-1)
    expected = -np.log(picked).sum() / (6 if reduction == "mean" else 1)
    assert np.isclose(loss, expected, rtol=1e-12)


def test_cross_entropy_is_stable_for_huge_logits():
    logits = np.array([[1e4, 0.0, -1e4], [5e3, 5e3, 0.0]])
    loss, dlogits = cross_entropy_loss(logits, np.array([0, 1]))
    assert np.isfinite(loss) and np.isfinite(dlogits).all()
    assert np.isclose(loss, np.log(2) / 2)


# ---- the functional contract: many micro-batches in flight --------------------------


@pytest.mark.parametrize(("name", "factory", "shape"), MODULES, ids=MODULE_IDS)
def test_split_backward_equals_backward(name, factory, shape):
    rng = np.random.default_rng(3)
    module = factory(rng)
    x = uniform(rng, *shape)
    y, ctx_a = module.forward(x)
    _, ctx_b = module.forward(x)
    dy = uniform(rng, *y.shape)
    dx_ref, grads_ref = module.backward(ctx_a, dy)
    dx = module.backward_input(ctx_b, dy)
    grads = module.backward_weight(ctx_b, dy)
    np.testing.assert_array_equal(dx, dx_ref)
    assert list(grads) == list(grads_ref)
    for key in grads:
        np.testing.assert_array_equal(grads[key], grads_ref[key])


@pytest.mark.parametrize(("name", "factory", "shape"), MODULES, ids=MODULE_IDS)
def test_interleaved_micro_batches_give_the_isolated_results(name, factory, shape):
    """A zero-bubble-like order: F0 F1 F2 B0 F3 B1 W0 B2 W2 B3 W1 W3."""
    rng = np.random.default_rng(4)
    module = factory(rng)
    before = {k: v.copy() for k, v in module.params.items()}
    xs = [uniform(rng, *shape) for _ in range(4)]
    out_shape = module.output_shape(shape)
    dys = [uniform(rng, *out_shape) for _ in range(4)]
    expected = []
    for x, dy in zip(xs, dys):  # each micro-batch alone
        _, ctx = module.forward(x)
        expected.append(module.backward(ctx, dy))

    ctxs, dxs, grads = {}, {}, {}

    def F(i):
        ctxs[i] = module.forward(xs[i])[1]

    def B(i):
        dxs[i] = module.backward_input(ctxs[i], dys[i])

    def W(i):
        grads[i] = module.backward_weight(ctxs[i], dys[i])

    for op, i in [(F, 0), (F, 1), (F, 2), (B, 0), (F, 3), (B, 1), (W, 0), (B, 2), (W, 2)]:
        op(i)
    for op, i in [(B, 3), (W, 1), (W, 3)]:
        op(i)

    for i, (dx_ref, grads_ref) in enumerate(expected):
        np.testing.assert_allclose(dxs[i], dx_ref, rtol=1e-12, atol=1e-14)
        for key in grads_ref:
            np.testing.assert_allclose(grads[i][key], grads_ref[key], rtol=1e-12, atol=1e-14)
    for key, value in module.params.items():  # forward/backward never touch params
        np.testing.assert_array_equal(value, before[key])


@pytest.mark.parametrize(("name", "factory", "shape"), MODULES, ids=MODULE_IDS)
def test_backward_weight_without_stash_recomputes(name, factory, shape):
    rng = np.random.default_rng(5)
    module = factory(rng)
    x = uniform(rng, *shape)
    y, ctx = module.forward(x)
    dy = uniform(rng, *y.shape)
    _, grads_ref = module.backward(module.forward(x)[1], dy)
    alone = module.backward_weight(module.forward(x)[1], dy)  # W with no B before it
    module.backward_input(ctx, dy)
    other_dy = module.backward_weight(ctx, dy.copy())  # equal values, another object
    for key in grads_ref:
        np.testing.assert_allclose(alone[key], grads_ref[key], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(other_dy[key], grads_ref[key], rtol=1e-12, atol=1e-14)


def test_backward_weight_frees_the_stash():
    rng = np.random.default_rng(6)
    block = make_block(rng)
    x = uniform(rng, 2, 3, 4)
    y, ctx = block.forward(x)
    activations = ctx_nbytes(ctx)
    dy = uniform(rng, *y.shape)
    block.backward_input(ctx, dy)
    assert ctx_nbytes(ctx) > activations  # B keeps gradients for W
    block.backward_weight(ctx, dy)
    assert ctx_nbytes(ctx) == activations  # W released them
    assert "stash" not in ctx and "stash" not in ctx["children"]["attn"]


def test_ctx_nbytes_counts_attention_activations():
    block = make_attention(np.random.default_rng(7), d_model=4, n_heads=2, head_dim=3)
    B, T = 2, 5
    _, ctx = block.forward(np.zeros((B, T, 4)))
    # x (B,T,D) + q, k, v (B,H,T,hd) + att (B,H,T,T) + y (B,T,H*hd), all float64
    assert ctx_nbytes(ctx) == 8 * (B * T * 4 + 3 * B * 2 * T * 3 + B * 2 * T * T + B * T * 6)


# ---- dtypes ---------------------------------------------------------------------------


def test_float64_by_default_and_float32_respected():
    rng = np.random.default_rng(8)
    block64 = TransformerBlock.init(8, 2, rng)
    assert all(p.dtype == np.float64 for p in block64.params.values())
    block = TransformerBlock.init(8, 2, rng, dtype=np.float32)
    x = rng.uniform(-1, 1, size=(2, 3, 8)).astype(np.float32)
    y, ctx = block.forward(x)
    dx, grads = block.backward(ctx, np.ones_like(y))
    assert y.dtype == dx.dtype == np.float32
    assert all(g.dtype == np.float32 for g in grads.values())
    loss, dlogits = cross_entropy_loss(y.reshape(-1, 8), np.zeros(6, dtype=int))
    assert loss.dtype == dlogits.dtype == np.float32
    assert Linear(np.eye(2, dtype=int)).weight.dtype == np.float64  # ints become float64


def test_shard_built_from_a_slice_does_not_alias_the_full_layer():
    full = Linear(np.zeros((2, 4)))
    shard = Linear(full.weight[:, :2])
    shard.params["weight"] += 1.0
    assert not full.weight.any()


# ---- errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: make_linear(np.random.default_rng(0)).forward(np.zeros((2, 5))), r"\(\.\.\., 3\)"),
        (lambda: Linear(np.zeros(3)), "2-D"),
        (lambda: Linear(np.zeros((3, 4)), np.zeros(3)), r"bias must have shape \(4,\)"),
        (lambda: LayerNorm(np.ones(3), np.zeros(4)), r"beta must have shape \(3,\)"),
        (lambda: make_attention(np.random.default_rng(0)).forward(np.zeros((3, 4))), "(B, T, 4)"),
        (lambda: MultiHeadAttention(*[np.zeros((4, 6))] * 3, np.zeros((6, 4)), 4), "nearest"),
        (lambda: make_attention(np.random.default_rng(0)).flops((2, 0, 4)), "T >= 1"),
        (lambda: MultiHeadAttention(*[np.zeros((4, 6))] * 3, np.zeros((4, 6)), 2), "wo"),
        (lambda: MLP(Linear(np.zeros((2, 3))), Linear(np.zeros((4, 2)))), "fc2 takes 4"),
        (lambda: Sequential(), "at least one"),
        (lambda: Sequential(Linear(np.zeros((2, 3))), Linear(np.zeros((4, 2)))).flops((1, 2)), "4"),
        (lambda: mse_loss(np.zeros(3), np.zeros(4)), r"\(3,\) and \(4,\)"),
        (lambda: mse_loss(np.zeros(3), np.zeros(3), reduction="avg"), "reduction"),
        (lambda: cross_entropy_loss(np.zeros((2, 3)), np.array([0, 3])), "target 3"),
        (lambda: cross_entropy_loss(np.zeros((2, 3)), np.array([0.0, 1.0])), "integer"),
        (lambda: cross_entropy_loss(np.zeros((2, 3)), np.array([0])), "leading dims"),
    ],
)
def test_bad_input_raises_config_error(call, match):
    with pytest.raises(ConfigError, match=match):
        call()


def test_wrong_dy_shape_names_both_shapes():
    layer = Linear(np.zeros((3, 4)))
    _, ctx = layer.forward(np.zeros((2, 3)))
    with pytest.raises(ConfigError, match=r"\(2, 5\), expected \(2, 4\)"):
        layer.backward_input(ctx, np.zeros((2, 5)))
    with pytest.raises(ValueError):  # ConfigError is also a ValueError
        layer.backward_weight(ctx, np.zeros((2, 5)))


# ---- FLOPs ----------------------------------------------------------------------------


def test_linear_flops():
    B, d_in, d_out = 8, 3, 5
    counts = Linear(np.zeros((d_in, d_out))).flops((B, d_in))
    assert counts == dict.fromkeys(["forward", "backward_input", "backward_weight"], 2 * B * 15)
    assert Linear(np.zeros((3, 5))).flops((2, 4, 3))["forward"] == 2 * 8 * 15  # rows = B*T


def test_sequential_flops_is_the_sum_of_its_layers():
    net = Sequential(Linear(np.zeros((3, 5))), ReLU(), Linear(np.zeros((5, 2))))
    counts = net.flops((4, 3))
    assert counts["forward"] == 2 * 4 * 3 * 5 + 4 * 5 + 2 * 4 * 5 * 2
    assert counts["backward_weight"] == 2 * 4 * 3 * 5 + 2 * 4 * 5 * 2


def test_attention_flops():
    B, T, D, n_heads = 2, 16, 8, 2
    attn = MultiHeadAttention.init(D, n_heads, np.random.default_rng(0))
    counts = attn.flops((B, T, D))
    matmuls = 4 * 2 * B * T * D * D + 2 * 2 * B * T * T * D  # projections + QK^T and AV
    assert counts["forward"] == matmuls + 6 * B * n_heads * T * T  # + softmax and scale
    assert counts["backward_weight"] == 4 * 2 * B * T * D * D


def test_transformer_block_flops_match_the_megatron_formula():
    """Forward matmuls of a block with hidden = 4D: 24*B*T*D**2 + 4*B*T**2*D."""
    B, T, D = 2, 16, 64
    block = TransformerBlock.init(D, 4, np.random.default_rng(0))
    counts = block.flops((B, T, D))
    megatron = 24 * B * T * D**2 + 4 * B * T**2 * D
    assert megatron < counts["forward"] < 1.05 * megatron  # elementwise work is small
    total = sum(counts.values())
    assert 3 * megatron < total < 3.15 * megatron  # backward is about twice the forward


def test_key_bias_gets_no_gradient():
    """Softmax ignores a shift shared by a whole row of scores, and q . bk is such a shift."""
    rng = np.random.default_rng(9)
    attn = make_attention(rng)
    y, ctx = attn.forward(uniform(rng, 2, 3, 4))
    _, grads = attn.backward(ctx, uniform(rng, *y.shape))
    np.testing.assert_allclose(grads["bk"], 0.0, atol=1e-12)
    assert np.abs(grads["bq"]).max() > 1e-3
