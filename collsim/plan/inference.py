"""Planning a deployment for inference: weights and KV cache per GPU, whether they fit, and
the roofline's prefill and decode times, from :mod:`collsim.parallel.inference.roofline`.

The KV cache of a sequence is 2 (keys and values) · layers · tokens · hidden ·
bytes_per_element; under tp a GPU holds its heads' share, under pp its stage's layers,
under cp its run of the tokens.  What is left of the GPU's memory after the weights
bounds the batch: ``max_batch`` sequences of ``prompt + new`` tokens fit, and at the
given batch ``max_tokens`` positions a sequence do.  :func:`plan_serving` plans a
:class:`~collsim.plan.PlanConfig`'s model (a preset such as ``llama2-70b``, grouped-query
attention and gated MLPs included), holding the planner's own parameter count per GPU
(:func:`~collsim.plan.config.derived.count_params`); ``collsim plan --inference`` and
``collsim infer --plan`` print it.

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

Llama-2-70B (8 key/value heads of 64 query heads) on 8 GPUs: its KV cache is 1/8 of a
70B model's without grouped-query attention, 320 KiB a token over the group.

>>> from collsim.plan import PlanConfig
>>> cfg = PlanConfig(model="llama2-70b", tp=8)
>>> plan = plan_serving(cfg, Roofline(989e12, 3.35e12, 2), batch=8, prompt=4000, new_tokens=96)
>>> plan.kv_bytes_per_token * 8 // 1024, round(plan.weight_bytes / 2**30, 1)  # KiB, GiB a GPU
(320, 16.1)
"""

from typing import NamedTuple

from ..errors import ConfigError, nearest_first
from ..parallel.inference.roofline import (
    ServedShape,
    decode_step,
    kv_cache_elements,
    prefill,
    weight_elements,
)
from .config.derived import derive
from .config.experts import params_per_gpu

__all__ = ["InferencePlan", "plan_inference", "plan_serving", "check_kv_split"]


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
    kv_bytes_per_token: int  # one position of one sequence, on this GPU
    max_tokens: int  # positions a sequence that fit beside the weights at this batch


def plan_inference(
    shape, roofline, batch, tokens, gpu_memory, tp=1, pp=1, cp=1, prompt=None, held=None
):
    """The :class:`InferencePlan` of ``batch`` sequences of ``tokens`` positions (prompt
    and output) on GPUs split ``tp`` x ``pp`` x ``cp``; ``prompt`` (default ``tokens``)
    is the prefill's length; ``held`` the weights one GPU holds (default: the roofline's
    count of the toy decoder's arrays)."""
    for name, value in (("batch", batch), ("tokens", tokens), ("tp", tp), ("pp", pp), ("cp", cp)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name}={value!r} must be a positive integer")
    if not gpu_memory > 0:
        raise ConfigError(f"gpu_memory={gpu_memory!r} must be > 0 bytes (e.g. '80GB')")
    b = roofline.bytes_per_element
    weights = (weight_elements(shape, tp, pp) if held is None else held) * b
    per_sequence = kv_cache_elements(shape, 1, tokens, tp, pp, cp) * b
    per_token = kv_cache_elements(shape, 1, cp, tp, pp, cp) * b  # one position a CP rank
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
        per_token,
        max(int(free // (per_token * batch)) * cp, 0) if per_token else 0,
    )


def check_kv_split(shape, tp):
    """Refuse a tp that neither divides the key/value heads nor is a multiple of them (each
    TP rank caches kv_heads/tp of them, or one replicated; vLLM's rule)."""
    kv = shape.key_value_heads
    if kv % tp and tp % kv:
        fits = [t for t in range(1, 2 * max(kv, tp) + 1) if kv % t == 0 or t % kv == 0]
        raise ConfigError(
            f"tp={tp} with {kv} key/value heads: tp must divide them or be a multiple of "
            f"them (each TP rank caches kv_heads/tp of them, or one copy of one); nearest "
            f"valid tp: {', '.join(map(str, nearest_first(tp, fits)[:3]))}"
        )


def plan_serving(cfg, roofline, batch, prompt, new_tokens):
    """The :class:`InferencePlan` of a :class:`~collsim.plan.PlanConfig`'s model served by
    ``batch`` sequences of ``prompt + new_tokens`` positions on its tp x pp x cp GPUs; the
    weights held are the planner's parameter count per GPU at the roofline's precision."""
    if cfg.experts is not None:
        raise ConfigError(
            f"model {cfg.model or 'with experts'!r} is a mixture of experts (experts = "
            f"{cfg.experts}): the inference plan counts dense models only; nearest valid "
            "choice: a dense model such as llama2-70b"
        )
    for name, value, least in (
        ("batch", batch, 1),
        ("prompt", prompt, 1),
        ("new_tokens", new_tokens, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ConfigError(f"{name}={value!r} must be a whole number >= {least}")
    shape = ServedShape.of(cfg)
    check_kv_split(shape, cfg.tp)
    held = params_per_gpu(derive(cfg).params, 0.0, cfg.tp, cfg.pp, 1, 1)
    tokens = prompt + new_tokens
    return plan_inference(
        shape,
        roofline,
        batch,
        tokens,
        cfg.gpu_memory,
        cfg.tp,
        cfg.pp,
        cfg.cp,
        prompt // cfg.cp,
        held=round(held),
    )
