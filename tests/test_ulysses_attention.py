"""All-to-all context parallelism (DeepSpeed-Ulysses) against single-device attention.

Every check runs UlyssesAttention on a ``switch(cp)`` cluster and compares it with the
full :class:`collsim.nn.MultiHeadAttention` on the whole sequence, in float64, to
rtol = atol = 1e-10: the output and dx (gathered back from the ranks' layouts) and every
weight gradient (summed over the cp ranks).  Values come from
``np.random.default_rng(seed).uniform(-1, 1)``.  Bytes per rank per pass, read from the
trace, must equal :func:`ulysses_attention_bytes` exactly; the all-to-all calls per pass
are counted from the transfers' typed tags (CollectiveStep).
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsim import Cluster, topology
from collsim.collectives.records import is_collective
from collsim.errors import ConfigError
from collsim.nn import MultiHeadAttention
from collsim.parallel.context.layouts import CP_LAYOUTS, gather_sequence, shard_sequence
from collsim.parallel.context.ulysses import UlyssesAttention, ulysses_attention_bytes
from collsim.runtime.group import Group

RTOL = ATOL = 1e-10
BYTES = 8  # float64
PASSES = ("forward", "backward_input", "backward_weight")


def close(a, b):
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


def make_attention(rng, heads, head_dim, d_model=None, causal=True, bias=True):
    d_model = heads * head_dim if d_model is None else d_model
    inner = heads * head_dim

    def u(*shape):
        return rng.uniform(-1.0, 1.0, size=shape)

    weights = [u(d_model, inner) for _ in "qkv"] + [u(inner, d_model)]
    biases = [u(inner) for _ in "qkv"] + [u(d_model)] if bias else [None] * 4
    return MultiHeadAttention(*weights, heads, *biases, causal=causal)


def run_ulysses(full, x, dy, cp, layout):
    """Forward, backward_input and backward_weight on cp ranks; results gathered."""
    group = Group(range(cp))

    def program(rank):
        attn = UlyssesAttention.from_full(full, group, rank.id, layout=layout)
        x_local = shard_sequence(x, cp, rank.id, layout)
        y, ctx = yield from attn.forward(rank, x_local)
        dy_local = shard_sequence(dy, cp, rank.id, layout)
        dx = yield from attn.backward_input(rank, ctx, dy_local)
        grads = yield from attn.backward_weight(rank, ctx, dy_local)
        return y, dx, grads, attn.attention_flops(x_local.shape)

    result = Cluster(topology.switch(cp)).run(program)
    ys, dxs, grads, attention = zip(*result.returns, strict=True)
    summed = {name: sum(g[name] for g in grads) for name in grads[0]}
    return gather_sequence(ys, layout), gather_sequence(dxs, layout), summed, attention, result


def check_against_one_device(full, x, dy, cp, layout):
    y, dx, grads, attention, result = run_ulysses(full, x, dy, cp, layout)
    y_ref, ctx = full.forward(x)
    dx_ref, grads_ref = full.backward(ctx, dy)
    close(y, y_ref)
    close(dx, dx_ref)
    assert list(grads) == list(grads_ref)  # same names, same order
    for name, grad in grads_ref.items():
        close(grads[name], grad)
    return attention, result


def pass_of_transfers(result):
    """Each collective transfer's pass: that of the sending rank's last compute span
    before it started (the span's LayerPass record, not its label)."""
    spans = {}
    for c in result.trace.computes:
        spans.setdefault(c.rank, []).append(c)
    out = []
    for t in result.trace.transfers:
        before = [c for c in spans[t.src] if c.end <= t.start]
        out.append((max(before, key=lambda c: c.end).meta.kind, t))
    return out


def bytes_and_calls(result, cp):
    """{pass: bytes sent per rank}, {pass: all-to-all calls} from the trace."""
    sent = {p: [0] * cp for p in PASSES}
    calls = {p: set() for p in PASSES}
    for kind, t in pass_of_transfers(result):
        assert is_collective(t.tag) and t.tag.collective == "all_to_all"
        sent[kind][t.src] += t.nbytes
        calls[kind].add((t.tag.group, t.tag.call))
    return sent, {p: len(c) for p, c in calls.items()}


def data(rng, batch, seq, d_model):
    return rng.uniform(-1, 1, (batch, seq, d_model)), rng.uniform(-1, 1, (batch, seq, d_model))


@pytest.mark.parametrize("layout", CP_LAYOUTS)
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("cp", [1, 2, 4])
def test_matches_one_device_and_the_closed_form(cp, causal, layout):
    rng = np.random.default_rng(100 * cp + causal)
    full = make_attention(rng, heads=4, head_dim=2, causal=causal)
    batch, seq = 2, 16
    x, dy = data(rng, batch, seq, 8)
    attention, result = check_against_one_device(full, x, dy, cp, layout)
    sent, calls = bytes_and_calls(result, cp)
    forward = ulysses_attention_bytes(batch, seq, 8, cp, BYTES, "forward")
    backward = ulysses_attention_bytes(batch, seq, 8, cp, BYTES, "backward")
    assert sent["forward"] == [forward] * cp
    assert sent["backward_input"] == [backward] * cp
    assert sent["backward_weight"] == [0] * cp
    assert result.stats.bytes_sent == [forward + backward] * cp  # nothing else moved
    # 4·(cp−1)/cp²·B·S·D·b each way, B·S·D·b = 2·16·8·8 B = 2 KiB: cp=2 1/4, cp=4 3/16 of 4×
    assert forward == backward == {1: 0, 2: 2048, 4: 1536}[cp]
    # one packed q/k/v all-to-all and one for the output (mirrored backward)
    expected_calls = {"forward": 2, "backward_input": 2, "backward_weight": 0}
    assert calls == (expected_calls if cp > 1 else dict.fromkeys(PASSES, 0))
    # every rank does the same attention work (H/cp heads over all S), in both layouts
    assert len({a["forward"] for a in attention}) == 1


@given(
    cp=st.integers(1, 8),
    heads_per_rank=st.integers(1, 2),
    head_dim=st.integers(1, 3),
    extra_width=st.integers(0, 1),
    chunks=st.integers(1, 2),
    batch=st.integers(1, 2),
    seed=st.integers(0, 2**32 - 1),
    causal=st.booleans(),
    bias=st.booleans(),
    layout=st.sampled_from(CP_LAYOUTS),
)
def test_any_cp_that_divides_heads_matches_one_device(
    cp, heads_per_rank, head_dim, extra_width, chunks, batch, seed, causal, bias, layout
):
    rng = np.random.default_rng(seed)
    heads = cp * heads_per_rank
    inner = heads * head_dim
    d_model = inner + extra_width  # the attention's width may differ from the model's
    full = make_attention(rng, heads, head_dim, d_model, causal=causal, bias=bias)
    seq = 2 * cp * chunks  # divisible as both layouts need
    x, dy = data(rng, batch, seq, d_model)
    _, result = check_against_one_device(full, x, dy, cp, layout)
    sent, _ = bytes_and_calls(result, cp)
    for kind, pass_ in (("forward", "forward"), ("backward_input", "backward")):
        assert sent[kind] == [ulysses_attention_bytes(batch, seq, inner, cp, BYTES, pass_)] * cp


@pytest.mark.parametrize("layout", CP_LAYOUTS)
@pytest.mark.parametrize("cp", range(1, 9))
def test_every_cp_up_to_8_matches_one_device_causal(cp, layout):
    # every cp the Hypothesis test may draw, drawn for sure: one head per rank, 2 tokens each
    rng = np.random.default_rng(cp)
    full = make_attention(rng, heads=cp, head_dim=2, causal=True)
    x, dy = data(rng, 1, 2 * cp, 2 * cp)
    _, result = check_against_one_device(full, x, dy, cp, layout)
    sent, calls = bytes_and_calls(result, cp)
    assert sent["forward"] == [ulysses_attention_bytes(1, 2 * cp, 2 * cp, cp, BYTES)] * cp
    assert calls["forward"] == calls["backward_input"] == (2 if cp > 1 else 0)


@pytest.mark.parametrize("layout", CP_LAYOUTS)
def test_flops_charged_sum_to_the_single_device_layers(layout):
    rng = np.random.default_rng(7)
    full = make_attention(rng, heads=4, head_dim=2)
    batch, seq, d_model = 2, 16, 8
    x, dy = data(rng, batch, seq, d_model)
    attention, result = check_against_one_device(full, x, dy, 4, layout)
    rate = Cluster(topology.switch(1)).compute_rate
    charged = dict.fromkeys(PASSES, 0.0)
    core = dict.fromkeys(PASSES, 0.0)
    for c in result.trace.computes:  # spans are selected by their LayerPass fields
        charged[c.meta.kind] += (c.end - c.start) * rate
        if c.meta.layer == "attn.core":
            core[c.meta.kind] += (c.end - c.start) * rate
    expected = full.flops(x.shape)
    projections = 4 * 2 * batch * seq * d_model * d_model  # q, k, v, o on one device
    for kind in PASSES:  # time·rate: exact up to the clock's rounding
        assert charged[kind] == pytest.approx(expected[kind], rel=1e-9)
        assert core[kind] == pytest.approx(sum(a[kind] for a in attention), rel=1e-9, abs=0)
    for kind in ("forward", "backward_input"):
        assert sum(a[kind] for a in attention) == expected[kind] - projections
        assert {a[kind] for a in attention} == {(expected[kind] - projections) // 4}


def test_backward_weight_alone_runs_backward_input_itself():
    rng = np.random.default_rng(3)
    full = make_attention(rng, heads=2, head_dim=2)
    x, dy = data(rng, 1, 4, 4)
    group = Group([0, 1])

    def program(rank):
        attn = UlyssesAttention.from_full(full, group, rank.id)
        y, ctx = yield from attn.forward(rank, shard_sequence(x, 2, rank.id, "contiguous"))
        dy_local = shard_sequence(dy, 2, rank.id, "contiguous")
        return (yield from attn.backward_weight(rank, ctx, dy_local))

    grads = Cluster(topology.switch(2)).run(program).returns
    _, grads_ref = full.backward(full.forward(x)[1], dy)
    for name, grad in grads_ref.items():
        close(grads[0][name] + grads[1][name], grad)


def test_weights_are_copies_and_replicated():
    full = make_attention(np.random.default_rng(0), heads=2, head_dim=2)
    attn = UlyssesAttention.from_full(full, Group([0, 1]), 1)
    assert attn.shard_axes == dict.fromkeys(full.params)
    assert all(attn.params[k] is not v for k, v in full.params.items())
    for k, v in full.params.items():
        np.testing.assert_array_equal(attn.params[k], v)


@pytest.mark.parametrize(
    ("call", "pieces"),
    [
        (
            lambda full: UlyssesAttention.from_full(full, Group(range(4)), 0),
            ["heads=6", "cp=4", "nearest first: 3, 2, 6, 1"],
        ),
        (
            lambda full: UlyssesAttention.from_full(full, Group(range(2)), 0, layout="balance"),
            ["'balance'", "'balanced'"],
        ),
        (lambda full: UlyssesAttention.from_full(full, Group(range(2)), 2), ["cp_rank=2", "0..1"]),
        (lambda full: UlyssesAttention.from_full(object(), Group(range(2)), 0), ["object"]),
        (
            lambda full: ulysses_attention_bytes(2, 8, 8, 2, 8, "backwards"),
            ["'backwards'", "'backward'"],
        ),
        (lambda full: ulysses_attention_bytes(2, 9, 8, 2, 8), ["seq=9", "cp=2"]),
        (lambda full: ulysses_attention_bytes(2, 8, 8, 0, 8), ["got cp=0"]),
        (lambda full: ulysses_attention_bytes(2, 8, 8, 2, 2.5), ["bytes_per_element", "2.5"]),
    ],
)
def test_bad_configurations_are_refused(call, pieces):
    full = make_attention(np.random.default_rng(0), heads=6, head_dim=2)
    with pytest.raises(ConfigError) as info:
        call(full)
    for piece in pieces:
        assert piece in str(info.value)


@pytest.mark.parametrize(
    ("tokens", "layout", "pieces"),
    [(3, "balanced", ["(1, 3, 8)", "seq=6", "4 or 8"]), (4, "contiguous", None)],
)
def test_a_rank_input_the_layout_cannot_hold_is_refused_before_any_transfer(tokens, layout, pieces):
    full = make_attention(np.random.default_rng(0), heads=2, head_dim=4)
    group = Group([0, 1])

    def program(rank):
        attn = UlyssesAttention.from_full(full, group, rank.id, layout=layout)
        y, ctx = yield from attn.forward(rank, np.zeros((1, tokens, 8)))
        return y.shape

    if pieces is None:
        assert Cluster(topology.switch(2)).run(program).returns == [(1, 4, 8)] * 2
        return
    with pytest.raises(ConfigError) as info:
        Cluster(topology.switch(2)).run(program)
    for piece in pieces:
        assert piece in str(info.value)


def test_running_on_the_wrong_rank_is_refused():
    full = make_attention(np.random.default_rng(0), heads=2, head_dim=2)
    group = Group([0, 1])

    def program(rank):
        attn = UlyssesAttention.from_full(full, group, 1 - rank.id)
        return (yield from attn.forward(rank, np.zeros((1, 2, 4))))

    with pytest.raises(ConfigError, match="cp_rank=group.index"):
        Cluster(topology.switch(2)).run(program)
