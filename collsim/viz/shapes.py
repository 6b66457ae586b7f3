"""A collective step by step, drawn in the shape of its algorithm.

The ring's circle (:mod:`collsim.viz.ring`) suits a ring; other algorithms are drawn as
they are taught:

* ``tree`` (binomial; all-reduce, broadcast, reduce): a layered tree, root on top;
* ``double_tree``: its two complementary trees side by side, each with its half of the
  chunks (the schedule's lanes);
* ``halving_doubling``: ranks in a row, each pairwise exchange an arc (rightward above,
  leftward below), labels at the arcs' tops, buffers as columns;
* ``nvls``: the NVSwitch as a node of its own: every rank's pieces go up to it, where it
  reduces (Σ) and multicasts the sum back down;
* ``nvls_tree``: each node a box with its GPUs and its own NVSwitch, which reduces and
  multicasts inside the node; the tree steps cross the nodes between GPUs of one local
  index (one rail each);
* ``pat``: ranks in a row as halving-doubling's, each move an arc: a step's partners are
  1, 2, 4, ... ranks apart (Bruck's distances, ⌈log2 K⌉ steps), said above the row, and
  those past rank 0 wrap round as long arcs;
* ``hierarchical`` and ``nccl_ring``: each node a box with its GPUs; NCCL's ring one
  channel at a time (``channel=``), as each channel is a ring of its own.

Every arrow is one :class:`~collsim.collectives.schedule.ChunkMove` of the step (through
the switch for NVLS: one leg up per sending rank, one down per receiving rank), and the
faint edges are the pairs the schedule's moves use in the whole run; the cells are each
rank's buffer after the step (:mod:`collsim.viz.cells`).  Nothing is recomputed: the
moves, the lanes and the contributions are the schedule's.

Examples
--------
>>> import collsim
>>> result = collsim.Cluster(collsim.topology.switch(4)).all_reduce(
...     count=64, dtype="float32", algorithm="tree")
>>> fig = shape_figure(result, step=1)
>>> sorted(p.get_gid() for p in fig.axes[0].patches if p.get_gid().startswith("move"))
['move 2->0 whole', 'move 3->1 whole']
>>> sorted(line.get_gid() for line in fig.axes[0].lines)   # the tree's edges
['edge 0-1', 'edge 0-2', 'edge 1-3']
"""

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle

from ..collectives.schedule import Lane
from ..errors import ConfigError
from .animation import Animation
from .cells import cell_style, draw_cell_key, draw_strip
from .limits import check_ring_ranks
from .ring import (
    COPY_COLOUR,
    REDUCE_COLOUR,
    chunk_label,
    frame_subtitle,
    move_handles,
    ring_frames,
    step_captions,
    step_number,
)
from .shape_layouts import (
    NODE,
    node_placement,
    row_placement,
    switch_nodes_placement,
    switch_placement,
    tree_placement,
)
from .style import say

__all__ = ["SHAPES", "shape_figure", "shape_movie", "lanes_shown", "draw_shape", "check_shape"]

SHAPES = {  # algorithm -> how it is drawn; any other algorithm is drawn on the ring's circle
    "tree": "tree",
    "double_tree": "tree",
    "halving_doubling": "row",
    "nvls": "switch",
    "nvls_tree": "switches",
    "pat": "row",
    "hierarchical": "nodes",
    "nccl_ring": "nodes",
}
MIXED_COLOUR = "#7B3294"  # an NVLS leg that carries pieces to reduce and sums to copy
ARROW = {"arrowstyle": "-|>", "mutation_scale": 16, "zorder": 6}
LABEL = {"ha": "center", "va": "center", "zorder": 7}
PALE_INK = "black"  # on the pale discs, node boxes and switches, whatever the theme's ink
LABEL_BOX = {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85}


def lanes_shown(schedule, channel=None):
    """The lanes a picture shows: ``channel``'s alone, or every lane when there are at most
    two (the double tree's trees side by side), else the first (one NCCL channel)."""
    lanes = schedule.lanes or (Lane("every chunk", range(schedule.n_chunks)),)
    if channel is None:
        return lanes if len(lanes) <= 2 else lanes[:1]
    if not schedule.lanes:
        raise ConfigError(
            f"channel {channel!r}: the {schedule.algorithm} schedule has one path for every "
            "chunk; channels are nccl_ring's (and the double tree's two trees)"
        )
    if isinstance(channel, bool) or not isinstance(channel, int) or not 0 <= channel < len(lanes):
        raise ConfigError(
            f"channel {channel!r}: this {schedule.algorithm} has {len(lanes)} "
            f"({', '.join(lane.name for lane in lanes)}); choose 0..{len(lanes) - 1}"
        )
    return (lanes[channel],)


