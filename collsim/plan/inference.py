"""Planning a deployment for inference: weights and KV cache per GPU, whether they fit, and
the roofline's prefill and decode times, from :mod:`collsim.parallel.inference.roofline`.

The KV cache of a sequence is 2 (keys and values) · layers · tokens · hidden ·
bytes_per_element; under tp a GPU holds its heads' share, under pp its stage's layers,
under cp its run of the tokens.  What is left of the GPU's memory after the weights
bounds the batch: ``max_batch`` sequences of ``prompt + new`` tokens fit.

Examples
--------
A Llama-2-7B shape (32 layers, hidden 4096, 32 heads, MLP 11008; two matrices, as
:mod:`~collsim.parallel.inference.roofline` counts a GPT-2-shaped MLP) in bf16 on an
80 GB GPU, 16 sequences of 4,096 tokens:

>>> from collsim.parallel.inference.roofline import Roofline, ServedShape
>>> shape = ServedShape(layers=32, hidden=4096, heads=32, vocab=32000, ffn_hidden=11008)
>>> plan = plan_inference(shape, Roofline(989e12, 3.35e12, 2), batch=16, tokens=4096,
...                       gpu_memory=80e9)
>>> round(plan.kv_cache_bytes / 2**30), plan.fits, plan.max_batch  # GiB per GPU
(32, True, 32)
"""

from typing import NamedTuple

from ..errors import ConfigError
from ..parallel.inference.roofline import (
    decode_step,
    kv_cache_elements,
    prefill,
    weight_elements,
)

__all__ = ["InferencePlan", "plan_inference"]


class InferencePlan(NamedTuple):
    """Memory and roofline times of one GPU of a deployment."""

    weight_bytes: int  # this GPU's weights (its tp and pp share), at the declared precision
    kv_cache_bytes: int  # its KV cache for batch sequences of tokens positions
    kv_bytes_per_sequence: int  # ... of one sequence
    gpu_memory: float  # bytes
    fits: bool  # weights + KV cache <= gpu_memory
    max_batch: int  # sequences of tokens positions that fit beside the weights (0: none)
    prefill: object  # SpanCost of the prompt's prefill (batch 1): about the TTFT
    decode: object  # SpanCost of a decode step at the last position: about the TPOT
    critical_batch: float  # B_crit: tokens a decode step needs to be compute-bound


def plan_inference(shape, roofline, batch, tokens, gpu_memory, tp=1, pp=1, cp=1, prompt=None):
    """The :class:`InferencePlan` of ``batch`` sequences of ``tokens`` positions (prompt
    and output) on GPUs split ``tp`` x ``pp`` x ``cp``; ``prompt`` (default ``tokens``)
    is the prefill's length."""
    for name, value in (("batch", batch), ("tokens", tokens), ("tp", tp), ("pp", pp), ("cp", cp)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name}={value!r} must be a positive integer")
    if not gpu_memory > 0:
        raise ConfigError(f"gpu_memory={gpu_memory!r} must be > 0 bytes (e.g. '80GB')")
    b = roofline.bytes_per_element
    weights = weight_elements(shape, tp, pp) * b
    per_sequence = kv_cache_elements(shape, 1, tokens, tp, pp, cp) * b
    free = gpu_memory - weights
    return InferencePlan(
        weights,
        per_sequence * batch,
        per_sequence,
        gpu_memory,
        weights + per_sequence * batch <= gpu_memory,
        max(int(free // per_sequence), 0) if per_sequence else 0,
        prefill(shape, roofline, 1, prompt or tokens, tp),
        decode_step(shape, roofline, batch, tokens, tp),
        roofline.critical_batch,
    )
