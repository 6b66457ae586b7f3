"""Ring attention (collsim.parallel.context.ring) against one-device attention, and its
bytes, ring structure, per-rank causal FLOPs and overlap against the closed forms.

Tolerance: float64, rtol = atol = 1e-10 (the online softmax sums in another order than
the one-device softmax; the differences seen are ~1e-15).
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import collsim
from collsim.errors import ConfigError
from collsim.nn import MultiHeadAttention
from collsim.parallel.context import (
    CP_LAYOUTS,
    RingAttention,
    RingMessage,
    RingStep,
    causal_attention_flops,
    gather_sequence,
    ring_attention_bytes,
    score_flops,
    shard_sequence,
    token_positions,
)
from collsim.parallel.modules import LayerPass, RankModule
from collsim.runtime.group import Group

TOL = {"rtol": 1e-10, "atol": 1e-10}


def _attention(d_heads, head_dim, causal, rng):
    """A MultiHeadAttention whose every weight and bias is uniform in [-1, 1]."""
    attn = MultiHeadAttention.init(d_heads * head_dim, d_heads, rng, causal=causal)
    for p in attn.params.values():
        p[...] = rng.uniform(-1, 1, p.shape)
    return attn


def _run(attn, x, dy, cp, layout, group=None, cluster=None):
    """Forward and backward of ring attention on ``cp`` ranks; returns the run and the full
    y, dx and the weight gradients summed over the group."""
    group = group or Group(list(range(cp)))
    cluster = cluster or collsim.Cluster(collsim.topology.switch(len(group.ranks)))

    def program(rank):
        ring = RingAttention.from_full(attn, group, group.index(rank.id), layout=layout)
        index = group.index(rank.id)
        y, ctx = yield from ring.forward(rank, shard_sequence(x, cp, index, layout))
        dx, grads = yield from ring.backward(rank, ctx, shard_sequence(dy, cp, index, layout))
        return y, dx, grads

    result = cluster.run(program)
    returns = [result.returns[r] for r in group.ranks]  # group order
    y = gather_sequence([r[0] for r in returns], layout)
    dx = gather_sequence([r[1] for r in returns], layout)
    grads = {name: sum(r[2][name] for r in returns) for name in attn.params}
    return result, y, dx, grads


def _check_values(cp, layout, causal, heads, head_dim, seq, batch, seed):
    rng = np.random.default_rng(seed)
    attn = _attention(heads, head_dim, causal, rng)
    d = heads * head_dim
    x, dy = rng.uniform(-1, 1, (batch, seq, d)), rng.uniform(-1, 1, (batch, seq, d))
    _, y, dx, grads = _run(attn, x, dy, cp, layout)
    y_ref, ctx = attn.forward(x)
    np.testing.assert_allclose(y, y_ref, **TOL)
    np.testing.assert_allclose(dx, attn.backward_input(ctx, dy), **TOL)
    ref = attn.backward_weight(ctx, dy)
    assert list(grads) == list(ref)
    for name in ref:
        np.testing.assert_allclose(grads[name], ref[name], err_msg=name, **TOL)


# ---- values -------------------------------------------------------------------------------


@pytest.mark.parametrize("cp", [1, 2, 3, 4])
@pytest.mark.parametrize("layout", CP_LAYOUTS)
@pytest.mark.parametrize("causal", [True, False])
def test_forward_and_backward_equal_one_device(cp, layout, causal):
    _check_values(cp, layout, causal, heads=2, head_dim=3, seq=4 * cp, batch=2, seed=cp)


@given(
    cp=st.integers(1, 8),
    layout=st.sampled_from(CP_LAYOUTS),
    causal=st.booleans(),
    heads=st.integers(1, 3),
    head_dim=st.integers(1, 3),
    chunks=st.integers(1, 2),
    batch=st.integers(1, 2),
    seed=st.integers(0, 2**32 - 1),
)
def test_hypothesis_equal_one_device(cp, layout, causal, heads, head_dim, chunks, batch, seed):
    multiple = cp if layout == "contiguous" else 2 * cp
    _check_values(cp, layout, causal, heads, head_dim, chunks * multiple, batch, seed)


def test_is_a_rank_module_with_replicated_weights():
    attn = _attention(2, 2, True, np.random.default_rng(0))
    ring = RingAttention.from_full(attn, Group([0, 1]), 1)
    assert isinstance(ring, RankModule)
    assert ring.shard_axes == dict.fromkeys(attn.params)
    assert all(ring.params[n] is not attn.params[n] for n in attn.params)  # copies
    assert all(np.array_equal(ring.params[n], attn.params[n]) for n in attn.params)


# ---- structure: bytes, ring order, tags -------------------------------------------------


@pytest.mark.parametrize("cp", [1, 2, 3, 4])
@pytest.mark.parametrize("layout", CP_LAYOUTS)
def test_bytes_ring_order_and_tags(cp, layout):
    rng = np.random.default_rng(7)
    batch, seq, heads, head_dim = 2, 4 * cp, 2, 2
    attn = _attention(heads, head_dim, True, rng)
    d = heads * head_dim
    x, dy = rng.uniform(-1, 1, (batch, seq, d)), rng.uniform(-1, 1, (batch, seq, d))
    ranks = [3, 1, 0, 2][:cp] if cp == 4 else list(range(cp))  # ring order = group order
    group = Group(ranks)
    cluster = collsim.Cluster(collsim.topology.switch(max(ranks) + 1))
    result, *_ = _run(attn, x, dy, cp, layout, group, cluster)
    transfers = result.trace.transfers
    assert all(isinstance(t.tag, RingMessage) for t in transfers)
    for t in transfers:  # every message goes to the next cp rank
        assert t.dst == ranks[(ranks.index(t.src) + 1) % cp]
        assert t.tag.layer == "attn" and 1 <= t.tag.step <= cp
        assert (t.tag.kind, t.tag.phase) in {
            ("kv", "forward"),
            ("kv", "backward"),
            ("dkv", "backward"),
        }
    for r in ranks:
        mine = [t for t in transfers if t.src == r]
        for phase, kinds in (("forward", {"kv": cp - 1}), ("backward", {"kv": cp - 1, "dkv": cp})):
            sent = [t for t in mine if t.tag.phase == phase]
            expected = ring_attention_bytes(batch, seq, d, cp, 8, pass_=phase)
            assert sum(t.nbytes for t in sent) == expected
            received = [t for t in transfers if t.dst == r and t.tag.phase == phase]
            assert sum(t.nbytes for t in received) == expected
            for kind, hops in kinds.items():
                steps = sorted(t.tag.step for t in sent if t.tag.kind == kind)
                assert steps == list(range(1, hops + 1)) if cp > 1 else steps == []


def test_bytes_closed_form_values():
    # forward (cp-1)·2·B·(S/cp)·D·b; backward (2cp-1)·2·B·(S/cp)·D·b
    assert ring_attention_bytes(1, 4096, 4096, 8, 2) == 7 * 2 * 512 * 4096 * 2
    assert ring_attention_bytes(1, 4096, 4096, 8, 2, pass_="backward") == 15 * 2 * 512 * 4096 * 2
    assert ring_attention_bytes(4, 64, 16, 1, 4) == 0
    assert ring_attention_bytes(4, 64, 16, 1, 4, pass_="backward") == 0


# ---- load balance --------------------------------------------------------------------------


def _flops_by_rank(cp, layout, causal, pass_="forward"):
    attn = _attention(2, 4, causal, np.random.default_rng(0))
    group = Group(list(range(cp)))
    key = "forward" if pass_ == "forward" else "backward_input"
    return [
        RingAttention.from_full(attn, group, i, layout).attention_flops((3, 48 // cp, 8))[key]
        for i in range(cp)
    ]


@pytest.mark.parametrize("cp", [1, 2, 3, 4, 6, 8])
@pytest.mark.parametrize("pass_", ["forward", "backward"])
def test_causal_flops_by_layout(cp, pass_):
    if 48 % (2 * cp):
        pytest.fail(f"seq 48 must split over cp={cp}")  # keeps the parametrisation honest
    balanced = _flops_by_rank(cp, "balanced", True, pass_)
    contiguous = _flops_by_rank(cp, "contiguous", True, pass_)
    unit = 3 * 2 * score_flops(4, pass_)  # B·H·f: one (query, key) score
    # the reference: a causal query at position t scores keys 0 … t, its own included
    for layout, flops in (("balanced", balanced), ("contiguous", contiguous)):
        kept = [sum(int(t) + 1 for t in token_positions(48, cp, i, layout)) for i in range(cp)]
        assert flops == [unit * n for n in kept]
        assert flops == causal_attention_flops(
            48, cp, layout, batch=3, heads=2, head_dim=4, pass_=pass_
        )
    assert len(set(balanced)) == 1  # every rank the same
    assert sum(balanced) == sum(contiguous) == unit * 48 * 49 // 2
    tile, mean = 48 // cp, sum(contiguous) / cp
    assert contiguous == sorted(contiguous)
    assert contiguous[-1] == unit * ((cp - 1) * tile**2 + tile * (tile + 1) // 2)
    assert contiguous[-1] / mean < (2 * cp - 1) / cp or cp == 1  # the large-tile limit
    dense = _flops_by_rank(cp, "contiguous", False, pass_)
    assert dense == causal_attention_flops(48, cp, "balanced", 3, 2, 4, pass_, causal=False)
    assert dense == [unit * 48 * 48 / cp] * cp


@pytest.mark.parametrize("layout", CP_LAYOUTS)
def test_ring_step_spans_add_up_to_attention_flops(layout):
    cp, rng = 4, np.random.default_rng(3)
    attn = _attention(2, 2, True, rng)
    x = dy = rng.uniform(-1, 1, (1, 16, 4))
    cluster = collsim.Cluster(collsim.topology.switch(cp), compute_rate=1e9)
    result, *_ = _run(attn, x, dy, cp, layout, cluster=cluster)
    for r in range(cp):
        flops = RingAttention.from_full(attn, Group(list(range(cp))), r, layout)
        expected = flops.attention_flops((1, 16 // cp, 4))
        spans = [c for c in result.trace.computes if c.rank == r and isinstance(c.meta, RingStep)]
        assert [c.meta.step for c in spans] == [1, 2, 3, 4] * 2
        assert [c.meta.kv_owner for c in spans[:4]] == [(r - s) % cp for s in range(cp)]
        assert isinstance(spans[0].meta, LayerPass) and spans[0].meta.layer == "attn"
        for kind in ("forward", "backward_input"):
            seconds = sum(c.end - c.start for c in spans if c.meta.kind == kind)
            assert seconds == pytest.approx(expected[kind] / 1e9, rel=1e-12)


# ---- overlap -------------------------------------------------------------------------------


def test_kv_transfer_overlaps_the_step_compute():
    cp, rng = 4, np.random.default_rng(5)
    attn = _attention(2, 8, False, rng)
    x = dy = rng.uniform(-1, 1, (2, 64, 16))
    cluster = collsim.Cluster(
        collsim.topology.ring(cp, bandwidth="10GB/s", latency="1us"), compute_rate=1e12
    )
    result, *_ = _run(attn, x, dy, cp, "contiguous", cluster=cluster)
    computes = [c for c in result.trace.computes if isinstance(c.meta, RingStep)]
    kv = [t for t in result.trace.transfers if t.tag.kind == "kv"]
    overlapping = [
        (t, c)
        for t in kv
        for c in computes
        if c.rank == t.src and t.start < c.end and c.start < t.end and c.meta.step == t.tag.step
    ]
    assert overlapping, "no K/V transfer ran while its sender computed the same ring step"
    assert {t.tag.phase for t, _ in overlapping} == {"forward", "backward"}


# ---- errors --------------------------------------------------------------------------------


def _forward_error(attn, x, cp=2, layout="balanced", seq=None):
    group = Group(list(range(cp)))

    def program(rank):
        ring = RingAttention.from_full(attn, group, rank.id, layout=layout, seq=seq)
        yield from ring.forward(rank, x)

    with pytest.raises(ConfigError) as info:
        collsim.Cluster(collsim.topology.switch(cp)).run(program)
    return str(info.value)


def test_error_seq_not_divisible_for_the_layout():
    attn = _attention(2, 2, True, np.random.default_rng(0))
    message = _forward_error(attn, np.zeros((1, 3, 4)))  # seq 6 over cp 2, balanced
    assert "seq=6" in message and "2·cp = 4" in message and "nearest valid seq: 4 or 8" in message
    with pytest.raises(ConfigError, match=r"seq=10 .*nearest valid seq: 8 or 12"):
        RingAttention.from_full(attn, Group([0, 1, 2, 3]), 0, "contiguous", seq=10)


def test_error_unknown_layout_names_the_nearest():
    attn = _attention(2, 2, True, np.random.default_rng(0))
    with pytest.raises(ConfigError, match=r"'balance'.*nearest valid choice: 'balanced'"):
        RingAttention.from_full(attn, Group([0, 1]), 0, layout="balance")


def test_error_group_size_and_rank_mismatch():
    attn = _attention(2, 2, True, np.random.default_rng(0))
    message = _forward_error(attn, np.zeros((1, 4, 4)), seq=16)  # 4 tokens = seq 8 over cp 2
    assert "seq=8" in message and "seq=16" in message and "(B, 8, 4)" in message
    with pytest.raises(ConfigError, match=r"cp_rank=2 .*choose 0\.\.1"):
        RingAttention.from_full(attn, Group([0, 1]), 2)
    group = Group([0, 1])

    def wrong_rank(rank):
        ring = RingAttention.from_full(attn, group, 1 - rank.id)
        yield from ring.forward(rank, np.zeros((1, 2, 4)))

    with pytest.raises(ConfigError, match=r"holds cp rank 1 .* runs on rank 0"):
        collsim.Cluster(collsim.topology.switch(2)).run(wrong_rank)


def test_error_closed_form_arguments():
    with pytest.raises(ConfigError, match=r"pass_='backwards'.*nearest valid choice: 'backward'"):
        ring_attention_bytes(1, 8, 4, 2, 2, pass_="backwards")
    with pytest.raises(ConfigError, match=r"cp=0"):
        ring_attention_bytes(1, 8, 4, 0, 2)
    with pytest.raises(ConfigError, match=r"seq=12 .*nearest valid seq: 8 or 16"):
        causal_attention_flops(12, 4, "balanced")
