"""What ``collsim infer`` prints: the tokens, the check, the all-reduces and the step times."""

import json
import math
from typing import NamedTuple

import numpy as np

from ..units import format_size, format_time

__all__ = [
    "matches",
    "human_report",
    "json_report",
    "crossover_table",
    "CollectiveRow",
    "cost_figures",
]


class CollectiveRow(NamedTuple):
    """The all-reduces of one phase (prefill or decode) of one run, per stage's TP group."""

    phase: str  # "prefill" or "decode"
    message_bytes: int  # the buffer each rank reduces: batch · tokens · hidden · 8
    calls: int  # all-reduces of the phase, summed over the stages' TP groups
    algorithm: str  # what ran (what auto chose)
    received_bytes: int  # the most one rank received in one of them
    mean_seconds: float  # simulated, first transfer to last, averaged over the calls


def matches(expected, result, rtol):
    """Tokens equal one device's, and the logits agree to ``rtol`` (rounding of the TP sum)."""
    return bool(
        np.array_equal(expected.tokens, result.tokens)
        and np.allclose(expected.logits, result.logits, rtol=rtol, atol=1e-12)
    )


def collective_rows(result):
    rows = []
    for phase, calls in (
        ("prefill", [c for c in result.all_reduces if c.end <= result.token_times[0]]),
        ("decode", [c for c in result.all_reduces if c.end > result.token_times[0]]),
    ):
        if calls:
            rows.append(
                CollectiveRow(
                    phase,
                    calls[0].message_bytes,
                    len(calls),
                    "/".join(sorted({c.algorithm for c in calls})),
                    max(c.received_bytes for c in calls),
                    sum(c.seconds for c in calls) / len(calls),
                )
            )
    return rows


def cp_collectives(result):
    """``{collective: calls}`` of the CP groups (all-gathers at the prefill, all-reduces and
    token broadcasts after), counted from the trace's tags."""
    calls = {}
    for t in result.result.trace.transfers:
        if getattr(t.tag, "dim", None) == "cp":
            calls.setdefault(t.tag.collective, set()).add((t.tag.group, t.tag.call))
    return {name: len(found) for name, found in sorted(calls.items())}


def request_times(args, result):
    """Each sequence of the batch as a request arriving at 0, its tokens when the last
    stage knew them."""
    from ..parallel.inference.metrics import RequestTimes

    return [RequestTimes(b, 0.0, args.prompt_len, result.token_times) for b in range(args.batch)]


def roofline_steps(result):
    """``(prefill, a decode step)`` SpanCosts of the GPU whose steps take longest."""
    costs = max((out.step_costs for out in result.outputs), key=lambda c: sum(s.seconds for s in c))
    return costs[0], (costs[-1] if len(costs) > 1 else None)


def _figures(args, machine, split, prompt, expected, result, match, roofline):
    from ..parallel.inference.metrics import serving_metrics

    steps = result.decode_step_seconds
    first, step = roofline_steps(result)
    metrics = serving_metrics(request_times(args, result))
    return {
        "tp": split.tp,
        "cp": split.cp,
        "pp": split.pp,
        "ranks": split.world_size,
        "machine": machine.name if machine is not None else f"switch({split.world_size})",
        "prompt": prompt.tolist(),
        "tokens": result.tokens.tolist(),
        "expected_tokens": expected.tokens.tolist(),
        "match": match,
        "max_logit_difference": float(np.max(np.abs(expected.logits - result.logits))),
        "prefill_s": result.token_times[0],
        "decode_step_s": list(steps),
        "kv_cache_bytes_per_rank": max(out.cache_bytes for out in result.outputs),
        "all_reduces": [row._asdict() for row in collective_rows(result)],
        "cp_collectives": cp_collectives(result),
        "roofline": roofline._asdict() | {"critical_batch": roofline.critical_batch},
        "prefill_roofline": cost_figures(first),
        "decode_step_roofline": cost_figures(step) if step is not None else None,
        "metrics": metrics.as_vllm(),
    }


def cost_figures(cost):
    """A SpanCost as JSON figures, with its time and its side of the roofline."""
    return cost._asdict() | {"seconds": cost.seconds, "bound": cost.bound}


def json_report(args, machine, split, prompt, expected, result, match, roofline):
    figures = _figures(args, machine, split, prompt, expected, result, match, roofline)
    return json.dumps(figures, indent=2)


