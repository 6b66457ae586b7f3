"""How a figure writes a time: µs, as nccl-tests' tables and the calibration figure do
(not the CLI's ASCII "us"), in the unit that reads best.  Axes, subtitles, notes and
animation captions all use these, so one figure never says "12 us" beside a "10 µs" tick.
"""

__all__ = ["time_unit", "time_tick"]


def time_unit(largest):
    """``(divisor, name)`` that shows ``largest`` seconds as a readable number.

    >>> time_unit(3e-4)
    (1e-06, 'µs')
    """
    # µs, as the calibration figure and nccl-tests' tables write it (not "us")
    for name, divisor in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if largest >= 2 * divisor:
            return divisor, name
    return 1e-9, "ns"


def time_tick(seconds, _position=None):
    """A time axis tick in the unit that reads best, as a slide says it: "10 µs", "1 ms".

    >>> time_tick(1e-4), time_tick(2e-3), time_tick(1.0), time_tick(5e-9), time_tick(0)
    ('100 µs', '2 ms', '1 s', '5 ns', '0 s')
    """
    if seconds == 0:
        return "0 s"
    for name, divisor in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= divisor * (1 - 1e-9):
            return f"{seconds / divisor:.4g} {name}"
    return f"{seconds / 1e-9:.4g} ns"
