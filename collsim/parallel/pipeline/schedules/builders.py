"""Builders for the classic pipeline schedules: GPipe, 1F1B, interleaved 1F1B and ZB-H1.

Each builder writes down, per stage, the warmup / steady / cooldown phases the way the
reference implementation runs them (Megatron-LM for 1F1B and interleaved, the ZB-H1 figure of
Qi et al. for ZB-H1), and returns a `Schedule`. Nothing here knows about time.

Examples
--------
>>> print(build_schedule("gpipe", p=2, m=2))
stage 0 | F0 F1 B0 B1
stage 1 | F0 F1 B0 B1
"""

import difflib

from ....errors import ConfigError
from ._checks import check_count, nearest_multiples
from .schedule import PipeOp, Schedule

__all__ = ["SCHEDULE_NAMES", "gpipe", "one_f_one_b", "interleaved", "zb_h1", "build_schedule"]

SCHEDULE_NAMES = ("gpipe", "1f1b", "interleaved", "zb-h1")


def gpipe(p, m):
    """GPipe: every stage runs all ``m`` forwards, then all ``m`` backwards.

    Simple, but every stage holds all ``m`` activations at the peak.

    Examples
    --------
    >>> sched = gpipe(p=3, m=4)
    >>> print(sched.table().splitlines()[0])
    stage 0 | F0 F1 F2 F3 B0 B1 B2 B3
    >>> sched.peak_inflight()
    (4, 4, 4)
    """
    check_count("p", p)
    check_count("m", m)
    stage_ops = tuple(PipeOp("F", i) for i in range(m)) + tuple(PipeOp("BW", i) for i in range(m))
    return Schedule("gpipe", p, m, 1, (stage_ops,) * p)


def one_f_one_b(p, m):
    """1F1B without interleaving (PipeDream-Flush; Megatron's default schedule).

    Stage ``s`` (``pp_rank``) runs

    * warmup: ``min(p - s - 1, m)`` forwards, just enough to fill the pipe below it;
    * steady: ``m - warmup`` rounds of one forward then one backward;
    * cooldown: the ``warmup`` backwards still owed.

    Same bubble as GPipe, but stage ``s`` holds at most ``min(p - s, m)`` activations.

    Examples
    --------
    >>> print(one_f_one_b(p=3, m=4))
    stage 0 | F0 F1 F2 B0 F3 B1 B2 B3
    stage 1 | F0 F1 B0 F2 B1 F3 B2 B3
    stage 2 | F0 B0 F1 B1 F2 B2 F3 B3
    """
    check_count("p", p)
    check_count("m", m)
    ops = []
    for pp_rank in range(p):
        warmup = min(p - pp_rank - 1, m)
        stage_ops = [PipeOp("F", i) for i in range(warmup)]
        for i in range(m - warmup):  # steady: forward i + warmup, backward i
            stage_ops += [PipeOp("F", warmup + i), PipeOp("BW", i)]
        stage_ops += [PipeOp("BW", i) for i in range(m - warmup, m)]
        ops.append(stage_ops)
    return Schedule("1f1b", p, m, 1, ops)


