"""Time per optimizer step: compute, communication per parallel dimension, and their ratio.

Communication uses :func:`collsim.collectives.formulas.closed_form`, the same closed forms
the collectives are tested against (one source; ring algorithms throughout).  A
point-to-point send is a 2-rank tree broadcast there: one step, S bytes, α + S/β.

Per step, on one GPU of the busiest pipeline stage (L_s = ⌈L/p⌉ layers, m micro-batches,
activation A = b·(s/cp)·h bytes·element, N_g = N/(t·p) parameters)::

    tp  Megatron f/g: all-reduce of A after attention and after the MLP, forward and
        backward, 4 per layer per micro-batch (6 with full recompute); with sequence
        parallelism each becomes an all-gather plus a reduce-scatter (same bytes).
    dp  ZeRO-0: gradient all-reduce of N_g·b once per step; ZeRO-1: reduce-scatter of the
        gradients and all-gather of the parameters once; ZeRO-2: the reduce-scatter every
        micro-batch (no full gradient is kept to accumulate into); ZeRO-3/FSDP: all-gather
        for forward and for backward and reduce-scatter, every micro-batch.  Under HSDP
        the shards also all-reduce across the dp_replicate groups.  The group holds the
        dp·cp ranks that share weights.
    pp  one activation send forward and one gradient send backward of A/t per micro-batch
        and virtual stage (Megatron's scatter/gather split across the TP ranks).
    cp  ring attention as collsim runs it (:mod:`collsim.parallel.context.formulas`): per
        layer and micro-batch a block of K and V, 2·b·(s/cp)·h·(g/a)/t bytes·element with g
        key/value heads of a, is sent on cp−1 times forward and again backward, and its
        dK/dV partial sums cp times (the last hop home), one send per hop.

Ranks are placed as Megatron does (tp fastest, then cp, dp, pp): a group whose ranks fit in
one node uses the intra-node bandwidth and latency, any other the inter-node ones.

Compute is 6·N·tokens FLOP per step (8·N with full recompute: the forward runs twice;
selective recompute adds the attention-score matmuls, 4·s·h·L per token, Korthikanti et al.),
spread over the world, stretched by layer imbalance ⌈L/p⌉·p/L and by the pipeline bubble,
the schedules' own closed form (:func:`collsim.parallel.pipeline.schedules.bubble_fraction`,
(p-1)/(v·m + p-1), Narayanan et al. 2021).  The ratio of compute to DP communication
(6·N·D/P over 2·N·b/BW, a first-principles estimate) is 3·D·BW/(P·b): N cancels; D is
the tokens per step of one data-parallel rank, BW its bandwidth, P the compute rate and b
the bytes of a gradient element.

:class:`Candidate` sums up one configuration's estimates, as the search ranks them and the
suggestions show them.

Examples
--------
>>> from collsim.plan.config import PlanConfig, derive
>>> cfg = PlanConfig(world_size=8, params=1e9, global_batch=8, seq=1024, inter_bandwidth="25GB/s")
>>> comm = communication(cfg, derive(cfg))
>>> comm["dp"]["ops"]["gradient_all_reduce"]["bytes_per_call"]  # 2(K-1)/K · 2 GB
3500000000.0
"""

from dataclasses import dataclass

from ...parallel.context.formulas import ring_attention_hops
from ...parallel.pipeline.schedules import bubble_fraction
from ..config.derived import pipeline_schedule
from .ops import add_op as _add
from .ops import dimension as _dimension
from .sync import data_parallel as _data_parallel
from .sync import expert_parallel as _expert_parallel

__all__ = [
    "communication",
    "compute",
    "pipeline_bubble",
    "scaling",
    "Candidate",
    "candidate",
    "DIMENSIONS",
]

DIMENSIONS = ("tp", "cp", "dp", "ep", "pp")


