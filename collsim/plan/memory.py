"""Memory per GPU: model states (parameters, gradients, optimizer) and activations.

Model states (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion
Parameter Models", §3): mixed-precision Adam keeps 2 bytes of bf16/fp16 parameter, 2 bytes
of gradient and 12 bytes of optimizer state (fp32 master copy, Adam m and v) per parameter,
16 bytes in all; plain fp32 keeps 4 + 4 + 8 (m and v).  Tensor and pipeline parallelism
split the parameters (N/(t·p) per GPU); over the sharding degree N_d, ZeRO-1 divides the
optimizer states, ZeRO-2 also the gradients, ZeRO-3 (FSDP) everything.  Gather buffers
that ZeRO-3 needs for one layer at a time are not counted.

Activations of one transformer layer for one micro-batch, in bytes (Korthikanti et al.
2022, "Reducing Activation Recomputation in Large Transformer Models", §4 and Table 2;
16-bit activations, 1-byte dropout masks, ffn = 4h; s sequence, b micro-batch, h hidden,
a heads, t tp)::

    no parallelism           sbh(34 + 5as/h)
    tensor parallel          sbh(10 + 24/t + 5as/(ht))
    tensor + sequence par.   (sbh/t)(34 + 5as/h)
    selective recompute      sbh(10 + 24/t)         with sequence parallel: 34·sbh/t
    full recompute           2sbh                   with sequence parallel: 2sbh/t

The paper's 24 splits into the attention's Q, K, V and output-projection inputs (2 + 2 + 2
+ 2) and the MLP's two inner activations (8 + 8, each 2·s·b·4h).  With g key/value heads
(grouped-query attention) K and V are g/a as large, so attention keeps 4 + 4g/a; an MLP of
inner size f keeps 4f/h, and a gated (SwiGLU) one 6f/h (gate and up outputs, which its
backward needs, and the down projection's input).  Llama 2 7B (f = 11008, g = a):
24 becomes 4 + 4 + 6·11008/4096 = 24.1.

With fp32 activations the 2-byte terms double (34 → 66, 5 → 9, 10 → 18, 24 → 48).  With
context parallelism each GPU holds s/cp of the sequence, so s is s/cp.  Attention
kernels that never store the s×s scores (flash attention) drop the 5as/h term; the
formula keeps it, as the paper does.

A pipeline stage holds ⌈L/p⌉ layers and keeps several micro-batches in flight, as the
pipeline schedules' own closed forms give (:func:`~collsim.parallel.pipeline.peak_inflight`:
GPipe all m, 1F1B min(m, p - s) on stage s, interleaved 1F1B min(2(p-s-1) + (v-1)p + 1, m·v)
chunks of 1/v stage each; Narayanan et al. 2021, Korthikanti et al. §4.2.3).  Stated
separately: the embedding dropout mask (first stage, sbh bytes per micro-batch in flight)
and the output layer (last stage: final layer norm and projection inputs 2·2sbh, fp32
logits 4sbv/t).

Examples
--------
>>> activation_bytes_per_layer(seq=2048, micro=1, hidden=12288, heads=96)  # sbh(34 + 5as/h)
2868903936.0
>>> activation_bytes_per_layer(2048, 1, 12288, 96, tp=8, recompute="selective")
327155712.0
>>> in_flight_microbatches("interleaved", pp=4, microbatches=8, vpp=2)  # (pv + p - 1)/v
5.5
"""

from ..parallel.pipeline.schedules import peak_inflight
from .config.derived import pipeline_schedule
from .config.experts import expert_shard_degree, params_per_gpu

__all__ = [
    "activation_bytes_per_layer",
    "in_flight_microbatches",
    "model_state_bytes",
    "estimate",
]


def activation_bytes_per_layer(
    seq,
    micro,
    hidden,
    heads,
    tp=1,
    sp=False,
    recompute="none",
    elem=2,
    kv_heads=None,
    ffn_hidden=None,
    gated_mlp=False,
):
    """Bytes one transformer layer keeps for the backward pass of one micro-batch.

    ``kv_heads`` (default ``heads``) and ``ffn_hidden`` (default 4·hidden) and a gated MLP
    generalise Korthikanti et al.'s 24 as the module docstring says.
    """
    s, b, h, a, t = seq, micro, hidden, heads, tp
    kv = (kv_heads or a) / a  # K and V relative to Q
    f = (ffn_hidden or 4 * h) / h
    sbh = s * b * h
    score = (2 * elem + 1) * a * s / h  # softmax output, its dropout mask and output: 5as/h
    if recompute == "full":
        return elem * sbh / (t if sp else 1)  # only the layer input is kept
    replicated = 4 * elem + 2  # 10: layer-norm and dropout activations outside the TP regions
    attention = elem * (2 + 2 * kv)  # Q and projection input, K and V: 8 at g = a
    mlp = elem * (3 if gated_mlp else 2) * f  # inner activations: 16 at f = 4h
    split = attention + mlp  # 24: activations inside the column/row-parallel regions
    everywhere = replicated + split  # 34: every activation of the layer, masks at 1 byte
    if sp:  # sequence parallelism splits the replicated part along s
        per = everywhere / t
        return sbh * (per if recompute == "selective" else per + score / t)
    if recompute == "selective":  # attention scores recomputed, not stored
        return sbh * (replicated + split / t)
    return sbh * (replicated + split / t + score / t)


