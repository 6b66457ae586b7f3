"""What ``collsim verify`` refuses before it trains, and how much memory a check needs.

Every refusal names the value as given, the rule it broke and the nearest valid choice
where there is one; all of them run before any array is built.  A check runs in seconds:
more ranks, layers or steps than :data:`LIMITS` teach nothing new.

Examples
--------
>>> check_verify_sizes(dp=2, tp=2, layers=2, steps=3)  # within LIMITS: nothing to say
>>> check_verify_sizes(dp=1, tp=1, layers=2, steps=101, names={"steps": "--steps"})
Traceback (most recent call last):
...
collsim.errors.ConfigError: --steps 101: more than the 100 steps a verification runs in \
seconds; nearest valid --steps 100
"""

import difflib
import math
from typing import NamedTuple

from ..errors import ConfigError
from ..parallel.config import PREFETCH
from ..parallel.tensor import check_tp
from .problems import BYTES, SCHEMES, SHARDING, has_attention, model_shape

__all__ = [
    "LIMITS",
    "OPTIMIZERS",
    "Sharding",
    "check_arguments",
    "check_sharding",
    "check_verify_sizes",
    "estimate_memory",
]

OPTIMIZERS = ("adam", "sgd")  # the sharding schemes' optimizers (Adam: its state is the point)
STAGES = (1, 2, 3)  # what ``verify zero`` runs; stage 0 is ``verify dp``

# a check runs in seconds: more ranks, layers or steps than these teach nothing new
LIMITS = {"ranks": 64, "layers": 64, "steps": 100}


class Sharding(NamedTuple):
    """The sharding options of zero, fsdp or hsdp after their defaults."""

    stage: int  # ZeRO stage: 1, 2 or 3
    dp: int  # data-parallel ranks (dp_replicate · dp_shard)
    dp_replicate: int  # replicas of the sharded model (1 unless hsdp)
    dp_shard: int  # ranks each replica is sharded over
    gpus_per_node: int  # GPUs per node of hsdp's two-level topology
    optimizer: str  # "adam" or "sgd"


def check_arguments(scheme, *, dp, tp, lr, hidden, heads, ffn, seq, sequence_parallel):
    """Refuse a scheme, learning rate, degree or width :func:`~collsim.verify.verify` cannot
    run; ``dp`` and ``tp`` are the degrees after the scheme's defaults (the kinds of value,
    the seed and the limits are :class:`~collsim.verify.config.VerifyConfig`'s first checks).

    >>> check_arguments("tp-mlp", dp=2, tp=2, lr=0.1, hidden=8, heads=2, ffn=32, seq=4,
    ...                 sequence_parallel=False)
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: scheme 'tp-mlp' is tensor parallel only: use dp-tp for dp=2
    """
    if scheme not in SCHEMES:
        raise ConfigError(f"unknown scheme {scheme!r}: choose one of {', '.join(SCHEMES)}")
    if isinstance(lr, bool) or not isinstance(lr, int | float) or not math.isfinite(lr) or lr <= 0:
        raise ConfigError(f"lr={lr!r}: the learning rate must be a finite number > 0, like 0.1")
    if scheme not in ("dp", "dp-tp", *SHARDING) and dp != 1:
        raise ConfigError(f"scheme {scheme!r} is tensor parallel only: use dp-tp for dp={dp}")
    if sequence_parallel and scheme not in ("sp", "dp-tp"):
        raise ConfigError(f"sequence parallelism applies to 'sp' and 'dp-tp', not {scheme!r}")
    if (scheme == "dp" or scheme in SHARDING) and tp != 1:
        raise ConfigError(f"scheme {scheme!r} is data parallel only: use dp-tp for tp={tp}")
    attention = has_attention(scheme)
    if attention and hidden % heads:
        raise ConfigError(f"heads={heads} must divide hidden={hidden} (head_dim = hidden/heads)")
    # Megatron-LM's rule: tp divides hidden and ffn hidden (and heads, and with SP the sequence)
    check_tp(
        tp,
        hidden=hidden,
        heads=heads if attention else None,
        ffn_hidden=ffn,
        seq=seq,
        sequence_parallel=sequence_parallel or scheme == "sp",
    )