def _in_lane(move, lane):
    return move.chunks.start in lane.chunks


def _placement(result, lane, layout):
    schedule = result.schedule
    k, shape = schedule.ranks, SHAPES[schedule.algorithm]
    moves = [m for step in schedule.steps for m in step if _in_lane(m, lane)]
    n_cells = len(lane.chunks)
    if shape == "tree":
        return tree_placement(moves, k, n_cells)
    if shape == "row":
        return row_placement(moves, k, n_cells)
    if shape == "switch":
        switch = next((m.combine.switch for m in moves if m.combine is not None), "NVSwitch")
        return switch_placement(k, switch, n_cells)
    if shape == "switches":
        nodes, switches = _switch_nodes(moves, k, layout)
        direct = sorted({tuple(sorted((m.src, m.dst))) for m in moves if m.combine is None})
        return switch_nodes_placement(nodes, switches, n_cells, direct)
    nodes = layout.nodes if layout is not None else (tuple(range(k)),)
    edges = sorted({tuple(sorted((m.src, m.dst))) for m in moves})
    return node_placement(nodes, n_cells, edges)


def _switch_nodes(moves, k, layout):
    """The nodes (tuples of ranks) and their switches' names, read from the moves: the
    ranks whose moves a switch combines share its node (``layout``'s nodes, or one rank a
    node, when no move goes through a switch)."""
    members = {}
    for m in moves:
        if m.combine is not None:
            members.setdefault(m.combine.switch, set()).update((m.src, m.dst))
    if not members:
        nodes = layout.nodes if layout is not None else tuple((r,) for r in range(k))
        return [tuple(n) for n in nodes], [f"node {n} switch" for n in range(len(nodes))]
    ordered = sorted(members.items(), key=lambda item: min(item[1]))
    return [tuple(sorted(ranks)) for _, ranks in ordered], [name for name, _ in ordered]


def _arrow(ax, p0, p2, colour, rad, gid, label, patches=(None, None), at=0.5, size="medium"):
    """One arrow p0 -> p2 (arc3 curvature ``rad``), its label at ``at`` of the way."""
    ends = {"patchA": patches[0], "patchB": patches[1]}
    style = {"connectionstyle": f"arc3,rad={rad}", "color": colour, "lw": 2.2, **ARROW}
    ax.add_patch(FancyArrowPatch(p0, p2, gid=gid, **ends, **style))
    (x0, y0), (x2, y2) = p0, p2
    # matplotlib's arc3 curve: a quadratic Bézier through this control point
    cx, cy = (x0 + x2) / 2 + rad * (y2 - y0), (y0 + y2) / 2 - rad * (x2 - x0)
    s = 1 - at
    x = s * s * x0 + 2 * s * at * cx + at * at * x2
    y = s * s * y0 + 2 * s * at * cy + at * at * y2
    shown = say(label)  # "whole" is a word; "c3" a name
    ax.text(
        x, y, shown, color=colour, fontsize="medium", bbox=LABEL_BOX, gid=f"label {gid}", **LABEL
    )


def _draw_moves(ax, moves, place, discs, n_chunks):
    pairs = {(m.src, m.dst) for m in moves}
    seen = {}  # pair -> moves drawn: a second move between one pair (PAT's chunks that
    # wrap round past K) bows to the other side, so both arrows and labels show
    for m in moves:
        colour = REDUCE_COLOUR if m.reduce else COPY_COLOUR
        label = chunk_label(m.chunks, n_chunks)
        p0, p2 = place.positions[m.src], place.positions[m.dst]
        rad = place.bend_of(p0, p2)
        if rad == 0.0 and (m.dst, m.src) in pairs:  # both ways at once: two curves apart
            rad = 0.25
        again = seen.get((m.src, m.dst), 0)
        seen[(m.src, m.dst)] = again + 1
        rad += (0.0, -0.3, 0.3)[min(again, 2)]
        gid = f"move {m.src}->{m.dst} {label}"
        ends = (discs[m.src], discs[m.dst])
        _arrow(ax, p0, p2, colour, rad, gid, label, ends)


def _leg_label(way, group, n_chunks):
    """What one leg carries: ``c5`` for one chunk, else counts by what the switch does
    with them (``7 to Σ``, ``Σ c5``, ``7 cast``)."""
    parts = []
    for reduce in (True, False):
        chunks = sorted({c for m in group if m.reduce == reduce for c in m.chunks})
        if not chunks:
            continue
        one = chunk_label(range(chunks[0], chunks[0] + 1), n_chunks) if len(chunks) == 1 else None
        what = one or len(chunks)
        if way == "up":
            parts.append(
                say("{what} to Σ", what=what) if reduce else say("{what} to cast", what=what)
            )
        else:
            parts.append(f"Σ {what}" if reduce else say("{what} cast", what=what))
    return "\n".join(parts)  # one line a kind: narrow labels stay apart


