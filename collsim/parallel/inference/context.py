"""Attention with the prompt, and its KV cache, split by tokens over a context-parallel group.

**Prefill.** CP rank c holds tokens ``c·L .. (c+1)·L`` of the prompt (L = prompt/cp).  It
projects its own queries, keys and values, keeps its keys and values in its cache, and
all-gathers everyone's keys and values over the CP group, so its queries see every earlier
token: the all-gather form of context parallelism that Llama 3's training used (the ring
form overlaps the same exchange with compute; the bytes are the same).

**Decode.** The new token is on every CP rank; the last CP rank keeps its keys and values.
Each rank scores the keys it holds; an all-reduce of the largest scores (op max) gives the
global maximum M, each rank sums exp(score - M) and the values weighted by them, and an
all-reduce of those sums gives the softmax's denominator and numerator over every key: the
exact softmax, split over the keys as flash-decoding splits it (Dao et al. 2023).

Both return the output projection of this rank's heads, the partial sum that the tensor-
parallel all-reduce completes.
"""

import math

import numpy as np

from ...nn.kv_cache import heads_output, qkv_heads
from ...nn.layers import softmax
from ..tensor.comm import all_gather_along

__all__ = ["prefill_attention", "decode_attention"]


def prefill_attention(rank, attn, x, cache, cp_group, cp_rank):
    """This CP rank's run of the prompt ``x`` (B, L, D) attending over the whole prompt."""
    run = x.shape[1]
    q, k, v = qkv_heads(attn, x)  # (B, H, L, hd) each
    cache.extend(k, v)  # this rank's run of the prompt stays here
    keys = yield from all_gather_along(rank, k, cp_group, 2)  # (B, H, cp·L, hd)
    values = yield from all_gather_along(rank, v, cp_group, 2)
    scores = (q @ keys.swapaxes(-1, -2)) / math.sqrt(attn.head_dim)  # (B, H, L, cp·L)
    positions = cp_rank * run + np.arange(run)  # of this rank's queries
    future = np.arange(keys.shape[2])[None, :] > positions[:, None]
    scores = np.where(future, -np.inf, scores)
    return heads_output(attn, softmax(scores, axis=-1) @ values)  # (B, L, D)


def decode_attention(rank, attn, x, cache, cp_group, keeps, algorithm):
    """The new token ``x`` (B, 1, D), on every CP rank, attending over every rank's keys;
    the rank that ``keeps`` the generated tokens appends its keys and values."""
    q, k, v = qkv_heads(attn, x)  # (B, H, 1, hd) each
    if keeps:
        keys, values = cache.extend(k, v)  # (B, H, S_c, hd)
    else:
        keys, values = cache.keys[:, :, : cache.length], cache.values[:, :, : cache.length]
    scores = (q @ keys.swapaxes(-1, -2)) / math.sqrt(attn.head_dim)  # (B, H, 1, S_c)
    local_max = scores.max(axis=-1, keepdims=True)  # (B, H, 1, 1)
    top = yield from rank.all_reduce(local_max, group=cp_group, algorithm=algorithm, op="max")
    weights = np.exp(scores - top)  # (B, H, 1, S_c): exp(score - M), M the global max
    partial = np.concatenate([weights @ values, weights.sum(axis=-1, keepdims=True)], axis=-1)
    total = yield from rank.all_reduce(partial, group=cp_group, algorithm=algorithm)
    out = total[..., :-1] / total[..., -1:]  # (B, H, 1, hd): softmax-weighted values
    return heads_output(attn, out)  # (B, 1, D)
