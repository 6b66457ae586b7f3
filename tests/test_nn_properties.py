"""Hypothesis properties: how the oracle splits for tensor, pipeline and data parallelism.

Hypothesis draws shapes, sizes and a seed; values come from
``np.random.default_rng(seed).uniform(-1, 1)``, so every example is reproducible
and bounded.  Splits must agree with the full layer to rtol 1e-10 (only the
order of floating-point sums differs).
"""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from collsim.nn import (
    GELU,
    MLP,
    Linear,
    MultiHeadAttention,
    Sequential,
    cross_entropy_loss,
    mse_loss,
)

RTOL, ATOL = 1e-10, 1e-12
seeds = st.integers(0, 2**32 - 1)
sizes = st.integers(1, 5)


def close(a, b):
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


def uniform(rng, *shape):
    return rng.uniform(-1.0, 1.0, size=shape)


@st.composite
def head_splits(draw):
    """(n_heads, head_dim, d_model, n_shards) with n_shards dividing n_heads."""
    n_heads = draw(st.integers(1, 6))
    n_shards = draw(st.sampled_from([s for s in range(1, n_heads + 1) if n_heads % s == 0]))
    return n_heads, draw(st.integers(1, 3)), draw(st.integers(1, 6)), n_shards


@given(head_splits(), sizes, sizes, st.booleans(), seeds)
def test_head_split_attention_sums_to_the_full_layer(split, B, T, causal, seed):
    n_heads, hd, D, n_shards = split
    rng = np.random.default_rng(seed)
    inner = n_heads * hd
    wq, wk, wv = (uniform(rng, D, inner) for _ in range(3))  # (D, H*hd)
    wo = uniform(rng, inner, D)  # (H*hd, D)
    bq, bk, bv, bo = uniform(rng, inner), uniform(rng, inner), uniform(rng, inner), uniform(rng, D)
    full = MultiHeadAttention(wq, wk, wv, wo, n_heads, bq, bk, bv, bo, causal=causal)
    x, dy = uniform(rng, B, T, D), uniform(rng, B, T, D)
    y_full, ctx_full = full.forward(x)
    dx_full, grads_full = full.backward(ctx_full, dy)

    per = n_heads // n_shards
    y_sum, dx_sum = np.zeros_like(y_full), np.zeros_like(x)
    for s in range(n_shards):
        c = slice(s * per * hd, (s + 1) * per * hd)  # this shard's heads' columns
        shard = MultiHeadAttention(
            wq[:, c], wk[:, c], wv[:, c], wo[c, :], per, bq[c], bk[c], bv[c], None, causal
        )
        y, ctx = shard.forward(x)  # a partial sum: no bias
        dx, grads = shard.backward(ctx, dy)  # dy is replicated on every shard
        y_sum += y
        dx_sum += dx
        for name in ("wq", "wk", "wv"):
            close(grads[name], grads_full[name][:, c])
        for name in ("bq", "bk", "bv"):
            close(grads[name], grads_full[name][c])
        close(grads["wo"], grads_full["wo"][c, :])
        assert "bo" not in grads
    close(y_sum + bo, y_full)  # the row-parallel all-reduce, plus the bias once
    close(dx_sum, dx_full)  # the backward all-reduce of the replicated input


@given(sizes, sizes, st.integers(1, 4), st.integers(1, 4), seeds)
def test_column_split_linear_concatenates(rows, d_in, out_per_shard, n_shards, seed):
    rng = np.random.default_rng(seed)
    d_out = out_per_shard * n_shards
    full = Linear(uniform(rng, d_in, d_out), uniform(rng, d_out))
    x = uniform(rng, rows, d_in)
    cols = [slice(s * out_per_shard, (s + 1) * out_per_shard) for s in range(n_shards)]
    shards = [Linear(full.weight[:, c], full.bias[c]) for c in cols]
    close(np.concatenate([s.forward(x)[0] for s in shards], axis=-1), full.forward(x)[0])


