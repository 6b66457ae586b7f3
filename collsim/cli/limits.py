"""Bounds a command checks before it starts: sweep sizes, memory and numpy work.

A sweep, a numeric run or a verification whose size is set by a flag could otherwise run
for minutes or exhaust memory; each check here refuses it up front with a
:class:`~collsim.errors.ConfigError` naming the flag, the value, the bound and the nearest
valid choice.

Examples
--------
>>> sweep_sizes(8, 64, 2)
[8, 16, 32, 64]
"""

import math

from .. import units
from ..errors import ConfigError
from ..units import available_memory
from ..viz.limits import MAX_SWEEP_SIZES  # nccl-tests' default -b 8 -e 128M -f 2 is 25
from .common import flag_value

__all__ = [
    "MAX_SWEEP_SIZES",
    "MAX_WORK_SECONDS",
    "sweep_sizes",
    "parse_factor",
    "size_flag",
    "available_memory",
    "check_fits",
    "transformer_seconds",
    "check_work",
]


def sweep_sizes(min_bytes, max_bytes, factor, max_sizes=MAX_SWEEP_SIZES):
    """The sizes of a sweep in bytes: ``min_bytes``, times ``factor``, ... up to ``max_bytes``.

    Sizes are whole bytes (repeats after rounding are dropped), at most ``max_sizes`` of
    them; the error for a longer sweep names the nearest factor and largest size that fit.

    >>> sweep_sizes("1KiB", "4KiB", "2")
    [1024, 2048, 4096]
    >>> sweep_sizes(8, "128MiB", 1.1)
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: the sweep --min-bytes 8 .. --max-bytes 128MiB with --factor 1.1 ...
    """
    lo = size_flag(min_bytes, "--min-bytes")
    hi = size_flag(max_bytes, "--max-bytes")
    f = parse_factor(factor)
    if lo < 1:
        raise ConfigError(
            f"--min-bytes {min_bytes!r}: a sweep multiplies the size by --factor, so it must "
            "start at >= 1 B; nearest valid --min-bytes 1"
        )
    if hi < lo:
        raise ConfigError(
            f"--max-bytes {max_bytes!r} ({hi} B) is below --min-bytes {min_bytes!r} ({lo} B); "
            f"nearest valid --max-bytes {lo}"
        )
    # count first: a factor just above 1 would otherwise loop for minutes
    count = math.floor(math.log(hi / lo) / math.log(f) + 1e-9) + 1
    if count > max_sizes:
        need = (hi / lo) ** (1 / (max_sizes - 1))  # the smallest factor that fits
        nearest_factor = math.ceil(need * 1000) / 1000  # rounded up so that it does fit
        largest = int(lo * f ** (max_sizes - 1))
        raise ConfigError(
            f"the sweep --min-bytes {min_bytes} .. --max-bytes {max_bytes} with --factor "
            f"{factor} has {count:,} sizes, more than the {max_sizes} a sweep may have; "
            f"nearest valid --factor {nearest_factor:g} or --max-bytes {largest}"
        )
    sizes, s = [], float(lo)
    while s <= hi and len(sizes) < max_sizes:
        if not sizes or int(s) != sizes[-1]:
            sizes.append(int(s))
        s *= f
    return sizes


def size_flag(text, flag):
    """A size flag in bytes; an empty value or a bad size is refused naming the flag."""
    if isinstance(text, str) and not text.strip():
        raise ConfigError(f"{flag} {text!r}: empty; give a size like {flag} 64MiB")
    return flag_value(units.parse_size, text, flag)


def parse_factor(text):
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ConfigError(f"--factor {text!r}: not a number; give e.g. --factor 2") from None
    if not math.isfinite(value) or value <= 1:
        raise ConfigError(
            f"--factor {text!r}: must be a finite number > 1 (each size is the last times "
            "the factor); nccl-tests' usual --factor 2"
        )
    return value


def check_fits(bytes_needed, what, hint=None, available=None):
    """Refuse, before allocating, a run whose arrays need more than the memory available.

    ``what`` says what needs the memory ("8 ranks x 1 GiB float32 buffers"); ``hint`` the
    way out (``--count-only``, a smaller size).  ``available`` defaults to
    :func:`available_memory`; when that is unknown, 16 GiB is assumed.

    >>> check_fits(2**40, "the buffers", "use --count-only", available=2**33)
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: the buffers need about 1 TiB (1,099,511,627,776 B), more than ...
    """
    if available is None:
        available = available_memory()
        if available is None:
            available = 16 * 2**30
    if bytes_needed <= available:
        return bytes_needed
    raise ConfigError(
        f"{what} need about {units.format_size(bytes_needed)} ({int(bytes_needed):,} B), "
        f"more than the {units.format_size(available)} of memory available"
        + (f"; {hint}" if hint else "")
    )


# measured on this 2-core machine: BLAS reaches ~5 GFLOP/s on square-ish matrices but only
# ~2e7·hidden FLOP/s on the thin (tokens × hidden) ones a small model makes
MATMUL_RATE = 5e9


THIN_MATMUL_RATE_PER_COLUMN = 2e7


ELEMENTWISE_RATE = 1e9  # elementwise operations/s; GELU's tanh and powers count ~50 each


MAX_WORK_SECONDS = 60.0  # what a check may take; longer looks hung


def transformer_seconds(
    *, layers, params_per_layer, tokens, sequences, heads, seq, hidden, ffn=None, passes=1
):
    """Wall seconds of ``passes`` forward + backward passes of numpy, estimated: backward
    is twice the forward; a forward does 2·P·tokens matmul FLOP for the weights and
    4·head_dim per attention score, ~20 elementwise operations per score and
    20·hidden + 50·ffn per token.  Within about 3× of the measured time.

    >>> round(transformer_seconds(layers=1, params_per_layer=10**6, tokens=2500, sequences=0,
    ...                           heads=0, seq=0, hidden=1000, ffn=0), 3)
    3.15
    """
    ffn = 4 * hidden if ffn is None else ffn
    scores = sequences * heads * seq * seq
    weight_rate = min(MATMUL_RATE, THIN_MATMUL_RATE_PER_COLUMN * max(hidden, 1))
    matmul = 2 * params_per_layer * tokens / weight_rate
    matmul += 4 * (hidden // max(heads, 1)) * scores / MATMUL_RATE
    elementwise = (20 * scores + tokens * (20 * hidden + 50 * ffn)) / ELEMENTWISE_RATE
    return passes * 3 * layers * (matmul + elementwise)


def check_work(seconds, what, hint):
    """Refuse a run whose numpy work is estimated above :data:`MAX_WORK_SECONDS`.

    >>> check_work(600.0, "--seq 4097", "use a smaller --seq")
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: --seq 4097 would take about 600 s of numpy arithmetic ...
    """
    if seconds <= MAX_WORK_SECONDS:
        return seconds
    raise ConfigError(
        f"{what} would take about {seconds:.3g} s of numpy arithmetic (estimated from the "
        f"sizes), more than the {MAX_WORK_SECONDS:.0f} s a run may take; {hint}"
    )
