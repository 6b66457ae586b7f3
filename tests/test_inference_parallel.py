"""Tensor-, context- and pipeline-parallel greedy decoding on the cluster equals one device.

The oracle is ``collsim.nn.Decoder.generate`` (itself checked against recomputing the
whole sequence in tests/test_nn_decoder.py).  Tokens must be equal; logits bit for bit
with pipeline parallelism alone (a stage runs the same numpy in the same order) and to
rounding with tp or cp (the all-reduce sums tp partial products where one device does one
matmul, and cp splits the softmax's sums over the keys: the order of a floating-point sum
differs, nothing else).
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import collsim
from collsim.errors import ConfigError
from collsim.nn import Decoder, DecoderConfig
from collsim.parallel.inference import InferenceSplit, StageHandoff, generate_on_cluster

RTOL, ATOL = 1e-10, 1e-12


def run_on_switch(model, prompt, new_tokens, split):
    cluster = collsim.Cluster(collsim.topology.switch(split.world_size))
    return generate_on_cluster(model, prompt, new_tokens, split, cluster)


@st.composite
def inference_cases(draw):
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    cp = draw(st.sampled_from([c for c in (1, 2, 4) if tp * c <= 8]))
    pp = draw(st.sampled_from([p for p in (1, 2, 4) if tp * cp * p <= 8]))
    heads = tp * draw(st.integers(1, 2))
    config = DecoderConfig(
        vocab=draw(st.integers(2, 40)),
        hidden=heads * draw(st.integers(1, 3)),
        heads=heads,
        layers=pp * draw(st.integers(1, 2)),
        max_len=32,
        seed=draw(st.integers(0, 2**16)),
    )
    batch, prompt_len = draw(st.integers(1, 3)), cp * draw(st.integers(1, 10 // cp))
    prompt = np.random.default_rng(config.seed).integers(0, config.vocab, (batch, prompt_len))
    return config, InferenceSplit(tp=tp, pp=pp, cp=cp), prompt, draw(st.integers(1, 5))


@given(inference_cases())
def test_parallel_decoding_generates_what_one_device_generates(case):
    config, split, prompt, new_tokens = case
    model = Decoder.init(config)
    expected = model.generate(prompt, new_tokens)
    run = run_on_switch(model, prompt, new_tokens, split)
    assert np.array_equal(run.tokens, expected.tokens)
    if split.tp == split.cp == 1:
        assert run.logits.tobytes() == expected.logits.tobytes()
    else:
        np.testing.assert_allclose(run.logits, expected.logits, rtol=RTOL, atol=ATOL)
    last_stage = run.outputs[(split.pp - 1) * split.cp * split.tp :]
    assert all(np.array_equal(out.tokens, run.tokens) for out in last_stage)
    assert len(run.token_times) == new_tokens
    assert all(b > a for a, b in zip(run.token_times, run.token_times[1:], strict=False))


@pytest.mark.parametrize(
    "algorithm", ["ring", "tree", "halving_doubling", "naive", "one_shot", "two_shot"]
)
def test_every_all_reduce_algorithm_gives_the_same_tokens(algorithm):
    model = Decoder.init(DecoderConfig(vocab=48, hidden=32, heads=4, layers=2))
    prompt = np.array([[4, 8, 15, 16, 23, 42]])
    run = run_on_switch(model, prompt, 4, InferenceSplit(tp=4, algorithm=algorithm))
    assert np.array_equal(run.tokens, model.generate(prompt, 4).tokens)
    assert {call.algorithm for call in run.all_reduces} == {algorithm}


def test_two_all_reduces_a_layer_a_token_inside_each_stage_and_a_sharded_cache():
    config = DecoderConfig(vocab=64, hidden=64, heads=4, layers=4)
    model, prompt, new_tokens = Decoder.init(config), np.arange(16).reshape(2, 8), 5
    split = InferenceSplit(tp=2, pp=2)
    run = run_on_switch(model, prompt, new_tokens, split)
    # each of the 2 stages' TP groups: 2 layers x 2 all-reduces x 5 steps
    assert len(run.all_reduces) == 2 * 2 * 2 * new_tokens
    decode = [c for c in run.all_reduces if c.message_bytes == 2 * 1 * 64 * 8]  # (B, 1, hidden)
    prefill = [c for c in run.all_reduces if c.message_bytes == 2 * 8 * 64 * 8]  # (B, 8, hidden)
    assert (len(prefill), len(decode)) == (8, 32)
    # a ring all-reduce of 2 ranks: each receives half the buffer twice = the buffer
    assert {c.received_bytes for c in decode} == {2 * 64 * 8}
    stages = {(t.src // 2, t.dst // 2) for t in run.result.trace.transfers}
    handoffs = [t for t in run.result.trace.transfers if isinstance(t.meta, StageHandoff)]
    assert stages == {(0, 0), (1, 1), (0, 1), (1, 0)}
    assert sum(t.meta.what == "activations" for t in handoffs) == 2 * new_tokens  # tp=2 pairs
    assert sum(t.meta.what == "token" for t in handoffs) == 2 * (new_tokens - 1)
    # the collectives stay inside a stage; only handoffs cross
    collective = [t for t in run.result.trace.transfers if not isinstance(t.meta, StageHandoff)]
    assert len(collective) == 2 * 40 * 2  # 2 stages' groups, 40 calls, 2 transfers each
    assert all(t.src // 2 == t.dst // 2 for t in collective)
    # the KV cache by heads: 2 layers a stage, heads/tp of the width, prompt + new tokens
    per_rank = 2 * 2 * 2 * (8 + new_tokens) * (64 // 2) * 8  # K and V, layers, B, T, width
    assert {out.cache_bytes for out in run.outputs} == {per_rank}


@pytest.mark.parametrize(
    "config, split, message",
    [
        (
            DecoderConfig(hidden=64, heads=4, layers=4),
            InferenceSplit(tp=8),
            r"tp=8 must divide heads=4 .*nearest first: 4, 2, 1",
        ),
        (
            DecoderConfig(hidden=64, heads=4, layers=6),
            InferenceSplit(pp=4),
            r"pp=4 must divide layers=6.*nearest first: 3, 2, 6, 1",
        ),
    ],
)
def test_a_split_that_does_not_divide_the_model_is_refused(config, split, message):
    with pytest.raises(ConfigError, match=message):
        run_on_switch(Decoder.init(config), np.array([[1, 2]]), 2, split)


def test_a_cluster_of_the_wrong_size_is_refused():
    model = Decoder.init(DecoderConfig(hidden=16, heads=2, layers=2))
    with pytest.raises(
        ConfigError,
        match="tp=2 x pp=2 needs 4 ranks, but the cluster has 2: give a cluster of at least 4",
    ):
        generate_on_cluster(
            model,
            np.array([[1]]),
            1,
            InferenceSplit(tp=2, pp=2),
            collsim.Cluster(collsim.topology.switch(2)),
        )


def test_context_parallel_splits_the_prompt_and_its_cache_and_combines_the_softmax():
    config = DecoderConfig(vocab=64, hidden=32, heads=4, layers=2)
    model, prompt, new_tokens = Decoder.init(config), np.arange(16).reshape(2, 8), 4
    run = run_on_switch(model, prompt, new_tokens, InferenceSplit(tp=2, cp=2))
    assert np.array_equal(run.tokens, model.generate(prompt, new_tokens).tokens)
    # ranks (cp, tp): 0, 1 prefill tokens 0..3, ranks 2, 3 tokens 4..7 and keep the new ones
    width = 2 * 2 * 2 * (32 // 2) * 8  # K and V, 2 layers, B = 2, this rank's heads, float64
    assert [out.cache_bytes for out in run.outputs] == [4 * width] * 2 + [(4 + 4) * width] * 2
    cp_calls = {}
    for t in run.result.trace.transfers:
        if getattr(t.tag, "dim", None) == "cp":
            cp_calls.setdefault(t.tag.collective, set()).add((t.tag.group, t.tag.call))
    # prefill: keys and values all-gathered, 2 a layer; decode: max, then sum, 2 a layer
    # a step; each of the 2 CP groups (one a TP rank)
    assert len(cp_calls["all_gather"]) == 2 * 2 * 2
    assert len(cp_calls["all_reduce"]) == 2 * 2 * 2 * (new_tokens - 1)
    assert len(cp_calls["broadcast"]) == 2 * new_tokens  # the token from the last CP rank


def test_a_prompt_that_cp_does_not_split_is_refused():
    model = Decoder.init(DecoderConfig(hidden=16, heads=2, layers=2))
    with pytest.raises(
        ConfigError, match=r"cp=4 must divide the prompt's 6 tokens.*first: 3, 2, 6, 1"
    ):
        run_on_switch(model, np.ones((1, 6), dtype=int), 2, InferenceSplit(cp=4))
