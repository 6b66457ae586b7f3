"""``collsim verify SCHEME``: train a parallel scheme on the virtual cluster and on one
device side by side, and show that they agree."""

import argparse

__all__ = ["register", "run"]

DESCRIPTION = """\
Build a small model and data from --seed, train it for --steps SGD steps on one device
(plain numpy) and with SCHEME on a virtual cluster (one switch, real collectives), and
compare after every step: the outputs, the gradient of the input, every parameter gradient
and every parameter.  Prints the loss curves, the largest differences, whether data-parallel
replicas stayed identical, the bytes each rank sent per collective next to the closed forms
(ring all-reduce 2(K-1)/K·N·b, reduce-scatter and all-gather (K-1)/K·N·b), and the simulated
time with how much communication hid behind compute.

schemes:
  dp            data parallel: batch split over --dp ranks, gradients all-reduced (averaged)
  tp-column     column-parallel Linear hidden -> ffn, output all-gathered (seed 004)
  tp-row        row-parallel Linear ffn -> hidden, input already split, output all-reduced
  tp-mlp        Megatron MLP (column -> GELU -> row): one all-reduce forward, one backward
  tp-attention  attention with heads split over --tp ranks
  sp            transformer blocks with sequence parallelism (reduce-scatter + all-gather)
  dp-tp         transformer blocks on a (dp, tp) device mesh (add --sp for sequence parallel)"""

EPILOG = """\
examples:
  seed 004, batch 64 on dp=4 (16 samples per rank):   collsim verify dp
  the same with gradient accumulation:                collsim verify dp --micro-batch 4
  overlap of the bucketed all-reduce with backward:   collsim verify dp --hidden 32 \\
                                        --bucket-size 8KiB --compute-rate 1GFLOP/s
  seed 004's column split on 4 ranks:                 collsim verify tp-column --tp 4
  the 2-D mesh:                                       collsim verify dp-tp --dp 2 --tp 2 --json

exit status: 0 when the cluster matches one device, 1 when it does not, 2 bad flags."""


def register(subparsers):
    from ..parallel.verify import SCHEMES

    parser = subparsers.add_parser(
        "verify",
        help="run DP / TP / SP / DP×TP on the cluster and check it against one device",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("scheme", choices=SCHEMES, metavar="SCHEME", help=", ".join(SCHEMES))
    par = parser.add_argument_group("parallelism and batch")
    par.add_argument("--dp", type=int, help="data-parallel degree (default 4 for dp, 2 for dp-tp)")
    par.add_argument("--tp", type=int, help="tensor-parallel degree (default 4; 2 for dp-tp)")
    par.add_argument("--sp", action="store_true", help="dp-tp: with sequence parallelism")
    par.add_argument("--batch", type=int, help="global batch (default 64 for dp, else 4·dp)")
    par.add_argument("--micro-batch", type=int, help="samples per forward/backward")
    par.add_argument("--accumulation", type=int, help="micro-batches per optimizer step")
    model = parser.add_argument_group("model and training")
    model.add_argument("--hidden", type=int, default=16, help="hidden size (default 16)")
    model.add_argument("--heads", type=int, default=4, help="attention heads (default 4)")
    model.add_argument("--ffn-hidden", type=int, help="MLP inner size (default 4·hidden)")
    model.add_argument("--seq", type=int, default=8, help="sequence length (default 8)")
    model.add_argument("--layers", type=int, default=2, help="transformer blocks (default 2)")
    model.add_argument("--steps", type=int, default=3, help="SGD steps (default 3)")
    model.add_argument("--lr", type=float, default=0.1, help="SGD learning rate (default 0.1)")
    model.add_argument("--seed", type=int, default=0, help="seed of weights and data")
    cluster = parser.add_argument_group("cluster")
    cluster.add_argument("--bandwidth", default="100GB/s", help="per link (default 100GB/s)")
    cluster.add_argument("--latency", default="5us", help="per link (default 5us)")
    cluster.add_argument(
        "--compute-rate", default="100TFLOP/s", help="FLOP/s per rank (default 100TFLOP/s)"
    )
    cluster.add_argument(
        "--bucket-size", default="25MiB", help="DP gradient bucket (default 25MiB, as DDP)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=run)


def run(args):
    """Print the report; 0 when the cluster matches one device, 1 when it does not."""
    import json

    from ..errors import ConfigError
    from ..parallel.verify import verify
    from ..units import parse_flops, parse_rate, parse_size, parse_time

    for flag in ("dp", "tp", "batch", "micro_batch", "accumulation", "hidden", "heads",
                 "ffn_hidden", "seq", "layers", "steps"):  # fmt: skip
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise ConfigError(f"--{flag.replace('_', '-')} must be >= 1, got {value}")
    parse_rate(args.bandwidth), parse_time(args.latency)  # fail early, with the unit message
    report = verify(
        args.scheme,
        dp=args.dp,
        tp=args.tp,
        batch=args.batch,
        hidden=args.hidden,
        heads=args.heads,
        seq=args.seq,
        ffn_hidden=args.ffn_hidden,
        layers=args.layers,
        steps=args.steps,
        seed=args.seed,
        micro_batch=args.micro_batch,
        accumulation=args.accumulation,
        lr=args.lr,
        sequence_parallel=args.sp,
        bucket_bytes=parse_size(args.bucket_size),
        bandwidth=args.bandwidth,
        latency=args.latency,
        compute_rate=parse_flops(args.compute_rate),
    )
    print(json.dumps(report.to_dict(), indent=2) if args.json else report)
    return 0 if report.match else 1
