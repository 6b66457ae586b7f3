"""Faults and stragglers: what goes wrong on a real cluster, as typed records.

A :class:`Faults` record lists them; ``Cluster(topology, faults=...)`` applies them:

* :class:`SlowRank` -- a straggler: every compute span of the rank takes ``factor`` times as
  long (a GPU throttled by heat, a noisy neighbour).
* :class:`SlowLink` -- a degraded link: both directions at ``factor`` times their bandwidth
  (a cable trained down to a lower rate, a flapping NIC).
* :class:`FailLink` -- the link goes down at simulated time ``at``: flows crossing it are
  rerouted along the next path of the topology, or stall where there is none.
* :class:`CrashRank` -- the rank stops at ``at``: it never advances again and every flow to
  or from it stalls.

A run that can make no more progress ends, ``watchdog_timeout`` simulated seconds after its
last progress, with a :class:`~collsim.errors.WatchdogTimeout`: the report of NCCL's
watchdog and PyTorch's flight recorder (see :mod:`collsim.runtime.diagnosis`).

The command-line strings are read by :meth:`Faults.parse`; a bad value is a
:class:`~collsim.errors.ConfigError` naming it, before any work.  Links and ranks are
checked against the topology by :meth:`Faults.check`, which ``Cluster`` calls.

Examples
--------
>>> faults = Faults.parse(slow_rank=["3:2x"], slow_link=["2-3:0.25"], fail_link=["2-3@1ms"],
...                       crash_rank=["5@2ms"], watchdog="10s")
>>> faults.slow_ranks[0], faults.fail_links[0].at
(SlowRank(rank=3, factor=2.0), 0.001)
>>> Faults.parse(slow_link=["2-3:0"])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
collsim.errors.ConfigError: --slow-link '2-3:0': the factor must be a number in (0, 1000000]...
"""

import math
import numbers
import re
from dataclasses import dataclass, field

from ..errors import ConfigError
from ..units import format_time, parse_time

__all__ = [
    "Faults",
    "SlowRank",
    "SlowLink",
    "FailLink",
    "CrashRank",
    "DEFAULT_WATCHDOG_TIMEOUT",
    "MAX_FACTOR",
]

# NCCL's watchdog (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC / the process group timeout) waits
# minutes of wall time; in simulated time 10 s is already thousands of collective steps
DEFAULT_WATCHDOG_TIMEOUT = 10.0
# A factor past a million turns a 5 us step into seconds: no longer a straggler, a fault
MAX_FACTOR = 1e6
MIN_FACTOR = 1e-6
# the engine's one-day guard on simulated time (collsim.network.engine.DEFAULT_MAX_TIME)
_DAY = 86_400.0
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


@dataclass(frozen=True)
class SlowRank:
    """Rank ``rank`` computes ``factor`` times slower (``factor=2``: twice as long)."""

    rank: int
    factor: float
    given: str = field(default="", repr=False, compare=False)  # the text, for messages


@dataclass(frozen=True)
class SlowLink:
    """The link between nodes ``u`` and ``v`` (both directions) at ``factor`` times its
    bandwidth (``factor=0.25``: a quarter)."""

    u: object
    v: object
    factor: float
    given: str = field(default="", repr=False, compare=False)


@dataclass(frozen=True)
class FailLink:
    """The link between ``u`` and ``v`` (both directions) goes down at ``at`` seconds."""

    u: object
    v: object
    at: float
    given: str = field(default="", repr=False, compare=False)


@dataclass(frozen=True)
class CrashRank:
    """Rank ``rank`` crashes at ``at`` seconds: it never advances again."""

    rank: int
    at: float
    given: str = field(default="", repr=False, compare=False)


