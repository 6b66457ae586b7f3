"""One flag's value checked: a refusal names the flag, the value as the user gave it, the
rule and the nearest valid choice.

Whole numbers and seeds (:func:`check_int`, :func:`check_seed`), a rank count within what
the mode can run (:func:`check_ranks`), a link's rate and latency (:func:`link_rate`,
:func:`link_latency`), and any parser's refusal reworded to name its flag
(:func:`flag_value`).  :mod:`.common` re-exports them with the cluster flags.

Examples
--------
>>> check_int(4, "--ranks", minimum=1)
4
"""

from .. import topology, units
from ..errors import ConfigError

__all__ = [
    "flag_value",
    "check_int",
    "check_seed",
    "check_ranks",
    "link_rate",
    "link_latency",
    "MAX_SIMULATED_RANKS",
    "MAX_ANALYTICAL_RANKS",
    "MAX_LATENCY_S",
]

# a simulation moves every chunk: a ring all-reduce on K ranks is 2K(K-1) transfers, 33
# million at K = 4096, about 2 s where its steps batch (collsim/fast/); a run
# whose flows share links goes through the engine one transfer at a time, which refuses
# more than 8.4 million (a ring all-reduce on 2,048 ranks) before it starts
MAX_SIMULATED_RANKS = 4096
MAX_ANALYTICAL_RANKS = 1 << 17  # the closed form still builds the topology graph
MAX_LATENCY_S = topology.MAX_LATENCY  # Cluster's default max_time guard: a longer hop never arrives


def flag_value(parse, text, flag):
    """``parse(text)``; a refusal is reworded to name the flag and the value as typed.

    >>> flag_value(units.parse_size, "2KiB", "--size")
    2048
    """
    try:
        return parse(text)
    except ConfigError as exc:
        raise ConfigError(f"{flag} {text!r}: {exc}") from None


def link_rate(text, flag):
    """Bytes/s of a bandwidth flag; the error names the flag and the value."""
    return flag_value(units.parse_rate, text, flag)


def link_latency(text, flag):
    """Seconds of a latency flag, at most :data:`MAX_LATENCY_S`; the error names the flag.

    >>> link_latency("-1us", "--latency")
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: --latency '-1us': time '-1us' must be a finite number of ...
    """
    seconds = flag_value(units.parse_time, text, flag)
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
