"""The roofline of serving a decoder: how long a prefill or a decode step takes on one GPU.

A step of a GPU does ``flops`` of arithmetic and reads ``bytes_read`` from HBM; it takes
the longer of ``flops / peak`` and ``bytes_read / hbm_bandwidth`` (Williams, Waterman and
Patterson, "Roofline", CACM 2009).  A decode step reads every weight and the whole KV
cache once to make one token per sequence, so at small batch it is *memory-bound*; a
prefill runs the whole prompt through the same weights, so it is *compute-bound*.

The batch where a decode step turns (weights only, KV cache aside): each parameter costs
2 FLOP per token (a multiply and an add) and ``bytes_per_element`` bytes read once per
step, so the step is compute-bound above

    B_crit = (peak FLOP/s / HBM B/s) · bytes_per_element / 2

tokens a step; the ratio peak/HBM is the machine's *ridge point* in FLOP per byte.  In
bf16 (2 bytes) the 2 and the 2 cancel: B_crit = peak/HBM, about 295 on an H100 SXM
(989 TFLOP/s / 3.35 TB/s) and 153 on an A100 SXM (312 TFLOP/s / 2.039 TB/s).  The KV
cache only raises it: its reads grow with the batch as fast as its FLOPs.

The run (:mod:`.program`, :mod:`.serving`), ``collsim infer`` and ``collsim plan
--inference`` all read these functions; nothing recomputes them on the side.

Examples
--------
>>> h100 = Roofline(peak_flops=989e12, hbm_bandwidth=3.35e12, bytes_per_element=2)
>>> round(h100.ridge_point), round(h100.critical_batch)  # FLOP/byte; tokens a step
(295, 295)
>>> step = h100.cost(flops=2 * 7e9, bytes_read=2 * 7e9)  # a 7B model's decode, batch 1
>>> step.bound, round(step.seconds * 1e3, 2)  # ms: the weights' read decides
('memory', 4.18)
"""

from typing import NamedTuple

from ...errors import ConfigError

__all__ = [
    "Roofline",
    "SpanCost",
    "ServedShape",
    "weight_elements",
    "kv_cache_elements",
    "kv_heads_per_gpu",
    "decode_step",
    "decode_batch",
    "prefill",
]


class SpanCost(NamedTuple):
    """What one step of one GPU costs on the roofline."""

    flops: float  # arithmetic of the step
    bytes_read: float  # bytes read from HBM: weights and KV cache, at the declared precision
    compute_seconds: float  # flops / peak FLOP/s
    memory_seconds: float  # bytes_read / HBM bytes/s

    @property
    def seconds(self):
        """The step's time: the slower of the two (they overlap on a GPU)."""
        return max(self.compute_seconds, self.memory_seconds)

    @property
    def bound(self):
        """``"compute"`` or ``"memory"``: which side of the roofline the step is on."""
        return "compute" if self.compute_seconds >= self.memory_seconds else "memory"


