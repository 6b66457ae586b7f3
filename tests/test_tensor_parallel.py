"""Tensor parallelism (column, row, Megatron MLP, head-split attention, sequence parallel)
on the virtual cluster against the full single-device layer.

Hypothesis draws shapes, the TP degree and a seed; values come from
``np.random.default_rng(seed).uniform(-1, 1)``.  Outputs, input gradients and parameter
gradients (the shards gathered back) must equal the full layer's to rtol 1e-10; bytes
must equal the closed forms: ring all-reduce 2(t-1)/t·N·b, reduce-scatter and all-gather
(t-1)/t·N·b each, with N = B·S·H.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsim import Cluster, topology
from collsim.errors import ConfigError
from collsim.nn import MLP, LayerNorm, Linear, MultiHeadAttention, TransformerBlock
from collsim.parallel.accounting import collective_bytes
from collsim.parallel.modules import gather_params
from collsim.parallel.tensor import (
    ColumnParallelLinear,
    ParallelMLP,
    RowParallelLinear,
    assemble,
    check_tp,
    local_part,
    sequence_shard,
)
from collsim.parallel.tensor.attention import ParallelAttention, ParallelTransformerBlock
from collsim.runtime.group import Group
from collsim.verify import verify

RTOL, ATOL = 1e-10, 1e-12
seeds = st.integers(0, 2**32 - 1)
small = st.integers(1, 3)
degrees = st.integers(1, 4)


def close(a, b):
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


def u(rng, *shape):
    return rng.uniform(-1.0, 1.0, size=shape)


def run_tp(make, tp, x, dy, in_layout="full", out_layout="full"):
    """Forward and backward of ``make(group, tp_rank)`` on tp ranks; the results gathered."""
    group = Group(range(tp))

    def program(rank):
        layer = make(group, rank.id)
        y, ctx = yield from layer.forward(rank, local_part(x, in_layout, group, rank.id))
        dy_local = local_part(dy, out_layout, group, rank.id)
        dx = yield from layer.backward_input(rank, ctx, dy_local)
        grads = yield from layer.backward_weight(rank, ctx, dy_local)
        return y, dx, grads, layer.params, layer.shard_axes

    result = Cluster(topology.switch(tp)).run(program)
    ys, dxs, grads, params, axes = zip(*result.returns)
    out = assemble(list(ys), out_layout), assemble(list(dxs), in_layout)
    return (*out, gather_params(grads, axes[0]), gather_params(params, axes[0]), result)


def check_against(full, x, dy, y, dx, grads, params):
    y_ref, ctx = full.forward(x)
    dx_ref, grads_ref = full.backward(ctx, dy)
    close(y, y_ref)
    close(dx, dx_ref)
    assert list(grads) == list(grads_ref)  # same names, same order
    for name, grad in grads_ref.items():
        close(grads[name], grad)
        np.testing.assert_array_equal(params[name], full.params[name])  # the shards tile it


def tp_bytes(result, tp):
    return collective_bytes(result.trace, tp)


def assert_formula(per_rank, formula, n_elements):
    """Ring bytes: the mean over ranks is the formula; each rank's too when the t chunks
    of the n elements are equal (else they differ by one element's bytes)."""
    t = len(per_rank)
    assert sum(per_rank) / t == pytest.approx(formula, rel=1e-15)
    if n_elements % t == 0:
        assert per_rank == [formula] * t


def collectives_of(result, rank=0):
    """Distinct collective calls rank ``rank`` took part in."""
    return len({(t.tag.group, t.tag.call) for t in result.trace.transfers if t.src == rank})


# ---- the layers equal the full layer ---------------------------------------------------------


@given(degrees, small, small, small, st.booleans(), st.booleans(), seeds)
def test_column_parallel(tp, rows, d_in, per, gather_output, three_d, seed):
    rng = np.random.default_rng(seed)
    full = Linear(u(rng, d_in, tp * per), u(rng, tp * per))
    shape = (rows, 2) if three_d else (rows,)
    x, dy = u(rng, *shape, d_in), u(rng, *shape, tp * per)

    def make(g, j):
        return ColumnParallelLinear.from_full(full, g, j, gather_output=gather_output)

    out = run_tp(make, tp, x, dy, "full", "full" if gather_output else "last")
    check_against(full, x, dy, *out[:4])
    if tp > 1:
        got = tp_bytes(out[4], tp)
        assert set(got) == ({"all_reduce", "all_gather"} if gather_output else {"all_reduce"})
        assert_formula(got["all_reduce"], 2 * (tp - 1) / tp * x.size * 8, x.size)  # f: dX
        if gather_output:  # column parallel: Y = [Y0 | Y1 | ...] needs an all-gather
            assert got["all_gather"] == [(tp - 1) / tp * dy.size * 8] * tp


@given(degrees, small, small, small, st.booleans(), seeds)
def test_row_parallel(tp, rows, per, d_out, input_is_parallel, seed):
    rng = np.random.default_rng(seed)
    full = Linear(u(rng, tp * per, d_out), u(rng, d_out))
    x, dy = u(rng, rows, 2, tp * per), u(rng, rows, 2, d_out)
    out = run_tp(
        lambda g, j: RowParallelLinear.from_full(full, g, j, input_is_parallel=input_is_parallel),
        tp,
        x,
        dy,
        "last" if input_is_parallel else "full",
    )
    check_against(full, x, dy, *out[:4])
    if tp > 1:
        got = tp_bytes(out[4], tp)
        assert set(got) == {"all_reduce"} | (set() if input_is_parallel else {"all_gather"})
        assert_formula(got["all_reduce"], 2 * (tp - 1) / tp * dy.size * 8, dy.size)  # g: Y
        if not input_is_parallel:  # dX reassembled from the column slices
            assert got["all_gather"] == [(tp - 1) / tp * x.size * 8] * tp


@given(degrees, small, small, small, small, st.booleans(), seeds)
def test_megatron_mlp(tp, B, S_per, H_per, per, sp, seed):
    rng = np.random.default_rng(seed)
    H, F = tp * H_per, tp * per  # Megatron-LM: tp divides hidden and ffn hidden
    full = MLP(Linear(u(rng, H, F), u(rng, F)), Linear(u(rng, F, H), u(rng, H)))
    S = tp * S_per if sp else S_per
    x, dy = u(rng, B, S, H), u(rng, B, S, H)
    layout = "seq" if sp else "full"
    out = run_tp(
        lambda g, j: ParallelMLP.from_full(full, g, j, sequence_parallel=sp),
        tp,
        x,
        dy,
        layout,
        layout,
    )
    check_against(full, x, dy, *out[:4])
    if tp == 1:
        return
    act = 2 * (tp - 1) / tp * B * S * H * 8  # one all-reduce of a (B, S, H) activation
    got = tp_bytes(out[4], tp)
    if sp:  # the same bytes as reduce-scatter + all-gather; the bias gradient summed too
        assert got["reduce_scatter"] == got["all_gather"] == [act] * tp
        assert got["all_reduce"] == [2 * (tp - 1) / tp * H * 8] * tp
        assert collectives_of(out[4]) == 5
    else:  # f/g: one all-reduce forward, one backward
        assert got == {"all_reduce": [2 * act] * tp}
        assert collectives_of(out[4]) == 2


@given(degrees, small, small, small, small, st.booleans(), st.booleans(), seeds)
def test_head_split_attention(tp, B, S_per, heads_per, head_dim, causal, sp, seed):
    rng = np.random.default_rng(seed)
    heads = tp * heads_per
    D = heads * head_dim
    w = [u(rng, D, D) for _ in range(4)]
    full = MultiHeadAttention(*w, heads, *(u(rng, D) for _ in range(4)), causal=causal)
    S = tp * S_per if sp else S_per + 1
    x, dy = u(rng, B, S, D), u(rng, B, S, D)
    layout = "seq" if sp else "full"
    out = run_tp(
        lambda g, j: ParallelAttention.from_full(full, g, j, sequence_parallel=sp),
        tp,
        x,
        dy,
        layout,
        layout,
    )
    check_against(full, x, dy, *out[:4])
    if tp > 1:
        act = 2 * (tp - 1) / tp * B * S * D * 8
        got = tp_bytes(out[4], tp)
        if sp:
            assert got["reduce_scatter"] == got["all_gather"] == [act] * tp
        else:
            assert got == {"all_reduce": [2 * act] * tp}


@given(st.sampled_from([1, 2, 4]), small, small, st.booleans(), seeds)
def test_transformer_block(tp, B, S_per, sp, seed):
    rng = np.random.default_rng(seed)
    H, heads = 8, 4
    full = TransformerBlock.init(H, heads, rng, hidden=2 * H)
    for ln in (full.ln1, full.ln2):  # non-trivial LayerNorm parameters
        ln.gamma[:], ln.beta[:] = u(rng, H) + 1.5, u(rng, H)
    for name, value in full.params.items():
        if name.endswith(("bias", "bq", "bk", "bv", "bo")):
            value[:] = u(rng, value.size)
    S = tp * S_per
    x, dy = u(rng, B, S, H), u(rng, B, S, H)
    layout = "seq" if sp else "full"
    out = run_tp(
        lambda g, j: ParallelTransformerBlock.from_full(full, g, j, sp), tp, x, dy, layout, layout
    )
    check_against(full, x, dy, *out[:4])
    if tp == 1:
        return
    act = 2 * (tp - 1) / tp * B * S * H * 8
    got = tp_bytes(out[4], tp)
    if sp:  # 4 reduce-scatters + 4 all-gathers = 4 all-reduces' bytes; one small all-reduce
        assert got["reduce_scatter"] == got["all_gather"] == [2 * act] * tp
        assert got["all_reduce"] == [2 * (tp - 1) / tp * 6 * H * 8] * tp  # ln1, ln2, bo, b2
        assert collectives_of(out[4]) == 9
    else:  # four all-reduces per layer: g, g forward; f, f backward
        assert got == {"all_reduce": [4 * act] * tp}
        assert collectives_of(out[4]) == 4


def test_sequence_parallel_moves_the_same_bytes_as_tensor_parallel():
    rng = np.random.default_rng(0)
    full = TransformerBlock.init(8, 4, rng)
    x, dy = u(rng, 2, 4, 8), u(rng, 2, 4, 8)
    tp_run = run_tp(lambda g, j: ParallelTransformerBlock.from_full(full, g, j), 4, x, dy)[4]
    sp_run = run_tp(
        lambda g, j: ParallelTransformerBlock.from_full(full, g, j, True), 4, x, dy, "seq", "seq"
    )[4]
    tp_bytes_, sp_bytes = tp_bytes(tp_run, 4), tp_bytes(sp_run, 4)
    activations = [a + b for a, b in zip(sp_bytes["reduce_scatter"], sp_bytes["all_gather"])]
    assert activations == tp_bytes_["all_reduce"]


def test_weight_gradient_without_a_backward_input_communicates_again():
    rng = np.random.default_rng(0)
    full = Linear(u(rng, 4, 3), u(rng, 3))
    x, dy = u(rng, 2, 4, 4), u(rng, 2, 4, 3)
    group = Group(range(2))

    def program(rank):
        layer = RowParallelLinear.from_full(full, group, rank.id, sequence_parallel=True)
        _, ctx = yield from layer.forward(rank, local_part(x, "last", group, rank.id)[:, :, :])
        return (yield from layer.backward_weight(rank, ctx, local_part(dy, "seq", group, rank.id)))

    returns = Cluster(topology.switch(2)).run(program).returns
    ref = full.backward_weight(full.forward(x)[1], dy)
    close(gather_params(returns, {"weight": 0, "bias": None})["weight"], ref["weight"])
    close(returns[1]["bias"], ref["bias"])


# ---- training steps: replicated parameters stay identical --------------------------------------


@given(
    st.sampled_from(["tp-column", "tp-row", "tp-mlp", "tp-attention", "sp"]),
    st.sampled_from([1, 2, 4]),
    small,
    st.integers(1, 2),
    seeds,
)
def test_training_steps_match_one_device(scheme, tp, B, S_per, seed):
    report = verify(
        scheme,
        tp=tp,
        batch=B,
        hidden=4,
        heads=4,
        ffn_hidden=8,
        seq=4 * S_per,
        layers=1,
        steps=3,
        seed=seed,
    )
    assert report.match, report
    assert report.tp_replica_diff == 0.0
    for key, formula in report.formula_bytes.items():
        assert sum(report.bytes_by_group[key]) / tp == pytest.approx(formula, rel=1e-15)


# ---- the rules -------------------------------------------------------------------------------


@given(
    degrees,
    st.integers(1, 24),
    st.integers(1, 12),
    st.integers(1, 48),
    st.integers(1, 12),
    st.booleans(),
)
def test_check_tp_names_every_bad_size_and_the_degrees_that_work(tp, hidden, heads, ffn, seq, sp):
    sizes = {"hidden": hidden, "heads": heads, "ffn_hidden": ffn}
    if sp:
        sizes["seq"] = seq
    bad = {k: v for k, v in sizes.items() if v % tp}
    if not bad:
        check_tp(tp, hidden=hidden, heads=heads, ffn_hidden=ffn, seq=seq, sequence_parallel=sp)
        return
    with pytest.raises(ConfigError) as err:
        check_tp(tp, hidden=hidden, heads=heads, ffn_hidden=ffn, seq=seq, sequence_parallel=sp)
    message = str(err.value)
    assert f"tp={tp}" in message
    for name, value in bad.items():
        assert f"{name}={value} ({value}/{tp}" in message
    working = [t for t in range(1, 49) if all(v % t == 0 for v in sizes.values())]
    nearest = sorted(working, key=lambda t2: (abs(t2 - tp), t2))  # every one, nearest first
    assert message.endswith("nearest first: " + ", ".join(map(str, nearest)))


def test_layers_refuse_sizes_tp_does_not_divide():
    rng = np.random.default_rng(0)
    g3 = Group(range(3))
    with pytest.raises(ConfigError, match=r"out_features=4 .*nearest first: 2, 4, 1"):
        ColumnParallelLinear.from_full(Linear.init(2, 4, rng), g3, 0)
    with pytest.raises(ConfigError, match=r"in_features=8 .*nearest first: 2, 4, 1, 8"):
        RowParallelLinear.from_full(Linear.init(8, 2, rng), g3, 0)
    with pytest.raises(ConfigError, match=r"ffn_hidden=16"):
        ParallelMLP.from_full(MLP.init(4, rng), g3, 0)
    with pytest.raises(ConfigError, match=r"heads=4 \(4/3 = 1.333\)"):
        ParallelAttention.from_full(MultiHeadAttention.init(12, 4, rng), g3, 0)
    with pytest.raises(ConfigError, match=r"hidden=8 .* heads=4 .* ffn_hidden=32"):
        ParallelTransformerBlock.from_full(TransformerBlock.init(8, 4, rng), g3, 0)
    with pytest.raises(ConfigError, match=r"seq=5 \(5/3 = 1.667\).*sequence parallelism"):
        sequence_shard(np.zeros((1, 5, 3)), g3, 0)
    with pytest.raises(ConfigError, match=r"seq=6 .*tp values that divide .*nearest first: 2, 1$"):
        verify("sp", tp=4, seq=6)
    with pytest.raises(ConfigError, match="cannot gather its output under sequence"):
        ColumnParallelLinear.from_full(
            Linear.init(2, 3, rng), g3, 0, gather_output=True, sequence_parallel=True
        )


def test_a_shard_on_the_wrong_rank_is_refused():
    full = Linear.init(2, 4, np.random.default_rng(0))
    group = Group([0, 1])

    def program(rank):
        layer = ColumnParallelLinear.from_full(full, group, 1 - rank.id)  # swapped
        yield from layer.forward(rank, np.zeros((1, 2)))

    with pytest.raises(ConfigError, match="tp_rank=group.index"):
        Cluster(topology.switch(2)).run(program)


def test_shards_copy_their_slices():
    full = LayerNorm.init(4)
    block = TransformerBlock(
        full,
        MultiHeadAttention.init(4, 2, np.random.default_rng(0)),
        LayerNorm.init(4),
        MLP.init(4, np.random.default_rng(1)),
    )
    shard = ParallelTransformerBlock.from_full(block, Group([0, 1]), 0)
    for name, value in shard.params.items():
        value += 1.0
        assert not np.shares_memory(value, block.params[name])
