"""The fault flags: ``--slow-rank``, ``--slow-link``, ``--fail-link``, ``--crash-rank`` and
``--watchdog-timeout``, read into a :class:`~collsim.runtime.faults.Faults` record.

Examples
--------
>>> import argparse
>>> parser = argparse.ArgumentParser()
>>> _ = add_fault_arguments(parser, computes=False)
>>> faults_from_args(parser.parse_args([])) is None
True
"""

__all__ = ["FAULT_FLAGS", "add_fault_arguments", "faults_from_args"]


FAULT_FLAGS = ("slow_rank", "slow_link", "fail_link", "crash_rank")


def add_fault_arguments(parser, computes=True):
    """--slow-rank, --slow-link, --fail-link, --crash-rank (each repeatable) and
    --watchdog-timeout: what goes wrong, and when the watchdog gives up.  A straggler
    computes slower, so --slow-rank is offered only where ranks compute (``computes``):
    a collective alone has nothing for it to slow down."""
    g = parser.add_argument_group(
        ("faults and stragglers" if computes else "faults")
        + " (each flag may repeat; nodes are ranks or switch names)"
    )
    if computes:
        g.add_argument(
            "--slow-rank",
            action="append",
            default=None,
            metavar="R:F",
            help="rank R computes F times slower, e.g. --slow-rank 3:2x (a "
            "straggler: its compute takes twice as long)",
        )
    g.add_argument(
        "--slow-link",
        action="append",
        default=None,
        metavar="U-V:F",
        help="link U-V (both directions) at F times its bandwidth, e.g. --slow-link "
        "2-3:0.25 (a quarter: a ring is then set by that link)",
    )
    g.add_argument(
        "--fail-link",
        action="append",
        default=None,
        metavar="U-V@T",
        help="link U-V goes down at simulated time T, e.g. --fail-link 2-3@1ms: "
        "traffic reroutes where the topology has another path, else it "
        "stalls",
    )
    g.add_argument(
        "--crash-rank",
        action="append",
        default=None,
        metavar="R@T",
        help="rank R crashes at time T, e.g. --crash-rank 5@2ms: the run ends with "
        "the watchdog's report naming it",
    )
    g.add_argument(
        "--watchdog-timeout",
        default=None,
        metavar="T",
        help="simulated time without progress before the watchdog stops a stalled "
        "run, e.g. --watchdog-timeout 1s (default 10s)",
    )
    return g


def faults_from_args(args):
    """The :class:`~collsim.runtime.faults.Faults` the fault flags give, or None; a bad
    value is refused naming it (the topology's links are checked by the Cluster)."""
    from ..runtime.faults import Faults

    given = {flag: getattr(args, flag, None) for flag in FAULT_FLAGS}
    timeout = getattr(args, "watchdog_timeout", None)
    if not any(given.values()):
        if timeout is not None:  # checked even alone: a bad value is a mistake
            Faults.parse(watchdog=timeout)
        return None
    return Faults.parse(**given, watchdog=timeout)