def _draw_switch_legs(ax, moves, place, discs, n_chunks):
    """NVLS: each rank's moves of the step go up to its switch on one leg and come down
    from it on another (one NVLink each way), labelled with what the switch does."""
    legs = {}
    for m in moves:
        legs.setdefault(("up", m.src, m.combine.switch), []).append(m)
        legs.setdefault(("down", m.dst, m.combine.switch), []).append(m)
    for (way, rank, name), group in sorted(legs.items()):
        hub = place.hubs[name]
        kinds = {m.reduce for m in group}
        colour = MIXED_COLOUR if len(kinds) > 1 else REDUCE_COLOUR if True in kinds else COPY_COLOUR
        # the two legs of a rank bow to opposite sides; the up leg's label sits near the
        # rank, where the legs of neighbouring ranks are furthest apart
        ends = (discs[rank], None) if way == "up" else (None, discs[rank])
        p0, p2 = (place.positions[rank], hub) if way == "up" else (hub, place.positions[rank])
        at = 0.2 if way == "up" else 0.5  # apart along the legs too: vertical legs
        label = _leg_label(way, group, n_chunks)
        _arrow(ax, p0, p2, colour, place.bend, f"{way} {rank}", label, ends, at, "small")
    for name, hub in place.hubs.items():
        _draw_switch(ax, name, hub)


def _draw_switch(ax, name, hub):
    """The switch as a node of its own, saying what it does."""
    ax.add_patch(
        FancyBboxPatch(
            (hub[0] - 0.7, hub[1] - 0.4),  # room for a name like "nvswitch0" on a slide
            1.4,
            0.8,
            boxstyle="round,pad=0.05",
            fc="#D9D9D9",
            ec="#333333",
            lw=1.5,
            zorder=8,
            gid=f"switch {name}",
        )
    )
    what = f"{name}\n" + say("Σ reduce\nmulticast")
    ax.text(*hub, what, fontsize="small", zorder=9, ha="center", va="center", color=PALE_INK)


def _partners(moves, k):
    """Who sends to whom in a step of PAT, read from its moves: "r − 2" (all-gather, to
    the rank 2 before) or "r + 4" (reduce-scatter), mod K."""
    reduce = moves[0].reduce
    distances = sorted({((m.dst - m.src) if reduce else (m.src - m.dst)) % k for m in moves})
    sign = "+" if reduce else "−"
    shown = ", ".join(f"r {sign} {d}" for d in distances)
    return say("every rank r sends to {partners} (mod {k})", partners=shown, k=k)


def _draw_lane(ax, result, frame, lane, place, cells):
    schedule = result.schedule
    k, n_chunks = schedule.ranks, schedule.n_chunks
    ax.set_aspect("equal")
    ax.axis("off")
    for n, x0, y0, w, h in place.boxes:
        box = Rectangle(
            (x0, y0), w, h, fc="#F7F7F7", ec="#999999", lw=1.2, zorder=0, gid=f"node {n}"
        )
        ax.add_patch(box)
        label = say("node {node}", node=n)
        ax.text(x0 + 0.1, y0 + h - 0.1, label, ha="left", va="top", color=PALE_INK)
    for a, b in place.edges:
        (xa, ya), (xb, yb) = place.positions[a], place.positions[b]
        edge = Line2D([xa, xb], [ya, yb], color="#BBBBBB", lw=1.5, zorder=1, gid=f"edge {a}-{b}")
        ax.add_line(edge)
    discs = {}
    for r, (x, y) in place.positions.items():
        discs[r] = ax.add_patch(
            Circle((x, y), NODE, fc="#F2F2F2", ec="#333333", lw=1.2, zorder=8, gid=f"rank {r}")
        )
        size = "medium" if k <= 8 else "small"  # two digits stay inside the disc
        disc = {"ha": "center", "va": "center", "zorder": 9, "color": PALE_INK}
        ax.text(x, y, f"r{r}", fontweight="bold", fontsize=size, **disc)
    moves = [m for m, _, _, _ in frame.moves if _in_lane(m, lane)]
    colour_of, key = cell_style(k, cells)
    written = {}
    for m in moves:
        for c in m.dst_chunks:
            written[(m.dst, c - lane.chunks.start)] = REDUCE_COLOUR if m.reduce else COPY_COLOUR
    for r, strip in place.strips.items():
        holdings = [frame.holdings[r][c] for c in lane.chunks]
        mine = {c: colour for (rank, c), colour in written.items() if rank == r}
        draw_strip(ax, strip, holdings, colour_of, mine, r)
    through = [m for m in moves if m.combine is not None]
    if place.hubs:  # the switches, with the legs of the moves they combine
        _draw_switch_legs(ax, through, place, discs, n_chunks)
    _draw_moves(ax, [m for m in moves if m.combine is None], place, discs, n_chunks)
    if schedule.algorithm == "pat" and moves:
        ax.text(0.0, 1.0, _partners(moves, k), transform=ax.transAxes, ha="left", va="top")
    x0, x1, y0, y1 = place.extent()
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    return key