def human_report(args, machine, split, prompt, expected, result, match, roofline):
    f = _figures(args, machine, split, prompt, expected, result, match, roofline)
    lines = [
        f"# collsim infer: tp={split.tp} x cp={split.cp} x pp={split.pp} = {split.world_size} "
        "ranks on "
        f"{f['machine']}",
        f"# model: {args.layers} layers, hidden {args.hidden}, {args.heads} heads "
        f"({args.heads // split.tp} a rank), vocab {args.vocab}, float64; batch {args.batch}, "
        f"prompt {args.prompt_len} tokens, {args.new_tokens} new",
    ]
    for b in range(args.batch):
        lines.append(f"prompt {b}: {' '.join(map(str, f['prompt'][b]))}")
        lines.append(f"tokens {b}: {' '.join(map(str, f['tokens'][b]))}")
    verdict = "MATCH" if match else "MISMATCH"
    lines.append(
        f"{verdict}: the tokens {'equal' if match else 'differ from'} one device's (largest "
        f"logit difference {f['max_logit_difference']:.2g}: the TP all-reduce sums tp partial "
        "products where one device does one matmul)"
    )
    rows = collective_rows(result)
    if rows:
        lines.append("all-reduces (each stage's TP group, 2 a layer a step):")
        lines.append(
            "  phase    message (B)  calls  algorithm   received/rank (B)  time each (sim)"
        )
        for r in rows:
            lines.append(
                f"  {r.phase:<8} {r.message_bytes:>11,}  {r.calls:>5}  {r.algorithm:<10}"
                f"  {r.received_bytes:>17,}  {format_time(r.mean_seconds)}"
            )
    else:
        lines.append("all-reduces: none (tp=1)")
    if f["cp_collectives"]:
        counted = ", ".join(
            f"{n} {name.replace('_', '-')}s" for name, n in f["cp_collectives"].items()
        )
        lines.append(f"context parallel (the CP groups): {counted}")
    steps = f["decode_step_s"]
    lines.append(
        f"prefill ({args.prompt_len} tokens, to the first token): {format_time(f['prefill_s'])}"
    )
    if steps:
        lines.append(
            f"decode step: {format_time(sum(steps) / len(steps))} on average "
            f"({format_time(min(steps))} .. {format_time(max(steps))}), simulated"
        )
    lines.append(
        f"KV cache: {format_size(f['kv_cache_bytes_per_rank'])} per rank "
        f"(heads split over tp={split.tp}, the prompt over cp={split.cp}, layers over "
        f"pp={split.pp})"
    )
    lines.extend(_roofline_lines(args, f, roofline))
    return "\n".join(lines)


def _roofline_lines(args, f, roofline):
    lines = [
        f"roofline per GPU: {roofline.peak_flops / 1e12:g} TFLOP/s, HBM "
        f"{roofline.hbm_bandwidth / 1e12:g} TB/s, {args.dtype}: B_crit = "
        f"{roofline.critical_batch:.0f} tokens a step"
    ]
    for name, cost in (
        ("prefill", f["prefill_roofline"]),
        ("decode step", f["decode_step_roofline"]),
    ):
        if cost is not None:
            lines.append(
                f"  {name}: {cost['flops']:.3g} FLOP, {format_size(round(cost['bytes_read']))} "
                f"read: {cost['bound']}-bound (compute {format_time(cost['compute_seconds'])}, "
                f"HBM {format_time(cost['memory_seconds'])}), the busiest GPU's spans summed"
            )
    m = f["metrics"]
    ttft, itl = m["vllm:time_to_first_token_seconds"], m["vllm:inter_token_latency_seconds"]
    tpot = m["vllm:request_time_per_output_token_seconds"]
    lines.append(
        f"TTFT {format_time(ttft['mean'])} (vllm:time_to_first_token_seconds), TPOT "
        + (f"{format_time(tpot['mean'])}" if tpot["count"] else "-")
        + " (vllm:request_time_per_output_token_seconds), ITL max "
        + (f"{format_time(itl['max'])}" if itl["count"] else "-")
        + f" (vllm:inter_token_latency_seconds), {m['tokens_per_second']:.4g} tokens/s "
        f"({m['vllm:generation_tokens_total']} tokens), simulated"
    )
    return lines


def _size_or(value, word):
    return word if math.isinf(value) else format_size(round(value))


def crossover_table(rows):
    """The crossovers as docs/inference.md shows them (one markdown row a group size)."""
    lines = [
        "# one-shot vs two-shot vs NCCL all-reduce on one node, by the closed forms",
        "| machine | GPUs | one-shot faster below | two-shot faster below (then) |",
        "|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.machine} | {r.ranks} | {_size_or(r.one_to_two_shot, 'always')} | "
            f"{_size_or(r.two_shot_to_nccl, 'never')} ({r.nccl_algorithm}) |"
        )
    alpha_beta = sorted({(r.machine, r.alpha, r.beta) for r in rows})
    for machine, alpha, beta in alpha_beta:
        lines.append(f"# {machine}: NVLink hop α = {format_time(alpha)}, β = {beta / 1e9:g} GB/s")
    return "\n".join(lines)
