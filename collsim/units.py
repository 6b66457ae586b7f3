"""Sizes, rates and times as humans write them, and back.

Everything inside collsim is in SI base units: bytes, bytes per second and seconds.
Strings are accepted only at the edges (CLI flags, presets, configs) and parsed here.

* sizes: ``"64MiB"`` (binary) and ``"64MB"`` (decimal) mean exactly what they say; a
  prefix alone is binary, as nccl-tests reads ``-b``/``-e`` (its ``parsesize``): ``"64M"``
  and ``"64m"`` are 64 MiB, ``"8G"`` 8 GiB.  A plain number is bytes.  A buffer has no size
  in bits: ``"64Mb"`` is refused, naming ``"64MB"``.
* rates: ``"100GB/s"`` is bytes per second, ``"400Gbit/s"``, ``"400Gb/s"`` and
  ``"400Gbps"`` bits per second; a bandwidth is per direction of a link.  ``"inf"`` is a
  free link.  A plain number string (``"100"``) is refused: bytes or bits?
* times: ``ns``, ``us`` (or ``µs``), ``ms``, ``s``; ``0`` is a free latency.  Any other
  plain number string (``"5"``) is refused: seconds or microseconds?

Numbers (not strings) are SI base units everywhere: ``5e-6`` is 5 us.

Examples
--------
>>> parse_size("64MiB"), parse_size("64MB"), parse_size("64M")
(67108864, 64000000, 67108864)
>>> parse_rate("100GB/s")
100000000000.0
>>> parse_rate("400Gbit/s")
50000000000.0
>>> parse_time("5us")
5e-06
>>> format_size(67108864), format_rate(1e11), format_time(5e-6)
('64 MiB', '100 GB/s', '5 us')
"""

import math
import numbers
import os
import re
import time

from numpy import bool_ as np_bool
from numpy import integer as np_integer

from .errors import ConfigError

__all__ = [
    "parse_size",
    "parse_rate",
    "parse_time",
    "parse_flops",
    "format_size",
    "format_rate",
    "format_time",
    "format_flops",
    "available_memory",
    "MAX_SIZE",
    "SPELLING",
]

# the rules above as the CLI's --help states them (collsim run, collsim viz)
SPELLING = (
    "Units: 64MiB = 64 x 2^20 B and 64MB = 64 x 10^6 B, as written; a prefix alone is binary, "
    "as nccl-tests reads -b/-e: 64M = 64 MiB, 8G = 8 GiB; a plain number is bytes. A size in "
    "bits (64Mb) is refused. A bandwidth or a time needs its unit: 100GB/s or 400Gbps (bits), "
    "5us or 2ms; only 0 goes without one. The run's header prints each flag as read."
)

# sizes beyond an exbibyte are typos: no cluster holds one buffer that big
MAX_SIZE = 2**60
_SIZE_UNITS = (
    "B, KB, KiB, MB, MiB, GB, GiB, TB, TiB, PB, PiB, or a prefix alone (K, M, G, "
    "T, P: binary, as nccl-tests reads them)"
)
_RATE_UNITS = "B/s, KB/s, MB/s, GB/s, TB/s (bytes), Kbit/s ... Tbit/s or Gb/s (bits), or inf"
_TIME_UNITS = "ns, us (or µs), ms, s"

_DECIMAL = {"": 1, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
_PREFIX = {**_DECIMAL, **_BINARY}
_NUMBER = r"([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
# a prefix alone ("8G", "64m") is nccl-tests' spelling and binary; with a unit it says itself
_SIZE_RE = re.compile(
    rf"^{_NUMBER}\s*(?:(?P<alone>[KkMmGgTP])|(?P<prefix>[KkMGTP]i?)?(?P<unit>B|b|bit|bits|bytes?)?)$"
)
_ALONE = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}
# a rate must say "per second" (/s or ps): "100GB" is a size, not a bandwidth
_RATE_RE = re.compile(rf"^{_NUMBER}\s*([KkMGTP]i?)?(B|b|bit)(?:/s|ps)$")
# divisors, not factors: 5 / 1e6 is exactly 5e-06 while 5 * 1e-6 is not
_TIME_DIVISORS = {"ns": 1e9, "us": 1e6, "µs": 1e6, "ms": 1e3, "s": 1.0, "": 1.0}
_TIME_RE = re.compile(rf"^{_NUMBER}\s*(ns|us|µs|ms|s)?$")


