"""``collsim verify SCHEME``: train a parallel scheme on the virtual cluster and on one
device side by side, and show that they agree.

The flags are checked, and the run's time and memory bounded, before any training, in
:mod:`.verify_checks`."""

import argparse

from .common import Formatter
from .console import add_progress_argument
from .exit_status import Meaning
from .trace_flag import add_trace_argument
from .verify_checks import check_args

__all__ = ["register", "run", "check_args"]

EXIT_STATUS = Meaning(ok="the cluster matches one device", failed="it does not")

DESCRIPTION = """\
Build a small model and data from --seed, train it for --steps SGD steps (Adam for zero,
fsdp, hsdp, cp and nd) on one device (plain numpy) and with SCHEME on a virtual cluster (one
switch, or two-level nodes for hsdp; real collectives), and
compare after every step: the outputs, the gradient of the input, every parameter gradient
and every parameter.  Prints the loss curves, the largest differences, whether data-parallel
replicas stayed identical, the bytes each rank sent per collective next to the closed forms
(ring all-reduce 2(K-1)/K·N·b, reduce-scatter and all-gather (K-1)/K·N·b), and the simulated
time with how much communication hid behind compute.

schemes:
  dp            data parallel: batch split over --dp ranks, gradients all-reduced (averaged)
  tp-column     column-parallel Linear hidden -> ffn, output all-gathered (Megatron-LM)
  tp-row        row-parallel Linear ffn -> hidden, input already split, output all-reduced
  tp-mlp        Megatron MLP (column -> GELU -> row): one all-reduce forward, one backward
  tp-attention  attention with heads split over --tp ranks
  sp            transformer blocks with sequence parallelism (reduce-scatter + all-gather)
  dp-tp         transformer blocks on a (dp, tp) device mesh (add --sp for sequence parallel)
  zero          transformer blocks, ZeRO --stage 1|2|3 over --dp ranks, Adam
  fsdp          ZeRO stage 3 with FSDP's knobs: --no-reshard-after-forward, --prefetch
  hsdp          ZeRO-3 inside a node (--dp-shard S ranks), replicated across --dp-replicate R
                nodes: dp = R·S on a two-level topology (--gpus-per-node G, default S)
  cp            context parallel: the sequence split over --cp ranks (× --dp replicas),
                ring attention or all-to-all (--variant), balanced or contiguous --layout, Adam
  moe           one mixture-of-experts layer with expert parallelism over --ep ranks:
                --experts E (E/ep a rank), --top-k, dropless or --capacity-factor, a
                --routing generator; one forward and backward against the dense layer
  nd            Accelerate's N-D mesh --dp-replicate R × --dp-shard S × --cp C × --tp T
                (× --pp P, --sp inside tp): ZeRO-3 over dp_shard × cp when S > 1, else plain
                data parallel; Adam.  With --ep E (and --etp X, default T) the blocks' MLPs
                are MoEs folded over the stage's dp·cp·tp ranks as Megatron-Core folds them:
                experts over ep, each expert's columns over etp, their gradients (and their
                ZeRO-3 shards) over the expert-data-parallel dp·cp·tp/(E·X) ranks

mixture of experts (moe): each rank routes its own tokens (top-k of softmax or sigmoid
scores), sends each token to the ranks holding its experts (an all-to-all of the
per-expert counts, then an all-to-allv of the tokens with uneven splits), the experts
(SwiGLU MLPs) compute, and the outputs come back the same way to be summed, weighted by
the scores.  With --capacity-factor cf an expert takes at most ceil(T·k/E·cf) of a rank's
T tokens (Megatron-Core's capacity); the rest are dropped (lowest scores first, or the
latest tokens with --drop-policy position) and pass through the residual only.  The report
gives each rank's tokens received, dropped, dispatch and combine bytes (next to the
closed form for the routing that happened), when it finished and its activation peak.

context parallelism (cp, nd): each cp rank holds seq/cp tokens of every sample.  Ring
attention sends, per layer, 2(cp-1)/cp·B·S·D·b forward (K/V) and 2(2cp-1)/cp·B·S·D·b
backward (K/V again, dK/dV home); all-to-all 4(cp-1)/cp²·B·S·D·b each pass.  With a causal
mask the contiguous layout leaves the last rank nearly (2cp-1)/cp times the mean attention
work (exactly: the query-key pairs the mask keeps, diagonal included); the balanced one
(chunks i and 2cp-1-i, as Megatron and Llama 3) evens it.  The report sets each rank's cp
bytes next to the closed form and its attention FLOPs with max/mean and the exact count.

sharding the model state (the ZeRO paper, Rajbhandari et al. 2020): mixed-precision Adam
holds 16 bytes per parameter -- bf16 parameters (2) and gradients (2), fp32 master weights,
Adam m and v (4 each, 12) -- so a rank of Ψ parameters holds 16Ψ.  Over N data-parallel
ranks, stage 1 shards the optimizer state (4Ψ + 12Ψ/N), stage 2 the gradients too
(2Ψ + 14Ψ/N), stage 3 = FSDP the parameters too (16Ψ/N, plus the unit it gathers for each
pass: all-gathered before the forward and again before the backward, freed after).  DDP and
stages 1-2 send 2Ψ(N-1)/N·b per rank per step (reduce-scatter + all-gather), stage 3
3Ψ(N-1)/N·b (1.5×).  HSDP's inter-node links carry only the replica all-reduce of the Ψ/N
shard.  These schemes report each rank's memory peak per category, measured by the tracker
at those precisions, next to the formulas, and the bytes by link class (intra/inter node)."""

