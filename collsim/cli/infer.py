"""``collsim infer``: greedy decoding, tensor- and pipeline-parallel, on the virtual cluster."""

from ..errors import ConfigError
from .common import Formatter
from .exit_status import Meaning
from .infer_run import machine_of, messages

__all__ = ["register", "run", "LIMITS", "check_sizes"]

EXIT_STATUS = Meaning(
    ok="the generated tokens equal one device's",
    failed="they do not (or the logits differ beyond rounding)",
)

# one run takes well under a second within these; the oracle and every rank hold the
# float64 weights, vocab x hidden of them for the embeddings and the head
LIMITS = {
    "--tp": 64,
    "--pp": 64,
    "--cp": 64,
    "--layers": 64,
    "--hidden": 1024,
    "--heads": 256,
    "--vocab": 8192,
    "--batch": 16,
    "--prompt-len": 512,
    "--new-tokens": 512,
}
LOGIT_TOLERANCE = 1e-9  # relative: the TP all-reduce sums tp partial products, one device one

DESCRIPTION = """\
Generate text greedily from a small decoder (token and position embeddings, pre-LayerNorm
transformer blocks, an LM head; float64 weights from --seed) on tp x pp virtual GPUs, and
check the tokens against one device running the same model with a KV cache.

The first step is the prefill (the whole prompt at once); every later step decodes one
token.  Under tensor parallelism each rank holds heads/tp attention heads (and their slice
of the KV cache) and 1/tp of the MLP (Megatron-LM's column/row split), so every layer ends
its attention and its MLP with an all-reduce over the TP group: two a layer a token, of
batch x hidden x 8 bytes when decoding, tiny messages whose time is mostly latency.
Pipeline stages hold layers/pp consecutive layers and pass (batch, tokens, hidden)
activations forward; the last stage sends the chosen token back to the first.  Context
parallelism splits the prompt: each CP rank prefills prompt/cp tokens (all-gathering the
keys and values) and keeps their KV cache; a decode step combines the softmax over the CP
group with two all-reduces a layer (the largest score, then the sums).

A compute span takes the roofline's time: the longer of its FLOPs at the GPU's peak and
its HBM reads (the weights it multiplies by, the KV cache it attends over, at --dtype) at
the GPU's HBM bandwidth, so a decode step is memory-bound below B_crit = peak / HBM ·
bytes / 2 tokens a step (295 on an H100 in bf16) and a long prefill compute-bound.

Prints the tokens, MATCH or MISMATCH against one device, each collective's bytes, the
simulated time of the prefill and of each decode step, which side of the roofline each is
on, and vLLM's serving metrics: time to first token (TTFT), time per output token (TPOT),
inter-token latency (ITL), tokens per second.  --crossovers prints, instead, the sizes
where one-shot, two-shot and NCCL's algorithms cross over on the preset (vLLM's custom
all-reduce uses one-shot and two-shot for these small messages).

--requests N --disaggregate P:D serves N requests (all arriving at t = 0; output lengths
drawn around --new-tokens) with continuous batching on P+D one-GPU instances, first
colocated (every GPU prefills and decodes; a waiting prefill goes before the next decode
step), then with P GPUs that only prefill and send each request's KV cache over the
network to D GPUs that only decode (DistServe, Splitwise), and compares TTFT and TPOT.

--plan prints, without running, the weights and KV cache per GPU of --batch sequences of
--prompt-len + --new-tokens positions at --dtype, whether they fit in --gpu-memory, the
largest batch that does, and the roofline's prefill and decode step times (any size): the
plan `collsim plan --inference` prints, which also takes model presets (--model llama2-70b)
with their key/value heads."""

EPILOG = """\
examples:
  collsim infer --tp 2 --pp 2 --layers 4 --hidden 64 --heads 4 --prompt-len 8 --new-tokens 8
  a long prompt split over 4 ranks:     collsim infer --tp 2 --cp 4 --prompt-len 64
  on a DGX H100, one-shot all-reduce:   collsim infer --tp 8 --heads 8 --preset dgx-h100 -a one_shot
  the model's crossover sizes:          collsim infer --crossovers --preset dgx-a100
  the figures as data:                  ... --json
  prefill and decode pools vs colocated: collsim infer --requests 8 --disaggregate 1:3 --batch 2
  (docs/inference.md states a larger workload, with the link it needs and why)
  KV cache per GPU of a 7B shape:       collsim infer --plan --layers 32 --hidden 4096 --heads 32
  (or of a preset:                      collsim plan --inference --model llama2-70b --tp 8)
"""