@dataclass(frozen=True)
class Faults:
    """Every fault of one run, and the watchdog's timeout in simulated seconds."""

    slow_ranks: tuple = ()
    slow_links: tuple = ()
    fail_links: tuple = ()
    crash_ranks: tuple = ()
    watchdog_timeout: float = DEFAULT_WATCHDOG_TIMEOUT

    def __post_init__(self):
        kinds = (
            ("slow_ranks", SlowRank),
            ("slow_links", SlowLink),
            ("fail_links", FailLink),
            ("crash_ranks", CrashRank),
        )
        for name, kind in kinds:
            records = getattr(self, name)
            if not isinstance(records, tuple | list):
                raise ConfigError(f"Faults({name}={records!r}): give a tuple of {kind.__name__}")
            for record in records:
                if not isinstance(record, kind):
                    raise ConfigError(
                        f"Faults({name}=...): {record!r} is not a {kind.__name__}; build it "
                        "with Faults.parse(...) or the records of collsim.runtime.faults"
                    )
                _check_record(record)
            object.__setattr__(self, name, tuple(records))
        timeout = self.watchdog_timeout
        if isinstance(timeout, str):
            timeout = _time(timeout, f"--watchdog-timeout {timeout!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
            raise ConfigError(f"Faults(watchdog_timeout={timeout!r}): give seconds (a number)")
        if not (math.isfinite(timeout) and 0 < timeout <= _DAY):
            raise ConfigError(
                f"--watchdog-timeout {self.watchdog_timeout!r}: the timeout must be > 0 and at "
                f"most one day (86400 s) of simulated time; e.g. 10s, NCCL-like"
            )
        object.__setattr__(self, "watchdog_timeout", float(timeout))
        _refuse_repeats(self.slow_ranks, lambda r: r.rank, "rank")
        _refuse_repeats(self.crash_ranks, lambda r: r.rank, "rank")
        _refuse_repeats(self.slow_links, lambda r: frozenset((r.u, r.v)), "link")
        _refuse_repeats(self.fail_links, lambda r: frozenset((r.u, r.v)), "link")

    def __bool__(self):
        """True when there is a fault (a timeout alone changes nothing)."""
        return bool(self.slow_ranks or self.slow_links or self.fail_links or self.crash_ranks)

    def all(self):
        """Every fault record, in the order the flags list them."""
        return self.slow_ranks + self.slow_links + self.fail_links + self.crash_ranks

    @classmethod
    def parse(cls, slow_rank=None, slow_link=None, fail_link=None, crash_rank=None, watchdog=None):
        """Read the command-line strings: ``slow_rank=["3:2x"]`` (rank:factor, ``x``
        optional), ``slow_link=["2-3:0.25"]`` (u-v:factor), ``fail_link=["2-3@1ms"]``
        (u-v@time), ``crash_rank=["5@2ms"]`` (rank@time), ``watchdog="10s"``.  Nodes are
        ranks or switch names (``nvswitch0-3``, ``rail3-spine``)."""
        slow_ranks = tuple(_slow_rank(t) for t in _texts(slow_rank, "--slow-rank"))
        slow_links = tuple(_slow_link(t) for t in _texts(slow_link, "--slow-link"))
        fail_links = tuple(_fail_link(t) for t in _texts(fail_link, "--fail-link"))
        crash_ranks = tuple(_crash_rank(t) for t in _texts(crash_rank, "--crash-rank"))
        timeout = DEFAULT_WATCHDOG_TIMEOUT
        if watchdog is not None:
            timeout = _time(watchdog, f"--watchdog-timeout {watchdog!r}")
            if timeout == 0:
                raise ConfigError(
                    f"--watchdog-timeout {watchdog!r}: the timeout must be > 0; e.g. 10s"
                )
        return cls(slow_ranks, slow_links, fail_links, crash_ranks, timeout)

    def check(self, graph, max_time=_DAY):
        """Refuse a rank or link that ``graph`` does not have, or a time past the
        cluster's ``max_time`` guard; returns ``self``."""
        ranks = sum(1 for _, d in graph.nodes(data=True) if d.get("kind") == "rank")
        for record in self.slow_ranks + self.crash_ranks:
            if not 0 <= record.rank < ranks:
                raise ConfigError(
                    f"{_shown(record)}: rank {record.rank} is not in topology "
                    f"{graph.graph.get('name')} (ranks 0..{ranks - 1})"
                )
        for record in self.slow_links + self.fail_links:
            _check_link(graph, record)
        for record in self.fail_links + self.crash_ranks:
            if record.at > max_time:
                raise ConfigError(
                    f"{_shown(record)}: {format_time(record.at)} is past the simulation's "
                    f"time guard max_time={max_time:g} s, so it would never happen"
                )
        return self

    def describe(self):
        """One line per fault, as ``collsim run`` prints them under ``# faults:``."""
        lines = []
        for r in self.slow_ranks:
            lines.append(f"slow rank {r.rank}: compute takes {r.factor:g}x as long")
        for r in self.slow_links:
            lines.append(f"slow link {_node(r.u)}-{_node(r.v)}: {r.factor:g}x its bandwidth")
        for r in self.fail_links:
            lines.append(f"failed link {_node(r.u)}-{_node(r.v)}: down at t={format_time(r.at)}")
        for r in self.crash_ranks:
            lines.append(f"crashed rank {r.rank}: stops at t={format_time(r.at)}")
        return lines


# -- parsing ---------------------------------------------------------------------------


def _texts(values, flag):
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    for text in values:
        if not isinstance(text, str):
            raise ConfigError(f"{flag} {text!r}: give the fault as text, e.g. {_EXAMPLE[flag]}")
    return [(flag, text) for text in values]


_EXAMPLE = {
    "--slow-rank": "3:2x",
    "--slow-link": "2-3:0.25",
    "--fail-link": "2-3@1ms",
    "--crash-rank": "5@2ms",
}


def _split(flag, text, sep, what):
    head, found, tail = text.strip().partition(sep)
    if not found or not head.strip() or not tail.strip():
        raise ConfigError(f"{flag} {text!r}: expected {what} (e.g. {flag} {_EXAMPLE[flag]})")
    return head.strip(), tail.strip()


def _rank(flag, text, token):
    if not token.isdigit() or not token.isascii():
        raise ConfigError(
            f"{flag} {text!r}: rank {token!r} must be a whole number >= 0 "
            f"(e.g. {flag} {_EXAMPLE[flag]})"
        )
    return int(token)


def _node_token(flag, text, token):
    if token.isascii() and token.isdigit():
        return int(token)
    if not _NAME.match(token):
        raise ConfigError(
            f"{flag} {text!r}: {token!r} is neither a rank (a whole number) nor a switch name "
            f"(letters, digits, '_' and '.', like nvswitch0 or rail3)"
        )
    return token


def _link(flag, text, head):
    parts = head.split("-")
    if len(parts) != 2 or not all(p.strip() for p in parts):
        raise ConfigError(
            f"{flag} {text!r}: a link is two nodes joined by one '-', like 2-3 or nvswitch0-5 "
            f"(e.g. {flag} {_EXAMPLE[flag]})"
        )
    u, v = (_node_token(flag, text, p.strip()) for p in parts)
    if u == v:
        raise ConfigError(f"{flag} {text!r}: a link joins two different nodes, not {u} and {v}")
    return u, v


def _factor(flag, text, token):
    number = token[:-1] if token.lower().endswith("x") else token
    try:
        value = float(number)
    except ValueError:
        value = math.nan
    if not (MIN_FACTOR <= value <= MAX_FACTOR):  # also nan
        raise ConfigError(
            f"{flag} {text!r}: the factor must be a number in (0, {MAX_FACTOR:.0f}] "
            f"(at least {MIN_FACTOR:g}), e.g. {flag} {_EXAMPLE[flag]}"
        )
    return value


def _time(token, shown):
    try:
        seconds = parse_time(token)
    except ConfigError as exc:
        raise ConfigError(f"{shown}: {exc}") from None
    if seconds > _DAY:
        raise ConfigError(
            f"{shown}: {format_time(seconds)} is past the simulation's one-day time guard "
            "(86400 s); real faults happen within a step: e.g. 1ms"
        )
    return seconds


def _slow_rank(item):
    flag, text = item
    rank, factor = _split(flag, text, ":", "RANK:FACTOR")
    return SlowRank(_rank(flag, text, rank), _factor(flag, text, factor), f"{flag} {text!r}")


def _slow_link(item):
    flag, text = item
    link, factor = _split(flag, text, ":", "U-V:FACTOR")
    u, v = _link(flag, text, link)
    return SlowLink(u, v, _factor(flag, text, factor), f"{flag} {text!r}")


def _fail_link(item):
    flag, text = item
    link, at = _split(flag, text, "@", "U-V@TIME")
    u, v = _link(flag, text, link)
    return FailLink(u, v, _time(at, f"{flag} {text!r}"), f"{flag} {text!r}")


def _crash_rank(item):
    flag, text = item
    rank, at = _split(flag, text, "@", "RANK@TIME")
    return CrashRank(_rank(flag, text, rank), _time(at, f"{flag} {text!r}"), f"{flag} {text!r}")


# -- checks ----------------------------------------------------------------------------


def _shown(record):
    return record.given or repr(record)


def _node(node):
    return str(node)


def _check_record(record):
    """A record built in code (not parsed) gets the same rules."""
    shown = _shown(record)
    if isinstance(record, SlowRank | CrashRank):
        rank = record.rank
        if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or rank < 0:
            raise ConfigError(f"{shown}: rank {rank!r} must be a whole number >= 0")
    if isinstance(record, SlowRank | SlowLink):
        factor = record.factor
        ok = isinstance(factor, numbers.Real) and not isinstance(factor, bool)
        if not (ok and MIN_FACTOR <= factor <= MAX_FACTOR):
            raise ConfigError(
                f"{shown}: the factor {factor!r} must be a number in (0, {MAX_FACTOR:.0f}]"
            )
    if isinstance(record, FailLink | CrashRank):
        at = record.at
        ok = isinstance(at, numbers.Real) and not isinstance(at, bool)
        if not (ok and math.isfinite(at) and 0 <= at <= _DAY):
            raise ConfigError(f"{shown}: the time {at!r} must be seconds in 0..86400")


def _refuse_repeats(records, key, what):
    seen = {}
    for record in records:
        k = key(record)
        if k in seen:
            raise ConfigError(
                f"{_shown(record)}: the same {what} as {_shown(seen[k])}; give each {what} once"
            )
        seen[k] = record


def _check_link(graph, record):
    """The link must exist in at least one direction; else name the links that do."""
    shown = _shown(record)
    for node in (record.u, record.v):
        if node not in graph:
            switches = sorted(str(n) for n, d in graph.nodes(data=True) if d.get("kind") != "rank")
            ranks = sum(1 for _, d in graph.nodes(data=True) if d.get("kind") == "rank")
            names = f"ranks 0..{ranks - 1}" + (
                f", switches {', '.join(switches[:12])}" if switches else ""
            )
            raise ConfigError(
                f"{shown}: node {node!r} is not in topology {graph.graph.get('name')} ({names})"
            )
    u, v = record.u, record.v
    if graph.has_edge(u, v) or graph.has_edge(v, u):
        return
    others = {b for _, b in graph.out_edges(u)} | {a for a, _ in graph.in_edges(u)}
    near = [f"{u}-{other}" for other in sorted(others, key=lambda n: (isinstance(n, str), n))]
    raise ConfigError(
        f"{shown}: there is no link between {u} and {v} in topology {graph.graph.get('name')}: "
        f"a fault names a link of the topology; the links at {u} are {', '.join(near) or 'none'}"
    )


def link_directions(graph, u, v):
    """The directed links of the link ``u``-``v`` that exist: ``(u, v)``, ``(v, u)``."""
    return [link for link in ((u, v), (v, u)) if graph.has_edge(*link)]
