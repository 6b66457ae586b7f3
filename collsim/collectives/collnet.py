"""NCCL's CollNet: the all-reduce whose sum across nodes is taken by the network's
switches (InfiniBand SHARP), Direct and Chain.

A SHARP switch adds up what the nodes send through it and sends the sum back, so each
node's link to it carries the data once each way, against 2(M-1)/M of it for a ring over
M nodes.  collsim's switch does that with the :class:`~collsim.collectives.schedule.Combine`
groups NVLS uses: the part a rail reduces is cut into M sub-parts, sub-part i summed in
the switch on its way to node i, then copied by the switch from node i to every node
(pipelined over P pieces, as in :mod:`.nvls`).  Every rail link carries the part once up
and once down, as SHARP's; the sum turns round at node i rather than in the switch.

* **CollNet Direct** (NCCL: only with NVSwitch): in every node GPU j collects part j of
  its node's GPUs (1 step over NVSwitch), the rail-j switch sums part j across the nodes
  (P + 1 steps, every rail at once), GPU j sends the result to its node's GPUs (1 step).
  Every GPU talks to the network through its own NIC.
* **CollNet Chain**: a chain inside every node sums the whole buffer into GPU 0 (G - 1
  steps), rail 0's switch sums it across the nodes (P + 1 steps), the chain copies it
  back (G - 1 steps).  One NIC per node carries all of it.

NCCL pipelines every phase over chunks; here only the switch's phase is, so the phases
read apart.  The closed form is :func:`~collsim.collectives.hardware_forms.hardware_cost`.

Examples
--------
>>> from collsim.hardware.layout import NodeLayout
>>> layout = NodeLayout(((0, 1), (2, 3), (4, 5)))          # 3 nodes of 2 GPUs
>>> s = collnet_all_reduce("collnet_direct", layout, SharpRails(("rail0", "rail1")), 2)
>>> s.n_steps, s.n_chunks, [name for name, _, _ in s.phases]
(5, 12, ['reduce-scatter in the node', 'in-network reduce (SHARP)', \
'reduce + copy back (SHARP)', 'copy back (SHARP)', 'all-gather in the node'])
>>> first = s.steps[1][0]                   # node 1's GPU 0 sends its sum of sub-part 0
>>> first.src, first.dst, first.chunks, first.combine.switch
(2, 0, range(0, 1), 'rail0')
"""

from dataclasses import dataclass, replace
from functools import partial

from ..errors import ConfigError
from .nvls import nvls_all_reduce
from .schedule import ChunkMove, Schedule

__all__ = ["COLLNET", "COLLNET_BUILDERS", "SharpRails", "sharp_rails", "collnet_all_reduce"]

COLLNET = ("collnet_direct", "collnet_chain")


@dataclass(frozen=True)
class SharpRails:
    """The network switch that sums for each rail of a group: ``names[j]`` is the
    switch GPU j of every node reaches (its rail's leaf), which must reduce (SHARP)."""

    names: tuple


def sharp_rails(graph, ranks, layout, algorithm="collnet_direct"):
    """The :class:`SharpRails` of group ``ranks`` (cluster ranks, laid out as
    ``layout``) on ``graph``, or a ConfigError naming the rule the group breaks."""
    from ..topology import route

    if layout.n_nodes < 2 or layout.gpus_per_node is None:
        raise ConfigError(
            f"{algorithm} on a group of {layout.n_nodes} node(s) of "
            f"{layout.gpus_per_node or 'unequal numbers of'} GPUs: CollNet sums across nodes "
            "in the network's switches; take whole, equal nodes, two or more (--nodes 2), "
            "or inside one node use 'nvls' or 'nccl_ring'"
        )
    if algorithm == "collnet_direct" and "nvswitch" not in dict(graph.nodes(data="role")).values():
        raise ConfigError(
            "collnet_direct needs NVSwitch inside the node (NCCL: CollNet Direct only with "
            "NVSwitch): every GPU sends straight to every other; use 'collnet_chain'"
        )
    names = []
    for j in range(layout.gpus_per_node):
        rail = [ranks[members[j]] for members in layout.nodes]
        leaves = {_first_network_switch(graph, route(graph, rail[0], other)) for other in rail[1:]}
        leaf = leaves.pop() if len(leaves) == 1 else None
        if leaf is None or not graph.nodes[leaf].get("reduces"):
            name = graph.graph.get("name")
            raise ConfigError(
                f"{algorithm} on topology {name!r}: the network switch of GPU {j}'s rail does "
                "not reduce (no InfiniBand SHARP); turn it on with --sharp "
                "(hardware.topology(..., sharp=True)) or use 'nccl_ring' or 'double_tree'"
            )
        names.append(leaf)
    return SharpRails(tuple(names))


