"""Closed forms for expert-parallel dispatch and combine, from the routing that happened.

Notation: ep ranks, E experts (E/ep a rank), d the hidden size, b bytes per element, so a
token row is ``d·b`` bytes; ``n[r][e]`` the rows source rank r sends to expert e (its
kept choices, plus padding when padding to capacity).  Rank j holds experts
``j·E/ep .. (j+1)·E/ep``; ``N[r][j]`` is n summed over j's experts.

* **dispatch** (tokens out): rank r sends ``d·b·Σ_{j≠r} N[r][j]`` and receives
  ``d·b·Σ_{s≠r} N[s][r]``: the all-to-allv's closed form
  (:func:`~collsim.collectives.formulas.all_to_allv_bytes`) with the counts N.
* **combine** (outputs back): the same with N transposed: what r received, it sends.
* the **count exchange** before it: an all-to-all of E/ep counts per pair, 8 bytes each
  (int64), ``(ep−1)·E/ep·8`` bytes a rank.
* the backward pass sends the outputs' gradients the way the tokens went and the inputs'
  gradients the way the outputs came back: dispatch and combine again.

Megatron-Core's **all-gather dispatcher** (:mod:`.allgather`), for comparison, all-gathers
every rank's T tokens over the group with their routing (which expert each slot goes to,
and its gate: 2E values a token) and reduce-scatters the outputs: a ring moves
``(ep−1)·T·(d + 2E)·b`` a rank out and ``(ep−1)·T·d·b`` back, whatever the routing; the
all-to-all moves only the rows whose expert is elsewhere, ``(ep−1)/ep·k·T·d·b`` a rank on
average when routing is uniform and nothing drops.

Examples
--------
>>> dispatch_bytes([[3, 1, 0, 2], [0, 0, 4, 4]], ep=2, row_bytes=16)
RaggedBytes(sent=(32, 0), received=(0, 32))
>>> allgather_dispatch_bytes(tokens=4, ep=2, row_bytes=16)
64
"""

import numpy as np

from ...collectives.formulas import RaggedBytes, all_to_allv_bytes

__all__ = [
    "rank_counts",
    "dispatch_bytes",
    "combine_bytes",
    "counts_bytes",
    "allgather_dispatch_bytes",
    "allgather_bytes",
]

COUNT_BYTES = 8  # int64 counts; the all-gather dispatcher's maps are float64, 8 B too


def rank_counts(expert_counts, ep):
    """(ep, ep) rows each source rank sends to each rank, from (ep, E) rows per expert."""
    counts = np.asarray(expert_counts, dtype=np.int64)
    return counts.reshape(len(counts), ep, -1).sum(axis=2).tolist()


def dispatch_bytes(expert_counts, ep, row_bytes):
    """Bytes each rank sends and receives in the token dispatch."""
    return all_to_allv_bytes(rank_counts(expert_counts, ep), row_bytes)


def combine_bytes(expert_counts, ep, row_bytes):
    """Bytes each rank sends and receives when the outputs come back."""
    return all_to_allv_bytes(np.transpose(rank_counts(expert_counts, ep)).tolist(), row_bytes)


def counts_bytes(experts, ep):
    """Bytes each rank sends in the all-to-all of per-expert counts."""
    return (ep - 1) * (experts // ep) * COUNT_BYTES


def allgather_dispatch_bytes(tokens, ep, row_bytes):
    """Bytes a rank sends in the all-gather dispatcher's ring all-gather of its ``tokens``
    rows (and again in the reduce-scatter that combines)."""
    return (ep - 1) * tokens * row_bytes


def allgather_bytes(tokens, ep, row_bytes, experts):
    """``(dispatch, combine)`` of the all-gather dispatcher as collsim runs it, per rank
    (every rank sends what it receives): the ring all-gathers of the ``tokens`` rows and of
    the routing maps (which slots go to which expert, and their gates: 2E float64 a token),
    then the ring reduce-scatter of the outputs.

    >>> allgather_bytes(tokens=4, ep=2, row_bytes=16, experts=2)
    (RaggedBytes(sent=(192, 192), received=(192, 192)), RaggedBytes(sent=(64, 64), received=(64, 64)))
    """  # noqa: E501
    out = allgather_dispatch_bytes(tokens, ep, row_bytes + 2 * experts * COUNT_BYTES)
    back = allgather_dispatch_bytes(tokens, ep, row_bytes)
    return RaggedBytes((out,) * ep, (out,) * ep), RaggedBytes((back,) * ep, (back,) * ep)