def communication(cfg, d):
    """Bytes each GPU sends and seconds it spends per step, by dimension, plus the total."""
    t, p, c = cfg.tp, cfg.pp, cfg.cp
    m = d.accumulation
    e = d.elem
    shape = bool(cfg.layers and cfg.hidden)
    layers = d.layers_per_stage or 0
    act = d.micro_batch * cfg.seq / c * (cfg.hidden or 0) * e  # A: one micro-batch's activation
    full = cfg.recompute == "full"

    tp = _dimension(cfg, t, 1)
    if t > 1 and shape:
        passes = ["attention_forward", "mlp_forward", "attention_backward", "mlp_backward"]
        passes += ["attention_recompute", "mlp_recompute"] if full else []
        for name in passes:
            if cfg.sp:
                _add(tp, f"{name}_all_gather", "all_gather", act, layers * m)
                _add(tp, f"{name}_reduce_scatter", "reduce_scatter", act, layers * m)
            else:
                _add(tp, name, "all_reduce", act, layers * m)

    cp = _dimension(cfg, c, t)
    if c > 1 and shape:
        # a block: K and V of the rank's tokens and its tp share of the g key/value heads
        block = 2 * d.micro_batch * cfg.seq / c * cfg.hidden * cfg.kv_groups / cfg.heads / t * e
        hops = ring_attention_hops(c)  # the simulator's hop counts, from its closed form
        passes = [("kv_forward", hops.kv), ("kv_backward", hops.kv), ("dkv_backward", hops.dkv)]
        passes += [("kv_recompute", hops.kv)] if full else []  # the forward runs twice
        for name, sends in passes:
            _add(cp, name, "broadcast", block, layers * m * sends, ranks=2, algorithm="tree")

    dp = _data_parallel(cfg, d, m)
    ep = _expert_parallel(cfg, d, m, act, full)

    pp = _dimension(cfg, p, t * c * d.dp)
    if p > 1 and shape:
        chunks = cfg.vpp if d.schedule == "interleaved" else 1
        send = act / t
        _add(pp, "activation_send", "broadcast", send, m * chunks, ranks=2, algorithm="tree")
        _add(pp, "gradient_send", "broadcast", send, m * chunks, ranks=2, algorithm="tree")

    dims = {"tp": tp, "cp": cp, "dp": dp, "ep": ep, "pp": pp}
    total = {
        "bytes_per_rank": sum(x["bytes_per_rank"] for x in dims.values()),
        "time_s": sum(x["time_s"] for x in dims.values()),
    }
    return {**dims, "total": total}


def compute(cfg, d):
    """FLOP per step and the seconds they take, stretched by imbalance and the bubble."""
    factor = 8 if cfg.recompute == "full" else 6
    tokens = d.tokens_per_step
    n = d.active_params or d.params  # an MoE token passes through top_k of E experts
    ideal = 6 * n * tokens / (d.world * cfg.compute_rate)
    # selective recompute reruns QKᵀ and scores·V: 4·s·h FLOP per token per layer
    selective = cfg.recompute == "selective" and cfg.layers and cfg.hidden
    extra = 4 * cfg.seq * cfg.hidden * cfg.layers * tokens if selective else 0.0
    imbalance = d.layers_per_stage * cfg.pp / cfg.layers if cfg.layers else 1.0
    bubble = pipeline_bubble(cfg, d)
    flops = factor * n * tokens + extra
    time = flops / (d.world * cfg.compute_rate) * imbalance / (1 - bubble)
    return {
        "flop_per_token_per_param": factor,
        "active_params": n,
        "recompute_flops_per_step": (factor - 6) * n * tokens + extra,
        "flops_per_step": flops,
        "flops_per_gpu": flops / d.world,
        "tokens_per_step": tokens,
        "compute_rate": cfg.compute_rate,  # FLOP/s per GPU
        "ideal_time_s": ideal,  # 6·N·tokens / (world·P): no bubble, no recompute, no comm
        "imbalance": imbalance,
        "bubble_fraction": bubble,  # (p-1)/(v·m + p-1) of the stretched compute time
        "time_s": time,
    }


