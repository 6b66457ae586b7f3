"""The one-shot all-reduce: every rank reads every peer's whole buffer and reduces it
locally, in one step.

This is what vLLM's custom all-reduce runs for small messages, and NCCL's symmetric-memory
kernels (NCCL 2.27) for its smallest sizes: inside an NVLink domain each GPU can load
its peers' buffers directly (CUDA IPC or symmetric memory), so a small all-reduce pays
one latency instead of a ring's 2(K-1).  The price is bandwidth: each rank receives the
(K-1) other whole buffers, (K-1)·S, where a ring receives 2(K-1)/K·S; on a switch they
share the rank's one link, so the time is α + (K-1)·S/β (formulas.py).

Each move reads the sender's *input* (``from_input``), as a peer load reads the buffer
the peer registered, so a rank that has already added some peers in never passes their
sums on.  A rank adds its peers in the order their data arrive; vLLM's kernel sums the K
buffers in rank order, which gives every rank the same floating-point bits (here the
ranks agree to rounding, exactly for integers).

Examples
--------
>>> s = one_shot_all_reduce(3)
>>> s.n_steps, [(m.src, m.dst) for m in s.steps[0]]
(1, [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)])
"""

from .schedule import ChunkMove, Schedule

__all__ = ["one_shot_all_reduce"]


def one_shot_all_reduce(k):
    """One step of K(K-1) whole-buffer moves, each reduced into the receiver's buffer."""
    whole = range(0, 1)
    moves = tuple(
        ChunkMove(src, dst, whole, True, from_input=True)
        for src in range(k)
        for dst in range(k)
        if src != dst
    )
    steps = (moves,) if moves else ()
    phases = (("every rank reads every peer", 0, 1),) if moves else ()
    return Schedule("all_reduce", "one_shot", k, 1, steps, phases)
