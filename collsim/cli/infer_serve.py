"""``collsim infer --requests N [--disaggregate P:D]``: many requests, continuous batching,
colocated and (with ``--disaggregate``) prefill and decode on separate pools of GPUs."""

import json

from ..errors import ConfigError
from ..units import format_size, format_time

__all__ = ["DTYPES", "parse_disaggregate", "roofline_of", "checked_split", "run_serving"]

DTYPES = {"fp8": 1, "bf16": 2, "fp16": 2, "fp32": 4}  # bytes a weight or cached value
MAX_REQUESTS = 256


def parse_disaggregate(text):
    """``"P:D"`` as (P, D): P prefill GPUs and D decode GPUs, both >= 1.

    >>> parse_disaggregate("1:3")
    (1, 3)
    >>> parse_disaggregate("0:4")
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: --disaggregate '0:4': P and D must each be >= 1 (P prefill \
GPUs, D decode GPUs); nearest valid --disaggregate 1:4
    """
    parts = str(text).split(":")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ConfigError(
            f"--disaggregate {text!r}: write P:D, the prefill and decode GPUs (e.g. 1:3)"
        )
    p, d = (int(x) for x in parts)
    if p < 1 or d < 1:
        raise ConfigError(
            f"--disaggregate {text!r}: P and D must each be >= 1 (P prefill GPUs, D decode "
            f"GPUs); nearest valid --disaggregate {max(p, 1)}:{max(d, 1)}"
        )
    if p + d > 64:
        raise ConfigError(
            f"--disaggregate {text!r}: {p + d} GPUs, at most 64 a run; nearest valid "
            f"--disaggregate {max(1, p * 64 // (p + d))}:{max(1, d * 64 // (p + d))}"
        )
    return p, d


def roofline_of(args, machine, cluster_rate):
    """The GPUs' roofline: the preset's peak and HBM bandwidth, or the generic switch's
    compute rate and ``--hbm``; weights and KV cache read at ``--dtype``."""
    from ..parallel.inference.roofline import Roofline
    from ..units import parse_rate
    from .flag_checks import flag_value

    if args.dtype not in DTYPES:
        raise ConfigError(f"--dtype {args.dtype!r}: choose one of {', '.join(DTYPES)}")
    if machine is not None:
        return Roofline.of_machine(machine, DTYPES[args.dtype])
    hbm = flag_value(parse_rate, args.hbm, "--hbm")
    if not 0 < hbm < float("inf"):
        raise ConfigError(f"--hbm {args.hbm!r}: an HBM bandwidth > 0 (e.g. '2TB/s')")
    return Roofline(cluster_rate, hbm, DTYPES[args.dtype])


def checked_split(args, config, algorithm):
    """The InferenceSplit of --tp, --pp and --cp, refused by its flags if it does not
    divide the model or the prompt."""
    from ..parallel.inference import InferenceSplit

    split = InferenceSplit(args.tp, args.pp, algorithm, args.cp)
    try:
        split.check(config)
        split.check_prompt(args.prompt_len)
    except ConfigError as exc:
        raise ConfigError(f"--tp {args.tp} --cp {args.cp} --pp {args.pp}: {exc}") from None
    return split


def check_serving(args):
    """Refuse what the serving run does not do, before any work."""
    from .flag_checks import check_int

    check_int(args.requests, "--requests", minimum=1, maximum=MAX_REQUESTS)
    if (args.tp, args.pp, args.cp) != (1, 1, 1):
        raise ConfigError(
            f"--requests with --tp {args.tp} --pp {args.pp} --cp {args.cp}: each serving "
            "instance is one GPU (the pools of --disaggregate are GPUs, not TP groups); "
            "nearest valid: --tp 1 --pp 1 --cp 1"
        )
    if args.disaggregate is None:
        raise ConfigError(
            "--requests needs --disaggregate P:D (P prefill GPUs, D decode GPUs), which it "
            "compares with P+D colocated GPUs; e.g. --disaggregate 1:3"
        )
    return parse_disaggregate(args.disaggregate)


