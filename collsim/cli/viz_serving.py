"""``collsim viz decode-step`` and ``collsim viz all-reduce-choice``: serving a model, a
decode step rank by rank (from a real run's trace) and the small-message all-reduce each
size and GPU count should use (from the closed forms)."""

from ..errors import ConfigError
from .viz_kinds import kind

__all__ = ["decode_step", "all_reduce_choice"]


def _decode_arguments(parser):
    g = parser.add_argument_group("the decode run (collsim infer's flags)")
    g.add_argument("--tp", type=int, default=8, help="tensor-parallel degree (default 8)")
    g.add_argument(
        "--pp",
        type=int,
        default=1,
        help="pipeline stages (default 1); a stage idles while the others work",
    )
    g.add_argument(
        "--algorithm",
        "-a",
        default=None,
        help="the TP all-reduce: one_shot, two_shot, ring, ... (default: auto, which on a "
        "preset keeps to what NCCL runs: its ring with the LL protocol here)",
    )
    g.add_argument(
        "--preset",
        default="dgx-h100",
        metavar="NAME",
        help="the machine: dgx-h100 (default), dgx-a100, pcie-8gpu",
    )
    g.add_argument("--layers", type=int, default=2, help="transformer blocks (default 2)")
    g.add_argument(
        "--hidden",
        type=int,
        default=1024,
        help="hidden size (default 1024: a span reads enough weights to be seen beside the "
        "all-reduces)",
    )
    g.add_argument("--heads", type=int, default=8, help="attention heads (default 8)")
    g.add_argument("--batch", type=int, default=1, help="sequences decoded together (default 1)")
    g.add_argument("--new-tokens", type=int, default=4, help="tokens generated (default 4)")
    g.add_argument(
        "--step",
        type=int,
        default=None,
        help="the decode step drawn, 2 .. --new-tokens (default the last; 1 is the prefill)",
    )


@kind(
    "decode-step",
    help="one decode step of tensor-parallel inference, rank by rank: compute, all-reduces, idle",
    description=(
        "Run collsim infer's greedy decode on tp GPUs of a machine preset (each layer ends "
        "its attention and its MLP with an all-reduce over the TP group, Megatron-LM's g) and "
        "draw one decode step from the run's trace: a row per rank, its compute spans (the "
        "roofline's time: the weights and KV cache read from HBM), each all-reduce from its "
        "first to its last transfer, and the idle time between.  At batch 1 the all-reduces "
        "of a few hundred bytes are almost all latency: compare -a ring with -a one_shot."
    ),
    arguments=_decode_arguments,
    example="--tp 8 --preset dgx-h100 -a one_shot --out decode-step.png  (or --tp 4 --pp 2)",
)
def decode_step(args):
    from ..viz.decode_step import decode_step_figure
    from .infer import check_sizes
    from .infer_run import decode_run

    run_args = _infer_defaults()
    for name in ("tp", "pp", "algorithm", "preset", "layers", "hidden", "heads", "batch"):
        setattr(run_args, name, getattr(args, name))
    run_args.new_tokens = args.new_tokens
    check_sizes(run_args)
    if args.step is not None and not 2 <= args.step <= args.new_tokens:
        nearest = min(max(args.step, 2), max(args.new_tokens, 2))
        raise ConfigError(
            f"--step {args.step}: a decode step is 2 .. --new-tokens {args.new_tokens} (step 1 "
            f"is the prefill); nearest valid --step {nearest}"
        )
    if args.new_tokens < 2:
        raise ConfigError(
            f"--new-tokens {args.new_tokens}: the first token comes from the prefill, so a "
            "decode step needs at least 2; nearest valid --new-tokens 2"
        )
    return decode_step_figure(decode_run(run_args).result, step=args.step)


def _infer_defaults():
    """``collsim infer``'s flags at their defaults, as a Namespace."""
    import argparse

    from .infer import register

    parser = argparse.ArgumentParser(prog="collsim")
    register(parser.add_subparsers())
    return parser.parse_args(["infer"])


def _choice_arguments(parser):
    parser.add_argument(
        "--machine",
        default="dgx-h100",
        metavar="NAME",
        help="the preset whose NVLink hop gives α and β: dgx-h100 (default), dgx-a100, pcie-8gpu",
    )
    parser.add_argument(
        "--max-gpus",
        type=int,
        default=8,
        help="rows 2 .. N GPUs of one node (default 8, at most the node's GPUs)",
    )


@kind(
    "all-reduce-choice",
    help="the fastest small-message all-reduce (one-shot, two-shot, ring, NVLS) by size and GPUs",
    description=(
        "For 2 .. N GPUs of one node of a machine preset and message sizes from 256 B to "
        "64 MiB, colour each cell by the all-reduce whose closed form is fastest on the "
        "node's NVLink hop (α and β as auto reads them): one-shot (every GPU reads every "
        "peer's buffer: α + (K-1)S/β), two-shot (reduce-scatter then all-gather: 2α + "
        "2(K-1)/K·S/β), the ring (2(K-1) steps) or NVLS (the switch reduces).  Each cell says "
        "how many times slower the ring would be; dashed lines mark where vLLM's custom "
        "all-reduce changes its choice (one-shot, two-shot, NCCL past 8 MiB)."
    ),
    arguments=_choice_arguments,
    example="--machine dgx-h100 --out all-reduce-choice.png",
)
def all_reduce_choice(args):
    from .. import hardware
    from ..collectives.small_messages import choice_grid
    from ..viz.all_reduce_choice import all_reduce_choice_figure
    from .flag_checks import check_int, flag_value

    machine = flag_value(hardware.preset, args.machine, "--machine")
    check_int(args.max_gpus, "--max-gpus", minimum=2, maximum=machine.gpus_per_node)
    rows = choice_grid(machine.name, ranks=tuple(range(2, args.max_gpus + 1)))
    return all_reduce_choice_figure(rows)