EPILOG = """\
examples:
  the batch-64, dp=4 example (16 samples per rank):   collsim verify dp
  the same with gradient accumulation:                collsim verify dp --micro-batch 4
  overlap of the bucketed all-reduce with backward:   collsim verify dp --hidden 32 \\
                                        --bucket-size 8KiB --compute-rate 1GFLOP/s
  Megatron-LM's column split on 4 ranks:              collsim verify tp-column --tp 4
  the 2-D mesh:                                       collsim verify dp-tp --dp 2 --tp 2 --json
  ZeRO stage 2 on 4 ranks (2Ψ + 14Ψ/N per rank):      collsim verify zero --stage 2 --dp 4
  FSDP keeping the gathered units for the backward:   collsim verify fsdp --dp 4 \\
                                        --no-reshard-after-forward --prefetch forward
  HSDP, 2 nodes of 4 GPUs (shard inside a node):      collsim verify hsdp --dp-replicate 2 \\
                                        --dp-shard 4 --json
  ring attention, causal imbalance of the contiguous layout:
                                      collsim verify cp --cp 4 --layout contiguous
  all-to-all (DeepSpeed-Ulysses) over 4 ranks:        collsim verify cp --cp 4 --variant all-to-all
  HSDP × CP, 8 ranks:                                 collsim verify nd --dp-replicate 2 \\
                                        --dp-shard 2 --cp 2 --tp 1
  MoE, 8 experts on 4 ranks, top-2, capacity 1.25:   collsim verify moe --ep 4 --experts 8 \\
                                        --top-k 2 --capacity-factor 1.25
  every token to one rank (the others get none):     collsim verify moe --routing adversarial
  FSDP beside ep, experts' columns over etp 2:        collsim verify nd --dp-replicate 2 \
                                        --dp-shard 4 --ep 2 --etp 2"""