def _first_network_switch(graph, path):
    for _, v in path:
        if graph.nodes[v].get("role") in ("rail", "fabric", "spine"):
            return v
    return None


def collnet_all_reduce(algorithm, layout, rails, pieces=1):
    """The CollNet Direct or Chain all-reduce of a group of whole, equal nodes
    (``layout``, two or more) whose rails' switches reduce (``rails``, a
    :class:`SharpRails`), the switch's phase in ``pieces`` pieces."""
    if not isinstance(rails, SharpRails):
        raise ConfigError(
            f"{algorithm} needs the switches of the group's rails that reduce (SHARP): give "
            "switch=collnet.sharp_rails(graph, ranks, layout), or run it on a topology with --sharp"
        )
    g, m, p = layout.gpus_per_node, layout.n_nodes, pieces
    direct = algorithm == "collnet_direct"
    parts = g if direct else 1  # the sums the network takes: one per rail used
    span = m * p  # chunks of one part: M sub-parts of P pieces (the switch's schedule)
    part = [range(j * span, (j + 1) * span) for j in range(parts)]
    # the switch's phase: NVLS's in-switch all-reduce of M ranks, on each rail used
    sharp = [
        _on_rail(nvls_all_reduce(m, rails.names[j], 1.0, p), layout, j, j * span)
        for j in range(parts)
    ]
    across = [tuple(move for rail in sharp for move in rail[s]) for s in range(p + 1)]
    if direct:
        inside = _direct(layout, part)
    else:
        inside = _chain(layout, range(0, span))
    before, after = inside
    steps = before + across + after
    first, last = len(before), len(before) + p + 1
    phases = (
        ("reduce-scatter in the node" if direct else "chain reduce in the node", 0, first),
        ("in-network reduce (SHARP)", first, first + 1),
        ("reduce + copy back (SHARP)", first + 1, last - 1),
        ("copy back (SHARP)", last - 1, last),
        ("all-gather in the node" if direct else "chain copy in the node", last, len(steps)),
    )
    phases = tuple(phase for phase in phases if phase[2] > phase[1])
    return Schedule("all_reduce", algorithm, layout.ranks, parts * span, tuple(steps), phases)


def _on_rail(schedule, layout, j, offset):
    """``schedule``'s steps among M ranks as the moves of rail j: rank i is node i's GPU j,
    chunk c is chunk ``offset + c``; the combine keys name the rail."""

    def moved(move):
        combine = replace(move.combine, key=(j, *move.combine.key))
        chunks = range(offset + move.chunks.start, offset + move.chunks.stop)
        return replace(
            move,
            src=layout.nodes[move.src][j],
            dst=layout.nodes[move.dst][j],
            chunks=chunks,
            combine=combine,
        )

    return [tuple(moved(move) for move in step) for step in schedule.steps]


def _direct(layout, part):
    """One step before (GPU j sums part j of its node) and one after (GPU j copies it to
    the others), straight through the NVSwitch; none on one GPU a node."""
    if layout.gpus_per_node == 1:
        return [], []
    gather, scatter = [], []
    for members in layout.nodes:
        for j, owner in enumerate(members):
            gather += [ChunkMove(r, owner, part[j], True) for r in members if r != owner]
            scatter += [ChunkMove(owner, r, part[j], False) for r in members if r != owner]
    return [tuple(gather)], [tuple(scatter)]


def _chain(layout, chunks):
    """G - 1 steps up a chain to GPU 0 of every node (summing), G - 1 back down."""
    g = layout.gpus_per_node
    up = [
        tuple(ChunkMove(members[i], members[i - 1], chunks, True) for members in layout.nodes)
        for i in range(g - 1, 0, -1)
    ]
    down = [
        tuple(ChunkMove(members[i], members[i + 1], chunks, False) for members in layout.nodes)
        for i in range(g - 1)
    ]
    return up, down


# the registry's builders (layout, switch, pieces) -> Schedule, one per algorithm
COLLNET_BUILDERS = {("all_reduce", a): partial(collnet_all_reduce, a) for a in COLLNET}
