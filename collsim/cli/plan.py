"""``collsim plan``: check a parallel configuration, explain it, estimate its cost."""

import argparse
import sys

from ..plan.config import ARCHITECTURES, PRESETS
from .exit_status import Meaning

PRESET_NAMES = tuple(PRESETS)

__all__ = ["register", "run", "add_config_arguments", "config_from_args"]

EXIT_STATUS = Meaning(
    ok="valid (or --search found some)", failed="invalid (or --search found none)"
)

DESCRIPTION = """\
Check a distributed-training configuration against every rule at once (world = tp·pp·cp·dp,
global batch = micro·dp·accumulation, hidden/heads/ffn divisible by tp, layers by pp, sequence
parallel and context parallel constraints, memory per GPU), explain each violation with its
numbers and the nearest valid choices, suggest complete valid configurations, and estimate
memory per GPU, communication per parallel dimension, compute and step time.  Closed-form:
no simulation, instant for any cluster size.  Sizes, rates and times take units: 80GiB,
300GB/s, 5us, 150TFLOP/s, 175B (parameters).

The model: --model NAME gives a preset's published shape (GPT-3, Llama 2, Llama 3: layers,
hidden, heads, key/value heads, MLP size and gating, vocabulary, sequence); or give the shape
with --layers/--hidden/--heads; --params alone takes the nearest GPT-3 shape (Brown et al.
2020, Table 2.1) and the report names it.  Accelerate's sizes (--dp-replicate-size,
--dp-shard-size) are checked against Accelerate's ParallelismConfig rules too.

Mixture of experts: the presets mixtral-8x7b, deepseek-v3, qwen3-30b-a3b and qwen3-235b-a22b
(their released configs), or --experts E with --top-k, --moe-ffn-hidden, --shared-experts,
--dense-layers.  --ep splits each MoE layer's experts over ep GPUs and --etp each expert over
etp (default tp), folded into the dp·cp·tp ranks of a stage as Megatron-Core's MoE parallel
folding does; the rules: E divisible by ep, ep·etp dividing dp·cp·tp, sequence parallelism
with ep and tp > 1, and a warning when ep·tp leaves a node's NVLink.  Memory counts each GPU's
parameters as dense/(tp·pp) + routed experts/(ep·etp·pp).

Serving (--inference): the same model and GPUs, planned for decoding instead: weights per
GPU, the KV cache per GPU (2 · layers/pp · kv_heads/tp · head_dim · tokens/cp · bytes a
sequence; grouped-query attention keeps kv_heads of the heads), whether --batch sequences
of --prompt-len + --new-tokens tokens fit, the largest batch and context that do, and the
roofline: a decode step reads every weight once, so it is memory-bound below B_crit =
peak FLOP/s / HBM bytes/s · bytes / 2 tokens a step (295 on an H100 in bf16).  Exits 1
when they do not fit, 2 for refused input.  (`collsim infer --plan` prints the same.)"""

EPILOG = """\
examples:
  Megatron-LM's 784-GPU error (world size not divisible by tp·pp), tp=8 and pp=4:
    collsim plan --world-size 784 --tp 8 --pp 4 --layers 96 --hidden 12288 --heads 96 \\
                 --seq 2048 --global-batch 1536 --micro-batch 1
  the same as data:           ... --json
  a preset model:             collsim plan --model llama2-7b --world-size 8 --global-batch 64
  mixture of experts:         collsim plan --model mixtral-8x7b --world-size 16 --ep 8 \\
                                --global-batch 16 --zero 1 --recompute full
  every valid configuration:  collsim plan --search --world-size 64 --model llama2-7b \\
                                --seq 4096 --global-batch 512
  from a file (TOML/JSON; flags override it):  collsim plan --config job.toml --zero 1
  serving, KV cache per GPU:  collsim plan --inference --model llama2-70b --tp 8 \\
                                --machine dgx-h100 --batch 16 --prompt-len 4000 --new-tokens 96"""