def pipeline_bubble(cfg, d):
    """The idle share of a stage's step: the schedules' own closed form,
    (p-1)/(m+p-1), or (p-1)/(v·m + p-1) interleaved."""
    name, v = pipeline_schedule(d.schedule, cfg.vpp)
    return bubble_fraction(name, cfg.pp, max(d.accumulation, 1e-12), v)


def scaling(cfg, d, comm, comp):
    """Step time, the compute/communication ratio 3·D·BW/(P·b) and the efficiency."""
    dp = comm["dp"]
    tokens_per_dp_rank = d.tokens_per_step / (d.dp * cfg.cp)  # D
    bandwidth = dp["bandwidth"]
    ratio = 3 * tokens_per_dp_rank * bandwidth / (cfg.compute_rate * d.elem)
    step = comp["time_s"] + comm["total"]["time_s"]
    overlapped = comp["time_s"] + (comm["total"]["time_s"] - dp["time_s"])
    overlapped += max(0.0, dp["time_s"] - comp["time_s"])
    return {
        "tokens_per_dp_rank": tokens_per_dp_rank,
        "dp_bandwidth": bandwidth,
        "compute_to_communication": ratio,  # 3·D·BW/(P·b): 6·N·D/P over 2·N·b/BW
        "compute_to_dp_time": comp["time_s"] / dp["time_s"] if dp["time_s"] else float("inf"),
        "step_time_s": step,  # compute + all communication, nothing overlapped
        "step_time_overlapped_s": overlapped,  # DP traffic hidden behind compute where it can be
        "efficiency": comp["ideal_time_s"] / step if step else 1.0,
        "efficiency_overlapped": comp["ideal_time_s"] / overlapped if overlapped else 1.0,
    }


@dataclass(frozen=True)
class Candidate:
    """One valid configuration with its estimates."""

    config: object  # PlanConfig
    dp: int
    accumulation: int
    memory_total: float  # bytes per GPU
    compute_time_s: float
    communication_time_s: float
    activation_bytes: float  # the activation part of memory_total
    tp_communication_time_s: float  # the tensor-parallel part of communication_time_s
    step_time_s: float
    efficiency: float
    warnings: tuple = ()  # rule ids of the warnings it raises

    def to_dict(self):
        c = self.config
        return {
            "world_size": c.world_size,
            "tp": c.tp,
            "pp": c.pp,
            "dp": self.dp,
            "cp": c.cp,
            "vpp": c.vpp,
            "sp": c.sp,
            "micro_batch": c.micro_batch,
            "accumulation": self.accumulation,
            "global_batch": c.global_batch,
            "zero": c.zero,
            "recompute": c.recompute,
            "memory_total": self.memory_total,
            "activation_bytes": self.activation_bytes,
            "compute_time_s": self.compute_time_s,
            "communication_time_s": self.communication_time_s,
            "tp_communication_time_s": self.tp_communication_time_s,
            "step_time_s": self.step_time_s,
            "efficiency": self.efficiency,
            "warnings": list(self.warnings),
        }


def candidate(cfg, d, mem, warnings=()):
    """A :class:`Candidate` with the cost estimates of an already valid ``cfg``."""
    comm = communication(cfg, d)
    comp = compute(cfg, d)
    scale = scaling(cfg, d, comm, comp)
    return Candidate(
        config=cfg,
        dp=int(d.dp),
        accumulation=int(d.accumulation),
        memory_total=mem["total"],
        compute_time_s=comp["time_s"],
        communication_time_s=comm["total"]["time_s"],
        activation_bytes=mem["activations"],
        tp_communication_time_s=comm["tp"]["time_s"],
        step_time_s=scale["step_time_s"],
        efficiency=scale["efficiency"],
        warnings=tuple(w.rule for w in warnings),
    )
