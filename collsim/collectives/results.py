"""What a cluster-level collective returns: :class:`CollectiveResult`, its counts
(:class:`CollectiveStats`) and its step-through (:class:`StepView`, one per schedule step,
with its :class:`StepTransfer` rows), read from the run's trace and the schedule.

:func:`collsim.collectives.api.run_collective` makes them (and ``cluster.all_reduce(...)``
and its siblings, through it); :mod:`collsim.collectives.api` re-exports every name here.
"""

from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from .. import units
from ..errors import ConfigError
from ..runtime.group import Group
from .checks import is_int
from .executor import DTYPE_BYTES
from .records import is_collective
from .schedule import contributions

__all__ = ["CollectiveResult", "CollectiveStats", "StepView", "StepTransfer"]


@dataclass
class CollectiveStats:
    """Accounting of one collective: read from its trace and schedule."""

    bytes_sent: list  # per group rank
    bytes_received: list  # per group rank
    messages: list  # per group rank
    link_bytes: dict  # (u, v) -> bytes
    steps: int  # rounds of the schedule
    time: float  # simulated seconds


class StepTransfer(NamedTuple):
    """One transfer of a step, in group ranks, with what the trace recorded of it."""

    src: int
    dst: int
    chunks: range  # the sender's chunk indices
    reduce: bool  # True: the receiver adds; False: it overwrites
    nbytes: int
    start: float  # simulated seconds
    end: float
    switch: str = None  # the switch that reduced or multicast it (NVLS), else None


@dataclass
class StepView:
    """One step of a collective: its transfers and every rank's chunks after it.

    ``number`` is the step as people count it, 1..n_steps (0: the initial state), as
    the CLI's "step 1 of 6" and the trace labels print it; ``index`` is the 0-based
    position in ``schedule.steps`` (-1 for the initial state).
    """

    index: int  # 0-based step; -1 for the state before the first step
    phase: str
    phase_step: int
    phase_steps: int
    n_steps: int
    transfers: list  # StepTransfer per move, group ranks
    holdings: list  # [rank][chunk] -> frozenset of contributing group ranks

    @property
    def number(self):
        """The 1-based step number (0 for the initial state, before any transfer)."""
        return self.index + 1

    def labels(self):
        """``[rank][chunk] -> "r0+r1+r3"`` ("-" where a chunk holds nothing yet)."""
        return [["+".join(f"r{r}" for r in sorted(c)) or "-" for c in row] for row in self.holdings]

    def __str__(self):
        if self.index < 0:
            head = "initial state"
        else:
            times = [t.start for t in self.transfers] + [t.end for t in self.transfers]
            when = (
                f", {units.format_time(min(times))} .. {units.format_time(max(times))}"
                if times
                else ""
            )
            head = (
                f"{self.phase} {self.phase_step}/{self.phase_steps} "
                f"(step {self.number} of {self.n_steps}){when}"
            )
        lines = [head]
        for t in self.transfers:
            chunks = t.chunks
            which = (
                f"chunk {chunks.start}"
                if len(chunks) == 1
                else f"chunks {chunks.start}-{chunks.stop - 1}"
            )
            kind = "reduce" if t.reduce else "copy"
            if t.switch is not None:  # the switch sums (reduce) or copies (multicast) it
                kind = f"{kind} in {t.switch}"
            lines.append(f"  r{t.src} -> r{t.dst}  {which}  {kind}  {t.nbytes:,} B")
        for r, row in enumerate(self.labels()):
            lines.append(f"  rank {r}: [{' | '.join(row)}]")
        return "\n".join(lines)


@dataclass
class CollectiveResult:
    """What a cluster-level collective returns."""

    collective: str
    algorithm: str
    group: Group
    schedule: object
    outputs: list  # per group rank (None in count-only mode)
    # the RunResult: its trace, and its counts when first read (``stats``)
    run: object = field(repr=False, compare=False)
    trace: object
    time: float
    count: int
    dtype: str
    op: str
    choice: object = None  # the AutoChoice where algorithm="auto" chose, else None
    protocol: object = None  # the Protocol the steps used, None without a protocol model

    @cached_property
    def stats(self):
        """The :class:`CollectiveStats` of the run, in group ranks (counted when first
        read: a loop of calls that reads only the outputs does not pay for them)."""
        stats, ranks = self.run.stats, self.group.ranks
        return CollectiveStats(
            bytes_sent=[stats.bytes_sent[r] for r in ranks],
            bytes_received=[stats.bytes_received[r] for r in ranks],
            messages=[stats.messages_sent[r] for r in ranks],
            link_bytes=stats.link_bytes,
            steps=self.schedule.n_steps,
            time=self.time,
        )

    @property
    def size_bytes(self):
        """S as nccl-tests defines it (all-gather: the buffer each rank ends with)."""
        return self.schedule.buffer_elements(self.count) * DTYPE_BYTES[self.dtype]

    def step(self, number):
        """The :class:`StepView` of step ``number``: 1..n_steps as "step 1 of 6" counts,
        0 for the initial state before any transfer.

        >>> import numpy as np, collsim
        >>> out = collsim.Cluster(collsim.topology.ring(3)).all_reduce([np.ones(3)] * 3)
        >>> out.step(1).number, out.step(1).index, out.step(0).phase
        (1, 0, 'initial')
        """
        n = self.schedule.n_steps
        if not is_int(number) or not 0 <= number <= n:
            raise ConfigError(
                f"step {number!r} is not in this {self.algorithm} "
                f"{self.collective.replace('_', '-')}: choose 1..{n}, or 0 for the initial state"
            )
        for view in self.steps(include_initial=True):
            if view.number == number:
                return view

    def steps(self, include_initial=False):
        """The step-through: one :class:`StepView` per step of the schedule, in order
        (``view.number`` 1, 2, ...; with ``include_initial`` first the state 0)."""
        # every transfer carries its step (the tag) and its move, in group ranks (meta)
        by_step = {}
        for t in self.trace.transfers:
            if is_collective(t.tag):
                # several moves may join one pair in a step (channels, trees): their
                # chunks tell them apart
                key = (t.meta.src, t.meta.dst, t.meta.chunks.start)
                by_step.setdefault(t.tag.step, {})[key] = t
        schedule = self.schedule
        for i, holdings in enumerate(contributions(schedule)):
            s = i - 1
            if s < 0:
                if include_initial:
                    yield StepView(-1, "initial", 0, 0, schedule.n_steps, [], holdings)
                continue
            phase, at, of = schedule.phase_of(s)
            rows = []
            for m in schedule.steps[s]:
                t = by_step.get(s, {}).get((m.src, m.dst, m.chunks.start))
                via = None if m.combine is None else m.combine.switch
                nbytes, start, end = (t.nbytes, t.start, t.end) if t else (0, 0.0, 0.0)
                rows.append(StepTransfer(m.src, m.dst, m.chunks, m.reduce, nbytes, start, end, via))
            yield StepView(s, phase, at, of, schedule.n_steps, rows, holdings)