def draw_shape(fig, rect, result, frame, lanes, layout, cells):
    """Draw ``frame`` of ``result`` in its shape into ``rect`` (figure fraction), one axes
    a lane side by side; returns the cell colour key."""
    left, bottom, width, height = rect
    width /= len(lanes)
    for i, lane in enumerate(lanes):
        ax = fig.add_axes((left + i * width, bottom, width - 0.01, height))
        key = _draw_lane(ax, result, frame, lane, _placement(result, lane, layout), cells)
        if len(lanes) > 1 or result.schedule.lanes:
            first, last = lane.chunks.start, lane.chunks.stop - 1
            held = (
                say("chunk {first}", first=first)
                if first == last
                else say("chunks {first}-{last}", first=first, last=last)
            )
            ax.set_title(f"{_lane_name(lane)} ({held})")
    return key


def _draw(fig, result, frame, lanes, layout, cells):
    key = draw_shape(fig, (0.02, 0.04, 0.8, 0.8), result, frame, lanes, layout, cells)
    fig.suptitle(frame.title, x=0.42, y=0.975, fontsize="xx-large", fontweight="bold")
    fig.text(0.42, 0.915, frame_subtitle(result, frame), ha="center", va="top")
    draw_cell_key(fig, key, (0.86, 0.35, 0.02, 0.45))
    handles = move_handles()
    if SHAPES[result.schedule.algorithm] in ("switch", "switches"):
        handles.append(Line2D([], [], color=MIXED_COLOUR, lw=2, marker=">", label=say("both")))
    fig.legend(handles=handles, loc="lower right", frameon=False, bbox_to_anchor=(0.995, 0.03))


def check_shape(result, channel=None, cells="count"):
    """The lanes to draw of ``result``, after refusing what a shaped drawing cannot show."""
    schedule = result.schedule
    if schedule.algorithm not in SHAPES:
        raise ConfigError(
            f"{schedule.algorithm} is drawn on the ring's circle (collsim.viz.ring); "
            f"shaped drawings are for {', '.join(SHAPES)}"
        )
    check_ring_ranks(schedule.ranks)
    cell_style(schedule.ranks, cells)
    return lanes_shown(schedule, channel)


def _figure():
    return Figure(figsize=(13.33, 7.5))  # 16:9, a slide's shape


def shape_figure(result, step=1, channel=None, layout=None, cells="count"):
    """One step of ``result`` (a :class:`~collsim.collectives.api.CollectiveResult` of
    an algorithm in :data:`SHAPES`) drawn in its algorithm's shape; returns a Figure.

    ``step`` counts from 1 (0: before the first step); ``channel`` picks one lane of
    nccl_ring or the double tree; ``layout`` is the group's
    :class:`~collsim.hardware.layout.NodeLayout` (hierarchical, nccl_ring; default one
    node); ``cells`` is "count" or "sources" (:mod:`collsim.viz.cells`)."""
    lanes = check_shape(result, channel, cells)
    frame = ring_frames(result)[step_number(result, step)]
    fig = _figure()
    _draw(fig, result, frame, lanes, layout, cells)
    return fig


def shape_movie(result, channel=None, layout=None, cells="count"):
    """Every step of ``result`` in its algorithm's shape, as an
    :class:`~collsim.viz.animation.Animation` (the initial state, then a frame a step)."""
    lanes = check_shape(result, channel, cells)
    frames = ring_frames(result)
    fig = _figure()

    def show(index):
        fig.clear()
        _draw(fig, result, frames[index], lanes, layout, cells)

    name = f"{result.algorithm} {result.collective}".replace("_", "-")
    title = say("{name} on {k} ranks, step by step", name=name, k=result.group.size)
    return Animation(fig, step_captions(frames), show, title)


def _lane_name(lane):
    """A lane's name in the figure's language: "tree 1", "channel 3" (the word, then its
    number, as the schedule names it)."""
    word, _, number = lane.name.rpartition(" ")
    return f"{say(word)} {number}" if word and number.isdigit() else say(lane.name)