class Roofline(NamedTuple):
    """One GPU's peak arithmetic and HBM bandwidth, and the precision weights are read at."""

    peak_flops: float  # FLOP/s (the machine's compute_rate: dense bf16)
    hbm_bandwidth: float  # bytes/s read from HBM
    bytes_per_element: int = 2  # of a weight or a cached key/value: 2 for bf16

    @classmethod
    def of_machine(cls, machine, bytes_per_element=2):
        """The roofline of a :class:`~collsim.hardware.Machine`'s GPU."""
        if not machine.hbm_bandwidth:
            raise ConfigError(
                f"machine {machine.name!r} gives no hbm_bandwidth: add it to the machine "
                "file (e.g. hbm_bandwidth = '2TB/s'), or start from a preset (dgx-h100, "
                "dgx-a100, pcie-8gpu)"
            )
        return cls(float(machine.compute_rate), float(machine.hbm_bandwidth), bytes_per_element)

    def check(self):
        for name in ("peak_flops", "hbm_bandwidth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ConfigError(f"roofline {name}={value!r} must be a number > 0")
        if self.bytes_per_element not in (1, 2, 4, 8):
            raise ConfigError(
                f"bytes_per_element={self.bytes_per_element!r}: choose 1 (fp8), 2 (bf16), "
                "4 (fp32) or 8 (fp64)"
            )
        return self

    @property
    def ridge_point(self):
        """FLOP per byte at which a kernel turns from memory- to compute-bound."""
        return self.peak_flops / self.hbm_bandwidth

    @property
    def critical_batch(self):
        """Tokens a decode step must batch to be compute-bound (weights only)."""
        return self.ridge_point * self.bytes_per_element / 2

    def cost(self, flops, bytes_read):
        """The :class:`SpanCost` of ``flops`` and ``bytes_read`` on this GPU."""
        return SpanCost(flops, bytes_read, flops / self.peak_flops, bytes_read / self.hbm_bandwidth)

    def cost_of(self, flops, elements_read):
        """As :meth:`cost`, for ``elements_read`` weights or cached values."""
        return self.cost(flops, elements_read * self.bytes_per_element)


class ServedShape(NamedTuple):
    """The shape of a decoder as the formulas read it (a DecoderConfig or a plan's model).

    ``kv_heads`` below ``heads`` is grouped-query attention (Ainslie et al. 2023): K and V
    have ``kv_heads`` heads of ``head_dim`` each.  ``gated`` is a SwiGLU MLP (three
    matrices).  Left at 0 / False they are the toy decoder's: every head its own K and V,
    ``head_dim = hidden / heads``, two MLP matrices (GPT-2's shape).
    """

    layers: int
    hidden: int
    heads: int
    vocab: int
    ffn_hidden: int  # the MLP's inner width (4·hidden in GPT-2's shape)
    kv_heads: int = 0  # key/value heads (grouped-query attention); 0: one a query head
    head_dim: int = 0  # one head's width; 0: hidden / heads
    gated: bool = False  # SwiGLU MLP: gate, up and down matrices

    @classmethod
    def of(cls, config):
        """A DecoderConfig's or a PlanConfig's shape (the latter's kv_heads, head_dim and
        gated MLP kept)."""
        ffn = getattr(config, "ffn_hidden", None) or 4 * config.hidden
        kv = getattr(config, "kv_heads", None) or 0
        head_dim = getattr(config, "head_dim", None) or 0
        gated = bool(getattr(config, "gated_mlp", False))
        return cls(
            config.layers, config.hidden, config.heads, config.vocab, ffn, kv, head_dim, gated
        )

    @property
    def key_value_heads(self):
        return self.kv_heads or self.heads

    @property
    def head_width(self):
        return self.head_dim or self.hidden // self.heads


def kv_heads_per_gpu(shape, tp=1):
    """Key/value heads one TP rank caches: ``kv_heads / tp``, or one (replicated, as vLLM and
    Megatron do) when there are fewer K/V heads than TP ranks.

    >>> kv_heads_per_gpu(ServedShape(80, 8192, 64, 32000, 28672, kv_heads=8), tp=16)
    1
    """
    return max(shape.key_value_heads // tp, 1)


def _matrix_elements(shape):
    """One layer's matrix weights: Q and the output projection (heads · head_dim wide), K and
    V (kv_heads · head_dim), and the MLP's two or three matrices; 4d² + 2df for GPT-2."""
    d = shape.hidden
    q = shape.heads * shape.head_width
    kv = shape.key_value_heads * shape.head_width
    return 2 * d * q + 2 * d * kv + (3 if shape.gated else 2) * d * shape.ffn_hidden


def weight_elements(shape, tp=1, pp=1):
    """Weights one GPU holds: its 1/tp of its stage's ``layers/pp`` blocks (the LayerNorms
    and the two output biases replicated) and, on the last stage, the head.

    >>> weight_elements(ServedShape(layers=1, hidden=4, heads=1, vocab=8, ffn_hidden=16))
    284
    """
    d, f = shape.hidden, shape.ffn_hidden
    q = shape.heads * shape.head_width
    kv = shape.key_value_heads * shape.head_width
    biases = q + 2 * kv + (2 if shape.gated else 1) * f  # wq, wk, wv; fc1 (and the gate)
    split = _matrix_elements(shape) + biases
    replicated = d + d + 4 * d  # wo's and fc2's biases, two LayerNorms
    head = shape.vocab * d + 2 * d  # the LM head and the final LayerNorm
    return shape.layers // pp * (split // tp + replicated) + head


def kv_cache_elements(shape, batch, tokens, tp=1, pp=1, cp=1):
    """Keys and values one GPU caches: 2 · layers/pp · batch · tokens/cp · kv_heads/tp ·
    head_dim (hidden/tp without grouped-query attention).

    >>> kv_cache_elements(ServedShape(32, 4096, 32, 32000, 11008), batch=1, tokens=4096)
    1073741824
    """
    width = kv_heads_per_gpu(shape, tp) * shape.head_width
    return 2 * (shape.layers // pp) * batch * (tokens // cp) * width


def decode_step(shape, roofline, batch, context, tp=1):
    """One decode step's :class:`SpanCost` on one GPU of a TP group: ``batch`` new tokens
    each attending over ``context`` cached ones (the new one included).  Pipeline stages
    run one after another for one token, so the step's time does not depend on pp."""
    return _decode(shape, roofline, batch, batch * context, tp)


def decode_batch(shape, roofline, contexts, tp=1):
    """A continuous batch's decode step: one new token for each sequence, sequence i
    attending over ``contexts[i]`` tokens; the weights are read once for all of them."""
    return _decode(shape, roofline, len(contexts), sum(contexts), tp)


def _decode(shape, roofline, batch, keys, tp):
    """``batch`` new tokens attending over ``keys`` cached positions in all."""
    d, layers = shape.hidden, shape.layers
    matmuls = 2 * batch * _matrix_elements(shape) // tp  # 2 FLOP a weight a token
    attention = 4 * keys * shape.heads * shape.head_width // tp  # QK^T and AV, every query head
    flops = layers * (matmuls + attention) + 2 * batch * d * shape.vocab
    read = weight_elements(shape, tp) + kv_cache_elements(shape, 1, keys, tp)
    return roofline.cost_of(flops, read)


def prefill(shape, roofline, batch, prompt, tp=1):
    """The prefill's :class:`SpanCost` on one GPU of a TP group: ``batch`` prompts of
    ``prompt`` tokens, every query against every key (as the run computes it), the
    weights read once and the cache written once."""
    d, layers = shape.hidden, shape.layers
    tokens = batch * prompt
    matmuls = 2 * tokens * _matrix_elements(shape) // tp
    attention = 4 * tokens * prompt * shape.heads * shape.head_width // tp
    flops = layers * (matmuls + attention) + 2 * batch * d * shape.vocab
    moved = weight_elements(shape, tp) + kv_cache_elements(shape, batch, prompt, tp)
    return roofline.cost_of(flops, moved)
