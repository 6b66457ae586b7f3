"""Flags, checks and limits shared by the commands (run, step, verify, pipeline, viz, tour).

Every check here runs before the expensive work and raises a
:class:`~collsim.errors.ConfigError` that names the flag, the value as the user gave it,
the rule and the nearest valid choice:

* :func:`check_output_path`, :func:`check_input_file`: files to write or read;
* :func:`check_int`, :func:`check_seed`: whole-number flags and their bounds;
* :func:`sweep_sizes`: the sizes of a ``--min-bytes``/``--max-bytes``/``--factor`` sweep,
  at most :data:`MAX_SWEEP_SIZES` of them;
* :func:`check_fits`: refuse a run whose arrays would not fit in the memory available;
* :func:`stdin_is_terminal`, :func:`progress`: pausing and progress only for a person.

Examples
--------
>>> sweep_sizes(8, 64, 2)
[8, 16, 32, 64]
>>> check_int(4, "--ranks", minimum=1)
4
"""

import argparse
import contextlib
import math
import os
import re
import stat
import sys
import threading
import time
from pathlib import Path

from .. import topology, units
from ..errors import ConfigError

__all__ = [
    "add_cluster_arguments",
    "add_progress_argument",
    "cluster_from_args",
    "TOPOLOGIES",
    "Formatter",
    "check_output_path",
    "check_input_file",
    "check_int",
    "check_seed",
    "check_ranks",
    "sweep_sizes",
    "parse_factor",
    "MAX_SWEEP_SIZES",
    "MAX_SIMULATED_RANKS",
    "MAX_ANALYTICAL_RANKS",
    "MAX_LATENCY_S",
    "available_memory",
    "check_fits",
    "check_work",
    "transformer_seconds",
    "MAX_WORK_SECONDS",
    "stdin_is_terminal",
    "progress",
    "join_negative_values",
    "explain_time_guard",
    "link_rate",
    "link_latency",
]

MAX_SWEEP_SIZES = 64  # nccl-tests' default -b 8 -e 128M -f 2 is 25 sizes
# a simulation moves every chunk through the event engine: a ring all-reduce on K ranks is
# 2K(K-1) transfers, about 30 s of wall time at K = 1024, so K = 2048 is two minutes
MAX_SIMULATED_RANKS = 2048
MAX_ANALYTICAL_RANKS = 1 << 17  # the closed form still builds the topology graph
MAX_LATENCY_S = 86_400.0  # Cluster's default max_time guard: a longer hop never arrives

TOPOLOGIES = ("ring", "bidirectional_ring", "fully_connected", "switch", "torus2d",
              "hierarchical")  # fmt: skip


def add_cluster_arguments(parser, ranks=8):
    """--ranks, --topology, --bandwidth, --latency, --model, --gpus-per-node, ..."""
    g = parser.add_argument_group("cluster")
    g.add_argument(
        "--ranks", "-k", type=int, default=ranks, help=f"number of ranks K (default {ranks})"
    )
    g.add_argument("--topology", default="ring", choices=TOPOLOGIES,
                   help="how ranks are wired (default ring: rank i -> i+1). 'switch' puts one "
                        "switch in the middle, so a rank-to-rank path is 2 links")  # fmt: skip
    g.add_argument(
        "--bandwidth",
        default="100GB/s",
        help="per link and direction, e.g. 100GB/s, 400Gbit/s, inf (default 100GB/s)",
    )
    g.add_argument("--latency", default="5us", help="per link, e.g. 5us, 2ms, 0 (default 5us)")
    g.add_argument("--model", default="maxmin", choices=("maxmin", "ideal"),
                   help="maxmin shares links fairly among flows (congestion); ideal ignores "
                        "other flows (alpha + n/beta per message) (default maxmin)")  # fmt: skip
    g.add_argument(
        "--gpus-per-node", type=int, default=4, help="hierarchical only: GPUs per node (default 4)"
    )
    g.add_argument(
        "--inter-bandwidth",
        default="50GB/s",
        help="hierarchical only: NIC bandwidth between nodes (default 50GB/s)",
    )
    g.add_argument(
        "--inter-latency",
        default="5us",
        help="hierarchical only: NIC latency between nodes (default 5us)",
    )
    return g