# (flag, PlanConfig field, type, help); types stay strings where units are allowed
_MODEL = [
    ("--model", "model", str, "a preset with its published shape: " + ", ".join(PRESET_NAMES)),
    ("--layers", "layers", int, "transformer layers L"),
    ("--hidden", "hidden", int, "hidden size h"),
    ("--heads", "heads", int, "attention heads a"),
    ("--kv-heads", "kv_heads", int, "key/value heads (grouped-query attention; default heads)"),
    ("--head-dim", "head_dim", int, "size of one attention head (default hidden/heads)"),
    ("--ffn-hidden", "ffn_hidden", int, "MLP inner size (default 4·hidden)"),
    ("--vocab", "vocab", int, "vocabulary size V (default 51200, or the preset's)"),
    ("--seq", "seq", int, "sequence length s in tokens (default 2048, or the preset's)"),
    ("--experts", "experts", int, "MoE: routed experts per layer (alias --num-experts)"),
    ("--top-k", "top_k", int, "MoE: experts per token (default 2; alias --moe-router-topk)"),
    ("--moe-ffn-hidden", "moe_ffn_hidden", int, "MoE: an expert's MLP size (default ffn)"),
    ("--shared-experts", "shared_experts", int, "MoE: always-on experts per layer (default 0)"),
    ("--dense-layers", "dense_layers", int, "MoE: first layers with a dense MLP (default 0)"),
    (
        "--params",
        "params",
        str,
        "parameter count instead of a shape, e.g. 7B (the nearest GPT-3 shape is assumed)",
    ),
]
_CLUSTER = [
    (
        "--machine",
        "machine",
        str,
        "a hardware preset (dgx-a100, dgx-h100, pcie-8gpu) or machine file: sets GPUs per node, "
        "the bandwidths and latencies below from its cited rates; flags override it",
    ),
    ("--world-size", "world_size", int, "GPUs in the job (default tp·pp·cp·dp)"),
    ("--gpus-per-node", "gpus_per_node", int, "GPUs per node sharing NVLink (default 8)"),
    ("--gpu-memory", "gpu_memory", str, "memory per GPU (default 80GiB)"),
    ("--compute-rate", "compute_rate", str, "FLOP/s one GPU achieves (default 150TFLOP/s)"),
    ("--intra-bandwidth", "intra_bandwidth", str, "per direction inside a node (default 300GB/s)"),
    ("--inter-bandwidth", "inter_bandwidth", str, "per GPU between nodes (default 25GB/s)"),
    ("--intra-latency", "intra_latency", str, "α inside a node (default 2us)"),
    ("--inter-latency", "inter_latency", str, "α between nodes (default 5us)"),
]
_PARALLEL = [
    ("--tp", "tp", int, "tensor-parallel degree (alias --tp-size)"),
    ("--pp", "pp", int, "pipeline stages"),
    ("--dp", "dp", int, "data-parallel degree (default: derived, world / (tp·pp·cp))"),
    ("--cp", "cp", int, "context-parallel degree (alias --cp-size)"),
    ("--vpp", "vpp", int, "virtual pipeline stages per GPU (interleaved 1F1B when > 1)"),
    ("--dp-replicate-size", "dp_replicate", int, "Accelerate HSDP replicas (dp = replicate·shard)"),
    ("--dp-shard-size", "dp_shard", int, "Accelerate FSDP shard degree (implies --zero 3)"),
    (
        "--ep",
        "ep",
        int,
        "expert-parallel degree: each MoE layer's experts over ep GPUs, folded into dp·cp·tp "
        "(alias --expert-model-parallel-size)",
    ),
    (
        "--etp",
        "etp",
        int,
        "expert tensor parallelism (default tp; alias --expert-tensor-parallel-size)",
    ),
]
_BATCH = [
    ("--global-batch", "global_batch", int, "samples per optimizer step"),
    ("--micro-batch", "micro_batch", int, "samples per forward/backward (default 1)"),
    ("--accumulation", "accumulation", int, "micro-batches per step (alias --grad-accum)"),
]
_METAVARS = {"params": "COUNT", "gpu_memory": "SIZE", "compute_rate": "FLOP/S", "model": "NAME"}
_METAVARS.update(dict.fromkeys(("intra_bandwidth", "inter_bandwidth"), "RATE"))
_METAVARS.update(dict.fromkeys(("intra_latency", "inter_latency"), "TIME"))
_ALIASES = {"--tp": ["--tp-size"], "--cp": ["--cp-size"], "--accumulation": ["--grad-accum"]}
_ALIASES |= {"--ep": ["--expert-model-parallel-size"], "--etp": ["--expert-tensor-parallel-size"]}
_ALIASES |= {"--experts": ["--num-experts"], "--top-k": ["--moe-router-topk"]}


