"""``collsim verify``'s flags checked before any training: each refusal names the flag as
the user typed it.

:func:`check_args` parses the flags given as text, builds the
:class:`~collsim.verify.config.VerifyConfig`, refuses a run that would take minutes or more
memory than there is, then applies every rule once.  Heavy imports stay inside the
functions, so ``collsim --help`` stays instant.
"""

__all__ = ["check_args", "learning_rate", "FLAGS"]

# the flags that set how much memory a check needs, named in the refusal
MODEL_SIZE_FLAGS = (
    "hidden",
    "ffn_hidden",
    "heads",
    "seq",
    "layers",
    "batch",
    "micro_batch",
    "steps",
    "dp",
    "tp",
)
# every option of VerifyConfig as the user spells it, for the refusals
FLAGS = {
    "dp": "--dp",
    "tp": "--tp",
    "cp": "--cp",
    "pp": "--pp",
    "sp": "--sp",
    "dp_replicate": "--dp-replicate",
    "dp_shard": "--dp-shard",
    "gpus_per_node": "--gpus-per-node",
    "stage": "--stage",
    "optimizer": "--optimizer",
    "prefetch": "--prefetch",
    "reshard_after_forward": "--no-reshard-after-forward",
    "variant": "--variant",
    "layout": "--layout",
    "causal": "--causal",
    "micro_batch": "--micro-batch",
    "accumulation": "--accumulation",
    "heads": "--heads",
    "hidden": "--hidden",
    "seq": "--seq",
    "layers": "--layers",
    "steps": "--steps",
    "batch": "--batch",
    "ffn_hidden": "--ffn-hidden",
    "seed": "--seed",
    "ep": "--ep",
    "etp": "--etp",
    "experts": "--experts",
    "top_k": "--top-k",
    "capacity_factor": "--capacity-factor",
    "drop_policy": "--drop-policy",
    "pad_to_capacity": "--pad-to-capacity",
    "routing": "--routing",
    "router_score": "--router-score",
    "dispatcher": "--dispatcher",
}
# the options given as text, so that a refusal can quote them: whole numbers
WHOLE_NUMBER_FLAGS = ("stage", "cp", "pp", "dp_replicate", "dp_shard", "gpus_per_node")


def check_args(args):
    """Every refusal that needs no training, named by flag: the flags' text parsed here, the
    config's sizes (``VerifyConfig.sizes``), the time and memory the run needs, then every
    rule applied once (``VerifyConfig.resolved``).  Returns the
    :class:`~collsim.verify.config.VerifyConfig`."""
    from dataclasses import fields

    from ..errors import ConfigError
    from ..units import parse_flops, parse_size
    from ..verify.config import VerifyConfig
    from .common import flag_value, link_latency, link_rate

    whole = {}
    for key in WHOLE_NUMBER_FLAGS:
        text = getattr(args, key)
        try:
            whole[key] = None if text is None else int(text)
        except ValueError:
            flag = FLAGS[key]
            raise ConfigError(f"{flag} {text!r}: must be a whole number, like {flag} 2") from None
    lr = None if args.lr is None else learning_rate(args.lr)
    link_rate(args.bandwidth, "--bandwidth"), link_latency(args.latency, "--latency")
    compute_rate = flag_value(parse_flops, args.compute_rate, "--compute-rate")
    bucket_bytes = flag_value(parse_size, args.bucket_size, "--bucket-size")
    if bucket_bytes < 1:  # the shared ParallelConfig refuses it; 1B already flushes each grad
        raise ConfigError(
            f"--bucket-size {args.bucket_size}: a gradient bucket holds at least "
            "1 byte; nearest valid --bucket-size 1B"
        )
    # each field from the flag of its name, as parsed above where the flag is text
    same = {f.name: getattr(args, f.name) for f in fields(VerifyConfig) if hasattr(args, f.name)}
    parsed = dict(
        sequence_parallel=args.sp,
        lr=lr,
        bucket_bytes=bucket_bytes,
        compute_rate=compute_rate,
        names=FLAGS,
    )
    config = VerifyConfig(**same | whole | parsed)
    _check_resources(args, config.sizes)  # before the rules: some search a size's divisors
    _ = config.resolved  # every rule now, once, before the progress line; verify reads it
    return config


def _check_resources(args, sizes):
    """Refuse a check that would take minutes or more memory than there is, naming the
    size flags given (the estimates read the config's sizes: batch, degrees and widths)."""
    from ..units import format_size
    from ..verify import estimate_memory, model_shape
    from ..verify.context import CONTEXT_SCHEMES
    from ..verify.moe import MOE_SCHEMES
    from .limits import check_fits, check_work, transformer_seconds

    if args.scheme in MOE_SCHEMES:  # its sizes bounded its cost already (verify.moe)
        return
    scheme, batch, ffn = args.scheme, sizes.batch, sizes.ffn_hidden
    given = ", ".join(
        f"--{k.replace('_', '-')} {getattr(args, k)}"
        for k in MODEL_SIZE_FLAGS
        if getattr(args, k) is not None
    )
    if scheme in CONTEXT_SCHEMES:  # the causal blocks on every rank of the mesh
        world = sizes.world
        n_layers, attention = args.layers, True
        per_layer = 4 * args.hidden**2 + 2 * args.hidden * ffn  # attention and MLP weights
        estimated, dp, tp = "dp", world, 1  # as data parallel on every rank
        given = given or "the defaults"
        where = f"batch {batch} on {world} ranks"
        smaller = "the check shows the same with the defaults (--hidden 16, --seq 8)"
    else:
        dp, tp = sizes.dp, sizes.tp
        n_layers, per_layer, attention = model_shape(scheme, args.hidden, ffn, args.layers)
        estimated = scheme
        where = f"batch {batch} on dp {dp} × tp {tp}"
        smaller = (
            f"the check shows the same with the defaults (--hidden 16: about "
            f"{format_size(_default_need(scheme, dp, tp))})"
        )
    need = estimate_memory(
        estimated,
        dp=dp,
        tp=tp,
        batch=batch,
        hidden=args.hidden,
        heads=args.heads,
        seq=args.seq,
        ffn=ffn,
        layers=args.layers,
        steps=args.steps,
    )
    seconds = transformer_seconds(
        layers=n_layers,
        params_per_layer=per_layer,
        tokens=batch * args.seq,
        sequences=batch if attention else 0,
        heads=args.heads,
        seq=args.seq,
        hidden=args.hidden,
        ffn=ffn,
        passes=2 * args.steps,  # one device and the cluster
    )
    check_work(seconds, given, "the check shows the same at the defaults (--hidden 16, --seq 8)")
    check_fits(
        need, f"{given} ({where}; float64 weights, activations and both runs' snapshots)", smaller
    )


def learning_rate(lr_text):
    """The --lr flag's value: a finite number > 0, refused by name otherwise."""
    import math

    from ..errors import ConfigError

    try:
        lr = float(lr_text)
    except ValueError:
        raise ConfigError(f"--lr {lr_text!r}: not a number; give e.g. --lr 0.1") from None
    if not math.isfinite(lr) or lr <= 0:
        raise ConfigError(
            f"--lr {lr_text}: the learning rate must be a finite number > 0, like --lr 0.1"
        )
    return lr


def _default_need(scheme, dp, tp):
    from ..verify import default_batch, estimate_memory

    batch = default_batch(scheme, dp)
    return estimate_memory(
        scheme, dp=dp, tp=tp, batch=batch, hidden=16, heads=4, seq=8, ffn=64, layers=2, steps=3
    )
