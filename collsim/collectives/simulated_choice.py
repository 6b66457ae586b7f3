"""``auto`` by simulation: run each candidate the closed forms weighed, count-only, on a
scratch cluster of the same topology, and take the fastest simulated time.

Slower than a prediction (one simulated call per algorithm and protocol), and it sees
what a closed form cannot: congestion on shared links, the routes the topology really
takes.  ``Cluster(..., choice="simulated")`` or ``collsim run --choice simulated``.

Examples
--------
>>> from collsim import hardware
>>> from collsim.collectives.auto import choose
>>> graph = hardware.topology("dgx-a100", nodes=2)
>>> found = choose(graph, tuple(range(16)), "all_reduce", 2**30, "auto", choice="simulated")
>>> found.source, found.algorithm, found.protocol.name
('simulated', 'nccl_ring', 'simple')
"""

from .choices import AutoChoice, Candidate

__all__ = ["simulated_choice", "count_for"]


def count_for(collective, size, ranks, itemsize=4):
    """Elements per rank of a count-only call of S = ``size`` bytes, as nccl-tests counts
    S (all-gather: each rank's share; the split collectives: a multiple of K)."""
    elements = max(1, int(size) // itemsize)
    if collective == "all_gather":
        return max(1, elements // ranks)
    if collective in ("reduce_scatter", "all_to_all"):
        return max(ranks, elements // ranks * ranks)
    return elements


def simulated_choice(graph, ranks, ranked):
    """``ranked`` (the closed forms' :class:`~collsim.collectives.auto.AutoChoice`) with
    every candidate's time simulated, fastest first; ties keep the closed forms' order."""
    from ..runtime import Cluster

    scratch = Cluster(graph, choice="closed_form")
    count = count_for(ranked.collective, ranked.size, len(ranks))
    timed = []
    for candidate in ranked.candidates:
        out = scratch.collective(
            ranked.collective,
            count=count,
            dtype="float32",
            algorithm=candidate.algorithm,
            protocol=candidate.protocol,
            group=list(ranks),
        )
        timed.append(Candidate(candidate.algorithm, candidate.protocol, out.time))
    ordered = tuple(sorted(timed, key=lambda c: c.time_s))
    best = ordered[0]
    return AutoChoice(
        ranked.collective,
        ranked.size,
        best.algorithm,
        best.protocol,
        best.time_s,
        ordered,
        source="simulated",
    )