def register(subparsers):
    parser = subparsers.add_parser(
        "infer",
        help="greedy decoding on tp x pp GPUs (KV cache, per-token all-reduces) vs one device",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=Formatter,
    )
    split = parser.add_argument_group("parallelism")
    split.add_argument(
        "--tp",
        type=int,
        default=None,
        help="tensor-parallel degree (divides heads); default 2, and 1 with --requests or --plan",
    )
    split.add_argument("--pp", type=int, default=1, help="pipeline stages (divides layers)")
    split.add_argument(
        "--cp",
        type=int,
        default=1,
        help="context-parallel degree (divides the prompt): each CP rank prefills and caches "
        "prompt/cp tokens; decode combines the softmax over the CP group",
    )
    split.add_argument(
        "--algorithm",
        "-a",
        default=None,
        help="the TP all-reduce: ring, tree, halving_doubling, naive, one_shot, two_shot, "
        "auto (default: ring on a generic switch, auto on a preset)",
    )
    model = parser.add_argument_group("model and request")
    model.add_argument("--layers", type=int, default=4, help="transformer blocks")
    model.add_argument("--hidden", type=int, default=64, help="hidden size (d_model)")
    model.add_argument("--heads", type=int, default=4, help="attention heads")
    model.add_argument("--vocab", type=int, default=128, help="vocabulary size")
    model.add_argument(
        "--batch",
        type=int,
        default=1,
        help="sequences decoded together (with --requests: the most a decode step carries)",
    )
    model.add_argument("--prompt-len", type=int, default=8, help="prompt tokens")
    model.add_argument(
        "--new-tokens",
        type=int,
        default=8,
        help="tokens to generate (with --requests: the mean; each draws from n/2 .. 3n/2)",
    )
    model.add_argument(
        "--dtype",
        default="bf16",
        help="precision of the weights and KV cache on the roofline and in --plan: fp8, "
        "bf16, fp16, fp32 (the numbers run in float64 whatever it is)",
    )
    model.add_argument("--seed", type=int, default=0, help="seed of the weights and the prompt")
    net = parser.add_argument_group("machine")
    net.add_argument(
        "--preset",
        default=None,
        metavar="NAME",
        help="a hardware preset (dgx-h100, dgx-a100, pcie-8gpu): its NVLink, NVSwitch and "
        "GPU FLOP rate; default: a generic switch of tp x pp ranks",
    )
    net.add_argument("--bandwidth", default="100GB/s", help="generic switch: per link")
    net.add_argument(
        "--hbm",
        default="2TB/s",
        help="generic switch: each GPU's HBM bandwidth (a preset has its own: 3.35 TB/s on "
        "dgx-h100, 2.039 TB/s on dgx-a100)",
    )
    net.add_argument(
        "--gpu-memory", default="80GB", help="--plan: one GPU's memory (both presets: 80 GB)"
    )
    serving = parser.add_argument_group("serving many requests")
    serving.add_argument(
        "--requests",
        type=int,
        default=None,
        metavar="N",
        help="serve N requests with continuous batching (needs --disaggregate)",
    )
    serving.add_argument(
        "--disaggregate",
        default=None,
        metavar="P:D",
        help="P GPUs prefill, D GPUs decode, the KV cache sent between them; compared with "
        "P+D colocated GPUs",
    )
    net.add_argument(
        "--latency", default="5us", help="generic switch: per link (a rank-to-rank path is 2)"
    )
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print the figures as JSON")
    out.add_argument(
        "--crossovers",
        action="store_true",
        help="print the one-shot / two-shot / NCCL crossover sizes on --preset and exit",
    )
    out.add_argument(
        "--plan",
        action="store_true",
        help="print weights and KV cache per GPU, whether they fit, and the roofline's "
        "times, without running (exit 1 if they do not fit)",
    )
    parser.set_defaults(func=run, _parser=parser)


