"""The schemes ``collsim verify`` checks: each one's model, data and how it is sharded.

==================  ================================================================  =======
scheme              model and split                                                   layouts
==================  ================================================================  =======
``dp``              ``layers`` transformer blocks, batch split over dp ranks           -
``tp-column``       Linear hidden -> ffn, columns split, output all-gathered (Megatron)  full
``tp-row``          Linear ffn -> hidden, rows split, input already split              last
``tp-mlp``          Megatron MLP: column -> GELU -> row (f/g)                          full
``tp-attention``    multi-head attention, heads split                                  full
``sp``              ``layers`` transformer blocks, TP with sequence parallelism          seq
``dp-tp``           ``layers`` transformer blocks on a (dp, tp) mesh (``--sp`` for SP)  full
``zero``            ``layers`` transformer blocks, ZeRO stage 1, 2 or 3 over dp ranks    -
``fsdp``            ``layers`` transformer blocks, ZeRO-3 with FSDP's knobs               -
``hsdp``            ``layers`` transformer blocks, sharded in a node, replicated across  -
==================  ================================================================  =======

The three sharding schemes (:data:`SHARDING`) train the model of ``dp`` with Adam by
default: the optimizer state is what they shard.

Inputs and targets are ``(batch, seq, features)`` arrays drawn uniformly from [-1, 1].
The defaults that depend on the scheme (:func:`default_dp`, :func:`default_tp`,
:func:`default_batch`) live here, so the command line and :func:`~collsim.verify.verify`
read one copy.

Examples
--------
>>> import numpy as np
>>> problem = build_problem("tp-mlp", np.random.default_rng(0), dp=1, tp=2, hidden=8,
...                         heads=2, ffn=32, layers=1, sp=False)
>>> problem.description, problem.in_layout, problem.out_layout
('MLP 8 -> 32 -> 8', 'full', 'full')
>>> default_dp("dp-tp"), default_tp("dp-tp"), default_batch("dp", 4)
(2, 2, 64)
"""

import copy
from dataclasses import dataclass

from ..nn import MLP, Linear, MultiHeadAttention, Sequential, TransformerBlock
from ..parallel.modules import units_of
from ..parallel.tensor import ColumnParallelLinear, ParallelMLP, RowParallelLinear
from ..parallel.tensor.attention import ParallelAttention, ParallelTransformerBlock

__all__ = [
    "SCHEMES",
    "SHARDING",
    "BYTES",
    "Problem",
    "build_problem",
    "make_batches",
    "model_shape",
    "has_attention",
    "default_dp",
    "default_tp",
    "default_batch",
]

SHARDING = ("zero", "fsdp", "hsdp")  # ZeRO / FSDP / HSDP over the data-parallel ranks
SCHEMES = ("dp", "tp-column", "tp-row", "tp-mlp", "tp-attention", "sp", "dp-tp") + SHARDING
BYTES = 8  # every array is float64
_BLOCKS = ("dp", "sp", "dp-tp") + SHARDING  # the schemes that train transformer blocks


@dataclass
class Problem:
    """One scheme's full model, data, and how to shard it."""

    model: object  # the single-device nn module
    make_units: object  # (tp_group, tp_rank) -> [(prefix, rank module)]
    in_layout: str
    out_layout: str
    dp: int
    tp: int
    description: str


def default_dp(scheme):
    """Data-parallel degree when none is given: 4 for ``dp`` (the batch-64, dp=4 example),
    ``zero``, ``fsdp`` and ``hsdp`` (2 × 2), 2 for ``dp-tp``, else 1."""
    return {"dp": 4, "dp-tp": 2, "zero": 4, "fsdp": 4, "hsdp": 4}.get(scheme, 1)


def default_tp(scheme):
    """Tensor-parallel degree when none is given: 1 for ``dp`` and the sharding schemes,
    2 for ``dp-tp``, else 4."""
    return {"dp": 1, "dp-tp": 2, "zero": 1, "fsdp": 1, "hsdp": 1}.get(scheme, 4)


def default_batch(scheme, dp):
    """Global batch when none is given: 64 for ``dp`` (the batch-64, dp=4 example), else 4·dp."""
    return 64 if scheme == "dp" else 4 * dp


