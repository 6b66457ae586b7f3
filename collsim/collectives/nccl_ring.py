"""NCCL's ring all-reduce: one ring per channel, laid through each node's GPUs and from
node to node on rails.

A group of M nodes of G GPUs each runs C channels: C = G when M > 1 (one per NIC), C = 1
on one node, where it is the textbook ring.  The buffer is cut into C parts and channel c
runs a ring all-reduce of part c on its own ring order (2(K-1) steps, as every ring).

**The ring of channel c.**  It visits the nodes in order 0, 1, ..., M-1 and, in node n,
enters at local GPU e_n(c) = (c - h_n) mod G, visits the node's other GPUs in increasing
local order (mod G) and leaves from the GPU x_n(c) = e_{n+1}(c) -- the GPU with the same
local index as the next node's entry -- to cross on that GPU's rail (local GPU j of every
node is on rail j).  With h_n = n the exit e_n(c) - 1 is the last GPU of the rotated order
e_n, e_n + 1, ..., e_n - 1, so in every node but possibly the last each channel runs the
node's GPUs round in order.  The last node leaves for node 0's entry c, which with
h_{M-1} = M-1 differs from its own entry unless G divides M - 1; then h_{M-1} = 1, which
differs from both neighbours' shifts (M-2 and 0, mod G) when G >= 3.

**Each NIC carries exactly one channel each way.**  In node n the entries c -> c - h_n
and the exits c -> e_{n+1}(c) are both bijections of the G channels onto the G local
GPUs, so every GPU's NIC sends exactly one channel out of the node and receives exactly
one, and each crossing goes from local GPU x to local GPU x of the next node: one rail.
The one exception is forced: with G = 2 and M odd, a channel's entries along the M nodes
would 2-colour an odd cycle, which is impossible, so the last node leaves from its other
GPU and that channel's hop back to node 0 crosses rails (still one channel per NIC).

Per step every GPU sends one chunk of S/(CK) per channel: C - 1 of them over NVLink and
one through its NIC (M > 1), so each rank sends 2(K-1)/K·S in all, each NIC link
2(K-1)/K·S/C each way (see :func:`collsim.collectives.hardware_forms.hardware_cost`).

Examples
--------
>>> from collsim.hardware.layout import NodeLayout
>>> layout = NodeLayout(((0, 1, 2), (3, 4, 5)))
>>> channel_rings(layout)                 # channel c enters node 1 where it left node 0
((0, 1, 2, 5, 4, 3), (1, 2, 0, 3, 5, 4), (2, 0, 1, 4, 3, 5))
>>> s = nccl_ring_all_reduce(layout)
>>> s.n_steps, s.n_chunks, len(s.steps[0])    # 2(K-1) steps; C*K chunks; C*K moves a step
(10, 18, 18)
"""

from ..errors import ConfigError
from .schedule import ChunkMove, Lane, Schedule

__all__ = ["nccl_ring_all_reduce", "channel_rings", "ring_phase", "channels_of"]


def ring_phase(order, parts, first, reduce, steps):
    """Add a ring reduce-scatter (``first=1, reduce=True``) or all-gather (``first=0``)
    over group ranks ``order`` to ``steps`` (a list of lists, one per step, extended as
    needed): in step s the rank at position p sends ``parts[(p - s - first) mod n]`` to
    position p + 1, so after a reduce-scatter position p holds part p reduced."""
    n = len(order)
    for s in range(n - 1):
        moves = steps[s]
        for p in range(n):
            moves.append(
                ChunkMove(order[p], order[(p + 1) % n], parts[(p - s - first) % n], reduce)
            )


def _shifts(m, g):
    """h_n, the shift of every node's entry (see the module docstring)."""
    h = list(range(m))
    if m > 1 and g > 1 and (m - 1) % g == 0 and g >= 3:
        h[-1] = 1
    return h


def channels_of(layout):
    """The number of channels C: G when the group spans equal nodes, else 1."""
    g = layout.gpus_per_node
    return g if layout.n_nodes > 1 and g is not None else 1


def channel_rings(layout):
    """Each channel's ring, as group ranks in ring order (see the module docstring)."""
    nodes, m, g = layout.nodes, layout.n_nodes, layout.gpus_per_node
    if channels_of(layout) == 1:  # one node, or nodes of unequal size: one ring
        return (tuple(r for node in nodes for r in node),)
    h = _shifts(m, g)
    rings = []
    for c in range(g):
        entries = [(c - h[n]) % g for n in range(m)]
        order = []
        for n in range(m):
            enter, leave = entries[n], entries[(n + 1) % m]
            if leave == enter:  # G = 2, M odd: leave from the other GPU (crosses rails)
                leave = (enter - 1) % g
            middle = [(enter + i) % g for i in range(1, g) if (enter + i) % g != leave]
            locals_ = [enter] + middle + ([leave] if leave != enter else [])
            order.extend(nodes[n][j] for j in locals_)
        rings.append(tuple(order))
    return tuple(rings)


def nccl_ring_all_reduce(layout):
    """NCCL's multi-channel ring all-reduce on ``layout`` (a NodeLayout of the group)."""
    k = layout.ranks
    if k < 1:
        raise ConfigError(f"nccl_ring needs at least one rank, got a layout of {k}")
    rings = channel_rings(layout)
    c = len(rings)
    steps = [[] for _ in range(2 * (k - 1))]
    for channel, order in enumerate(rings):
        parts = [range(channel * k + j, channel * k + j + 1) for j in range(k)]
        ring_phase(order, parts, 1, True, steps)
        ring_phase(order, parts, 0, False, steps[k - 1 :])
    phases = (("reduce-scatter", 0, k - 1), ("all-gather", k - 1, 2 * (k - 1)))
    lanes = tuple(Lane(f"channel {i}", range(i * k, (i + 1) * k)) for i in range(c))
    steps = tuple(tuple(s) for s in steps)
    return Schedule("all_reduce", "nccl_ring", k, c * k, steps, phases, lanes=lanes)