def add_progress_argument(parser):
    """--progress: report progress on stderr even when it is not a terminal."""
    parser.add_argument(
        "--progress",
        action="store_true",
        help="report progress of long runs on stderr (automatic when stderr is a terminal)",
    )


def link_rate(text, flag):
    """Bytes/s of a bandwidth flag; the error names the flag and the value."""
    try:
        return units.parse_rate(text)
    except ConfigError as exc:
        raise ConfigError(f"{flag} {text!r}: {exc}") from None


def link_latency(text, flag):
    """Seconds of a latency flag, at most :data:`MAX_LATENCY_S`; the error names the flag.

    >>> link_latency("-1us", "--latency")
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: --latency '-1us': time '-1us' must be a finite number of ...
    """
    try:
        seconds = units.parse_time(text)
    except ConfigError as exc:
        raise ConfigError(f"{flag} {text!r}: {exc}") from None
    if seconds > MAX_LATENCY_S:
        raise ConfigError(
            f"{flag} {text!r}: {units.format_time(seconds)} per link is longer than the "
            "simulation's time guard (1 day, 86,400 s), so no message "
            "would ever arrive; real links take 1-10 us"
        )
    return seconds


def check_ranks(k, analytical=False, flag="--ranks"):
    """Refuse a rank count below 1 or above the limit of the mode (simulated or closed form)."""
    check_int(k, flag, minimum=1)
    limit = MAX_ANALYTICAL_RANKS if analytical else MAX_SIMULATED_RANKS
    if k > limit:
        hint = (
            "the closed form needs only the first two ranks' path; use a smaller --ranks"
            if analytical
            else "a simulation moves every chunk (a ring all-reduce is 2K(K-1) transfers); "
            "use --analytical for the closed form at any size up to "
            f"{MAX_ANALYTICAL_RANKS:,} ranks"
        )
        mode = "the closed form (--analytical)" if analytical else "a simulation"
        raise ConfigError(
            f"{flag} {k}: more than the {limit:,} ranks {mode} takes "
            f"(nearest valid {flag} {limit}); {hint}"
        )
    return k


