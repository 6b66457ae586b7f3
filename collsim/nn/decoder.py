"""A decoder-only language model that generates greedily with a KV cache: the inference oracle.

Token and position embeddings, ``layers`` pre-LayerNorm :class:`~collsim.nn.TransformerBlock`
s (causal), a final LayerNorm and a language-model head to ``vocab`` logits (GPT-2's
shape).  :meth:`Decoder.generate` runs inference as a server does: *prefill* the whole
prompt at once (filling the KV cache), take the most likely next token (greedy
sampling), then *decode* one token per step, each attending over the cache.  Weights
come from a seed, so the generated tokens are a deterministic function of
(config, prompt): the tensor- and pipeline-parallel runs on the cluster
(:mod:`collsim.parallel.inference`) are checked against this one device.

Examples
--------
>>> import numpy as np
>>> model = Decoder.init(DecoderConfig(vocab=32, hidden=16, heads=2, layers=2))
>>> prompt = np.array([[1, 2, 3, 4]])  # (B, T) token ids
>>> out = model.generate(prompt, new_tokens=3)
>>> out.tokens.shape, out.logits.shape  # (B, new) ids and the (B, new, vocab) logits
((1, 3), (1, 3, 32))
>>> whole = np.concatenate([prompt, out.tokens[:, :-1]], axis=1)  # recompute, no cache
>>> bool(np.allclose(model.full_logits(whole)[:, -3:], out.logits))
True
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..errors import ConfigError
from .blocks import TransformerBlock
from .kv_cache import LayerKV, cached_attention
from .layers import LayerNorm, Linear

__all__ = ["DecoderConfig", "Decoder", "Generation", "greedy_token", "check_prompt"]


@dataclass(frozen=True)
class DecoderConfig:
    """The decoder's shape and the seed of its weights."""

    vocab: int = 128  # token ids 0 .. vocab-1
    hidden: int = 64  # d_model: the width of the residual stream
    heads: int = 4  # attention heads; head_dim = hidden / heads
    layers: int = 4  # transformer blocks
    ffn_hidden: int | None = None  # the MLP's inner width; None: 4 · hidden
    max_len: int = 256  # positions: prompt plus generated tokens must fit
    seed: int = 0  # same seed, same weights, same tokens

    def __post_init__(self):
        for name in ("vocab", "hidden", "heads", "layers", "max_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"decoder {name}={value!r} must be a positive integer")
        if self.ffn_hidden is not None and (
            not isinstance(self.ffn_hidden, int) or self.ffn_hidden < 1
        ):
            raise ConfigError(f"decoder ffn_hidden={self.ffn_hidden!r} must be a positive integer")
        if self.hidden % self.heads:
            nearest = min(
                (h for h in range(1, self.hidden + 1) if self.hidden % h == 0),
                key=lambda h: (abs(h - self.heads), h),
            )
            raise ConfigError(
                f"heads={self.heads} must divide hidden={self.hidden} (each head is "
                f"hidden/heads wide); the nearest valid heads is {nearest}"
            )


class Generation(NamedTuple):
    """What :meth:`Decoder.generate` returns."""

    tokens: np.ndarray  # (B, new_tokens) int64: the generated ids
    logits: np.ndarray  # (B, new_tokens, vocab): the logits each id was chosen from


def greedy_token(logits):
    """The most likely id of each row of ``logits`` (..., vocab): greedy sampling.

    Ties go to the lowest id (``numpy.argmax``), so the choice is deterministic.

    >>> greedy_token(np.array([[0.1, 2.0, 2.0], [3.0, 0.0, 1.0]]))
    array([1, 0])
    """
    return np.argmax(logits, axis=-1).astype(np.int64)


def check_prompt(prompt, config, new_tokens):
    """The prompt as a (B, T) int64 array, or a ConfigError naming what is wrong."""
    prompt = np.asarray(prompt)
    if prompt.ndim != 2 or min(prompt.shape) < 1 or not np.issubdtype(prompt.dtype, np.integer):
        raise ConfigError(
            f"a prompt is a (batch, length) array of integer token ids, got dtype "
            f"{prompt.dtype} and shape {prompt.shape}"
        )
    if prompt.min() < 0 or prompt.max() >= config.vocab:
        bad = int(prompt.max() if prompt.max() >= config.vocab else prompt.min())
        raise ConfigError(f"token id {bad} is outside the vocabulary 0..{config.vocab - 1}")
    if isinstance(new_tokens, bool) or not isinstance(new_tokens, int) or new_tokens < 1:
        raise ConfigError(f"new_tokens={new_tokens!r} must be a positive integer")
    if prompt.shape[1] + new_tokens > config.max_len:
        raise ConfigError(
            f"prompt length {prompt.shape[1]} + new_tokens {new_tokens} exceeds max_len="
            f"{config.max_len} positions; the most new_tokens that fit is "
            f"{max(config.max_len - prompt.shape[1], 0)}"
        )
    return prompt.astype(np.int64)


class Decoder:
    """Embeddings, transformer blocks, final LayerNorm and LM head, all float64 numpy."""

    def __init__(self, config, token_table, position_table, blocks, ln_f, head):
        self.config = config
        self.token_table = token_table  # (vocab, hidden)
        self.position_table = position_table  # (max_len, hidden)
        self.blocks = list(blocks)  # TransformerBlock per layer, causal
        self.ln_f = ln_f  # LayerNorm(hidden)
        self.head = head  # Linear(hidden, vocab), no bias

    @classmethod
    def init(cls, config=None):
        """Weights from ``config.seed``; biases and LayerNorms random too, so that a
        parallel run that adds a bias twice, or on no rank, is caught."""
        config = DecoderConfig() if config is None else config
        rng = np.random.default_rng(config.seed)
        d = config.hidden
        token_table = rng.normal(0.0, 1.0, (config.vocab, d))
        position_table = rng.normal(0.0, 0.5, (config.max_len, d))
        blocks = [
            TransformerBlock.init(d, config.heads, rng, hidden=config.ffn_hidden)
            for _ in range(config.layers)
        ]
        ln_f = LayerNorm.init(d)
        for module in [*blocks, ln_f]:
            for name, value in module.params.items():
                if value.ndim == 1:  # biases, gamma and beta: in place
                    centre = 1.0 if name.endswith("gamma") else 0.0
                    value[...] = centre + rng.normal(0.0, 0.1, value.shape)
        head = Linear.init(d, config.vocab, rng, bias=False)
        return cls(config, token_table, position_table, blocks, ln_f, head)

    @property
    def head_dim(self):
        return self.config.hidden // self.config.heads

    def new_cache(self, batch, capacity):
        """One empty :class:`LayerKV` per layer for ``capacity`` tokens."""
        return [LayerKV(batch, self.config.heads, self.head_dim, capacity) for _ in self.blocks]

    def embed(self, tokens, start):
        """Token plus position embeddings of ``tokens`` (B, T) at positions start.. (B, T, D)."""
        return self.token_table[tokens] + self.position_table[start : start + tokens.shape[1]]

    def layer_step(self, block, x, cache):
        """One block over the new tokens ``x`` (B, T_new, D), reading and filling ``cache``."""
        h = x + cached_attention(block.attn, block.ln1.forward(x)[0], cache)  # (B, T, D)
        return h + block.mlp.forward(block.ln2.forward(h)[0])[0]  # (B, T, D)

    def logits(self, h):
        """Logits (..., vocab) of the final hidden states ``h`` (..., D)."""
        return self.head.forward(self.ln_f.forward(h)[0])[0]

    def hidden_states(self, tokens, cache):
        """The last block's output (B, T, D) for ``tokens`` (B, T) after the cache's tokens."""
        x = self.embed(tokens, cache[0].length)
        for block, layer_cache in zip(self.blocks, cache, strict=True):
            x = self.layer_step(block, x, layer_cache)
        return x

    def step(self, tokens, cache):
        """Logits (B, T, vocab) of ``tokens`` (B, T) following the ``cache``'s tokens."""
        return self.logits(self.hidden_states(tokens, cache))

    def generate(self, prompt, new_tokens):
        """Prefill ``prompt`` (B, T), then decode ``new_tokens`` greedily: a :class:`Generation`."""
        prompt = check_prompt(prompt, self.config, new_tokens)
        cache = self.new_cache(prompt.shape[0], prompt.shape[1] + new_tokens)
        # only the last position's logits pick a token: (B, vocab)
        step_logits = self.logits(self.hidden_states(prompt, cache)[:, -1])  # prefill
        tokens, logits = [], []
        for _ in range(new_tokens):
            tokens.append(greedy_token(step_logits))  # (B,)
            logits.append(step_logits)
            if len(tokens) < new_tokens:  # decode: one token each step
                step_logits = self.logits(self.hidden_states(tokens[-1][:, None], cache)[:, -1])
        return Generation(np.stack(tokens, axis=1), np.stack(logits, axis=1))

    def full_logits(self, tokens):
        """Logits (B, T, vocab) of the whole sequence at once, no cache (the check)."""
        tokens = np.asarray(tokens)
        x = self.embed(tokens, 0)
        for block in self.blocks:
            x = block.forward(x)[0]
        return self.logits(x)

    def kv_cache_bytes(self, batch, tokens):
        """Bytes of the KV cache for ``tokens`` positions: 2 · layers · B · tokens · hidden · 8."""
        return 2 * len(self.blocks) * batch * tokens * self.config.hidden * 8

    def __repr__(self):
        c = self.config
        return (
            f"Decoder(vocab={c.vocab}, hidden={c.hidden}, heads={c.heads}, layers={c.layers}, "
            f"max_len={c.max_len})"
        )
