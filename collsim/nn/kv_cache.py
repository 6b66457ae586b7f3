"""The KV cache: one layer's keys and values for the tokens seen so far, and attention over it.

Generating text token by token, a decoder's query for the new token attends to the keys
and values of every earlier token.  Those do not change once computed (the mask is causal),
so a server keeps them instead of recomputing the whole sequence at every step: prefill
writes the prompt's keys and values, and each decode step appends one token's and attends
over all of them.  The cache is allocated up front for ``capacity`` tokens, as vLLM and
PyTorch's static cache do, so its memory is known before the first token.

Split by heads (tensor parallelism), a rank's cache holds only its heads: pass the head
shard of a :class:`~collsim.nn.MultiHeadAttention` and a cache of that many heads.

Examples
--------
Prefill three tokens, then decode one: the same output as attention over all four at once.

>>> import numpy as np
>>> from collsim.nn import MultiHeadAttention
>>> rng = np.random.default_rng(0)
>>> attn = MultiHeadAttention.init(8, 2, rng)
>>> x = rng.uniform(-1, 1, size=(1, 4, 8))  # (B, T, D)
>>> cache = LayerKV(batch=1, n_heads=2, head_dim=4, capacity=4)
>>> _ = cached_attention(attn, x[:, :3], cache)  # prefill: tokens 0..2
>>> last = cached_attention(attn, x[:, 3:], cache)  # decode: token 3
>>> bool(np.allclose(last, attn.forward(x)[0][:, 3:])), cache.length
(True, 4)
"""

import math

import numpy as np

from ..errors import ConfigError
from .layers import SOFTMAX_FLOPS, softmax

__all__ = ["LayerKV", "cached_attention", "cached_attention_flops", "qkv_heads", "heads_output"]


class LayerKV:
    """Keys and values of one attention layer, ``(B, H, capacity, head_dim)`` each.

    ``length`` tokens are filled; :meth:`extend` writes the next ones and returns views
    of everything filled so far.
    """

    def __init__(self, batch, n_heads, head_dim, capacity, dtype=np.float64):
        shape = (int(batch), int(n_heads), int(capacity), int(head_dim))
        if min(shape) < 1:
            raise ConfigError(
                f"a KV cache needs batch, heads, capacity and head_dim >= 1, got {shape}"
            )
        self.keys = np.zeros(shape, dtype=dtype)  # (B, H, capacity, hd)
        self.values = np.zeros(shape, dtype=dtype)  # (B, H, capacity, hd)
        self.length = 0

    @property
    def capacity(self):
        return self.keys.shape[2]

    @property
    def nbytes(self):
        """Bytes held (keys and values, the whole capacity: allocated up front)."""
        return self.keys.nbytes + self.values.nbytes

    def extend(self, k, v):
        """Append ``k``, ``v`` (B, H, T_new, hd); return keys, values of all tokens so far."""
        start, stop = self.length, self.length + k.shape[2]
        if stop > self.capacity:
            raise ConfigError(
                f"the KV cache holds {self.capacity} tokens; {stop} would not fit: "
                f"allocate a capacity of at least {stop} (prompt plus new tokens)"
            )
        self.keys[:, :, start:stop] = k
        self.values[:, :, start:stop] = v
        self.length = stop
        return self.keys[:, :, :stop], self.values[:, :, :stop]


def qkv_heads(attn, x):
    """Queries, keys and values of ``x`` (B, T, D), each ``(B, H, T, head_dim)``."""
    pairs = ((attn.wq, attn.bq), (attn.wk, attn.bk), (attn.wv, attn.bv))
    return tuple(attn._project(x, w, b) for w, b in pairs)


def heads_output(attn, y):
    """The output projection of the heads' results ``y`` (B, H, T, head_dim): (B, T, D)
    (no ``bo``: on a head shard, the partial sum the tensor-parallel all-reduce completes)."""
    return attn._merge(y) @ attn.wo


def cached_attention(attn, x, cache):
    """Attention of the new tokens ``x`` (B, T_new, D) over the cache and themselves.

    Appends their keys and values to ``cache`` (a :class:`LayerKV` with ``attn``'s heads)
    and returns the output ``(B, T_new, D)``: on a head shard (no ``bo``) the partial sum
    that the tensor-parallel all-reduce completes.
    """
    batch, new, _ = attn.output_shape(np.shape(x))
    if cache.keys.shape[:2] != (batch, attn.n_heads) or cache.keys.shape[3] != attn.head_dim:
        raise ConfigError(
            f"a KV cache of (batch, heads, head_dim) = "
            f"{cache.keys.shape[:2] + cache.keys.shape[3:]} does not fit attention over "
            f"{(batch, attn.n_heads, attn.head_dim)}"
        )
    past = cache.length
    q, k, v = qkv_heads(attn, x)  # (B, H, T_new, hd) each
    keys, values = cache.extend(k, v)  # (B, H, past + T_new, hd)
    scores = (q @ keys.swapaxes(-1, -2)) / math.sqrt(attn.head_dim)  # (B, H, T_new, S)
    if attn.causal:
        # query i sits at position past + i and may not see a key after it
        future = np.arange(past + new)[None, :] > (past + np.arange(new))[:, None]
        scores = np.where(future, -np.inf, scores)
    out = heads_output(attn, softmax(scores, axis=-1) @ values)  # (B, T_new, D)
    return out if attn.bo is None else out + attn.bo


def cached_attention_flops(attn, batch, new, past):
    """FLOPs of :func:`cached_attention` for ``new`` tokens after ``past`` cached ones.

    Four projections of the new tokens, ``QK^T`` and ``AV`` over ``past + new`` keys, and
    the softmax and scaling per score (as :meth:`MultiHeadAttention.flops` counts them).

    >>> import numpy as np
    >>> from collsim.nn import MultiHeadAttention
    >>> attn = MultiHeadAttention.init(8, 2, np.random.default_rng(0))
    >>> cached_attention_flops(attn, batch=1, new=1, past=3)  # 4·2·8·8 + 2·2·2·4·4 + 6·2·4
    688
    """
    inner = attn.n_heads * attn.head_dim
    keys = past + new
    projections = 4 * 2 * batch * new * attn.d_model * inner
    products = 2 * 2 * batch * attn.n_heads * new * keys * attn.head_dim
    scores = batch * attn.n_heads * new * keys
    return projections + products + (SOFTMAX_FLOPS[0] + 1) * scores
