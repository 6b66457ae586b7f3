"""Model presets with their published shapes, and the shape assumed for a bare parameter count.

``--model NAME`` fills in layers, hidden size, attention heads, key/value heads (grouped-query
attention), MLP inner size, vocabulary, sequence length, whether the MLP is gated (SwiGLU:
three matrices instead of two) and the architecture family (``gpt``: learned position
embeddings, biases, LayerNorm, output layer tied to the input embedding, as Megatron-LM's
GPT; ``llama``: rotary positions, no biases, RMSNorm, a separate output layer).  Flags given
beside it win (``--model llama2-7b --seq 2048``).

Sources:

* GPT-3: Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1
  (n_layers, d_model, n_heads); vocabulary 50257 (GPT-2's BPE), context 2048, ffn = 4·d_model.
  The table prints d_model 5140 for GPT-3 13B; its n_heads·d_head = 40·128 = 5120, which is
  the size Megatron-LM and every reimplementation use, and the one taken here.
* Llama 2: Touvron et al. 2023, "Llama 2: Open Foundation and Fine-Tuned Chat Models",
  Table 1, and the ``config.json`` of meta-llama/Llama-2-{7b,13b,70b}-hf on Hugging Face
  (hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
  num_key_value_heads, vocab_size 32000, max_position_embeddings 4096).
* Llama 3: Dubey et al. 2024, "The Llama 3 Herd of Models", Table 3, and the ``config.json``
  of meta-llama/Meta-Llama-3-8B, -70B and Llama-3.1-405B (vocab 128256, 8 key/value heads,
  sequence 8192 for pre-training).

A bare parameter count (``--params 7B`` with no shape) gets the shape of the GPT-3 row of
Table 2.1 nearest to it in log scale (7B → GPT-3 6.7B: 32 layers, hidden 4096, 32 heads), so
activation memory and tensor-parallel traffic are estimated rather than silently zero; the
report says which row it assumed.

Examples
--------
>>> PRESETS["llama2-70b"].kv_heads, PRESETS["llama2-70b"].ffn_hidden
(8, 28672)
>>> assumed_shape(7e9).name
'gpt3-6.7b'
>>> preset("llama-2-7b")
Traceback (most recent call last):
...
collsim.errors.ConfigError: unknown model 'llama-2-7b'; valid names, nearest first: llama2-7b, ...
"""

import difflib
import math
from dataclasses import dataclass

from ...errors import ConfigError
from .experts import MOE_FIELDS

__all__ = [
    "ModelShape",
    "PRESETS",
    "GPT3_ROWS",
    "preset",
    "assumed_shape",
    "shape_note",
    "SHAPE_FIELDS",
]

#: the PlanConfig fields a preset fills in
SHAPE_FIELDS = "layers hidden heads kv_heads ffn_hidden vocab seq gated_mlp architecture".split()
SHAPE_FIELDS += list(MOE_FIELDS) + ["head_dim"]


@dataclass(frozen=True)
class ModelShape:
    """A published model shape, as a preset."""

    name: str
    nominal_params: float  # the size in the model's name (6.7e9 for "6.7B")
    layers: int
    hidden: int
    heads: int
    kv_heads: int  # key/value heads; = heads without grouped-query attention
    ffn_hidden: int  # MLP inner size
    vocab: int
    seq: int  # training sequence length
    gated_mlp: bool  # SwiGLU: gate, up and down matrices
    architecture: str  # "gpt" or "llama" (see the module docstring)
    source: str
    # a mixture of experts (collsim.plan.config.experts); None for a dense model
    experts: int | None = None  # routed experts per MoE layer
    top_k: int | None = None  # experts per token
    moe_ffn_hidden: int | None = None  # an expert's MLP inner size
    shared_experts: int | None = None  # always-on experts per MoE layer
    dense_layers: int | None = None  # first layers with a dense MLP
    head_dim: int | None = None  # an attention head's size when it is not hidden / heads

    def fields(self):
        """The PlanConfig settings this preset gives."""
        return {name: getattr(self, name) for name in SHAPE_FIELDS}


_GPT3 = "Brown et al. 2020, Table 2.1"
_LLAMA2 = "Touvron et al. 2023, Table 1; Hugging Face config.json of meta-llama/Llama-2-*-hf"
_LLAMA3 = "Dubey et al. 2024, Table 3; Hugging Face config.json of meta-llama/Llama-3*"


def _gpt3(name, n, layers, hidden, heads):
    return ModelShape(
        name, n, layers, hidden, heads, heads, 4 * hidden, 50257, 2048, False, "gpt", _GPT3
    )


def _llama(name, n, layers, hidden, heads, kv, ffn, vocab, seq, source):
    return ModelShape(name, n, layers, hidden, heads, kv, ffn, vocab, seq, True, "llama", source)


