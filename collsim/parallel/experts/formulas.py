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

The **hierarchical** dispatcher (:mod:`.hierarchical`, G GPUs a node): ``U[r][m]``, the
tokens of rank r with at least one slot on node m, cross the network once each, to rank
(m, l) of r's local index l, as rows of ``d + 2E`` values; that forwarder sends each slot's
row to the GPU of node m holding its expert.  So rank r = (n, l) sends
``(d+2E)·b·Σ_{m≠n} U[r][m]`` across nodes and ``d·b·Σ_{s: local index l} Σ_{j on node n,
j≠r} N[s][j]`` inside its node; the combine sends ``d·b`` rows back the same ways.

The **ragged top-k form**: a token's k experts are k distinct experts of E; when each is
equally likely (uniform routing), the chance that none of them is on a given rank, which
holds E/ep of the experts, is ``C(E − E/ep, k) / C(E, k)``, so a token goes to
``ep·(1 − C(E − E/ep, k)/C(E, k))`` distinct ranks on average
(:func:`expected_destination_ranks`).  Drawn with replacement it would be
``ep·(1 − (1 − 1/ep)^k)``, the many-experts limit.  A dispatcher that sends a token once
per destination rank (DeepEP's) moves that many rows a token; one that sends a row per
slot (Megatron-Core's all-to-all) moves k.

Examples
--------
>>> dispatch_bytes([[3, 1, 0, 2], [0, 0, 4, 4]], ep=2, row_bytes=16)
RaggedBytes(sent=(32, 0), received=(0, 32))
>>> allgather_dispatch_bytes(tokens=4, ep=2, row_bytes=16)
64
"""

import math

import numpy as np

from ...collectives.formulas import RaggedBytes, all_to_allv_bytes
from ...errors import ConfigError

__all__ = [
    "rank_counts",
    "dispatch_bytes",
    "combine_bytes",
    "counts_bytes",
    "allgather_dispatch_bytes",
    "allgather_bytes",
    "hierarchical_bytes",
    "expected_destination_ranks",
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


def hierarchical_bytes(expert_counts, node_tokens, ep, gpus_per_node, row_bytes, experts):
    """``(dispatch, combine)`` of the hierarchical dispatcher per rank, inter-node and
    intra-node bytes together, from ``expert_counts`` (ep, E) and ``node_tokens`` (ep,
    nodes), the distinct tokens each rank sends to each node.

    >>> out, back = hierarchical_bytes([[2, 0, 1, 0], [0, 0, 0, 0]], [[1, 1], [0, 0]],
    ...                                ep=2, gpus_per_node=1, row_bytes=16, experts=4)
    >>> out.sent, back.sent  # rank 0: one token to node 1 as 16 + 2·4·8 B; 16 B back
    ((80, 0), (0, 16))
    """
    G, N = gpus_per_node, rank_counts(expert_counts, ep)  # N[s][j]: slots s -> rank j
    wide = row_bytes + 2 * experts * COUNT_BYTES
    out_sent, out_recv = [0] * ep, [0] * ep
    back_sent, back_recv = [0] * ep, [0] * ep
    for r in range(ep):
        n, l = divmod(r, G)
        for m, tokens in enumerate(node_tokens[r]):
            if m != n:  # across nodes, to (m, l), and back
                out_sent[r] += wide * tokens
                out_recv[m * G + l] += wide * tokens
                back_sent[m * G + l] += row_bytes * tokens
                back_recv[r] += row_bytes * tokens
        for j in range(n * G, (n + 1) * G):  # forwarded inside node n: r -> j
            if j != r:
                slots = sum(N[s][j] for s in range(l, ep, G))  # every source on r's rail
                out_sent[r] += row_bytes * slots
                out_recv[j] += row_bytes * slots
                back_sent[j] += row_bytes * slots
                back_recv[r] += row_bytes * slots
    return (
        RaggedBytes(tuple(out_sent), tuple(out_recv)),
        RaggedBytes(tuple(back_sent), tuple(back_recv)),
    )


def expected_destination_ranks(experts, ep, top_k):
    """Distinct ranks a token's ``top_k`` experts sit on, on average, when it picks k
    distinct experts of ``experts`` uniformly and each of the ``ep`` ranks holds E/ep.

    >>> round(expected_destination_ranks(256, 8, 8), 3)  # DeepSeek-V3's 256 experts, top-8
    5.295
    >>> expected_destination_ranks(8, 4, 2)  # 2 of 8 experts on 4 ranks: 1 + 24/28
    1.8571428571428572
    """
    for name, value in (("experts", experts), ("ep", ep), ("top_k", top_k)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name}={value!r} must be a whole number >= 1, like {name}=8")
    if experts % ep:
        near = max(e for e in range(1, experts + 1) if experts % e == 0 and e <= ep)
        raise ConfigError(
            f"experts={experts} is not divisible by ep={ep}: each rank holds E/ep experts; "
            f"nearest valid ep={near}"
        )
    if top_k > experts:
        raise ConfigError(
            f"top_k={top_k} is more than experts={experts}: a token picks k distinct experts; "
            f"nearest valid top_k={experts}"
        )
    none_here = math.comb(experts - experts // ep, top_k) / math.comb(experts, top_k)
    return ep * (1.0 - none_here)