def build_topology(args, analytical=None):
    k, name = args.ranks, args.topology
    if analytical is None:
        analytical = bool(getattr(args, "analytical", False))
    check_ranks(k, analytical)
    # parsed here so that a bad value is named by its flag; the topology gets the text
    bandwidth, latency = args.bandwidth, args.latency
    link_rate(bandwidth, "--bandwidth"), link_latency(latency, "--latency")
    if name == "torus2d":
        rows = max(r for r in range(1, math.isqrt(k) + 1) if k % r == 0)
        return topology.torus2d(rows, k // rows, bandwidth, latency)
    if name == "hierarchical":
        per = args.gpus_per_node
        if per < 1 or k % per:
            divisors = [d for d in range(1, min(k, 4096) + 1) if k % d == 0]
            near = min(divisors, key=lambda d: (abs(d - per), d))
            raise ConfigError(
                f"--ranks {k} is not a multiple of --gpus-per-node {per}; "
                f"nearest valid --gpus-per-node {near}"
            )
        link_rate(args.inter_bandwidth, "--inter-bandwidth")
        link_latency(args.inter_latency, "--inter-latency")
        return topology.hierarchical(k // per, per, bandwidth, args.inter_bandwidth, latency,
                                     args.inter_latency)  # fmt: skip
    return topology.PRESETS[name](k, bandwidth, latency)


def cluster_from_args(args, analytical=None):
    """The Cluster the cluster flags describe; ``--ranks`` is bounded by the mode
    (:data:`MAX_SIMULATED_RANKS`, or :data:`MAX_ANALYTICAL_RANKS` with ``--analytical``)."""
    from ..runtime import Cluster

    return Cluster(build_topology(args, analytical), model=args.model)


class Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Keep the description's line breaks (they carry examples); show each default once.

    A help text that already names its default ("(default 8)") is left alone, and so are
    flags without a meaningful default (None, or False for a switch).
    """

    def _get_help_string(self, action):
        text = action.help or ""
        if (
            "default" in text.lower()
            or action.default is None
            or action.default is False
            or action.default is argparse.SUPPRESS
        ):
            return text
        return super()._get_help_string(action)


def check_int(value, flag, minimum=None, maximum=None, hint=None):
    """``value`` as an int within [minimum, maximum]; the error names the flag and value.

    >>> check_int(0, "--hidden", minimum=1)
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: --hidden 0: must be >= 1; nearest valid --hidden 1
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{flag} {value!r}: must be a whole number")
    if minimum is not None and value < minimum:
        nearest = minimum
        rule = f"must be >= {minimum}"
    elif maximum is not None and value > maximum:
        nearest = maximum
        rule = f"must be <= {maximum:,}"
    else:
        return value
    message = f"{flag} {value}: {rule}; nearest valid {flag} {nearest}"
    raise ConfigError(message + (f" ({hint})" if hint else ""))


def check_seed(seed, flag="--seed"):
    """A random seed: a whole number >= 0 (numpy's rule), below 2**128."""
    return check_int(seed, flag, minimum=0, maximum=2**128 - 1)


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
    lo = _size_flag(min_bytes, "--min-bytes")
    hi = _size_flag(max_bytes, "--max-bytes")
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


def _size_flag(text, flag):
    if isinstance(text, str) and not text.strip():
        raise ConfigError(f"{flag} {text!r}: empty; give a size like {flag} 64MiB")
    try:
        return units.parse_size(text)
    except ConfigError as exc:
        raise ConfigError(f"{flag} {text!r}: {exc}") from None


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


def available_memory():
    """Bytes this process may still allocate: MemAvailable of /proc/meminfo, else the free
    physical pages (``os.sysconf``), else None when the system does not say."""
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


def transformer_seconds(*, layers, params_per_layer, tokens, sequences, heads, seq, hidden,
                        ffn=None, passes=1):  # fmt: skip
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


def stdin_is_terminal():
    """True when a person can answer on standard input (it exists, is open, is a tty)."""
    stream = sys.stdin
    try:
        return stream is not None and not stream.closed and stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def _stderr_is_terminal():
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError, OSError):
        return False


@contextlib.contextmanager
def progress(what, enabled=None, interval=2.0):
    """While the block runs, show ``what``, the latest note and the elapsed wall time on
    stderr; the block receives ``note(text)`` to say where it is ("size 3 of 25").

    Shown when ``enabled`` (a ``--progress`` flag) or when stderr is a terminal, and only
    once the block has run ``interval`` seconds; never on stdout, so ``--json`` output
    stays clean and short runs print nothing.

    >>> with progress("sweep", enabled=False) as note:
    ...     note("size 1 of 2")
    """
    status = {"note": ""}

    def note(text):
        status["note"] = text

    if not (enabled or _stderr_is_terminal()):
        yield note
        return
    stream, done, start = sys.stderr, threading.Event(), time.monotonic()

    def line():
        elapsed = time.monotonic() - start
        return f"\r{what}: {status['note'] + ', ' if status['note'] else ''}{elapsed:.0f} s "

    def tick():
        while not done.wait(interval):
            with contextlib.suppress(OSError, ValueError):
                stream.write(line())
                stream.flush()

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield note
    finally:
        done.set()
        thread.join()
        if time.monotonic() - start >= interval:
            with contextlib.suppress(OSError, ValueError):
                stream.write(f"\r{what}: done in {time.monotonic() - start:.1f} s\x1b[K\n")
                stream.flush()


