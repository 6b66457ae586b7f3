"""How a sequence is split over a context-parallel (cp) group.

==============  ==========================================================================
layout          what cp rank ``i`` of ``cp`` holds (the sequence cut into equal chunks)
==============  ==========================================================================
``contiguous``  chunk ``i`` of ``cp``: tokens ``i·S/cp .. (i+1)·S/cp``.  Under a causal
                mask the last rank's queries see the most keys: its work is nearly
                ``(2·cp−1)/cp`` times the mean (:func:`~.formulas.causal_balance`).
``balanced``    chunks ``i`` and ``2·cp−1−i`` of ``2·cp``, concatenated in that order
                (the load-balanced layout of Megatron-LM's context parallelism and of
                Llama 3 training): one early and one late chunk each, so every rank's
                causal work is the same.
==============  ==========================================================================

Examples
--------
>>> import numpy as np
>>> [token_positions(8, 2, i, "balanced").tolist() for i in range(2)]
[[0, 1, 6, 7], [2, 3, 4, 5]]
>>> x = np.arange(8.0).reshape(1, 8, 1)  # (B, S, D)
>>> parts = [shard_sequence(x, 2, i, "balanced") for i in range(2)]
>>> bool((gather_sequence(parts, "balanced") == x).all())
True
"""

import difflib
import numbers

import numpy as np

from ...errors import ConfigError

__all__ = ["CP_LAYOUTS", "shard_sequence", "gather_sequence", "token_positions", "check_sequence"]

CP_LAYOUTS = ("contiguous", "balanced")


def _check_layout(layout):
    if not isinstance(layout, str) or layout not in CP_LAYOUTS:
        guess = difflib.get_close_matches(str(layout), CP_LAYOUTS, n=1, cutoff=0)[0]
        raise ConfigError(
            f"unknown context-parallel layout {layout!r}: choose one of "
            f"{', '.join(CP_LAYOUTS)}; nearest valid choice: {guess!r}"
        )
    return layout


def _check_count(value, what):
    """A whole number >= 1 (a Python or numpy int, not a bool)."""
    whole = isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)
    if not whole or value < 1:
        raise ConfigError(f"{what} must be a whole number >= 1, got {value!r}")
    return int(value)


def _chunks_per_rank(layout):
    return 2 if layout == "balanced" else 1


def check_sequence(seq, cp, layout):
    """Refuse a sequence length that ``layout`` cannot split over ``cp`` ranks.

    The contiguous layout needs ``seq`` divisible by ``cp``, the balanced one by ``2·cp``.
    The error names ``seq``, the rule and the nearest valid lengths.

    >>> check_sequence(16, 4, "balanced")
    >>> check_sequence(12, 4, "balanced")
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: seq=12 cannot be split over cp=4 with the balanced layout: \
it must be divisible by 2·cp = 8 (2·cp equal chunks, two per rank); nearest valid seq: 8 or 16
    >>> check_sequence(8, 2, "balance")
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: unknown context-parallel layout 'balance': choose one of \
contiguous, balanced; nearest valid choice: 'balanced'
    """
    _check_layout(layout)
    cp = _check_count(cp, "cp (the context-parallel degree)")
    seq = _check_count(seq, "seq (the sequence length)")
    chunks = _chunks_per_rank(layout) * cp
    if seq % chunks:
        below, above = seq // chunks * chunks, (seq // chunks + 1) * chunks
        nearest = f"{below} or {above}" if below else f"{above}"
        rule = (
            "2·cp = {} (2·cp equal chunks, two per rank)"
            if layout == "balanced"
            else "cp = {} (one equal chunk per rank)"
        ).format(chunks)
        raise ConfigError(
            f"seq={seq} cannot be split over cp={cp} with the {layout} layout: it must be "
            f"divisible by {rule}; nearest valid seq: {nearest}"
        )


def _check_index(index, cp):
    whole = isinstance(index, numbers.Integral) and not isinstance(index, bool | np.bool_)
    if not whole or not 0 <= index < cp:
        raise ConfigError(f"cp rank index {index!r} is not a rank of cp={cp}: choose 0..{cp - 1}")
    return int(index)


def shard_sequence(x, cp, index, layout, axis=1):
    """Rank ``index``'s tokens of ``x`` (a copy), cut along ``axis`` by ``layout``.

    >>> import numpy as np
    >>> shard_sequence(np.arange(8), 2, 0, "contiguous", axis=0).tolist()
    [0, 1, 2, 3]
    >>> shard_sequence(np.arange(8), 2, 0, "balanced", axis=0).tolist()
    [0, 1, 6, 7]
    """
    x = np.asarray(x)
    if not -x.ndim <= axis < x.ndim:
        raise ConfigError(f"axis={axis} is not an axis of an array of shape {x.shape}")
    check_sequence(x.shape[axis], cp, layout)
    index = _check_index(index, cp)
    if layout == "contiguous":
        return np.split(x, cp, axis=axis)[index].copy()
    chunks = np.split(x, 2 * cp, axis=axis)
    return np.concatenate([chunks[index], chunks[2 * cp - 1 - index]], axis=axis)


def gather_sequence(parts, layout, axis=1):
    """The full sequence from the ranks' parts in group order: :func:`shard_sequence`'s
    inverse.

    >>> import numpy as np
    >>> parts = [np.array([0, 1, 6, 7]), np.array([2, 3, 4, 5])]
    >>> gather_sequence(parts, "balanced", axis=0).tolist()
    [0, 1, 2, 3, 4, 5, 6, 7]
    """
    _check_layout(layout)
    parts = [np.asarray(p) for p in parts]
    if not parts:
        raise ConfigError("gather_sequence needs the parts of at least one rank, got none")
    lengths = {p.shape[axis] for p in parts}
    if len(lengths) != 1:
        raise ConfigError(
            f"gather_sequence: the ranks' parts have different lengths {sorted(lengths)} along "
            f"axis {axis}: every rank holds the same number of tokens"
        )
    if layout == "contiguous":
        return np.concatenate(parts, axis=axis)
    if lengths.pop() % 2:
        raise ConfigError(
            f"gather_sequence: a balanced part holds two equal chunks, but its length "
            f"{parts[0].shape[axis]} along axis {axis} is odd"
        )
    halves = [np.split(p, 2, axis=axis) for p in parts]
    early = [h[0] for h in halves]  # chunk i of rank i
    late = [h[1] for h in reversed(halves)]  # chunk 2·cp−1−i of rank i, so reversed
    return np.concatenate(early + late, axis=axis)


def token_positions(seq, cp, index, layout):
    """The global positions of rank ``index``'s tokens, in its local order.

    >>> [token_positions(8, 4, 3, layout).tolist() for layout in CP_LAYOUTS]
    [[6, 7], [3, 4]]
    """
    check_sequence(seq, cp, layout)
    return shard_sequence(np.arange(int(seq)), cp, index, layout, axis=0)