def register(subparsers):
    from ..verify import SCHEMES
    from ..verify.context import CONTEXT_SCHEMES
    from ..verify.moe import MOE_SCHEMES

    schemes = SCHEMES + CONTEXT_SCHEMES + MOE_SCHEMES
    parser = subparsers.add_parser(
        "verify",
        help="run DP / TP / SP / DP×TP on the cluster and check it against one device",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=Formatter,
    )
    parser.add_argument("scheme", choices=schemes, metavar="SCHEME", help=", ".join(schemes))
    par = parser.add_argument_group("parallelism and batch")
    par.add_argument(
        "--dp",
        type=int,
        help="data-parallel degree (default 4 for dp, zero and fsdp; 2 for dp-tp; R·S for hsdp)",
    )
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
    model.add_argument("--steps", type=int, default=3, help="optimizer steps (default 3)")
    model.add_argument(
        "--lr", help="learning rate, finite > 0 (default 0.1 for SGD, 0.01 for Adam)"
    )
    model.add_argument("--seed", type=int, default=0, help="random seed of weights and data, >= 0")
    shard = parser.add_argument_group("zero, fsdp, hsdp: sharding the model state")
    shard.add_argument(
        "--stage",
        help="zero: 1 shards the optimizer state, 2 also the "
        "gradients, 3 also the parameters (default 1)",
    )
    shard.add_argument(
        "--optimizer",
        help="adam (default: its 12 B of fp32 state per parameter "
        "is what ZeRO shards) or sgd (4 B: master weights)",
    )
    shard.add_argument(
        "--no-reshard-after-forward",
        dest="reshard_after_forward",
        action="store_false",
        help="fsdp, hsdp: keep each unit's gathered "
        "parameters from forward to backward (SHARD_GRAD_OP: one all-gather "
        "fewer, more memory; by default freed after each pass)",
    )
    shard.add_argument(
        "--prefetch",
        default="none",
        help="fsdp, hsdp: start the next unit's "
        "all-gather early: none (default), forward, backward or both",
    )
    shard.add_argument(
        "--dp-replicate",
        help="hsdp: R replicas of the sharded model, one per node group (default 2)",
    )
    shard.add_argument(
        "--dp-shard",
        help="hsdp: S ranks each model is sharded over, inside a node (default 2); dp = R·S",
    )
    shard.add_argument(
        "--gpus-per-node",
        help="hsdp: GPUs per node of the two-level topology "
        "(default dp-shard: each shard group one node); moe: the ep ranks as nodes of this "
        "many GPUs, else one switch",
    )
    context = parser.add_argument_group("cp, nd: context parallelism and the N-D mesh")
    context.add_argument(
        "--cp",
        help="context-parallel ranks: each holds seq/cp tokens of every "
        "sample (default 2 for cp, 1 for nd)",
    )
    context.add_argument(
        "--variant",
        help="ring (default: K/V blocks round the ring) or "
        "all-to-all (DeepSpeed-Ulysses; heads divisible by cp)",
    )
    context.add_argument(
        "--layout",
        help="balanced (default: rank i holds chunks i and "
        "2·cp−1−i, seq divisible by 2·cp) or contiguous (chunk i)",
    )
    context.add_argument(
        "--causal",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="causal attention (default on; --no-causal: every key)",
    )
    context.add_argument("--pp", help="nd: pipeline stages (default 1)")
    moe = parser.add_argument_group("moe: a mixture-of-experts layer, expert parallelism")
    moe.add_argument(
        "--ep",
        type=int,
        help="expert-parallel ranks (moe: default 4; nd: default 1, folded over dp·cp·tp)",
    )
    moe.add_argument(
        "--etp",
        type=int,
        help="nd: expert tensor parallelism, each expert's MLP split by columns and rows over "
        "etp ranks (default --tp, as Megatron-Core's --expert-tensor-parallel-size); "
        "ep·etp must divide dp·cp·tp",
    )
    moe.add_argument("--experts", type=int, help="experts, divisible by --ep (default 8)")
    moe.add_argument("--top-k", type=int, help="experts each token is sent to (default 2)")
    moe.add_argument(
        "--capacity-factor",
        type=float,
        help="cap each expert at ceil(T·k/E·cf) of a rank's T tokens (default: dropless)",
    )
    moe.add_argument(
        "--drop-policy",
        help="over capacity, drop the lowest scores (probs, default) or the latest tokens "
        "(position)",
    )
    moe.add_argument(
        "--pad-to-capacity",
        action="store_true",
        help="fill every expert's slots to capacity with zero-weight tokens",
    )
    moe.add_argument(
        "--routing",
        help="which experts tokens prefer: uniform (default), zipf, lognormal, hot (one "
        "expert), adversarial (all to rank 0)",
    )
    moe.add_argument("--router-score", help="softmax (default; Mixtral) or sigmoid (DeepSeek-V3)")
    moe.add_argument(
        "--dispatcher",
        help="alltoall (default: counts, then only the rows whose expert is elsewhere), "
        "allgather (Megatron-Core's: every token to every rank, outputs reduce-scattered) or "
        "hierarchical (DeepEP's two levels: a token crosses to each node once, then NVLink; "
        "with --gpus-per-node)",
    )
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
    add_trace_argument(parser, "the cluster's training run")
    add_progress_argument(parser)
    parser.set_defaults(func=run)


def run(args):
    """Print the report; 0 when the cluster matches one device, 1 when it does not."""
    import json

    from ..network.chrome import ChromePart
    from ..verify import verify
    from .common import explain_time_guard
    from .console import progress
    from .trace_flag import check_trace, write_trace

    config = check_args(args)
    check_trace(args)
    timing = {k: getattr(args, k) for k in ("bandwidth", "latency", "compute_rate")}
    training = progress(f"collsim verify {args.scheme}: training twice", args.progress)
    with training, explain_time_guard(**timing):
        report = verify(config)
    if args.json:
        print(json.dumps(_finite_or_null(report.to_dict()), indent=2))
    else:
        print(report)
    write_trace(args, [ChromePart(report.trace)], quiet=args.json)
    return 0 if report.match else 1


def _finite_or_null(value):
    """JSON has no nan or inf: a diverged run's figures become null (see "non_finite")."""
    if isinstance(value, float) and not (value == value and abs(value) != float("inf")):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite_or_null(v) for v in value]
    return value