def in_flight_microbatches(schedule, pp, microbatches, vpp=1, stage=0):
    """Micro-batches' worth of activations pipeline ``stage`` holds at its peak.

    The schedules' closed form, in whole stages' worth (an interleaved chunk is 1/v).
    """
    if pp == 1:
        return 1  # gradient accumulation alone finishes each micro-batch first
    name, v = pipeline_schedule(schedule, vpp)
    return _tidy(peak_inflight(name, pp, microbatches, v, stage=stage) / v)


def model_state_bytes(params_per_gpu, zero, shard_degree, precision="bf16"):
    """(parameters, gradients, optimizer) bytes per GPU for ``params_per_gpu`` parameters.

    >>> model_state_bytes(1e9, zero=1, shard_degree=4)  # 2 + 2 + 12/4 bytes per parameter
    (2000000000.0, 2000000000.0, 3000000000.0)
    """
    fp32 = precision == "fp32"
    param_b, grad_b, optim_b = (4, 4, 8) if fp32 else (2, 2, 12)
    n = float(params_per_gpu)
    shard = float(shard_degree)
    params = param_b * n / (shard if zero >= 3 else 1)
    grads = grad_b * n / (shard if zero >= 2 else 1)
    optim = optim_b * n / (shard if zero >= 1 else 1)
    return params, grads, optim


def estimate(cfg, d):
    """The memory dict of a plan: bytes per GPU by part, and how it was counted."""
    dense = d.params - d.routed_params
    per_gpu = params_per_gpu(dense, d.routed_params, cfg.tp, cfg.pp, cfg.ep, cfg.expert_tp)
    experts_per_gpu = per_gpu - dense / (cfg.tp * cfg.pp)
    params, grads, optim = model_state_bytes(
        per_gpu - experts_per_gpu, d.zero, d.shard_degree, cfg.precision
    )
    if experts_per_gpu:  # the routed experts' state is sharded over their edp group
        shard = expert_shard_degree(d.shard_degree, cfg.tp, cfg.ep, cfg.expert_tp)
        expert_state = model_state_bytes(experts_per_gpu, d.zero, shard, cfg.precision)
        params, grads, optim = (a + b for a, b in zip((params, grads, optim), expert_state))
    act = _activations(cfg, d)
    total = params + grads + optim + act["activations"]
    return {
        "params": params,
        "grads": grads,
        "optimizer": optim,
        "activations": act["activations"],
        "total": total,
        "activations_per_layer": act["per_layer"],
        "activations_layers": act["layers"],
        "activations_embedding": act["embedding"],
        "activations_logits": act["logits"],
        "in_flight_microbatches": act["in_flight"],
        "layers_per_stage": d.layers_per_stage,
        "params_per_gpu": per_gpu,
        "expert_params_per_gpu": experts_per_gpu,
        "shard_degree": d.shard_degree,
        "gpu_memory": cfg.gpu_memory,
        "free": cfg.gpu_memory - total,
        "fits": total <= cfg.gpu_memory,
    }


def _activations(cfg, d):
    """Activations on the busiest stage: max(first stage, last stage)."""
    if not (cfg.layers and cfg.hidden and cfg.heads):
        return dict(
            activations=0.0, per_layer=0.0, layers=0.0, embedding=0.0, logits=0.0, in_flight=0
        )
    s = cfg.seq / cfg.cp
    b, h, t, e = d.micro_batch, cfg.hidden, cfg.tp, d.elem
    sp_div = t if cfg.sp else 1
    per_layer = activation_bytes_per_layer(
        s,
        b,
        h,
        cfg.heads,
        t,
        cfg.sp,
        cfg.recompute,
        e,
        cfg.kv_groups,
        d.ffn_hidden,
        cfg.gated_mlp,
    )
    m = max(d.accumulation, 1)
    first = in_flight_microbatches(d.schedule, cfg.pp, m, cfg.vpp)
    last = in_flight_microbatches(d.schedule, cfg.pp, m, cfg.vpp, stage=cfg.pp - 1)
    layers = d.layers_per_stage
    embedding = s * b * h / sp_div  # 1-byte dropout mask of the embedding output
    logits = (
        2 * e * s * b * h / sp_div + 4 * s * b * cfg.vocab / t
    )  # norm + projection in, fp32 logits
    if cfg.pp == 1:
        stages = [(per_layer * layers, embedding, logits)]
    else:
        stages = [(per_layer * layers * first, embedding * first, 0.0)]
        stages.append((per_layer * layers * last, 0.0, logits * last))
    busiest = max(stages, key=sum)
    return dict(
        activations=float(sum(busiest)),
        per_layer=float(per_layer),
        layers=float(busiest[0]),
        embedding=float(busiest[1]),
        logits=float(busiest[2]),
        in_flight=_tidy(first),
    )


def _tidy(x):
    return int(x) if float(x).is_integer() else float(x)
