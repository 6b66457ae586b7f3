"""``collsim plan --inference`` (and its older name ``collsim infer --plan``): weights and
KV cache per GPU, whether they fit, the largest batch and context that do, and the
roofline's prefill and decode times and B_crit, from the formulas alone (no simulation).

Both commands build one :class:`~collsim.plan.PlanConfig` and print
:func:`collsim.plan.inference.plan_serving`'s plan with :func:`report`; the model may be a
preset (``--model llama2-70b``: grouped-query attention, gated MLP) or a shape.
"""

import json

from ..errors import ConfigError
from ..units import format_size, format_time

__all__ = ["add_inference_arguments", "run_plan", "run_plan_inference", "PLAN_LIMITS"]

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


def add_inference_arguments(parser):
    """``collsim plan``'s serving flags (``--inference`` and what it reads)."""
    group = parser.add_argument_group("inference (--inference: serving the model, not training it)")
    group.add_argument(
        "--inference",
        action="store_true",
        help="plan serving instead of training: weights and KV cache per GPU (2 · layers/pp "
        "· kv_heads/tp · head_dim · tokens/cp · bytes a sequence), the largest batch and "
        "context that fit, the roofline's prefill and decode step and B_crit; exit 1 if "
        "they do not fit",
    )
    group.add_argument(
        "--batch", type=int, default=1, metavar="N", help="sequences decoded together"
    )
    group.add_argument(
        "--prompt-len",
        type=int,
        default=None,
        metavar="N",
        help="prompt tokens a sequence (default: the model's --seq)",
    )
    group.add_argument(
        "--new-tokens", type=int, default=0, metavar="N", help="tokens generated a sequence"
    )
    group.add_argument(
        "--dtype",
        default="bf16",
        help="precision of the weights and the KV cache: fp8, bf16, fp16, fp32",
    )
    group.add_argument(
        "--hbm",
        default="2TB/s",
        metavar="RATE",
        help="each GPU's HBM bandwidth without --machine (a preset has its own: 3.35 TB/s "
        "on dgx-h100, 2.039 TB/s on dgx-a100); the peak is --compute-rate",
    )


def _check(args, limits):
    from .flag_checks import check_int

    for flag, limit in limits.items():
        minimum = 0 if flag == "--new-tokens" else 1
        value = getattr(args, flag[2:].replace("-", "_"), None)
        if value is not None:
            check_int(value, flag, minimum=minimum, maximum=limit)


def run_plan_inference(args, cfg):
    """``collsim plan --inference``: the plan of ``cfg``, the PlanConfig the flags describe
    (``collsim plan`` builds it); 0 if the weights and KV cache fit in --gpu-memory, 1 if
    not."""
    from .. import hardware
    from .flag_checks import flag_value

    limits = {k: v for k, v in PLAN_LIMITS.items() if k not in ("--layers", "--hidden")}
    _check(args, {k: v for k, v in limits.items() if k in ("--batch", "--prompt-len")})
    _check(args, {"--new-tokens": PLAN_LIMITS["--new-tokens"]})
    machine = None
    if args.machine is not None:
        if str(args.machine).lower().endswith(hardware.FILE_SUFFIXES):
            machine = hardware.load(args.machine)
        else:
            machine = flag_value(hardware.preset, args.machine, "--machine")
    prompt = cfg.seq if args.prompt_len is None else args.prompt_len
    return report(args, cfg, machine, args.batch, prompt, args.new_tokens)


def run_plan(args, machine):
    """``collsim infer --plan``: the same plan for infer's toy-shaped flags (a GPT-2-shaped
    decoder of --layers, --hidden, --heads, --vocab on --preset)."""
    from ..plan import PlanConfig

    _check(args, PLAN_LIMITS)
    shape = {name: getattr(args, name) for name in ("layers", "hidden", "heads", "vocab")}
    split = {name: getattr(args, name) for name in ("tp", "pp", "cp")}
    seq = args.prompt_len + args.new_tokens
    cfg = PlanConfig(**shape, **split, seq=seq, gpu_memory=_gpu_memory(args.gpu_memory))
    return report(args, cfg, machine, args.batch, args.prompt_len, args.new_tokens)