def _cluster(machine, gpus, args):
    from .. import hardware, topology
    from ..runtime import Cluster

    if machine is None:
        return Cluster(topology.switch(gpus, args.bandwidth, args.latency))
    return Cluster(hardware.topology(machine, -(-gpus // machine.gpus_per_node)))


def run_serving(args, machine):
    """Serve ``--requests`` colocated on P+D GPUs and disaggregated P:D; 0 if every
    request's tokens equal one device's in both."""
    from ..nn import Decoder, DecoderConfig
    from ..parallel.inference.serving import Deployment, serve, workload

    p, d = check_serving(args)
    top = max(3 * args.new_tokens // 2, 1)
    config = DecoderConfig(
        args.vocab, args.hidden, args.heads, args.layers, max_len=args.prompt_len + top
    )
    model = Decoder.init(config)
    requests = workload(args.requests, args.prompt_len, args.new_tokens, args.vocab, args.seed)
    runs = []
    for deployment in (Deployment(0, p + d, args.batch), Deployment(p, d, args.batch)):
        cluster = _cluster(machine, deployment.gpus, args)
        roofline = roofline_of(args, machine, cluster.compute_rate)
        runs.append(serve(model, requests, deployment, cluster, roofline))
    match = all(run.matches(model) for run in runs)
    if args.json:
        print(json.dumps(_figures(args, machine, roofline, runs, match), indent=2))
    else:
        print(_human(args, machine, roofline, runs, match))
    return 0 if match else 1


def _name(deployment):
    if deployment.disaggregated:
        return f"disaggregated {deployment.prefill}:{deployment.decode}"
    return f"colocated x{deployment.decode}"


def _figures(args, machine, roofline, runs, match):
    return {
        "machine": machine.name if machine is not None else "switch",
        "roofline": roofline._asdict() | {"critical_batch": roofline.critical_batch},
        "workload": {
            "requests": args.requests,
            "prompt_tokens": args.prompt_len,
            "output_tokens": [r.output_tokens for r in runs[0].requests],
            "batch": args.batch,
            "arrival": "all at t = 0",
        },
        "match": match,
        "deployments": [
            {
                "deployment": _name(run.deployment),
                "metrics": run.metrics.as_vllm(),
                "kv_transfers": len(run.kv_transfers),
                "kv_bytes": sum(t.nbytes for t in run.kv_transfers),
                "kv_transfer_mean_s": (
                    sum(t.end - t.start for t in run.kv_transfers) / len(run.kv_transfers)
                    if run.kv_transfers
                    else 0.0
                ),
            }
            for run in runs
        ],
    }


def _human(args, machine, roofline, runs, match):
    where = machine.name if machine is not None else "a generic switch"
    lines = [
        f"# collsim infer: {args.requests} requests (all at t = 0), prompt {args.prompt_len} "
        f"tokens, output {args.new_tokens // 2 or 1}..{max(3 * args.new_tokens // 2, 1)}, "
        f"a decode batch of at most {args.batch}, on {where}",
        f"# model: {args.layers} layers, hidden {args.hidden}, {args.heads} heads, vocab "
        f"{args.vocab}; each GPU one instance; {args.dtype} on the roofline "
        f"(B_crit = {roofline.critical_batch:.0f} tokens a step)",
        f"{'deployment':<20} {'TTFT mean':>10} {'TTFT p99':>10} {'TPOT mean':>10} "
        f"{'ITL p99':>10} {'tokens/s':>10}",
    ]
    for run in runs:
        m = run.metrics
        lines.append(
            f"{_name(run.deployment):<20} {format_time(m.ttft.mean):>10} "
            f"{format_time(m.ttft.p99):>10} {format_time(m.tpot.mean):>10} "
            f"{format_time(m.itl.p99):>10} {m.tokens_per_second:>10.3g}"
        )
    base, split = runs[0].metrics, runs[1].metrics
    lines.append(
        f"disaggregated / colocated: TTFT x{split.ttft.mean / base.ttft.mean:.2f}, "
        f"TPOT x{split.tpot.mean / base.tpot.mean:.2f}, throughput "
        f"x{split.tokens_per_second / base.tokens_per_second:.2f}"
    )
    moved = runs[1].kv_transfers
    if moved:
        each = sum(t.end - t.start for t in moved) / len(moved)
        lines.append(
            f"KV caches moved: {len(moved)}, {format_size(sum(t.nbytes for t in moved))} "
            f"(float64 arrays), {format_time(each)} each on average, simulated"
        )
    lines.append(
        "(vLLM's names: TTFT vllm:time_to_first_token_seconds, TPOT "
        "vllm:request_time_per_output_token_seconds, ITL vllm:inter_token_latency_seconds)"
    )
    verdict = "MATCH" if match else "MISMATCH"
    lines.append(
        f"{verdict}: every request's tokens {'equal' if match else 'differ from'} one "
        "device generating it alone, in both deployments"
    )
    return "\n".join(lines)