def has_attention(scheme):
    """Whether the scheme's model has attention (so heads must divide hidden)."""
    return scheme in ("dp", "tp-attention", "sp", "dp-tp") + SHARDING


def build_problem(scheme, rng, *, dp, tp, hidden, heads, ffn, layers, sp):
    """The :class:`Problem` of ``scheme``: its model drawn from ``rng`` and its sharding."""
    if scheme == "dp" or scheme in SHARDING:  # sharding happens in the trainer's dp group
        model = Sequential(*(TransformerBlock.init(hidden, heads, rng, ffn) for _ in range(layers)))
        return Problem(
            model,
            lambda g, j: units_of(copy.deepcopy(model)),
            "full",
            "full",
            dp,
            1,
            f"{layers} transformer block(s)",
        )
    tp_layers = {
        "tp-column": (
            lambda: Linear.init(hidden, ffn, rng),
            ColumnParallelLinear,
            {"gather_output": True},
            "full",
            f"Linear {hidden} -> {ffn}",
        ),
        "tp-row": (
            lambda: Linear.init(ffn, hidden, rng),
            RowParallelLinear,
            {},
            "last",
            f"Linear {ffn} -> {hidden}",
        ),
        "tp-mlp": (
            lambda: MLP.init(hidden, rng, hidden=ffn),
            ParallelMLP,
            {},
            "full",
            f"MLP {hidden} -> {ffn} -> {hidden}",
        ),
        "tp-attention": (
            lambda: MultiHeadAttention.init(hidden, heads, rng),
            ParallelAttention,
            {},
            "full",
            f"attention, hidden {hidden}, {heads} heads",
        ),
    }
    if scheme in tp_layers:
        init, cls, options, in_layout, what = tp_layers[scheme]
        model = init()

        def one_layer(g, j):
            return [("", cls.from_full(model, g, j, **options))]

        return Problem(model, one_layer, in_layout, "full", 1, tp, what)
    # sp, dp-tp: transformer blocks under TP (and SP)
    blocks = [TransformerBlock.init(hidden, heads, rng, ffn) for _ in range(layers)]

    def tp_blocks(g, j):
        return [
            (str(i), ParallelTransformerBlock.from_full(b, g, j, sp, name=f"block{i}"))
            for i, b in enumerate(blocks)
        ]

    layout = "seq" if sp else "full"
    what = f"{layers} transformer block(s), {'sequence' if sp else 'tensor'} parallel"
    return Problem(Sequential(*blocks), tp_blocks, layout, layout, dp, tp, what)


def make_batches(scheme, rng, *, batch, seq, hidden, ffn, steps):
    """One ``(x, target)`` pair per step, uniform in [-1, 1], shaped for the scheme's model.

    >>> import numpy as np
    >>> x, target = make_batches("tp-row", np.random.default_rng(0), batch=2, seq=3,
    ...                          hidden=4, ffn=8, steps=1)[0]
    >>> x.shape, target.shape  # (B, S, ffn) in, (B, S, H) out
    ((2, 3, 8), (2, 3, 4))
    """
    in_features = ffn if scheme == "tp-row" else hidden
    out_features = ffn if scheme == "tp-column" else hidden
    return [
        (
            rng.uniform(-1, 1, (batch, seq, in_features)),
            rng.uniform(-1, 1, (batch, seq, out_features)),
        )
        for _ in range(steps)
    ]


def model_shape(scheme, hidden, ffn, layers):
    """(layers, weights per layer, has attention) of the model ``scheme`` trains.

    Weights are the matrices' entries (no biases or LayerNorms): what the matmul FLOPs and
    the memory estimate count.

    >>> model_shape("tp-mlp", 8, 32, 2)
    (1, 512, False)
    """
    per_layer = {
        "tp-column": hidden * ffn,
        "tp-row": hidden * ffn,
        "tp-mlp": 2 * hidden * ffn,
        "tp-attention": 4 * hidden * hidden,
    }.get(scheme, 4 * hidden * hidden + 2 * hidden * ffn)
    n_layers = layers if scheme in _BLOCKS else 1
    return n_layers, per_layer, has_attention(scheme)
