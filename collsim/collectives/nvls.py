"""In-switch reduction (NVLink SHARP, NCCL's NVLS algorithm) on one NVSwitch node.

The buffer is cut into K parts, part c owned by rank c, and each part into P pieces.  In
step s = 1..P+1 (1-based):

* reduce of piece s (s <= P): for every owner c, the K-1 moves r -> c of c's piece s,
  ``reduce=True``, form ONE :class:`~collsim.collectives.schedule.Combine` group: the
  switch sums the K-1 contributions (NVLS's ``multimem.ld_reduce``) and sends the sum
  down c's link once; c adds its own;
* multicast of piece s-1 (s >= 2): for every owner c, the K-1 moves c -> r of the reduced
  piece, one Combine group: c sends it up once and the switch copies it to every rank
  (``multimem.st``).

So each GPU's link to the switch carries about S up and S down -- (K-1)/K·S of its
contributions and S/K of its own reduced part up; S/K of the sum and (K-1)/K·S of the
others' parts down -- against 2(K-1)/K·S each way for a ring.

**Why pipeline, and how many pieces.**  Without pipelining the multicast of a part waits
for its whole reduce: 2 steps of S each way, each direction of a link busy half the time.
With P pieces the reduce of piece s and the multicast of piece s-1 share the step, so both
directions are busy in all but the first and last step: time (P+1)(α + S/(Pβ)), within
1/P of S/β.  More pieces cost more α, so the API takes, per call, the P in 1..64 with the
least closed-form time, about sqrt(S/(αβ))
(:func:`~collsim.collectives.hardware_forms.best_pieces`): 1 for 8 bytes (2 steps),
about 30 for 1 GiB on dgx-h100 (3 % of the bandwidth term to the fill and drain).

The group must lie in one node whose NVSwitch reduces (``reduces=True``, dgx-h100).

Examples
--------
>>> s = nvls_all_reduce(4, "nvswitch0")
>>> s.n_steps, s.n_chunks                 # P + 1 steps; K parts of P pieces
(17, 64)
>>> first = s.steps[0][0]
>>> first.src, first.dst, first.chunks, first.combine.key, first.combine.members
(1, 0, range(0, 1), ('reduce', 0, 0), 3)
"""

from dataclasses import dataclass

from ..errors import ConfigError
from .schedule import ChunkMove, Combine, Schedule

__all__ = ["nvls_all_reduce", "nvls_switch", "NvlsSwitch", "NodeSwitches", "node_switches"]


@dataclass(frozen=True)
class NvlsSwitch:
    """The NVSwitch that reduces for a group: its node name in the topology and its
    reduce/multicast throughput as a fraction of the links' rate."""

    name: str
    efficiency: float = 1.0


def nvls_switch(graph, ranks):
    """The :class:`NvlsSwitch` that can reduce for group ``ranks`` (cluster ranks) on
    ``graph``; a ConfigError naming the rule otherwise."""
    nodes = sorted({graph.nodes[r].get("node", 0) for r in ranks})
    if len(nodes) > 1:
        raise ConfigError(
            f"nvls on a group spanning nodes {nodes}: in-switch reduction runs inside one "
            "node's NVSwitch; take a group inside one node, or across nodes use "
            "'nvls_tree' (where every node's NVSwitch reduces), 'nccl_ring' or 'double_tree'"
        )
    switches = [
        n
        for n, data in graph.nodes(data=True)
        if data.get("role") == "nvswitch" and data.get("node", 0) == nodes[0]
    ]
    reducing = [s for s in switches if graph.nodes[s].get("reduces")]
    if not reducing:
        name = graph.graph.get("name")
        raise ConfigError(
            f"nvls on topology {name!r}: node {nodes[0]} has no NVSwitch that reduces "
            f"(reduces=True, NVLink SHARP: dgx-h100); use algorithm 'nccl_ring' or 'ring'"
        )
    machine = graph.graph.get("machine")
    efficiency = getattr(getattr(machine, "intra", None), "reduce_efficiency", 1.0) or 1.0
    return NvlsSwitch(reducing[0], float(efficiency))


@dataclass(frozen=True)
class NodeSwitches:
    """The reducing NVSwitch of every node of a group that spans nodes (NVLS-Tree):
    ``names[n]`` is node n's, in the group's node order; one reduce efficiency for all."""

    names: tuple
    efficiency: float = 1.0


def node_switches(graph, ranks, layout):
    """The :class:`NodeSwitches` of group ``ranks`` (cluster ranks) laid out as
    ``layout``; a ConfigError naming the node whose NVSwitch does not reduce."""
    names, efficiency = [], 1.0
    for members in layout.nodes:
        switch = nvls_switch(graph, [ranks[i] for i in members])
        names.append(switch.name)
        efficiency = switch.efficiency
    return NodeSwitches(tuple(names), efficiency)


def nvls_all_reduce(k, switch, efficiency=1.0, pieces=16):
    """The NVLS all-reduce of ``k`` ranks through ``switch`` (its name in the topology)."""
    if k == 1:
        return Schedule("all_reduce", "nvls", 1, 1, ())
    p = pieces
    piece = [[range(c * p + s, c * p + s + 1) for s in range(p)] for c in range(k)]
    steps = []
    for s in range(p + 1):
        moves = []
        if s < p:
            for c in range(k):
                group = Combine(switch, ("reduce", c, s), k - 1, efficiency)
                moves += [
                    ChunkMove(r, c, piece[c][s], True, combine=group) for r in range(k) if r != c
                ]
        if s >= 1:
            for c in range(k):
                group = Combine(switch, ("multicast", c, s - 1), k - 1, efficiency)
                moves += [
                    ChunkMove(c, r, piece[c][s - 1], False, combine=group)
                    for r in range(k)
                    if r != c
                ]
        steps.append(tuple(moves))
    phases = (("in-switch reduce", 0, 1), ("reduce + multicast", 1, p), ("multicast", p, p + 1))
    phases = tuple(phase for phase in phases if phase[2] > phase[1])  # P = 1: no overlap
    return Schedule("all_reduce", "nvls", k, k * p, tuple(steps), phases)
