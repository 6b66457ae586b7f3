"""The memory tracker: every array a rank holds, registered with its category and charged
at its declared training precision.

A rank program calls (it does not yield: these take no simulated time, and record at
``rank.now``)::

    block = rank.alloc("gathered_params", "block 2 weights", elements)
    ...
    rank.free(block)
    rank.allocated("params")          # bytes this rank holds now

Each call is a :class:`~collsim.network.memory.MemoryEvent` in the run's trace
(``result.trace.memory``), so each rank's timeline and peaks are read from the run
(:func:`memory_timeline`, :func:`memory_peaks`, :func:`busiest`; DESIGN.md, principle 5),
never computed on the side.  The bytes are the precision's, not the numpy arrays': the
verification numerics run in float64, a mixed-precision run holds bf16 and fp32.

Examples
--------
>>> import collsim
>>> def program(rank):
...     rank.alloc("params", "w", 10)                  # bf16: 2 B per element
...     rank.alloc("optimizer", "Adam m", 10)          # fp32: 4 B per element
...     yield rank.compute("1us")
...     x = rank.alloc("activations", "x", 4 * (rank.id + 1))
...     yield rank.compute("1us")
...     rank.free(x)
...     return rank.allocated()
>>> result = collsim.Cluster(collsim.topology.switch(2)).run(program)
>>> result.returns
[60, 60]
>>> peak = busiest(memory_peaks(result.trace, 2))
>>> peak.rank, peak.total, peak.to_dict()["activations"]
(1, 76, 16)
>>> [(point.time, point.total) for point in memory_timeline(result.trace, 0)]
[(0.0, 20), (0.0, 60), (1e-06, 68), (2e-06, 60)]
"""

import difflib
import numbers
from dataclasses import dataclass, field

from ..errors import ConfigError
from ..network.memory import (
    CATEGORIES,
    MemoryEvent,
    MemoryPeak,
    MemoryPoint,
    busiest,
    memory_peaks,
    memory_timeline,
)
from ..units import MAX_SIZE, format_size, format_time

__all__ = [
    "CATEGORIES",
    "PRECISION",
    "MemoryEvent",
    "MemoryBlock",
    "MemoryTracker",
    "MemoryPoint",
    "MemoryPeak",
    "memory_timeline",
    "memory_peaks",
    "busiest",
]

# bytes per element at the declared training precision: mixed-precision Adam keeps bf16
# parameters and gradients (2 B each) and fp32 master weights, momentum and variance (4 B
# each, one "optimizer" block apiece), so a model of Psi parameters holds 2 Psi + 2 Psi +
# 12 Psi = 16 Psi bytes of model state (Rajbhandari et al. 2020, "ZeRO", section 3).
# Activations, gathered parameters and communication buffers are bf16 like the parameters.
PRECISION = {
    "params": 2,
    "grads": 2,
    "optimizer": 4,
    "activations": 2,
    "gathered_params": 2,
    "comm_buffers": 2,
}


@dataclass(eq=False)
class MemoryBlock:
    """A handle on what one ``rank.alloc`` registered: give it to ``rank.free``.

    Blocks compare by identity: two blocks of the same name are two arrays."""

    rank: int
    category: str
    name: str
    nbytes: int
    freed: bool = False
    _tracker: object = field(default=None, repr=False)

    def __repr__(self):
        state = ", freed" if self.freed else ""
        return (
            f"MemoryBlock(rank {self.rank}, {self.category} {self.name!r}, "
            f"{format_size(self.nbytes)}{state})"
        )


class MemoryTracker:
    """What every rank of one run holds now, by category; it records each allocation and
    release in ``trace.memory``.  One per :class:`~collsim.runtime.execution.Execution`
    (its ``memory`` field); rank programs reach it through ``rank.alloc``, ``rank.free``
    and ``rank.allocated``."""

    def __init__(self, trace):
        self.trace = trace
        self._held = {}  # rank id -> {category: bytes held now}

    def alloc(self, rank, time, category, name, elements, bytes_per_element=None):
        """Register ``elements`` elements of ``category`` on ``rank`` at ``time``; returns
        a :class:`MemoryBlock`.  A block of 0 bytes records no event."""
        category = check_category(category, f"rank {rank}: alloc(category=...)")
        if not isinstance(name, str):
            raise ConfigError(f"rank {rank}: alloc(name={name!r}): the name must be a string")
        elements = _whole(elements, f"rank {rank}: alloc({name!r}, elements=...)", low=0)
        if bytes_per_element is None:
            bytes_per_element = PRECISION[category]
        else:
            bytes_per_element = _whole(
                bytes_per_element, f"rank {rank}: alloc({name!r}, bytes_per_element=...)", low=1
            )
        nbytes = elements * bytes_per_element
        if nbytes > MAX_SIZE:
            raise ConfigError(
                f"rank {rank}: alloc({name!r}, elements={elements:,}) is {format_size(nbytes)}, "
                f"more than the {format_size(MAX_SIZE)} any one buffer can be"
            )
        block = MemoryBlock(rank, category, name, nbytes, _tracker=self)
        self._record(rank, time, category, name, nbytes)
        return block

    def free(self, rank, time, block):
        """Release ``block`` (registered by ``rank`` in this run) at ``time``."""
        if not isinstance(block, MemoryBlock):
            raise ConfigError(
                f"rank {rank}: free({block!r}) takes the MemoryBlock that rank.alloc returned"
            )
        if block._tracker is not self or block.rank != rank:
            raise ConfigError(
                f"rank {rank}: free({block!r}): the block was allocated by rank {block.rank}"
                + ("" if block._tracker is self else " in another run")
                + "; a rank frees only its own blocks, in the run that allocated them"
            )
        if block.freed:
            raise ConfigError(
                f"rank {rank}: {block!r} is freed twice (at t={format_time(time)}): "
                "free each block once"
            )
        block.freed = True
        self._record(rank, time, block.category, block.name, -block.nbytes)

    def allocated(self, rank, category=None):
        """Bytes ``rank`` holds now: in ``category``, or in all categories."""
        held = self._held.get(rank)
        if category is None:
            return sum(held.values()) if held else 0
        category = check_category(category, f"rank {rank}: allocated(category=...)")
        return held[category] if held else 0

    def _record(self, rank, time, category, name, nbytes):
        if nbytes == 0:
            return  # an empty block holds nothing: no event, so every event's nbytes != 0
        held = self._held.get(rank)
        if held is None:
            held = self._held[rank] = dict.fromkeys(CATEGORIES, 0)
        held[category] += nbytes
        self.trace.add_memory(MemoryEvent(rank, time, category, name, nbytes))


def check_category(category, where):
    """``category`` if it is one of :data:`CATEGORIES`, else a ConfigError naming it and
    the nearest valid category.

    >>> check_category("optimiser", "alloc(category=...)")
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: alloc(category=...) 'optimiser' is not a memory category; \
nearest valid: 'optimizer' (one of params, grads, optimizer, activations, gathered_params, \
comm_buffers)
    """
    if isinstance(category, str) and category in PRECISION:
        return category
    choices = ", ".join(CATEGORIES)
    close = difflib.get_close_matches(str(category), CATEGORIES, n=1, cutoff=0.0)
    raise ConfigError(
        f"{where} {category!r} is not a memory category; nearest valid: {close[0]!r} "
        f"(one of {choices})"
    )


def _whole(value, where, low):
    whole = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not whole or value < low:
        kind = "" if whole else f" (a {type(value).__name__})"
        raise ConfigError(f"{where} {value!r}{kind}: must be a whole number >= {low}")
    return int(value)
