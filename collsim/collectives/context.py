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

__all__ = ["CollectiveContext", "context_of"]


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
    # id(schedule) -> (schedule, its moves indexed by rank); the schedule is kept so its
    # id cannot be reused while the run lasts
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
