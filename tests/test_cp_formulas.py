"""The context-parallel closed forms added for issue 25 (items 2 and 17), as properties.

``causal_pairs`` against a count from the token positions themselves, ``causal_balance``
against its large-tile limit, and the fuzz rules (tests/fuzzkit.py) for
``context_parallel_bytes``, ``causal_pairs`` and ``ring_attention_hops``: a call succeeds or
raises a collsim error naming the bad value.
"""

from fuzzkit import check_api
from hypothesis import given
from hypothesis import strategies as st

from collsim.parallel.context.formulas import (
    causal_balance,
    causal_pairs,
    context_parallel_bytes,
    ring_attention_hops,
)
from collsim.parallel.context.layouts import token_positions

LAYOUTS = ("contiguous", "balanced")


@given(
    cp=st.integers(1, 8),
    tiles=st.integers(1, 6),
    layout=st.sampled_from(LAYOUTS),
    causal=st.booleans(),
)
def test_causal_pairs_count_what_the_mask_keeps(cp, tiles, layout, causal):
    seq = 2 * cp * tiles  # splits in either layout
    pairs = causal_pairs(seq, cp, layout, causal)
    for rank in range(cp):  # a causal query at position t keeps keys 0 … t
        kept = [int(t) + 1 if causal else seq for t in token_positions(seq, cp, rank, layout)]
        assert pairs[rank] == sum(kept)
    balance = causal_balance(seq, cp, layout, causal)
    if causal and layout == "contiguous" and cp > 1:  # below the large-tile limit, nearing it
        assert 1 < balance.max_over_mean < balance.max_limit == (2 * cp - 1) / cp
        assert balance.min_limit < balance.min_over_mean < 1
    else:
        assert balance.max_over_mean == balance.min_over_mean == 1.0


ODD = [0, -1, 2.5, True, "8", None, 10**30]


KEYS = [
    "batch",
    "seq",
    "hidden",
    "cp",
    "bytes_per_element",
    "tp",
    "layers",
    "microbatches",
    "steps",
]


@given(
    key=st.sampled_from(KEYS),
    value=st.sampled_from(ODD),
    variant=st.sampled_from(["ring", "all-to-all", "rings"]),
)
def test_context_parallel_bytes_succeeds_or_names_the_value(key, value, variant):
    sizes = dict(batch=2, seq=16, hidden=8, cp=2, bytes_per_element=8, tp=2)
    sizes[key] = value
    bad = variant if variant == "rings" else value
    outcome = check_api(context_parallel_bytes, variant, bad=bad, **sizes)
    if outcome.error is None:
        assert isinstance(outcome.value, int) and outcome.value >= 0


@given(fn=st.sampled_from([causal_pairs, causal_balance]), value=st.sampled_from(ODD))
def test_pair_counts_succeed_or_name_the_value(fn, value):
    check_api(fn, value, 2, "balanced", bad=value)
    check_api(fn, 8, value, "contiguous", bad=value)
    check_api(ring_attention_hops, value, bad=value)