def add_config_arguments(parser):
    """The flags that describe a job (shared with ``collsim viz memory``)."""
    parser.add_argument(
        "--config", metavar="FILE", help="TOML or JSON file of settings; flags override it"
    )
    groups = (
        ("model", _MODEL),
        ("cluster", _CLUSTER),
        ("parallelism", _PARALLEL),
        ("batch", _BATCH),
    )
    for title, flags in groups:
        group = parser.add_argument_group(title)
        for flag, dest, type_, help_ in flags:
            group.add_argument(
                flag,
                *_ALIASES.get(flag, []),
                dest=dest,
                type=type_,
                help=help_,
                metavar=_METAVARS.get(dest, "N"),
            )
        if title == "model":
            group.add_argument(
                "--gated-mlp",
                action=argparse.BooleanOptionalAction,
                default=None,
                help="SwiGLU MLP with three matrices (default: off, or the preset's)",
            )
            group.add_argument(
                "--architecture",
                choices=ARCHITECTURES,
                help="gpt: biases, LayerNorm, learned positions, tied output layer; llama: "
                "none of those (default gpt, or the preset's)",
            )
        if title == "parallelism":
            group.add_argument(
                "--sp",
                action=argparse.BooleanOptionalAction,
                default=None,
                help="Megatron sequence parallelism (needs tp > 1)",
            )
            group.add_argument(
                "--zero",
                choices=["0", "1", "2", "3", "fsdp"],
                help="ZeRO stage: 1 shards optimizer states, 2 also gradients, "
                "3 (= FSDP) also parameters",
            )
    training = parser.add_argument_group("training")
    training.add_argument(
        "--recompute",
        choices=["none", "selective", "full"],
        help="activation recomputation (default none)",
    )
    training.add_argument(
        "--precision",
        choices=["bf16", "fp16", "fp32"],
        help="bf16/fp16 mixed-precision Adam (16 B/param) or fp32 (default bf16)",
    )
    training.add_argument(
        "--schedule",
        choices=["gpipe", "1f1b", "interleaved"],
        help="pipeline schedule (default 1f1b, interleaved with --vpp > 1)",
    )


def machine_fields(name):
    """The planner's cluster fields of a hardware preset or machine file: GPUs per node, the
    effective bandwidth of a GPU inside a node and of its share of the node's NICs, and α
    as the simulator charges a message (the path's link latencies plus NCCL's Simple
    protocol latency for that link class), in the planner's own units.

    >>> f = machine_fields("dgx-h100")
    >>> f["gpus_per_node"], f["intra_bandwidth"], f["inter_bandwidth"]
    (8, '370.8GB/s', '47GB/s')
    """
    from .. import hardware
    from ..topology import path_alpha_beta

    if str(name).lower().endswith(hardware.FILE_SUFFIXES):
        machine = hardware.load(name)
    else:
        machine = hardware.preset(name)
    per = machine.gpus_per_node
    simple = hardware.PROTOCOLS["simple"]
    fields = {
        "gpus_per_node": per,
        "intra_bandwidth": f"{machine.intra.effective_rate / 1e9:.6g}GB/s",
        "intra_latency": f"{_alpha(machine, 1, simple, path_alpha_beta) * 1e6:.6g}us",
    }
    if machine.inter.nics:
        share = machine.inter.nics * machine.inter.effective_rate / per
        fields["inter_bandwidth"] = f"{share / 1e9:.6g}GB/s"
        fields["inter_latency"] = f"{_alpha(machine, 2, simple, path_alpha_beta) * 1e6:.6g}us"
    return fields


def _alpha(machine, nodes, protocol, path_alpha_beta):
    """α of a message from GPU 0 to its neighbour (nodes=1) or to GPU 0 of the next node."""
    from .. import hardware

    graph = hardware.topology(machine, nodes)
    dst = 1 if nodes == 1 else machine.gpus_per_node
    alpha, _ = path_alpha_beta(graph, 0, dst)
    return alpha + protocol.latency_for("nvlink" if nodes == 1 else "net")


