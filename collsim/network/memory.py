"""Memory read from a run: each rank's allocation events, its timeline and its peaks.

A rank program registers every array it holds with ``rank.alloc(category, name,
elements)`` and releases it with ``rank.free(block)`` (:mod:`collsim.runtime.memory`).
Each of those is a :class:`MemoryEvent` on the simulated clock, kept in the run's trace
(``trace.memory``, in recording order).  The timeline and the peaks here are read from
those events alone (DESIGN.md, principle 5: memory is measured like bytes and time).

A peak is taken over the states after each event, in recording order: a block allocated
before another is freed at the same instant counts, as it does on a GPU.

Examples
--------
>>> from collsim.network.trace import Trace
>>> trace = Trace()
>>> trace.add_memory(MemoryEvent(0, 0.0, "params", "w", 20))
>>> trace.add_memory(MemoryEvent(0, 1e-6, "activations", "x", 8))
>>> trace.add_memory(MemoryEvent(0, 2e-6, "activations", "x", -8))
>>> [(p.time, p.total) for p in memory_timeline(trace, 0)]
[(0.0, 20), (1e-06, 28), (2e-06, 20)]
>>> peak = busiest(memory_peaks(trace, 2))
>>> peak.rank, peak.total, peak.by_category["activations"]
(0, 28, 8)
"""

import numbers
from dataclasses import dataclass
from typing import NamedTuple

from ..errors import ConfigError

__all__ = [
    "CATEGORIES",
    "MemoryEvent",
    "MemoryPoint",
    "MemoryPeak",
    "memory_timeline",
    "memory_peaks",
    "busiest",
    "replay",
]

# what a rank holds, as the ZeRO paper (Rajbhandari et al. 2020) divides it: model states
# (parameters, gradients, optimizer state) and the residual states (activations saved for
# backward, temporary buffers); a ZeRO-3 / FSDP unit's gathered parameters are apart from
# the rank's own shard, so that the picture shows what the schedule gathers and frees
CATEGORIES = ("params", "grads", "optimizer", "activations", "gathered_params", "comm_buffers")


class MemoryEvent(NamedTuple):
    """One allocation (``nbytes > 0``) or release (``nbytes < 0``) on ``rank`` at ``time``
    simulated seconds: ``name`` (display only) of ``category`` (one of :data:`CATEGORIES`),
    charged at the declared precision.  A named tuple, not a dataclass: a training step
    records one per array; read its fields, never its positions."""

    rank: int
    time: float
    category: str
    name: str
    nbytes: int


class MemoryPoint(NamedTuple):
    """What one rank holds right after one of its events: ``by_category`` maps every
    category of :data:`CATEGORIES` to bytes (it unpacks as ``(time, by_category)``)."""

    time: float
    by_category: dict

    @property
    def total(self):
        """Bytes held in all categories together."""
        return sum(self.by_category.values())


@dataclass(frozen=True)
class MemoryPeak:
    """The peaks of one rank: ``total`` the peak of the sum over time, ``by_category[c]``
    the peak of category ``c`` alone (each may be reached at a different time, so their
    sum can exceed ``total``); ``time`` when ``total`` was first reached (None if the rank
    never held anything)."""

    rank: int
    total: int
    by_category: dict
    time: float = None

    def to_dict(self):
        """Bytes (ints) per category and ``total``, the keys ``collsim verify --json``
        reports as ``peak_memory``.

        >>> MemoryPeak(0, 20, dict.fromkeys(CATEGORIES, 0) | {"params": 20}).to_dict()
        {'params': 20, 'grads': 0, 'optimizer': 0, 'activations': 0, 'gathered_params': 0, 'comm_buffers': 0, 'total': 20}
        """  # noqa: E501
        return {c: int(self.by_category.get(c, 0)) for c in CATEGORIES} | {"total": int(self.total)}


def replay(events):
    """Each event with what its rank holds right after it: ``(event, {category: bytes})``
    pairs in recording order (the dict is a fresh copy per event)."""
    held = {}
    for event in events:
        state = held.get(event.rank)
        if state is None:
            state = held[event.rank] = dict.fromkeys(CATEGORIES, 0)
        state[event.category] += event.nbytes
        yield event, dict(state)


def memory_timeline(trace, rank):
    """What ``rank`` holds after each of its events: a list of :class:`MemoryPoint`
    ``(time, {category: bytes})`` in recording order (empty if it never allocated)."""
    rank = _check_rank(rank, "memory_timeline(rank=...)")
    mine = (e for e in trace.memory if e.rank == rank)
    return [MemoryPoint(event.time, state) for event, state in replay(mine)]


def memory_peaks(trace, n_ranks):
    """Per rank ``0..n_ranks-1``, its :class:`MemoryPeak` read from ``trace.memory``."""
    n_ranks = _check_rank(n_ranks, "memory_peaks(n_ranks=...)", low=1)
    totals = [0] * n_ranks
    times = [None] * n_ranks
    peaks = [dict.fromkeys(CATEGORIES, 0) for _ in range(n_ranks)]
    for event, state in replay(trace.memory):
        r = event.rank
        if r >= n_ranks:
            raise ConfigError(
                f"memory_peaks(n_ranks={n_ranks}): the trace has memory events of rank {r}; "
                f"give n_ranks={_highest_rank(trace) + 1} (the cluster's size)"
            )
        total = sum(state.values())
        if total > totals[r]:
            totals[r], times[r] = total, event.time
        peak = peaks[r]
        for category, nbytes in state.items():
            if nbytes > peak[category]:
                peak[category] = nbytes
    return [MemoryPeak(r, totals[r], peaks[r], times[r]) for r in range(n_ranks)]


def busiest(peaks):
    """The :class:`MemoryPeak` with the largest ``total`` (the lowest rank on ties)."""
    peaks = list(peaks)
    if not peaks:
        raise ConfigError("busiest([]): give the per-rank peaks that memory_peaks returns")
    return min(peaks, key=lambda p: (-p.total, p.rank))


def _highest_rank(trace):
    return max(e.rank for e in trace.memory)


def _check_rank(value, where, low=0):
    whole = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not whole or value < low:
        raise ConfigError(f"{where} {value!r}: must be a whole number >= {low}")
    return int(value)