@contextlib.contextmanager
def explain_time_guard(**flags):
    """Turn the simulation's time guard into an error that names the flags behind it.

    ``flags`` maps a flag to the value the user gave (``bandwidth="1e-300B/s"`` for
    ``--bandwidth``); the guard is read from the error's ``guard`` field.
    """
    from ..errors import SimulationLimitError

    try:
        yield
    except SimulationLimitError as exc:
        if exc.guard != "max_time":
            raise
        given = ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in flags.items())
        raise ConfigError(
            f"the run passed the simulation's time guard ({exc.limit:,.0f} s of simulated "
            f"time) with {given}: a link, a size or a compute rate is far from "
            "real hardware (links 10-900 GB/s and 1-10 us, GPUs 10-1000 TFLOP/s)"
        ) from None


# an option followed by a value that starts with "-" and a digit, ".", "inf" or "nan":
# argparse takes "-1us" for an unknown option and says only "expected one argument"
_NEGATIVE_VALUE = re.compile(r"^-(\d|\.\d|inf|nan)", re.IGNORECASE)


def join_negative_values(argv):
    """Write ``--latency -1us`` as ``--latency=-1us`` so argparse passes the value on and
    the command can reject it by name.

    >>> join_negative_values(["run", "--latency", "-1us", "-k", "-3", "--json"])
    ['run', '--latency=-1us', '-k=-3', '--json']
    """
    out, i = [], 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return out + list(argv[i:])
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if (
            token.startswith("-")
            and len(token) > 1
            and not _NEGATIVE_VALUE.match(token)
            and "=" not in token
            and nxt is not None
            and _NEGATIVE_VALUE.match(nxt)
        ):
            out.append(f"{token}={nxt}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out


def check_output_path(path, flag="--out", suffixes=None):
    """Refuse an output file that cannot be written, before any expensive work starts.

    Returns the path as a :class:`~pathlib.Path`.  ``suffixes`` (like ``(".png", ".svg")``)
    limits the file types; the error names the flag, the path and the rule it broke.

    Examples
    --------
    >>> check_output_path("out.png", suffixes=(".png",)).name
    'out.png'
    >>> check_output_path("/no/such/folder/out.png")
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: --out /no/such/folder/out.png: folder /no/such/folder does not ...
    """
    if path is None or str(path) == "":
        raise ConfigError(f"{flag} {path!r}: give a file name, like {flag} out.png")
    out = Path(path)
    if suffixes is not None and out.suffix.lower() not in suffixes:
        raise ConfigError(
            f"{flag} {path}: unknown file type {out.suffix or '(none)'!r}; "
            f"use one of {', '.join(suffixes)}"
        )
    if out.is_dir():
        raise ConfigError(f"{flag} {path}: is a folder; give a file name inside it")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.exists():
        # a path under a regular file also lands here or below: name the file in the way
        blocker = next((p for p in parent.parents if p.exists() and not p.is_dir()), None)
        if blocker is not None or (parent.exists() and not parent.is_dir()):
            raise ConfigError(f"{flag} {path}: {blocker or parent} is a file, not a folder")
        raise ConfigError(f"{flag} {path}: folder {parent} does not exist; create it first")
    if not parent.is_dir():
        raise ConfigError(f"{flag} {path}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"{flag} {path}: folder {parent} is not writable")
    return out


def check_input_file(path, flag="--config", max_bytes=1 << 20):
    """Refuse an input that is not a readable regular file of at most ``max_bytes``.

    A FIFO or a device would block or never end, so only regular files are read.

    Examples
    --------
    >>> check_input_file("/dev/null")
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: --config /dev/null: not a regular file (a device, FIFO or ...
    """
    src = Path(path)
    try:
        info = src.stat()
    except FileNotFoundError:
        raise ConfigError(f"{flag} {path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{flag} {path}: cannot read it ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(
            f"{flag} {path}: not a regular file (a device, FIFO or folder); "
            "give a .toml or .json file"
        )
    if info.st_size > max_bytes:
        raise ConfigError(
            f"{flag} {path}: {info.st_size} bytes, more than the {max_bytes} a settings "
            "file may have"
        )
    if not os.access(src, os.R_OK):
        raise ConfigError(f"{flag} {path}: not readable")
    return src
