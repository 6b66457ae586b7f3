"""Megatron-Core's all-to-all token dispatcher on an expert-parallel group.

Rank r of ``ep`` holds experts ``r·E/ep .. (r+1)·E/ep``.  Its slots arrive sorted by expert
(:class:`~collsim.nn.routing.Routing`), so the rows for each destination rank are one
contiguous block.  One dispatch is:

1. an all-to-all of the per-expert counts: each rank learns how many rows every source
   will send to each of its experts (``(ep, E/ep)``), all it needs to receive;
2. the token all-to-allv (:mod:`collsim.collectives.all_to_allv`) with those uneven splits;
3. the permutation of what arrived (source-major: source 0's rows for each local expert,
   then source 1's...) to expert-major order, so each expert's rows are contiguous for the
   grouped expert compute (Megatron's ``sort_chunks_by_idxs``).

Combine undoes it: the inverse permutation, and the all-to-allv with the counts transposed.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.runtime.group import Group
>>> group = Group([0, 1])
>>> def program(rank):  # rank r sends r+1 rows to each of the 4 experts (2 per rank)
...     counts = np.full(4, rank.id + 1)
...     rows = np.repeat(np.arange(4.0) + 10 * rank.id, counts)[:, None]
...     got, layout = yield from dispatch(rank, group, rows, counts)
...     back = yield from combine(rank, group, got, layout)
...     return got.ravel().tolist(), layout.expert_rows.tolist(), bool((back == rows).all())
>>> result = collsim.Cluster(collsim.topology.switch(2)).run(program)
>>> result.returns[1]  # expert 2: 1 row from rank 0, 2 from rank 1; then expert 3
([2.0, 12.0, 12.0, 3.0, 13.0, 13.0], [3, 3], True)
"""

from dataclasses import dataclass

import numpy as np

from ...collectives.all_to_allv import direct_all_to_allv, run_all_to_allv
from ...errors import ConfigError

__all__ = [
    "DispatchLayout",
    "dispatch",
    "dispatch_again",
    "combine",
    "expert_slice",
    "known_counts",
]


@dataclass(frozen=True)
class DispatchLayout:
    """What one dispatch learned and did on one rank (group rank ``ep_rank``)."""

    ep_rank: int
    rows_to: np.ndarray  # (ep,) rows this rank sends to each rank (the diagonal stays)
    rows_from: np.ndarray  # (ep, E/ep) rows each source sends to each local expert
    order: np.ndarray  # received row index of each expert-major row (the permutation)
    dispatch_schedule: object  # RaggedSchedule of the tokens' way out
    combine_schedule: object  # and of their way back

    @property
    def expert_rows(self):
        """(E/ep,) rows each local expert computes."""
        return self.rows_from.sum(axis=0)


def expert_slice(experts, ep, ep_rank):
    """The experts group rank ``ep_rank`` of ``ep`` holds."""
    if experts % ep:
        near = max(e for e in range(1, min(ep, experts) + 1) if experts % e == 0)
        raise ConfigError(
            f"experts={experts} is not divisible by ep={ep}: each ep rank holds E/ep whole "
            f"experts; nearest valid ep={near}"
        )
    per = experts // ep
    return slice(ep_rank * per, (ep_rank + 1) * per)


def known_counts(ep, g, rows_to, rows_in):
    """The (ep, ep) table of rows sent between ranks as rank g knows it: its row (what it
    sends) and its column (what it receives); the moves it takes part in read no more."""
    table = np.zeros((ep, ep), dtype=np.int64)
    table[g, :] = rows_to
    table[:, g] = rows_in
    return table


def dispatch(rank, group, rows, expert_counts, call="dispatch"):
    """Send ``rows`` (sorted by expert, ``expert_counts[e]`` rows for expert e of all E) to
    the ranks that hold their experts; return ``(rows in expert-major order, layout)``."""
    ep, g = group.size, group.index(rank.id)
    expert_counts = np.asarray(expert_counts, dtype=np.int64)
    per = len(expert_counts) // ep
    by_rank = expert_counts.reshape(ep, per)  # row j: the counts for rank j's experts
    rows_from = yield from rank.all_to_all(np.ascontiguousarray(by_rank), group=group)
    rows_from = np.asarray(rows_from, dtype=np.int64).reshape(ep, per)
    rows_to, rows_in = by_rank.sum(axis=1), rows_from.sum(axis=1)
    known = known_counts(ep, g, rows_to, rows_in)
    out_schedule, back_schedule = direct_all_to_allv(known), direct_all_to_allv(known.T)
    got = yield from run_all_to_allv(rank, out_schedule, rows, group, call)
    starts = np.concatenate([[0], np.cumsum(rows_from.ravel())])[:-1].reshape(ep, per)
    pieces = [np.zeros(0, dtype=np.int64)]  # expert-major: expert e's rows, sources in order
    for e in range(per):
        pieces += [np.arange(starts[s, e], starts[s, e] + rows_from[s, e]) for s in range(ep)]
    order = np.concatenate(pieces).astype(np.int64)
    layout = DispatchLayout(g, rows_to, rows_from, order, out_schedule, back_schedule)
    return got[order], layout


def dispatch_again(rank, group, rows, layout, call):
    """The same exchange as ``layout``'s dispatch for other rows (the backward pass sends
    the outputs' gradients the way the tokens went): no count exchange."""
    got = yield from run_all_to_allv(rank, layout.dispatch_schedule, rows, group, call)
    return got[layout.order]


def combine(rank, group, rows, layout, call="combine"):
    """Rows in expert-major order back to the ranks their tokens came from, in the order
    those ranks sent them."""
    received_order = np.empty_like(rows)
    received_order[layout.order] = rows
    return (yield from run_all_to_allv(rank, layout.combine_schedule, received_order, group, call))
