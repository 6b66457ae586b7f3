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

NCCL also runs CollNet Direct (Simple only) for **all-gather** and **reduce-scatter**
(its ``src/device/all_gather.h`` and ``reduce_scatter.h``): rank r's block is chunk r.

* all-gather: GPU j of every node sends its block up rail j once and the switch
  multicasts it to GPU j of every other node (1 step, every rail at once); GPU j then
  copies the M blocks of its rail to its node's other GPUs over NVLink (1 step).
* reduce-scatter, the reverse: every GPU sends GPU j of its node its values of the M
  blocks of rail j, which GPU j sums (1 step); rail j's switch sums block r across the
  nodes on its way to its owner r (1 step).

These two are not cut into pieces (a rank's block is one chunk), so the phases read apart.

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
>>> g = collnet_all_gather(layout, SharpRails(("rail0", "rail1")))
>>> [name for name, _, _ in g.phases], [(m.src, m.dst) for m in g.steps[0][:2]]
(['multicast across nodes (SHARP)', 'all-gather in the node'], [(0, 2), (0, 4)])
"""

from dataclasses import dataclass, replace
from functools import partial

from ..errors import ConfigError
from .nvls import nvls_all_reduce
from .schedule import ChunkMove, Combine, Schedule

__all__ = [
    "COLLNET",
    "COLLNET_BUILDERS",
    "SharpRails",
    "sharp_rails",
    "collnet_all_reduce",
    "collnet_all_gather",
    "collnet_reduce_scatter",
]

COLLNET = ("collnet_direct", "collnet_chain")


@dataclass(frozen=True)
class SharpRails:
    """The network switch that sums for each rail of a group: ``names[j]`` is the
    switch GPU j of every node reaches (its rail's leaf), which must reduce (SHARP)."""

    names: tuple


# what to run instead where CollNet cannot, per collective: (one node, no SHARP, no NVSwitch)
_INSTEAD = {
    "all_reduce": ("'nvls' or 'nccl_ring'", "'nccl_ring' or 'double_tree'", "'collnet_chain'"),
    "all_gather": ("'ring'", "'ring' (or 'pat' at one GPU a node)", "'ring'"),
}
_INSTEAD["reduce_scatter"] = _INSTEAD["all_gather"]


def sharp_rails(graph, ranks, layout, algorithm="collnet_direct", collective="all_reduce"):
    """The :class:`SharpRails` of group ``ranks`` (cluster ranks, laid out as
    ``layout``) on ``graph``, or a ConfigError naming the rule the group breaks (and
    what ``collective`` can run instead)."""
    from ..topology import route

    one_node, no_sharp, no_nvswitch = _INSTEAD[collective]

    if layout.n_nodes < 2 or layout.gpus_per_node is None:
        raise ConfigError(
            f"{algorithm} on a group of {layout.n_nodes} node(s) of "
            f"{layout.gpus_per_node or 'unequal numbers of'} GPUs: CollNet sums across nodes "
            "in the network's switches; take whole, equal nodes, two or more (--nodes 2), "
            f"or inside one node use {one_node}"
        )
    if algorithm == "collnet_direct" and "nvswitch" not in dict(graph.nodes(data="role")).values():
        raise ConfigError(
            "collnet_direct needs NVSwitch inside the node (NCCL: CollNet Direct only with "
            f"NVSwitch): every GPU sends straight to every other; use {no_nvswitch}"
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
                f"(hardware.topology(..., sharp=True)) or use {no_sharp}"
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
    _checked(algorithm, rails)
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


def _checked(algorithm, rails):
    if not isinstance(rails, SharpRails):
        raise ConfigError(
            f"{algorithm} needs the switches of the group's rails that reduce (SHARP): give "
            "switch=collnet.sharp_rails(graph, ranks, layout), or run it on a topology with --sharp"
        )


def collnet_all_gather(layout, rails, pieces=1):
    """CollNet Direct's all-gather of a group of whole, equal nodes (``layout``, two or
    more) whose rails' switches multicast (``rails``): up the rails once, then NVLink.
    ``pieces`` is taken for the registry's sake; the blocks are not cut."""
    _checked("collnet_direct", rails)
    steps = (_across(layout, rails, False), _in_node(layout, False))
    phases = (("multicast across nodes (SHARP)", 0, 1), ("all-gather in the node", 1, 2))
    return _gathers("all_gather", layout, steps, phases, "own_chunk", "full")


def collnet_reduce_scatter(layout, rails, pieces=1):
    """CollNet Direct's reduce-scatter: NVLink to GPU j of every node the blocks of rail
    j, summed there; then rail j's switch sums each block on its way to its owner."""
    _checked("collnet_direct", rails)
    steps = (_in_node(layout, True), _across(layout, rails, True))
    phases = (("reduce-scatter in the node", 0, 1), ("reduce across nodes (SHARP)", 1, 2))
    return _gathers("reduce_scatter", layout, steps, phases, "full", "own_chunk")


def _gathers(collective, layout, steps, phases, start, result):
    """The schedule without an empty step (one GPU a node: nothing moves in the node)."""
    kept = [(step, name) for step, (name, _, _) in zip(steps, phases) if step]
    return Schedule(
        collective,
        "collnet_direct",
        layout.ranks,
        layout.ranks,
        tuple(step for step, _ in kept),
        tuple((name, i, i + 1) for i, (_, name) in enumerate(kept)),
        start,
        result,
    )


def _across(layout, rails, reduce):
    """One step on every rail j at once: block r (GPU j of node n) goes through rail j's
    switch between its owner and GPU j of every other node -- copied out from the owner
    (the switch multicasts) or, with ``reduce``, summed in to it (the switch adds)."""
    moves = []
    for j, switch in enumerate(rails.names):
        for n, members in enumerate(layout.nodes):
            owner = members[j]
            group = Combine(switch, ("reduce" if reduce else "multicast", j, n), layout.n_nodes - 1)
            for other in layout.nodes:
                if other is not members:
                    ends = (other[j], owner) if reduce else (owner, other[j])
                    moves.append(ChunkMove(*ends, range(owner, owner + 1), reduce, combine=group))
    return tuple(moves)


def _in_node(layout, reduce):
    """One step in every node: GPU j copies the blocks of its rail (GPU j of every node)
    to its node's other GPUs or, with ``reduce``, gets theirs and sums them."""
    moves = []
    for members in layout.nodes:
        for j, head in enumerate(members):
            blocks = [other[j] for other in layout.nodes]
            for peer in members:
                if peer != head:
                    ends = (peer, head) if reduce else (head, peer)
                    moves += [ChunkMove(*ends, range(b, b + 1), reduce) for b in blocks]
    return tuple(moves)


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
COLLNET_BUILDERS = {
    **{("all_reduce", a): partial(collnet_all_reduce, a) for a in COLLNET},
    ("all_gather", "collnet_direct"): collnet_all_gather,
    ("reduce_scatter", "collnet_direct"): collnet_reduce_scatter,
}
