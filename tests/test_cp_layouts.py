"""The context-parallel sequence layouts: contiguous and load-balanced (Megatron-LM, Llama 3).

Round trips shard -> gather for every cp 1..8 and both layouts, the token positions
(each of 0..S-1 exactly once, in the rank's local order), the balanced layout's promise
(every rank's causal work, the sum over its query positions p of the p+1 keys it sees, is
the same) and the refusals (the value, the rule, the nearest valid choice).
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsim.errors import ConfigError
from collsim.parallel.context.layouts import (
    CP_LAYOUTS,
    check_sequence,
    gather_sequence,
    shard_sequence,
    token_positions,
)

CHUNKS_PER_RANK = {"contiguous": 1, "balanced": 2}


def causal_work(positions):
    """Keys a rank's queries see under a causal mask: p + 1 for the query at p."""
    return int(np.sum(positions + 1))


@given(
    cp=st.integers(1, 8),
    layout=st.sampled_from(CP_LAYOUTS),
    per_chunk=st.integers(1, 3),
    batch=st.integers(1, 2),
    width=st.integers(1, 3),
    axis=st.sampled_from([0, 1, 2, -1]),
)
def test_shard_then_gather_gives_the_sequence_back(cp, layout, per_chunk, batch, width, axis):
    seq = CHUNKS_PER_RANK[layout] * cp * per_chunk
    shape = [batch, width, width]
    shape[axis] = seq
    x = np.arange(np.prod(shape), dtype=float).reshape(shape)
    parts = [shard_sequence(x, cp, i, layout, axis=axis) for i in range(cp)]
    for part in parts:
        assert part.shape[axis] == seq // cp
    np.testing.assert_array_equal(gather_sequence(parts, layout, axis=axis), x)
    # the parts are the tokens at token_positions, in that order
    for i, part in enumerate(parts):
        np.testing.assert_array_equal(part, np.take(x, token_positions(seq, cp, i, layout), axis))


@pytest.mark.parametrize("layout", CP_LAYOUTS)
@pytest.mark.parametrize("cp", range(1, 9))
def test_token_positions_cover_every_position_once(cp, layout):
    seq = CHUNKS_PER_RANK[layout] * cp * 3
    every = np.concatenate([token_positions(seq, cp, i, layout) for i in range(cp)])
    assert sorted(every.tolist()) == list(range(seq))
    assert every.dtype.kind == "i"


def test_balanced_positions_are_chunks_i_and_2cp_minus_1_minus_i():
    # cp = 4, seq = 16: 8 chunks of 2 tokens; rank 1 holds chunks 1 and 6
    assert token_positions(16, 4, 1, "balanced").tolist() == [2, 3, 12, 13]
    assert token_positions(16, 4, 3, "balanced").tolist() == [6, 7, 8, 9]
    assert token_positions(16, 4, 1, "contiguous").tolist() == [4, 5, 6, 7]


@pytest.mark.parametrize("per_chunk", [1, 2, 5])
@pytest.mark.parametrize("cp", range(1, 9))
def test_balanced_layout_gives_every_rank_equal_causal_work(cp, per_chunk):
    seq = 2 * cp * per_chunk
    balanced = {causal_work(token_positions(seq, cp, i, "balanced")) for i in range(cp)}
    assert len(balanced) == 1
    assert balanced.pop() * cp == seq * (seq + 1) // 2  # all of it, split evenly
    contiguous = [causal_work(token_positions(seq, cp, i, "contiguous")) for i in range(cp)]
    assert contiguous == sorted(set(contiguous))  # strictly more work on every later rank


@pytest.mark.parametrize(
    ("seq", "cp", "layout", "pieces"),
    [
        (12, 4, "balanced", ["seq=12", "cp=4", "2·cp = 8", "nearest valid seq: 8 or 16"]),
        (10, 4, "contiguous", ["seq=10", "cp = 4", "nearest valid seq: 8 or 12"]),
        (3, 4, "contiguous", ["seq=3", "nearest valid seq: 4"]),
        (5, 4, "balanced", ["seq=5", "nearest valid seq: 8"]),
    ],
)
def test_check_sequence_names_the_rule_and_the_nearest_lengths(seq, cp, layout, pieces):
    with pytest.raises(ConfigError) as info:
        check_sequence(seq, cp, layout)
    for piece in pieces:
        assert piece in str(info.value)


@given(seq=st.integers(1, 200), cp=st.integers(1, 8), layout=st.sampled_from(CP_LAYOUTS))
def test_check_sequence_refuses_exactly_the_lengths_that_do_not_divide(seq, cp, layout):
    chunks = CHUNKS_PER_RANK[layout] * cp
    if seq % chunks == 0:
        check_sequence(seq, cp, layout)
        return
    with pytest.raises(ConfigError) as info:
        check_sequence(seq, cp, layout)
    nearest = str(info.value).split("nearest valid seq: ")[1].split(" or ")
    assert all(int(n) % chunks == 0 and abs(int(n) - seq) < chunks for n in nearest)


@pytest.mark.parametrize(
    ("call", "pieces"),
    [
        (
            lambda: check_sequence(8, 2, "balance"),
            ["'balance'", "choice: 'balanced'"],
        ),
        (lambda: check_sequence(8, 2, "contig"), ["'contig'", "'contiguous'"]),
        (lambda: check_sequence(8, 0, "contiguous"), ["cp", "got 0"]),
        (lambda: check_sequence(8, True, "contiguous"), ["cp", "got True"]),
        (lambda: check_sequence(0, 2, "contiguous"), ["seq", "got 0"]),
        (lambda: check_sequence(8.0, 2, "contiguous"), ["seq", "got 8.0"]),
        (lambda: shard_sequence(np.zeros((1, 8)), 2, 2, "contiguous"), ["2", "0..1"]),
        (lambda: shard_sequence(np.zeros((1, 8)), 2, -1, "contiguous"), ["-1", "0..1"]),
        (lambda: shard_sequence(np.zeros((1, 8)), 2, 0, "contiguous", axis=2), ["axis=2"]),
        (lambda: shard_sequence(np.zeros((1, 6)), 2, 0, "balanced"), ["seq=6", "4 or 8"]),
        (lambda: gather_sequence([np.zeros((1, 2)), np.zeros((1, 4))], "contiguous"), ["[2, 4]"]),
        (lambda: gather_sequence([np.zeros((1, 3))], "balanced"), ["3", "odd"]),
        (lambda: gather_sequence([], "balanced"), ["none"]),
        (lambda: gather_sequence([np.zeros((1, 2))], "ring"), ["'ring'"]),
        (lambda: token_positions(9, 2, 0, "balanced"), ["seq=9", "8 or 12"]),
    ],
)
def test_bad_input_is_refused_with_the_value_and_the_rule(call, pieces):
    with pytest.raises(ConfigError) as info:
        call()
    for piece in pieces:
        assert piece in str(info.value)