def _gpu_memory(text):
    from ..units import parse_size
    from .flag_checks import flag_value

    memory = flag_value(parse_size, text, "--gpu-memory")
    if not memory > 0:
        raise ConfigError(f"--gpu-memory {text!r}: must be > 0 bytes (e.g. 80GB)")
    return memory


def report(args, cfg, machine, batch, prompt, new_tokens):
    """Check the split, plan, print (text or --json); 0 if it fits, 1 if not."""
    from ..plan.inference import plan_serving
    from .infer_serve import roofline_of

    _check_split(cfg, prompt)
    rate = machine.compute_rate if machine is not None else cfg.compute_rate
    roofline = roofline_of(args, machine, rate)
    plan = plan_serving(cfg, roofline, batch, prompt, new_tokens)
    if args.json:
        from .infer_report import cost_figures

        figures = plan._asdict()
        figures["prefill"], figures["decode"] = map(cost_figures, (plan.prefill, plan.decode))
        print(json.dumps(figures, indent=2))
    else:
        print(_human(args, cfg, machine, roofline, plan, batch, prompt, new_tokens))
    return 0 if plan.fits else 1


def _check_split(cfg, prompt):
    """tp divides the heads, hidden and MLP, pp the layers, cp the prompt (exit 2)."""
    from ..parallel.inference import InferenceSplit
    from ..parallel.inference.roofline import ServedShape
    from ..plan.inference import check_kv_split

    split = InferenceSplit(cfg.tp, cfg.pp, None, cfg.cp)
    try:
        split.check(cfg)
        split.check_prompt(prompt)
        check_kv_split(ServedShape.of(cfg), cfg.tp)
    except ConfigError as exc:
        raise ConfigError(f"--tp {cfg.tp} --cp {cfg.cp} --pp {cfg.pp}: {exc}") from None


def _human(args, cfg, machine, roofline, plan, batch, prompt, new_tokens):
    gpu = machine.gpu if machine is not None else "a GPU"
    tokens = prompt + new_tokens
    used = plan.weight_bytes + plan.kv_cache_bytes
    verdict = "FITS" if plan.fits else "DOES NOT FIT"
    model = cfg.model or f"{cfg.layers} layers, hidden {cfg.hidden}, {cfg.heads} heads"
    kv = cfg.kv_heads or cfg.heads
    b = roofline.bytes_per_element
    lines = [
        f"# inference plan: {model} ({kv} key/value heads), {args.dtype}; tp={cfg.tp} x "
        f"pp={cfg.pp} x cp={cfg.cp}; {batch} sequences of {tokens} tokens ({prompt} prompt "
        f"+ {new_tokens} new)",
        f"# {gpu}: {roofline.peak_flops / 1e12:g} TFLOP/s, HBM "
        f"{roofline.hbm_bandwidth / 1e12:g} TB/s, {format_size(plan.gpu_memory)}",
        f"weights per GPU:  {format_size(plan.weight_bytes)} (parameters / (tp · pp) · {b} B)",
        f"KV cache per GPU: {format_size(plan.kv_cache_bytes)} "
        f"({format_size(plan.kv_bytes_per_token)} a token, "
        f"{format_size(plan.kv_bytes_per_sequence)} a sequence: 2 · layers/pp · kv_heads/tp "
        f"· head_dim · tokens/cp · {b} B)",
        f"{verdict}: {format_size(used)} of {format_size(plan.gpu_memory)}; at most "
        f"{plan.max_batch} sequences of {tokens} tokens, or {plan.max_tokens} tokens a "
        f"sequence at batch {batch}, fit beside the weights",
        f"prefill of one prompt ({prompt // cfg.cp} tokens a GPU): "
        f"{format_time(plan.prefill.seconds)}, {plan.prefill.bound}-bound "
        f"(compute {format_time(plan.prefill.compute_seconds)}, HBM "
        f"{format_time(plan.prefill.memory_seconds)}): about the TTFT, network aside",
        f"decode step at batch {batch}, {tokens} tokens of context: "
        f"{format_time(plan.decode.seconds)}, {plan.decode.bound}-bound (compute "
        f"{format_time(plan.decode.compute_seconds)}, HBM "
        f"{format_time(plan.decode.memory_seconds)}): about the TPOT, network aside",
        f"B_crit = peak / HBM · {b} B / 2 = {plan.critical_batch:.0f} tokens a step to be "
        "compute-bound (weights alone)",
    ]
    return "\n".join(lines)
