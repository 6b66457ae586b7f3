"""``collsim infer --plan``: weights and KV cache per GPU, whether they fit, and the
roofline's prefill and decode times, from the formulas alone (no simulation)."""

import json

from ..errors import ConfigError
from ..units import format_size, format_time

__all__ = ["run_plan", "PLAN_LIMITS"]

# closed forms only, so real shapes are welcome; the bounds keep the integers sane
PLAN_LIMITS = {
    "--tp": 1024,
    "--pp": 1024,
    "--cp": 1024,
    "--layers": 1024,
    "--hidden": 1 << 17,
    "--heads": 1024,
    "--vocab": 1 << 20,
    "--batch": 1 << 16,
    "--prompt-len": 1 << 22,
    "--new-tokens": 1 << 22,
}


def _check(args):
    from ..nn import DecoderConfig
    from ..units import parse_size
    from .flag_checks import check_int, flag_value
    from .infer_serve import checked_split

    for flag, limit in PLAN_LIMITS.items():
        check_int(getattr(args, flag[2:].replace("-", "_")), flag, minimum=1, maximum=limit)
    memory = flag_value(parse_size, args.gpu_memory, "--gpu-memory")
    if not memory > 0:
        raise ConfigError(f"--gpu-memory {args.gpu_memory!r}: must be > 0 bytes (e.g. 80GB)")
    tokens = args.prompt_len + args.new_tokens
    config = DecoderConfig(args.vocab, args.hidden, args.heads, args.layers, max_len=tokens)
    checked_split(args, config, None)
    return config, memory, tokens


def run_plan(args, machine):
    """Print the plan; 0 if weights and KV cache fit in --gpu-memory, 1 if not."""
    from ..parallel.inference.roofline import ServedShape
    from ..plan.inference import plan_inference
    from .infer_serve import roofline_of

    config, memory, tokens = _check(args)
    rate = machine.compute_rate if machine is not None else 100e12  # a Cluster's default
    roofline = roofline_of(args, machine, rate)
    plan = plan_inference(
        ServedShape.of(config),
        roofline,
        args.batch,
        tokens,
        memory,
        args.tp,
        args.pp,
        args.cp,
        prompt=args.prompt_len // args.cp,
    )
    if args.json:
        from .infer_report import cost_figures

        figures = plan._asdict()
        figures["prefill"], figures["decode"] = map(cost_figures, (plan.prefill, plan.decode))
        print(json.dumps(figures, indent=2))
    else:
        print(_human(args, machine, roofline, plan, tokens))
    return 0 if plan.fits else 1


def _human(args, machine, roofline, plan, tokens):
    gpu = machine.gpu if machine is not None else "a GPU"
    used = plan.weight_bytes + plan.kv_cache_bytes
    verdict = "FITS" if plan.fits else "DOES NOT FIT"
    lines = [
        f"# collsim infer --plan: {args.layers} layers, hidden {args.hidden}, vocab "
        f"{args.vocab}, {args.dtype}; tp={args.tp} x pp={args.pp} x cp={args.cp}; "
        f"{args.batch} sequences of {tokens} tokens ({args.prompt_len} prompt + "
        f"{args.new_tokens} new)",
        f"# {gpu}: {roofline.peak_flops / 1e12:g} TFLOP/s, HBM "
        f"{roofline.hbm_bandwidth / 1e12:g} TB/s, {format_size(plan.gpu_memory)}",
        f"weights per GPU:  {format_size(plan.weight_bytes)}",
        f"KV cache per GPU: {format_size(plan.kv_cache_bytes)} "
        f"({format_size(plan.kv_bytes_per_sequence)} a sequence: 2 · layers/pp · tokens/cp "
        f"· hidden/tp · {roofline.bytes_per_element} B)",
        f"{verdict}: {format_size(used)} of {format_size(plan.gpu_memory)}; at most "
        f"{plan.max_batch} sequences of {tokens} tokens fit beside the weights",
        f"prefill of one prompt ({args.prompt_len // args.cp} tokens a GPU): "
        f"{format_time(plan.prefill.seconds)}, {plan.prefill.bound}-bound "
        f"(compute {format_time(plan.prefill.compute_seconds)}, HBM "
        f"{format_time(plan.prefill.memory_seconds)}): about the TTFT, network aside",
        f"decode step at batch {args.batch}, {tokens} tokens of context: "
        f"{format_time(plan.decode.seconds)}, {plan.decode.bound}-bound (compute "
        f"{format_time(plan.decode.compute_seconds)}, HBM "
        f"{format_time(plan.decode.memory_seconds)}): about the TPOT, network aside",
        f"B_crit = peak / HBM · {roofline.bytes_per_element} B / 2 = "
        f"{plan.critical_batch:.0f} tokens a step to be compute-bound (weights alone)",
    ]
    return "\n".join(lines)