def _shown(names, key, value):
    """``--stage 4`` when the user spelled it as a flag, else ``stage=4``."""
    what = names.get(key, key)
    return f"{what} {value}" if what.startswith("-") else f"{what}={value!r}"


def _whole(value, key, names, minimum=1):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        what = names.get(key, key)
        near = f"; nearest valid {what}{' ' if what.startswith('-') else '='}{minimum}"
        rule = f"must be a whole number >= {minimum}"
        raise ConfigError(
            f"{_shown(names, key, value)}: {rule}"
            + (near if isinstance(value, int | float) and not isinstance(value, bool) else "")
        )
    return value


def _choice(value, key, choices, names):
    if value in choices:
        return value
    texts = [str(c) for c in choices]
    near = difflib.get_close_matches(str(value), texts, n=1, cutoff=0.0)
    what = names.get(key, key)
    sep = " " if what.startswith("-") else "="
    raise ConfigError(
        f"{_shown(names, key, value)}: not one of {', '.join(texts)}; nearest "
        f"valid {what}{sep}{near[0]}"
    )


def check_sharding(
    scheme,
    *,
    dp,
    stage=None,
    dp_replicate=None,
    dp_shard=None,
    prefetch="none",
    reshard_after_forward=True,
    gpus_per_node=None,
    optimizer=None,
    names=None,
):
    """Refuse sharding options ``scheme`` cannot run; returns the resolved :class:`Sharding`
    (None for a scheme that does not shard).

    ``dp`` is the degree the user gave (None: the scheme's default), ``names`` maps an
    option to its flag (``{"stage": "--stage"}``) so a refusal says what the user typed.
    ``zero`` runs ``stage`` 1, 2 or 3 (default 1); ``fsdp`` and ``hsdp`` are stage 3;
    ``hsdp``'s dp is ``dp_replicate · dp_shard`` (default 2 × 2) on nodes of
    ``gpus_per_node`` GPUs (default ``dp_shard``: the shard group inside a node).

    >>> check_sharding("zero", dp=4, stage=2)
    Sharding(stage=2, dp=4, dp_replicate=1, dp_shard=4, gpus_per_node=4, optimizer='adam')
    >>> check_sharding("hsdp", dp=None, dp_replicate=2, dp_shard=4).gpus_per_node
    4
    >>> check_sharding("zero", dp=4, stage=4, names={"stage": "--stage"})
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: --stage 4: ZeRO stages are 1 (optimizer state), 2 (+ gradients) \
and 3 (+ parameters); nearest valid --stage 3
    """
    names = names or {}
    given = {
        "stage": stage is not None,
        "dp_replicate": dp_replicate is not None,
        "dp_shard": dp_shard is not None,
        "gpus_per_node": gpus_per_node is not None,
        "optimizer": optimizer is not None,
        "prefetch": prefetch != "none",
        "reshard_after_forward": reshard_after_forward is not True,
    }
    where = {
        "stage": ("zero",),
        "dp_replicate": ("hsdp",),
        "dp_shard": ("hsdp",),
        "gpus_per_node": ("hsdp",),
        "optimizer": SHARDING,
        "prefetch": ("fsdp", "hsdp"),
        "reshard_after_forward": ("fsdp", "hsdp"),
    }
    for key, set_ in given.items():
        if set_ and scheme not in where[key]:
            what = names.get(key, key)
            raise ConfigError(
                f"{what} applies to {' and '.join(where[key])}, not to scheme {scheme!r}"
            )
    if scheme not in SHARDING:
        return None
    optimizer = _choice("adam" if optimizer is None else optimizer, "optimizer", OPTIMIZERS, names)
    _choice(prefetch, "prefetch", PREFETCH, names)
    if not isinstance(reshard_after_forward, bool):
        raise ConfigError(f"reshard_after_forward={reshard_after_forward!r}: True or False")
    if scheme == "zero":
        stage = 1 if stage is None else stage
        if isinstance(stage, bool) or stage not in STAGES:
            near = 3 if isinstance(stage, int | float) and stage > 3 else 1
            raise ConfigError(
                f"{_shown(names, 'stage', stage)}: ZeRO stages are 1 (optimizer "
                "state), 2 (+ gradients) and 3 (+ parameters); nearest valid "
                f"{names.get('stage', 'stage')}"
                f"{' ' if names.get('stage', '').startswith('-') else '='}{near}"
            )
        stage = int(stage)
    else:
        stage = 3
    if scheme != "hsdp":
        dp = 4 if dp is None else dp
        return Sharding(stage, dp, 1, dp, dp, optimizer)
    replicate = _whole(2 if dp_replicate is None else dp_replicate, "dp_replicate", names)
    shard = _whole(2 if dp_shard is None else dp_shard, "dp_shard", names)
    if dp is not None and dp != replicate * shard:
        raise ConfigError(
            f"{_shown(names, 'dp', dp)}: hsdp's dp is dp_replicate × dp_shard = {replicate} × "
            f"{shard} = {replicate * shard}; leave {names.get('dp', 'dp')} out or give "
            f"{replicate * shard}"
        )
    dp = replicate * shard
    if dp > LIMITS["ranks"]:  # before any divisor search; both values named as given
        raise ConfigError(
            f"{_shown(names, 'dp_replicate', replicate)} × {_shown(names, 'dp_shard', shard)} "
            f"= {dp} ranks: more than the {LIMITS['ranks']} a verification runs in seconds; "
            f"choose dp_replicate · dp_shard <= {LIMITS['ranks']}"
        )
    g = _whole(shard if gpus_per_node is None else gpus_per_node, "gpus_per_node", names)
    if dp % g:
        near = max(d for d in range(1, min(g, dp) + 1) if dp % d == 0)
        raise ConfigError(
            f"{_shown(names, 'gpus_per_node', g)}: the {dp} ranks fill whole "
            f"nodes, so it must divide {dp}; nearest valid "
            f"{names.get('gpus_per_node', 'gpus_per_node')} {near}"
        )
    return Sharding(stage, dp, replicate, shard, g, optimizer)


