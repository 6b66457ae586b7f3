"""What one run of collectives remembers: a named, typed record held by the execution.

A :class:`~collsim.runtime.execution.Execution` (one ``Cluster.run``) holds one
:class:`CollectiveContext` in its ``collectives`` field, made by the first collective of
the run and dropped with the run, so two runs never share sequence numbers, tags or
plans.  Schedules stay frozen, shared, plain data: what the executor derives from one
(its moves indexed by rank) is cached here, per run, not inside the schedule.

Examples
--------
>>> import numpy as np, collsim
>>> cluster = collsim.Cluster(collsim.topology.switch(2))
>>> def program(rank):
...     yield from rank.all_reduce(np.ones(2))
...     yield from rank.all_reduce(np.ones(2))
...     return context_of(rank._execution).seq[(rank.id, (0, 1))]
>>> cluster.run(program).returns
[2, 2]
"""

from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["CollectiveContext", "StepPlan", "KeptPlan", "context_of"]


class StepPlan(NamedTuple):
    """One step of a schedule indexed by rank: rank r's sends (and their trace labels) are
    ``sends[send_ptr[r]:send_ptr[r + 1]]``, its receives ``recvs[recv_ptr[r]:recv_ptr[r + 1]]``."""

    send_ptr: object  # K + 1 positions into sends (an array, or a shared one for a ring)
    sends: tuple  # the step's ChunkMoves, ordered by sender
    labels: list  # their display labels in the trace
    recv_ptr: object  # K + 1 positions into recvs
    recvs: tuple  # the step's ChunkMoves, ordered by receiver


class KeptPlan(NamedTuple):
    """A schedule's :class:`StepPlan` per step, kept in :attr:`CollectiveContext.plans`."""

    schedule: object  # kept, so that its id (the key) is not reused while the run lasts
    steps: list  # a StepPlan per step


@dataclass
class CollectiveContext:
    """Per-run state of the collectives (one per :class:`Execution`)."""

    # (rank id, group ranks) -> position of that rank's next collective on the group
    seq: dict = field(default_factory=dict)
    # group ranks -> a small id that message tags carry instead of the rank tuple
    group_ids: dict = field(default_factory=dict)
    # (group id, seq) -> the tag (a records.CollectiveStep) of every step of that
    # collective call, shared by the ranks of the group
    step_tags: dict = field(default_factory=dict)
    # (elements, chunks) -> chunk_bounds(elements, chunks), computed once per run
    chunk_bounds: dict = field(default_factory=dict)
    # id(schedule) -> its KeptPlan: the schedule and its moves indexed by rank
    plans: dict = field(default_factory=dict)

    def next_seq(self, rank_id, group_ranks):
        """The position of this rank's next collective on ``group_ranks`` (0, 1, ...)."""
        key = (rank_id, group_ranks)
        seq = self.seq.get(key, 0)
        self.seq[key] = seq + 1
        return seq


def context_of(execution):
    """The execution's :class:`CollectiveContext`, made on first use."""
    context = execution.collectives
    if context is None:
        context = execution.collectives = CollectiveContext()
    return context