def check_sizes(args, serving=False):
    from .flag_checks import check_int, check_seed

    for flag, limit in LIMITS.items():
        check_int(getattr(args, flag[2:].replace("-", "_")), flag, minimum=1, maximum=limit)
    check_seed(args.seed)
    if serving:
        _check_serving_work(args)
        return
    world = args.tp * args.cp * args.pp
    if world > LIMITS["--tp"]:
        raise ConfigError(
            f"--tp {args.tp} x --cp {args.cp} x --pp {args.pp} = {world} ranks: at most "
            f"{LIMITS['--tp']} "
            "ranks a run (the simulation holds every rank's weights in this process)"
        )
    from .limits import check_fits, check_work, transformer_seconds

    tokens = args.batch * (args.prompt_len + args.new_tokens)
    sizes = (
        f"--layers {args.layers} --hidden {args.hidden} --tp {args.tp} --cp {args.cp} "
        f"--batch {args.batch} "
        f"--prompt-len {args.prompt_len} --new-tokens {args.new_tokens}"
    )
    check_fits(estimate_memory(args), f"the weights and KV caches of {sizes}", "use smaller sizes")
    numpy = transformer_seconds(
        layers=args.layers,
        params_per_layer=12 * args.hidden**2,
        tokens=2 * tokens,  # one device, then the cluster
        sequences=0,
        heads=args.heads,
        seq=0,
        hidden=args.hidden,
    )
    seconds = numpy + engine_seconds(args)
    check_work(seconds, sizes, "use fewer --new-tokens or --layers, or a smaller --tp")


def _check_serving_work(args):
    from .limits import check_work, transformer_seconds

    # each request is generated three times: colocated, disaggregated and alone (the check)
    tokens = 3 * args.requests * (args.prompt_len + 3 * args.new_tokens // 2)
    numpy = transformer_seconds(
        layers=args.layers,
        params_per_layer=12 * args.hidden**2,
        tokens=tokens,
        sequences=3 * args.requests,
        heads=args.heads,
        seq=args.prompt_len,
        hidden=args.hidden,
    )
    steps = 3 * args.requests * args.new_tokens  # compute spans, at most
    check_work(
        numpy + steps * CALL_SECONDS,
        f"--requests {args.requests} --prompt-len {args.prompt_len} --new-tokens "
        f"{args.new_tokens} --hidden {args.hidden} --layers {args.layers}",
        "use fewer --requests, a shorter --prompt-len or fewer --new-tokens",
    )


# measured on a shared 2-core machine: a collective call in a rank program costs about 2 ms
# of Python, a message about 50 us, times the flows that share its link under max-min
# (one-shot, two-shot and naive send to every peer at once); within 2x of the runs
CALL_SECONDS, MESSAGE_SECONDS = 2e-3, 50e-6
EVERY_PEER_AT_ONCE = ("one_shot", "two_shot", "naive")


def engine_seconds(args):
    """Wall seconds the engine takes for the run's messages, estimated."""
    calls, sent = messages(args)
    every_peer = str(args.algorithm or "").replace("-", "_") in EVERY_PEER_AT_ONCE
    sharing = max(args.tp - 1, 1) if every_peer else 1
    return calls * CALL_SECONDS + sent * MESSAGE_SECONDS * sharing


def estimate_memory(args):
    """Bytes, about: the layers' float64 weights (12·hidden² each) twice (one device's and
    the ranks' shards), the embeddings and head, and the KV caches of both runs."""
    length = args.prompt_len + args.new_tokens
    weights = 2 * args.layers * 12 * args.hidden**2
    tables = (2 * args.vocab + length) * args.hidden
    caches = 2 * 2 * args.layers * args.batch * length * args.hidden
    return 8 * (weights + tables + caches)


def run(args):
    """Run the decode and print the report (or JSON); 0 if the tokens match one device."""
    if args.crossovers:
        return _print_crossovers(args)
    serving = args.requests is not None or args.disaggregate is not None
    if args.tp is None:
        args.tp = 1 if serving or args.plan else 2
    if args.plan:
        from .infer_plan import run_plan

        return run_plan(args, machine_of(args))
    if serving:
        from .infer_serve import check_serving, run_serving

        check_serving(args)
        check_sizes(args, serving=True)
        return run_serving(args, machine_of(args))
    check_sizes(args)
    from .infer_run import decode_run

    machine, split, prompt, expected, result, roofline = decode_run(args)
    from .infer_report import human_report, json_report, matches

    match = matches(expected, result, LOGIT_TOLERANCE)
    report = json_report if args.json else human_report
    print(report(args, machine, split, prompt, expected, result, match, roofline))
    return 0 if match else 1


def _print_crossovers(args):
    import json

    from ..collectives.small_messages import crossovers

    machine = machine_of(args)
    names = [machine.name] if machine is not None else ["dgx-h100", "dgx-a100"]
    rows = [row for name in names for row in crossovers(name)]
    if args.json:
        print(json.dumps({"crossovers": [row._asdict() for row in rows]}, indent=2))
        return 0
    from .infer_report import crossover_table

    print(crossover_table(rows))
    return 0