def check_verify_sizes(*, dp, tp, layers, steps, names=None, ranks_given=None):
    """Refuse a run past :data:`LIMITS`; ``names`` maps a size to how the user spelled it,
    ``ranks_given`` says how the user gave the ranks (default ``dp × tp = ...``)."""
    names = names or {}
    for key, value in (("ranks", dp * tp), ("layers", layers), ("steps", steps)):
        if value <= LIMITS[key]:
            continue
        if key == "ranks":
            given = ranks_given or f"dp × tp = {dp} × {tp}"
            raise ConfigError(
                f"{given} = {value} ranks: more than the {LIMITS[key]} a "
                f"verification runs in seconds; choose dp · tp <= {LIMITS[key]}"
            )
        what = names.get(key, key)
        shown = f"{what} {value}" if what.startswith("-") else f"{what}={value}"
        raise ConfigError(
            f"{shown}: more than the {LIMITS[key]} {key} a verification runs in seconds; "
            f"nearest valid {what} {LIMITS[key]}"
        )


def estimate_memory(scheme, *, dp, tp, batch, hidden, heads, seq, ffn, layers, steps):
    """Bytes :func:`~collsim.verify.verify` needs, about (an upper estimate, float64 throughout).

    Parameters are held by the oracle, by every rank's shard (dp replicas of the model)
    and in the per-step snapshots of both runs (gradients and parameters); activations
    are kept for the backward pass in both runs; the data and the per-step outputs and
    input gradients are stored too.  (The planner's Korthikanti et al. activation formula
    counts a GPU's 16-bit run with dropout masks, not these numpy arrays and snapshots.)

    >>> estimate_memory("dp", dp=4, tp=1, batch=64, hidden=16, heads=4, seq=8, ffn=64,
    ...                 layers=2, steps=3) < 2**25
    True
    """
    n_layers, per_layer, attention = model_shape(scheme, hidden, ffn, layers)
    params = n_layers * per_layer * (dp + 3 + 4 * steps)
    tokens = batch * seq
    scores = batch * heads * seq * seq * 2 if attention else 0
    activations = 2 * n_layers * (tokens * (6 * hidden + 2 * ffn) + scores)
    widest = max(hidden, ffn)
    stored = steps * tokens * widest * 6  # data (x, target) and both runs' y and dx
    return BYTES * (params + activations + stored)
