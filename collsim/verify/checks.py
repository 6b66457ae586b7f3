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

import math

from ..errors import ConfigError
from ..parallel.tensor import check_tp
from .problems import BYTES, SCHEMES, has_attention, model_shape

__all__ = ["LIMITS", "check_arguments", "check_verify_sizes", "estimate_memory"]

# a check runs in seconds: more ranks, layers or steps than these teach nothing new
LIMITS = {"ranks": 64, "layers": 64, "steps": 100}


def check_arguments(scheme, *, dp, tp, lr, seed, hidden, heads, ffn, seq, layers, steps,
                    sequence_parallel):  # fmt: skip
    """Refuse a scheme, learning rate, seed, degree or size :func:`~collsim.verify.verify`
    cannot run; ``dp`` and ``tp`` are the degrees after the scheme's defaults.

    >>> check_arguments("tp-mlp", dp=2, tp=2, lr=0.1, seed=0, hidden=8, heads=2, ffn=32,
    ...                 seq=4, layers=1, steps=1, sequence_parallel=False)
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: scheme 'tp-mlp' is tensor parallel only: use dp-tp for dp=2
    """
    if scheme not in SCHEMES:
        raise ConfigError(f"unknown scheme {scheme!r}: choose one of {', '.join(SCHEMES)}")
    if isinstance(lr, bool) or not isinstance(lr, int | float) or not math.isfinite(lr) or lr <= 0:
        raise ConfigError(f"lr={lr!r}: the learning rate must be a finite number > 0, like 0.1")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed={seed!r}: a random seed is a whole number >= 0, like 0")
    if scheme not in ("dp", "dp-tp") and dp != 1:
        raise ConfigError(f"scheme {scheme!r} is tensor parallel only: use dp-tp for dp={dp}")
    if sequence_parallel and scheme not in ("sp", "dp-tp"):
        raise ConfigError(f"sequence parallelism applies to 'sp' and 'dp-tp', not {scheme!r}")
    if scheme == "dp" and tp != 1:
        raise ConfigError(f"scheme 'dp' is data parallel only: use dp-tp for tp={tp}")
    attention = has_attention(scheme)
    if attention and hidden % heads:
        raise ConfigError(f"heads={heads} must divide hidden={hidden} (head_dim = hidden/heads)")
    # Megatron-LM's rule: tp divides hidden and ffn hidden (and heads, and with SP the sequence)
    check_tp(tp, hidden=hidden, heads=heads if attention else None, ffn_hidden=ffn, seq=seq,
             sequence_parallel=sequence_parallel or scheme == "sp")  # fmt: skip
    check_verify_sizes(dp=dp, tp=tp, layers=layers, steps=steps)


def check_verify_sizes(*, dp, tp, layers, steps, names=None):
    """Refuse a run past :data:`LIMITS`; ``names`` maps a size to how the user spelled it."""
    names = names or {}
    for key, value in (("ranks", dp * tp), ("layers", layers), ("steps", steps)):
        if value <= LIMITS[key]:
            continue
        if key == "ranks":
            raise ConfigError(
                f"dp × tp = {dp} × {tp} = {value} ranks: more than the {LIMITS[key]} a "
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