def interleaved(p, m, v):
    """Megatron's interleaved 1F1B: ``v`` model chunks per stage, bubble divided by ``v``.

    Every stage works through ``m * v`` *virtual micro-batches* ``k`` (one chunk-pass each). Forward
    ``k`` takes micro-batches in groups of ``p`` per chunk: chunk ``(k mod pv) // p``, micro-batch
    ``(k // pv) p + k mod p``; backward ``k`` visits the chunks in reverse (chunk ``v - 1`` first).
    Stage ``s`` runs

    * warmup: ``min(2 (p - s - 1) + (v - 1) p, m v)`` forwards;
    * steady: ``m v - warmup`` rounds of forward ``warmup + i`` then backward ``i``;
    * cooldown: the remaining backwards.

    Rules: ``p >= 2`` (one stage has nobody to interleave with); ``v >= 2`` (for ``v = 1`` use
    :func:`one_f_one_b`: this warmup would then be ``2 (p - s - 1)``, more memory for the same
    bubble); ``m`` a multiple of ``p``, Megatron's classic rule. Newer Megatron-Core relaxes it
    with ``microbatch_group_size_per_vp_stage`` (the last group may have any size ``>= p``).
    Megatron-LM once ran all forwards first when ``m == p``; like Megatron-Core, this builder
    uses the capped warmup above in every case.

    Examples
    --------
    >>> sched = interleaved(p=2, m=4, v=2)
    >>> print(sched)
    stage 0 | F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0
    stage 1 | F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0
    >>> sched.formula_bubble_fraction() < one_f_one_b(p=2, m=4).formula_bubble_fraction()
    True
    """
    check_count("p", p)
    check_count("m", m)
    check_count("v", v)
    if p < 2:
        raise ConfigError(
            f"interleaved schedule needs p >= 2 pipeline stages, got p={p}; "
            f"nearest valid choice: p=2 (or schedule '1f1b' for a single stage)"
        )
    if v < 2:
        raise ConfigError(
            f"interleaved schedule needs v >= 2 model chunks per stage, got v={v}; "
            f"nearest valid choice: v=2, or schedule '1f1b', which is the v=1 case"
        )
    if m % p:
        choices = " or ".join(f"m={c}" for c in nearest_multiples(m, p))
        raise ConfigError(
            f"interleaved schedule needs the number of micro-batches m={m} to be a multiple "
            f"of the pipeline stages p={p} (Megatron's rule); nearest valid choice: {choices}"
        )
    total = m * v

    def forward_op(k):
        group, k_in_group = divmod(k, p * v)
        return PipeOp("F", group * p + k_in_group % p, chunk=k_in_group // p)

    def backward_op(k):
        fwd = forward_op(k)
        return PipeOp("BW", fwd.microbatch, chunk=v - 1 - fwd.chunk)

    ops = []
    for pp_rank in range(p):
        warmup = min(2 * (p - pp_rank - 1) + (v - 1) * p, total)
        stage_ops = [forward_op(k) for k in range(warmup)]
        for i in range(total - warmup):
            stage_ops += [forward_op(warmup + i), backward_op(i)]
        stage_ops += [backward_op(k) for k in range(total - warmup, total)]
        ops.append(stage_ops)
    return Schedule("interleaved", p, m, v, ops)


def zb_h1(p, m):
    """ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): 1F1B with a split backward.

    ``B`` (input gradient) stays on the critical path; ``W`` (weight gradient) is deferred by
    ``p - 1`` micro-batches on every stage, into what would be bubble. Round ``x`` of stage ``s``
    runs ``F_x``, ``B_(x - (p-1-s))``, ``W_(x - (p-1))``, leaving out indices outside ``0..m-1``,
    so stage ``s`` runs

    * warmup: ``p - s - 1`` forwards (as 1F1B), then ``s`` rounds of F, B;
    * steady: ``m - p + 1`` rounds of F, B, W;
    * cooldown: ``p - s - 1`` rounds of B, W, then ``s`` W's that fill the tail.

    Every stage then holds ``p`` activations at its peak, the same as 1F1B's stage 0, and the
    bubble is ``(p-1)(t_f + t_b - t_w)`` when ``t_w <= min(t_f, t_b)``. Needs ``m >= p``.

    Examples
    --------
    >>> print(zb_h1(p=2, m=3))
    stage 0 | F0 F1 B0 W0 F2 B1 W1 B2 W2
    stage 1 | F0 B0 F1 B1 W0 F2 B2 W1 W2
    """
    check_count("p", p)
    check_count("m", m)
    if m < p:
        raise ConfigError(
            f"zb-h1 needs at least as many micro-batches as stages, got m={m} < p={p}; "
            f"nearest valid choice: m={p}"
        )
    ops = []
    for pp_rank in range(p):
        stage_ops = []
        for x in range(m + p - 1):
            for kind, mb in (("F", x), ("B", x - (p - 1 - pp_rank)), ("W", x - (p - 1))):
                if 0 <= mb < m:
                    stage_ops.append(PipeOp(kind, mb))
        ops.append(stage_ops)
    return Schedule("zb-h1", p, m, 1, ops)


def build_schedule(name, p, m, v=1):
    """Build a schedule by name: ``"gpipe"``, ``"1f1b"``, ``"interleaved"`` or ``"zb-h1"``.

    Case and ``_`` versus ``-`` do not matter. ``v`` is only for ``"interleaved"``.

    Examples
    --------
    >>> build_schedule("ZB_H1", p=4, m=8)
    Schedule(name='zb-h1', stages=4, microbatches=8, virtual=1)
    >>> build_schedule("1fib", p=4, m=8)
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: unknown pipeline schedule '1fib'; ... did you mean '1f1b'?
    """
    key = str(name).strip().lower().replace("_", "-")
    if key not in SCHEDULE_NAMES:
        guess = difflib.get_close_matches(key, SCHEDULE_NAMES, n=1, cutoff=0)[0]
        valid = ", ".join(repr(n) for n in SCHEDULE_NAMES)
        raise ConfigError(
            f"unknown pipeline schedule {name!r}; valid names are {valid}; did you mean {guess!r}?"
        )
    if key == "interleaved":
        return interleaved(p, m, v)
    if v != 1:
        raise ConfigError(
            f"v={v} model chunks per stage only applies to 'interleaved'; schedule {key!r} "
            f"needs v=1 (nearest valid choice), or use name='interleaved'"
        )
    builders = {"gpipe": gpipe, "1f1b": one_f_one_b, "zb-h1": zb_h1}
    return builders[key](p, m)
