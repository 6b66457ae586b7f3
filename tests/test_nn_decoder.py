"""The inference oracle: greedy generation with a KV cache equals recomputing the sequence.

The reference is the training path's own forward (``TransformerBlock.forward`` over the
whole sequence, causal mask, no cache), which shares no attention code with
``cached_attention``: a wrong mask offset, a cache written at the wrong position or a
position embedding off by one changes the logits there.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsim.errors import ConfigError
from collsim.nn import Decoder, DecoderConfig, LayerKV, MultiHeadAttention, cached_attention

RTOL, ATOL = 1e-10, 1e-12


@st.composite
def decoder_cases(draw):
    heads = draw(st.integers(1, 4))
    hidden = heads * draw(st.integers(1, 4))
    config = DecoderConfig(
        vocab=draw(st.integers(2, 24)),
        hidden=hidden,
        heads=heads,
        layers=draw(st.integers(1, 3)),
        max_len=24,
        seed=draw(st.integers(0, 2**16)),
    )
    batch, prompt_len = draw(st.integers(1, 3)), draw(st.integers(1, 8))
    new_tokens = draw(st.integers(1, 6))
    prompt = np.random.default_rng(config.seed).integers(0, config.vocab, (batch, prompt_len))
    return config, prompt, new_tokens


@given(decoder_cases())
def test_cached_decode_equals_recomputing_the_whole_sequence(case):
    config, prompt, new_tokens = case
    model = Decoder.init(config)
    out = model.generate(prompt, new_tokens)
    # the logits of token i come from the sequence up to the token before it
    whole = np.concatenate([prompt, out.tokens[:, :-1]], axis=1)
    recomputed = model.full_logits(whole)[:, prompt.shape[1] - 1 :]
    np.testing.assert_allclose(out.logits, recomputed, rtol=RTOL, atol=ATOL)
    assert np.array_equal(out.tokens, np.argmax(recomputed, axis=-1))


def test_prefill_at_once_equals_feeding_the_prompt_token_by_token():
    model = Decoder.init(DecoderConfig(vocab=16, hidden=8, heads=2, layers=2, max_len=16))
    prompt = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]])
    at_once = model.step(prompt, model.new_cache(2, 5))
    cache = model.new_cache(2, 5)
    one_by_one = np.concatenate([model.step(prompt[:, [t]], cache) for t in range(5)], axis=1)
    np.testing.assert_allclose(at_once, one_by_one, rtol=RTOL, atol=ATOL)


def test_generation_is_a_function_of_the_seed_and_the_prompt():
    prompt = np.array([[1, 2, 3]])
    config = DecoderConfig(vocab=64, hidden=16, heads=4, layers=2)
    first = Decoder.init(config).generate(prompt, 8)
    again = Decoder.init(config).generate(prompt, 8)
    assert np.array_equal(first.tokens, again.tokens)
    assert first.logits.tobytes() == again.logits.tobytes()
    other = Decoder.init(DecoderConfig(vocab=64, hidden=16, heads=4, layers=2, seed=1))
    assert not np.array_equal(other.generate(prompt, 8).logits, first.logits)


def test_a_decode_step_without_the_cache_sees_no_context():
    # the natural wrong answer: run the new token through the model alone
    model = Decoder.init(DecoderConfig(vocab=32, hidden=16, heads=2, layers=2))
    prompt = np.array([[5, 6, 7, 8]])
    out = model.generate(prompt, 2)
    alone = model.step(out.tokens[:, :1], model.new_cache(1, 1))[:, -1]  # position 0, no past
    assert not np.allclose(alone, out.logits[:, 1])


def test_the_cache_holds_the_heads_of_a_shard_and_its_bytes():
    rng = np.random.default_rng(0)
    attn = MultiHeadAttention.init(8, 4, rng)
    cache = LayerKV(batch=2, n_heads=4, head_dim=2, capacity=5)
    assert cache.nbytes == 2 * (2 * 4 * 5 * 2) * 8  # keys and values, float64
    x = rng.uniform(-1, 1, (2, 5, 8))
    cached_attention(attn, x, cache)
    with pytest.raises(ConfigError, match="holds 5 tokens; 6 would not fit"):
        cached_attention(attn, x[:, :1], cache)
    with pytest.raises(ConfigError, match=r"does not fit attention over \(2, 4, 2\)"):
        cached_attention(attn, x, LayerKV(batch=2, n_heads=2, head_dim=2, capacity=5))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"hidden": 64, "heads": 5}, "heads=5 must divide hidden=64.*nearest valid heads is 4"),
        ({"layers": 0}, "layers=0 must be a positive integer"),
    ],
)
def test_bad_configs_name_the_value(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        DecoderConfig(**kwargs)


@pytest.mark.parametrize(
    "prompt, new_tokens, message",
    [
        ([[1, 200]], 2, "token id 200 is outside the vocabulary 0..127"),
        ([1, 2], 2, r"\(batch, length\) array"),
        ([[1.5, 2.0]], 2, r"integer token ids"),
        ([[1, 2]], 300, "the most new_tokens that fit is 254"),
    ],
)
def test_bad_prompts_name_the_value(prompt, new_tokens, message):
    with pytest.raises(ConfigError, match=message):
        Decoder.init().generate(prompt, new_tokens)