def config_from_args(args):
    """A PlanConfig from parsed flags (and ``--config`` FILE under them)."""
    from ..plan import load_config
    from ..plan.config import config_from_mapping

    fields = [dest for _, dest, _, _ in _MODEL + _CLUSTER + _PARALLEL + _BATCH]
    fields += ["sp", "zero", "recompute", "precision", "schedule", "gated_mlp", "architecture"]
    fields.remove("machine")
    given = {k: getattr(args, k) for k in fields if getattr(args, k, None) is not None}
    if getattr(args, "machine", None) is not None:
        given = {**machine_fields(args.machine), **given}
    if "zero" in given and given["zero"] != "fsdp":
        given["zero"] = int(given["zero"])
    if args.config is not None:
        # load_config reads only a regular file of bounded size (a FIFO would block)
        return load_config(args.config, **given)
    return config_from_mapping(given)


def register(subparsers):
    parser = subparsers.add_parser(
        "plan",
        help="check a parallel configuration, explain violations, estimate memory and time",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_config_arguments(parser)
    out = parser.add_argument_group("output")
    out.add_argument(
        "--json", action="store_true", help="print the report as JSON (schema collsim.plan/1)"
    )
    out.add_argument(
        "--search",
        action="store_true",
        help="list every valid (tp, pp, dp, micro-batch, ZeRO, recompute), fastest first",
    )
    out.add_argument(
        "--top",
        default="20",
        metavar="N",
        help=f"rows --search prints, 1 to {MAX_ROWS}, or 0 for all (default 20)",
    )
    out.add_argument(
        "--suggestions",
        default="5",
        metavar="N",
        help=f"nearest valid configurations an invalid one gets, 0 to {MAX_ROWS} (default 5)",
    )
    from .infer_plan import add_inference_arguments

    add_inference_arguments(parser)
    parser.set_defaults(func=run)


MAX_ROWS = 1000


def _count(flag, text, lowest):
    """A whole number lowest..MAX_ROWS from a flag's text, or a ConfigError naming it."""
    from ..errors import ConfigError

    try:
        value = int(str(text).strip())
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: expected a whole number, e.g. {flag} 10") from None
    if not lowest <= value <= MAX_ROWS:
        nearest = min(max(value, lowest), MAX_ROWS)
        raise ConfigError(
            f"{flag} {text}: must be between {lowest} and {MAX_ROWS}; nearest valid choice: "
            f"{flag} {nearest}"
        )
    return value


def run(args):
    """Print the report (or the search table); 0 when valid, 1 when not."""
    args.top = _count("--top", args.top, 0)
    args.suggestions = _count("--suggestions", args.suggestions, 0)
    if not args.inference:
        _refuse_serving_flags(args)
    cfg = config_from_args(args)
    if args.inference:
        from .infer_plan import run_plan_inference

        return run_plan_inference(args, cfg)
    if args.search:
        return _search(cfg, args)
    from ..plan import plan

    report = plan(cfg, suggestions=args.suggestions)
    print(report.to_json() if args.json else report)
    return 0 if report.valid else 1


def _refuse_serving_flags(args):
    """--batch, --prompt-len, --new-tokens, --hbm and --dtype describe serving only."""
    from ..errors import ConfigError

    given = [
        f"{flag} {value}"
        for flag, value, default in (
            ("--batch", args.batch, 1),
            ("--prompt-len", args.prompt_len, None),
            ("--new-tokens", args.new_tokens, 0),
            ("--hbm", args.hbm, "2TB/s"),
            ("--dtype", args.dtype, "bf16"),
        )
        if value != default
    ]
    if given:
        raise ConfigError(
            f"{given[0]} plans serving: add --inference (or, for training, use "
            "--global-batch / --micro-batch and --seq)"
        )


def _search(cfg, args):
    import json

    from ..plan import search
    from ..plan.report import search_table

    progress = _progress if sys.stderr.isatty() else None
    found = search(cfg, progress=progress)
    if progress:
        print("\r\033[K", end="", file=sys.stderr, flush=True)
    shown = found[: args.top] if args.top else found
    if args.json:
        data = {
            "schema": "collsim.plan.search/1",
            "count": len(found),
            "model": cfg.model,
            "assumed_shape": cfg.assumed_shape,  # the GPT-3 row a bare --params got, or null
            "results": [c.to_dict() for c in shown],
        }
        print(json.dumps(data, indent=2))
    else:
        print(search_table(cfg, shown, len(found)))
    return 0 if found else 1


def _progress(done, total):
    print(
        f"\rsearching: {done}/{total} (tp, pp) shapes ({done / total:.0%})",
        end="",
        file=sys.stderr,
        flush=True,
    )