def _number(text, what="size", example="'64MiB'"):
    """A plain number (SI base units) as a float, or None for a string to parse."""
    if type(text) is float:  # the common case (rank.compute(seconds=...)): skip the ABC check
        return text
    if isinstance(text, bool | np_bool):
        raise ConfigError(f"{text!r} is not a quantity: give a number or a string like {example}")
    if isinstance(text, numbers.Real):
        try:
            return float(text)
        except OverflowError:  # an int past a float's range
            return math.inf if text > 0 else -math.inf
    if not isinstance(text, str):
        raise ConfigError(f"{text!r} is not a quantity: give a number or a string like {example}")
    if not text.strip():
        raise ConfigError(f"{what} {text!r} is empty: give a number or a string like {example}")
    return None


def _overflowed(value):
    """A number past a float's range, written out or with a prefix (``"1e308GB/s"``)."""
    return math.isinf(value)


def parse_size(text):
    """Bytes in ``text`` as an int: ``"1KiB"`` -> 1024, ``"1KB"`` -> 1000, ``"1K"`` -> 1024.

    >>> parse_size("1.5KiB"), parse_size(4096), parse_size("8g")
    (1536, 4096, 8589934592)
    >>> parse_size("64Mb")
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: size '64Mb' is in bits (b is a bit, B a byte); a buffer size ...
    """
    if isinstance(text, int | np_integer) and not isinstance(text, bool):
        if not 0 <= text <= MAX_SIZE:
            raise ConfigError(f"size {text!r} must be a whole number of bytes in 0..2**60 (1 EiB)")
        return int(text)  # exactly: a float would round sizes past 2**53
    value = _number(text)
    if value is None:
        match = _SIZE_RE.match(text.strip())
        if not match:
            raise ConfigError(
                f"cannot read size {text!r}: expected a number and a unit like '64MiB'; "
                f"units are {_SIZE_UNITS}"
            )
        number, alone, prefix, unit = match.groups()
        if unit in ("b", "bit", "bits"):
            raise ConfigError(
                f"size {text!r} is in bits (b is a bit, B a byte); a buffer size "
                f"is in bytes: did you mean {number}{prefix or ''}B?"
            )
        value = float(number) * (_ALONE[alone.upper()] if alone else _PREFIX[prefix or ""])
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"size {text!r} must be a finite number of bytes >= 0")
    if value > MAX_SIZE:
        raise ConfigError(f"size {text!r} is more than the {MAX_SIZE:,} B (1 EiB) collsim accepts")
    if value != int(value):
        raise ConfigError(f"size {text!r} is not a whole number of bytes ({value} B)")
    return int(value)


def parse_rate(text):
    """Bytes per second in ``text``; ``"inf"`` is a link that costs nothing.

    >>> parse_rate("25Gb/s"), parse_rate("inf")
    (3125000000.0, inf)
    """
    value = _number(text, "bandwidth", "'100GB/s'")
    if value is None:
        stripped = text.strip()
        if stripped.lower() in ("inf", "infinity"):
            return math.inf
        match = _RATE_RE.match(stripped)
        if not match:
            raise ConfigError(
                f"cannot read bandwidth {text!r}: expected e.g. '100GB/s' (bytes) or "
                f"'400Gbit/s'; units are {_RATE_UNITS}"
            )
        number, prefix, unit = match.groups()
        value = float(number) * _PREFIX[prefix or ""]
        if unit in ("b", "bit"):
            value /= 8
        if _overflowed(value):
            raise ConfigError(f"bandwidth {text!r} is too large to represent (write 'inf')")
    if math.isnan(value) or value <= 0:
        raise ConfigError(f"bandwidth {text!r} must be > 0 bytes/s (use 'inf' for a free link)")
    return value