#: every row of GPT-3's Table 2.1 (the shape rule picks among them)
GPT3_ROWS = (
    _gpt3("gpt3-125m", 125e6, 12, 768, 12),
    _gpt3("gpt3-350m", 350e6, 24, 1024, 16),
    _gpt3("gpt3-760m", 760e6, 24, 1536, 16),
    _gpt3("gpt3-1.3b", 1.3e9, 24, 2048, 24),
    _gpt3("gpt3-2.7b", 2.7e9, 32, 2560, 32),
    _gpt3("gpt3-6.7b", 6.7e9, 32, 4096, 32),
    _gpt3("gpt3-13b", 13e9, 40, 5120, 40),  # the table's 5140 is a misprint for 40·128
    _gpt3("gpt3-175b", 175e9, 96, 12288, 96),
)

PRESETS = {row.name: row for row in GPT3_ROWS}
PRESETS.update(
    (m.name, m)
    for m in (
        _llama("llama2-7b", 7e9, 32, 4096, 32, 32, 11008, 32000, 4096, _LLAMA2),
        _llama("llama2-13b", 13e9, 40, 5120, 40, 40, 13824, 32000, 4096, _LLAMA2),
        _llama("llama2-70b", 70e9, 80, 8192, 64, 8, 28672, 32000, 4096, _LLAMA2),
        _llama("llama3-8b", 8e9, 32, 4096, 32, 8, 14336, 128256, 8192, _LLAMA3),
        _llama("llama3-70b", 70e9, 80, 8192, 64, 8, 28672, 128256, 8192, _LLAMA3),
        _llama("llama3-405b", 405e9, 126, 16384, 128, 8, 53248, 128256, 8192, _LLAMA3),
    )
)


_MIXTRAL = "Jiang et al. 2024, Mixtral of Experts; config.json of mistralai/Mixtral-8x7B-v0.1"
_DEEPSEEK = (
    "DeepSeek-AI 2024, DeepSeek-V3 Technical Report; config.json of deepseek-ai/DeepSeek-V3 "
    "(MLA attention counted as plain attention of 128 heads)"
)
_QWEN3 = (
    "Qwen Team 2025, Qwen3 Technical Report; config.json of Qwen/Qwen3-30B-A3B and "
    "Qwen/Qwen3-235B-A22B (head_dim 128)"
)


def _moe(name, n, shape, experts, top_k, moe_ffn, shared, dense, source, head_dim=None):
    """A SwiGLU MoE preset: ``shape`` is (layers, hidden, heads, kv, ffn, vocab, seq)."""
    return ModelShape(
        name, n, *shape, True, "llama", source, experts, top_k, moe_ffn, shared, dense, head_dim
    )


#: MoE presets, the shapes of their released configs; seq is the pre-training length
#: (Mixtral's is not published: 4096 as the others)
MOE_PRESETS = (
    _moe(
        "mixtral-8x7b", 46.7e9, (32, 4096, 32, 8, 14336, 32000, 4096), 8, 2, 14336, 0, 0, _MIXTRAL
    ),
    _moe(
        "deepseek-v3",
        671e9,
        (61, 7168, 128, 128, 18432, 129280, 4096),
        256,
        8,
        2048,
        1,
        3,
        _DEEPSEEK,
    ),
    _moe(
        "qwen3-30b-a3b",
        30.5e9,
        (48, 2048, 32, 4, 6144, 151936, 4096),
        128,
        8,
        768,
        0,
        0,
        _QWEN3,
        128,
    ),
    _moe(
        "qwen3-235b-a22b",
        235e9,
        (94, 4096, 64, 4, 12288, 151936, 4096),
        128,
        8,
        1536,
        0,
        0,
        _QWEN3,
        128,
    ),
)
PRESETS.update((m.name, m) for m in MOE_PRESETS)


def preset(name):
    """The :class:`ModelShape` called ``name`` (case does not matter).

    An unknown name raises a ConfigError listing every valid name, nearest first.
    """
    if not isinstance(name, str):
        raise ConfigError(f"model {name!r} must be a preset name such as 'llama2-7b'")
    key = name.strip().lower()
    if key in PRESETS:
        return PRESETS[key]
    names = list(PRESETS)
    ranked = sorted(names, key=lambda n: -difflib.SequenceMatcher(None, key, n).ratio())
    raise ConfigError(f"unknown model {name!r}; valid names, nearest first: {', '.join(ranked)}")


def assumed_shape(params):
    """The GPT-3 row of Table 2.1 nearest to ``params`` in log scale (ties: the smaller)."""
    return min(GPT3_ROWS, key=lambda row: abs(math.log(params / row.nominal_params)))


def shape_note(row, params):
    """The sentence the report prints when a bare parameter count got ``row``'s shape."""
    return (
        f"model shape assumed: only the parameter count ({params / 1e9:.4g} B) was given, so "
        f"the planner takes the nearest row of GPT-3's Table 2.1 (Brown et al. 2020), "
        f"{row.name}: {row.layers} layers, hidden {row.hidden}, {row.heads} heads, "
        f"ffn {row.ffn_hidden}, for activation memory and TP/PP/CP traffic; give --model "
        "or --layers/--hidden/--heads for the real shape"
    )
