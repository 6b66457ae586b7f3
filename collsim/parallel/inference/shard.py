"""What one rank of a tensor- and pipeline-parallel decoder holds, cut from the full model.

A layer on TP rank ``t`` of ``tp`` keeps Megatron's split (Shoeybi et al. 2019): heads
``t·H/tp .. (t+1)·H/tp`` of the attention (``wq``, ``wk``, ``wv`` by columns, ``wo`` by
rows) and columns ``t·F/tp ..`` of the MLP's first linear with the same rows of its second.
The output projections give partial sums; their biases are kept apart and added once, after
the all-reduce.  The LayerNorms are replicated.  Its KV cache holds its own heads only.

A pipeline stage holds its run of layers; the first stage also the embeddings, the last the
final LayerNorm and the language-model head (replicated over its TP ranks here: Megatron's
vocabulary-parallel head is not modelled).

Examples
--------
>>> from collsim.nn import Decoder, DecoderConfig
>>> from collsim.parallel.inference.config import InferenceSplit
>>> model = Decoder.init(DecoderConfig(vocab=16, hidden=8, heads=4, layers=2))
>>> weights = RankWeights.from_model(model, InferenceSplit(tp=2, pp=2), rank_id=3)
>>> weights.stage, weights.tp_rank, list(weights.layer_ids), weights.layers[0].attn.n_heads
(1, 1, [1], 2)
>>> weights.embeddings is None, weights.head is not None
(True, True)
"""

from typing import NamedTuple

import numpy as np

from ...nn import LayerKV, LayerNorm, Linear, MultiHeadAttention
from ..tensor.attention import ParallelAttention
from ..tensor.layers import ColumnParallelLinear, RowParallelLinear

__all__ = ["ShardedLayer", "Embeddings", "RankWeights"]


class ShardedLayer(NamedTuple):
    """One transformer block's share on one TP rank."""

    ln1: LayerNorm  # replicated
    attn: MultiHeadAttention  # this rank's heads, no output bias: a partial sum
    attn_bias: np.ndarray  # the output bias, added once after the all-reduce
    ln2: LayerNorm  # replicated
    fc1: Linear  # this rank's columns of the first MLP linear, with their bias
    fc2: Linear  # the same rows of the second, no bias: a partial sum
    mlp_bias: np.ndarray  # the second linear's bias, added once after the all-reduce

    @classmethod
    def from_block(cls, block, group, tp_rank):
        attn = ParallelAttention.from_full(block.attn, group, tp_rank)
        fc1 = ColumnParallelLinear.from_full(block.mlp.fc1, group, tp_rank)
        fc2 = RowParallelLinear.from_full(block.mlp.fc2, group, tp_rank)
        return cls(block.ln1, attn.shard, attn.bo, block.ln2, fc1.shard, fc2.shard, fc2.bias)


class Embeddings(NamedTuple):
    """The first stage's token and position tables."""

    tokens: np.ndarray  # (vocab, hidden)
    positions: np.ndarray  # (max_len, hidden)

    def lookup(self, ids, start):
        """Embeddings (B, T, hidden) of ``ids`` (B, T) at positions ``start ..``."""
        return self.tokens[ids] + self.positions[start : start + ids.shape[1]]


class RankWeights(NamedTuple):
    """Everything one rank holds: its stage's layers (its TP share) and the ends it owns."""

    stage: int  # pipeline stage, 0 .. pp-1
    cp_rank: int  # which run of the prompt's tokens it prefills, 0 .. cp-1
    tp_rank: int  # position in its TP group, 0 .. tp-1
    layer_ids: range  # the full model's indices of this stage's layers
    layers: tuple  # ShardedLayer per layer of the stage
    embeddings: Embeddings | None  # on the first stage only
    ln_f: LayerNorm | None  # on the last stage only
    head: Linear | None  # on the last stage only: hidden -> vocab logits

    @classmethod
    def from_model(cls, model, split, rank_id):
        coords = split.grid.coords(rank_id)
        stage, cp_rank, tp_rank = coords["pp"], coords["cp"], coords["tp"]
        group = split.grid.group("tp", rank_id)
        layer_ids = split.stage_layers(stage, len(model.blocks))
        layers = tuple(ShardedLayer.from_block(model.blocks[i], group, tp_rank) for i in layer_ids)
        first, last = stage == 0, stage == split.pp - 1
        embeddings = Embeddings(model.token_table, model.position_table) if first else None
        return cls(
            stage,
            cp_rank,
            tp_rank,
            layer_ids,
            layers,
            embeddings,
            model.ln_f if last else None,
            model.head if last else None,
        )

    def new_cache(self, batch, capacity):
        """A :class:`~collsim.nn.LayerKV` per layer of the stage, with this rank's heads,
        for ``capacity`` tokens (its run of the prompt, and the generated ones if it keeps
        them)."""
        return [
            LayerKV(batch, layer.attn.n_heads, layer.attn.head_dim, capacity)
            for layer in self.layers
        ]