def parse_time(text):
    """Seconds in ``text``; a string other than ``"0"`` needs its unit.

    >>> parse_time("2ms"), parse_time(0), parse_time("0"), parse_time(5e-6)
    (0.002, 0.0, 0.0, 5e-06)
    >>> parse_time("5")
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: time '5' has no unit: seconds or microseconds? write 5s, 5ms or ...
    """
    value = _number(text, "time", "'5us'")
    if value is None:
        match = _TIME_RE.match(text.strip())
        if not match:
            raise ConfigError(
                f"cannot read time {text!r}: expected e.g. '5us', '2ms' or '1s'; "
                f"units are {_TIME_UNITS}"
            )
        number, unit = match.groups()
        value = float(number) / _TIME_DIVISORS[unit or ""]
        if unit is None and value != 0:  # a bandwidth needs its unit too ("100" is refused)
            raise ConfigError(
                f"time {text!r} has no unit: seconds or microseconds? write "
                f"{number}s, {number}ms or {number}us; only 0 may go without "
                "one"
            )
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"time {text!r} must be a finite number of seconds >= 0")
    return value


_FLOPS_RE = re.compile(rf"^{_NUMBER}\s*([KMGTP]?)\s*(?:FLOP/s|FLOPS|flop/s|flops)?$")


def parse_flops(text):
    """FLOP per second: ``"150TFLOP/s"``, ``"989T"``, ``1.5e14``; ``"inf"`` makes
    computation free, to isolate communication.

    >>> parse_flops("150TFLOP/s"), parse_flops("2.5e14"), parse_flops("inf")
    (150000000000000.0, 250000000000000.0, inf)
    """
    value = _number(text, "compute rate", "'150TFLOP/s'")
    if value is None:
        stripped = text.strip()
        if stripped.lower() in ("inf", "infinity"):
            return math.inf
        match = _FLOPS_RE.match(stripped)
        if not match:
            raise ConfigError(
                f"cannot read compute rate {text!r}: expected e.g. '150TFLOP/s'; prefixes "
                "are K, M, G, T, P (FLOP/s or FLOPS optional)"
            )
        value = float(match.group(1)) * _DECIMAL[match.group(2)]
        if _overflowed(value):
            raise ConfigError(f"compute rate {text!r} is too large to represent (write 'inf')")
    if math.isnan(value) or value <= 0:
        raise ConfigError(f"compute rate {text!r} must be > 0 FLOP/s (use 'inf' for free compute)")
    return value


def _real(value, what):
    """Refuse a value the formatters cannot print as a quantity."""
    if isinstance(value, bool | np_bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"cannot format {value!r} as {what}: give a number")


def _scaled(value, steps, unit, base):
    """Format ``value`` with the largest prefix in ``steps`` that keeps it >= 1."""
    for prefix, factor in steps:
        if abs(value) >= factor:
            scaled = value / factor
            return f"{scaled:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}" if base else f"{value} {unit}"


def format_size(nbytes, binary=True):
    """``67108864`` -> ``'64 MiB'`` (or ``'67.11 MB'`` with ``binary=False``)."""
    _real(nbytes, "a size")
    steps = (
        [("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)]
        if binary
        else [("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)]
    )
    return _scaled(nbytes, steps, "B", True)


def format_rate(bytes_per_s):
    """Bytes per second in decimal units, as vendors and nccl-tests print them."""
    _real(bytes_per_s, "a rate")
    if math.isinf(bytes_per_s):
        return "inf B/s"
    return _scaled(bytes_per_s, [("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)], "B/s", True)


def format_flops(flop_per_s):
    """A compute rate in decimal units, as GPU datasheets print it: ``1.5e14`` -> ``'150 TFLOP/s'``.

    >>> format_flops(1.5e14)
    '150 TFLOP/s'
    """
    _real(flop_per_s, "a compute rate")
    if math.isinf(flop_per_s):
        return "inf FLOP/s"
    steps = [("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)]
    return _scaled(flop_per_s, steps, "FLOP/s", True)


def format_time(seconds):
    """Seconds with the unit that reads best: ``5e-6`` -> ``'5 us'``."""
    _real(seconds, "a time")
    if seconds == 0:
        return "0 s"
    for unit, factor in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= factor:
            return f"{seconds / factor:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns"


def available_memory():
    """Bytes this process may still allocate: MemAvailable of /proc/meminfo, else the free
    physical pages (``os.sysconf``), else None when the system does not say.  Read at most
    twice a second: a loop of small collectives asks before every call."""
    now = time.monotonic()
    if now - _MEMORY[0] > 0.5:
        _MEMORY[:] = [now, _read_available_memory()]
    return _MEMORY[1]


_MEMORY = [-1.0, None]  # [when it was read, bytes]


def _read_available_memory():
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None