@given(sizes, st.integers(1, 4), sizes, st.integers(1, 4), seeds)
def test_row_split_linear_sums(rows, in_per_shard, d_out, n_shards, seed):
    rng = np.random.default_rng(seed)
    d_in = in_per_shard * n_shards
    full = Linear(uniform(rng, d_in, d_out), uniform(rng, d_out))
    x, dy = uniform(rng, rows, d_in), uniform(rng, rows, d_out)
    y_sum = np.zeros((rows, d_out))
    dx_full, grads_full = full.backward(full.forward(x)[1], dy)
    for s in range(n_shards):
        r = slice(s * in_per_shard, (s + 1) * in_per_shard)
        shard = Linear(full.weight[r, :])  # bias on no shard
        y, ctx = shard.forward(x[:, r])  # the input arrives already split
        y_sum += y
        dx, grads = shard.backward(ctx, dy)
        close(dx, dx_full[:, r])
        close(grads["weight"], grads_full["weight"][r, :])
    close(y_sum + full.bias, full.forward(x)[0])


@given(sizes, sizes, st.integers(1, 3), st.integers(1, 3), seeds)
def test_megatron_mlp_split_sums(B, D, hidden_per_shard, n_shards, seed):
    """fc1 column-parallel, GELU local, fc2 row-parallel: one all-reduce at the end."""
    rng = np.random.default_rng(seed)
    hidden = hidden_per_shard * n_shards
    fc1 = Linear(uniform(rng, D, hidden), uniform(rng, hidden))
    fc2 = Linear(uniform(rng, hidden, D), uniform(rng, D))
    full = MLP(fc1, fc2)
    x = uniform(rng, B, 2, D)
    y_sum = np.zeros_like(x)
    for s in range(n_shards):
        c = slice(s * hidden_per_shard, (s + 1) * hidden_per_shard)
        shard = MLP(Linear(fc1.weight[:, c], fc1.bias[c]), Linear(fc2.weight[c, :]))
        y_sum += shard.forward(x)[0]
    close(y_sum + fc2.bias, full.forward(x)[0])


@given(st.integers(1, 4), st.integers(1, 3), seeds)
def test_pipeline_stages_compose_to_the_full_model(cut, n_micro, seed):
    """Stages are slices; their grads are sub-dicts of the full model's, and accumulate."""
    rng = np.random.default_rng(seed)
    layers = [Linear(uniform(rng, 3, 3), uniform(rng, 3)) for _ in range(3)]
    model = Sequential(layers[0], GELU(), layers[1], GELU(), layers[2])
    stages = [model[:cut], model[cut:]]
    full_grads = dict.fromkeys(model.params, 0.0)
    stage_grads = dict.fromkeys(model.params, 0.0)
    for _ in range(n_micro):  # gradient accumulation over micro-batches
        x, dy = uniform(rng, 2, 3), uniform(rng, 2, 3)
        y_full, ctx = model.forward(x)
        for key, g in model.backward(ctx, dy)[1].items():
            full_grads[key] = full_grads[key] + g
        h, ctx0 = stages[0].forward(x)
        y, ctx1 = stages[1].forward(h)
        close(y, y_full)
        dh, grads1 = stages[1].backward(ctx1, dy)
        _, grads0 = stages[0].backward(ctx0, dh)
        assert set(grads0).isdisjoint(grads1) and set(grads0) | set(grads1) == set(model.params)
        for key, g in {**grads0, **grads1}.items():
            stage_grads[key] = stage_grads[key] + g
    for key in model.params:
        close(stage_grads[key], full_grads[key])


@given(st.integers(1, 4), st.integers(1, 3), st.integers(2, 4), st.booleans(), seeds)
def test_data_parallel_mean_losses_average(rows_per_rank, dp, n_classes, use_ce, seed):
    """Each rank takes the mean over its rows; averaging rank gradients = full-batch gradient.

    With reduction="sum" the rank gradients sum instead.
    """
    rng = np.random.default_rng(seed)
    layer = Linear(uniform(rng, 3, n_classes), uniform(rng, n_classes))
    B = rows_per_rank * dp
    x = uniform(rng, B, 3)
    if use_ce:
        target = rng.integers(0, n_classes, size=B)
        loss_fn = cross_entropy_loss
    else:
        target = uniform(rng, B, n_classes)
        loss_fn = mse_loss

    def grads(rows, reduction):
        y, ctx = layer.forward(x[rows])
        loss, dy = loss_fn(y, target[rows], reduction=reduction)
        return loss, layer.backward(ctx, dy)[1]

    for reduction, combine in (("mean", np.mean), ("sum", np.sum)):
        loss_full, grads_full = grads(slice(None), reduction)
        local = [
            grads(slice(r * rows_per_rank, (r + 1) * rows_per_rank), reduction) for r in range(dp)
        ]
        close(combine([loss for loss, _ in local]), loss_full)
        for key in grads_full:
            close(combine([g[key] for _, g in local], axis=0), grads_full[key])
