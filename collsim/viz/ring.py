"""A collective step by step: ranks on a circle, the transfers of one step as arrows.

Each arrow is one :class:`~collsim.collectives.schedule.ChunkMove` of the step, labelled
with the chunks it carries (``c3``, ``c4-7``, ``whole`` for one-chunk algorithms) and
coloured by what the receiver does (adds it in, or copies it over).  Beside each rank, its
buffer as one cell per chunk, read outward from the rank (chunk 0 nearest it), coloured by
how many ranks' contributions the chunk holds after the step; the cells a transfer just
wrote are outlined.  The reduce-scatter's accumulation and the all-gather's spread show as
colour spreading around the ring.  Every algorithm draws on the same circle: a tree's or
halving-doubling's long-distance partners are long arrows.

Arrows and cells come from the collective's schedule and its
:func:`~collsim.collectives.schedule.contributions`; bytes and times from its trace (via
:meth:`CollectiveResult.steps <collsim.collectives.api.CollectiveResult.steps>`).

Examples
--------
>>> import collsim
>>> cluster = collsim.Cluster(collsim.topology.ring(4))
>>> result = cluster.all_reduce(count=1024, dtype="float32")
>>> fig = ring_figure(result, step=3)          # steps count from 1; 0 is the initial state
>>> fig.get_suptitle()
'reduce-scatter 3/3  (step 3 of 6)'
>>> sorted(a.get_gid() for a in fig.axes[0].patches if a.get_gid().startswith("move"))
['move 0->1 c1', 'move 1->2 c2', 'move 2->3 c3', 'move 3->0 c0']
>>> [frame.step for frame in ring_frames(result)]  # the initial state, then every step
[0, 1, 2, 3, 4, 5, 6]
"""

import math
import operator
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Circle, FancyArrowPatch

from ..errors import ConfigError
from ..units import format_size, format_time
from .animation import ANIMATIONS, MIN_FRAME_WIDTH, Animation, write_animation
from .cells import Strip, cell_style, draw_cell_key, draw_strip
from .limits import MAX_FPS, check_rate, check_ring_ranks
from .style import current, say, styled

__all__ = [
    "ring_figure",
    "ring_animation",
    "ring_movie",
    "ring_frames",
    "chunk_label",
    "Frame",
    "ANIMATIONS",
    "MIN_FRAME_WIDTH",
]

REDUCE_COLOUR = "#C44E52"  # the receiver adds the chunk in
COPY_COLOUR = "#4C72B0"  # the receiver copies it over its own
CELL_CMAP = "YlGn"
NODE = 0.13  # radius of a rank's disc, in data units
STRIP = 1.2  # the longest buffer strip
CENTRE = {"ha": "center", "va": "center"}
DISC = {"facecolor": "#F2F2F2", "edgecolor": "#333333", "linewidth": 1.2}
ARROW = {"arrowstyle": "-|>", "mutation_scale": 14, "linewidth": 1.8, "zorder": 6}
LABEL = {
    **CENTRE,
    "bbox": {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85},
}


def _radius(k):
    """Radius of the circle of ranks: grows with K so neighbours' arrows stay visible."""
    return max(1.0, 0.1 * k)


@dataclass
class Frame:
    """One picture of the step-through: the moves of ``step`` and every rank's chunks
    after it.  ``step`` counts from 1 as the titles do; 0 is the state before the first
    step (no moves)."""

    step: int
    title: str
    moves: list  # (ChunkMove, nbytes, start, end)
    holdings: list  # [rank][chunk] -> frozenset of contributing ranks


def chunk_label(chunks, n_chunks):
    """``c3``, ``c4-7``, or ``whole`` when the algorithm moves the buffer as one chunk.

    >>> chunk_label(range(4, 8), 8), chunk_label(range(0, 1), 1)
    ('c4-7', 'whole')
    """
    if n_chunks == 1:
        return "whole"
    if len(chunks) == 1:
        return f"c{chunks.start}"
    return f"c{chunks.start}-{chunks.stop - 1}"


def ring_frames(result):
    """The :class:`Frame` list of a :class:`~collsim.collectives.api.CollectiveResult`:
    the initial state, then one frame per step of its schedule."""
    schedule = result.schedule
    frames = []
    for view in result.steps(include_initial=True):
        if view.index < 0:
            frames.append(Frame(0, "initial state", [], view.holdings))
            continue
        title = (
            f"{view.phase} {view.phase_step}/{view.phase_steps}  "
            f"(step {view.number} of {view.n_steps})"
        )
        moves = [
            (m, t.nbytes, t.start, t.end)
            for m, t in zip(schedule.steps[view.index], view.transfers)
        ]
        frames.append(Frame(view.number, title, moves, view.holdings))
    return frames


def _positions(k):
    """Rank r at angle 90° - 360°·r/K: rank 0 on top, ranks increasing clockwise."""
    angles = [math.pi / 2 - 2 * math.pi * r / k for r in range(k)]
    radius = _radius(k)
    return [(radius * math.cos(a), radius * math.sin(a)) for a in angles], angles


def _cell_geometry(k, n_chunks):
    """(gap, depth, width) of the buffer cells: a radial strip per rank that stays clear
    of its neighbours at any K."""
    gap = NODE + 0.1
    room = (_radius(k) + gap) * 2 * math.pi / k  # arc between neighbouring strips
    width = min(0.24, 0.7 * room)
    depth = min(width, STRIP / n_chunks)
    return gap, depth, width


def _draw_buffers(ax, frame, k, n_chunks, positions, angles, written, cells):
    colour_of, key = cell_style(k, cells)
    gap, depth, width = _cell_geometry(k, n_chunks)
    numbers = depth >= 0.12 and width >= 0.12 and cells == "count"  # stripes carry no count
    digits = 9 if depth >= 0.15 else 8  # points
    for r in range(k):
        along = (math.cos(angles[r]), math.sin(angles[r]))
        x0, y0 = positions[r]
        strip = Strip((x0 + along[0] * gap, y0 + along[1] * gap), along, depth, width)
        mine = {c: colour for (rank, c), colour in written.items() if rank == r}
        holdings = frame.holdings[r]
        draw_strip(ax, strip, holdings, colour_of, mine, r, numbers=digits if numbers else None)
    return key


def _bezier_point(p0, p2, rad, t):
    """A point of matplotlib's ``arc3`` curve from p0 to p2 (t=0 at p0)."""
    (x0, y0), (x2, y2) = p0, p2
    cx, cy = (x0 + x2) / 2 + rad * (y2 - y0), (y0 + y2) / 2 - rad * (x2 - x0)
    s = 1 - t
    return s * s * x0 + 2 * s * t * cx + t * t * x2, s * s * y0 + 2 * s * t * cy + t * t * y2


def _bend(p0, p2, reverse_too, first):
    """``arc3`` curvature that bows the arrow toward the centre of the circle (so it
    never crosses the ranks between its ends); of a pair sent both ways in one step,
    the second bows less, so the two stay apart."""
    (x0, y0), (x2, y2) = p0, p2
    # arc3's control point is the midpoint plus rad·(dy, -dx): toward the centre when
    # that vector points against the midpoint
    outward = (y2 - y0) * (x0 + x2) - (x2 - x0) * (y0 + y2)
    sign = -1.0 if outward > 0 else 1.0
    if reverse_too:
        return sign * (0.3 if first else 0.1)
    return sign * 0.25


def _draw_moves(ax, frame, n_chunks, positions, discs, fontsize):
    pairs = {(m.src, m.dst) for m, _, _, _ in frame.moves}
    degree = {}
    for m, _, _, _ in frame.moves:
        for r in (m.src, m.dst):
            degree[r] = degree.get(r, 0) + 1
    for move, _nbytes, _start, _end in frame.moves:
        colour = REDUCE_COLOUR if move.reduce else COPY_COLOUR
        label = chunk_label(move.chunks, n_chunks)
        p0, p2 = positions[move.src], positions[move.dst]
        rad = _bend(p0, p2, (move.dst, move.src) in pairs, move.src < move.dst)
        ends = {"patchA": discs[move.src], "patchB": discs[move.dst]}
        style = {"connectionstyle": f"arc3,rad={rad}", "color": colour, **ARROW}
        gid = f"move {move.src}->{move.dst} {label}"
        ax.add_patch(FancyArrowPatch(p0, p2, gid=gid, **ends, **style))
        # long arrows carry their label near the end with fewer arrows (the sender,
        # unless many arrows leave it), so arrows that cross in the middle or fan out
        # of one rank keep their labels apart
        if math.dist(p0, p2) < 0.8 * _radius(len(positions)):
            t = 0.5
        else:
            t = 0.3 if degree[move.src] <= degree[move.dst] else 0.7
        x, y = _bezier_point(p0, p2, rad, t)
        gid = f"label {move.src}->{move.dst}"
        ax.text(x, y, label, fontsize=fontsize, color=colour, gid=gid, zorder=7, **LABEL)


def frame_subtitle(result, frame):
    name = f"{result.algorithm.replace('_', '-')} {result.collective.replace('_', '-')}"
    head = f"{name} of {format_size(result.size_bytes)} on {result.group.size} ranks"
    if not frame.moves:
        return head
    sizes = sorted({nbytes for _, nbytes, _, _ in frame.moves})
    each = format_size(sizes[0])
    if len(sizes) > 1:  # uneven chunks: the smallest and the largest transfer
        each += f"-{format_size(sizes[-1])}"
    start = min(m[2] for m in frame.moves)
    end = max(m[3] for m in frame.moves)
    return f"{head}  ·  {each} per arrow  ·  t = {format_time(start)} → {format_time(end)}"


def draw_circle(ax, result, frame, cells="count"):
    """Draw ``frame`` of ``result`` on the circle of ranks into ``ax``; returns the cell
    colour key (for :func:`~collsim.viz.cells.draw_cell_key`)."""
    schedule = result.schedule
    k, n_chunks = schedule.ranks, schedule.n_chunks
    ax.set_aspect("equal")
    ax.axis("off")
    positions, angles = _positions(k)
    fontsize = "medium" if k <= 8 else "x-small"
    discs = []
    for r, (x, y) in enumerate(positions):
        discs.append(ax.add_patch(Circle((x, y), NODE, zorder=8, gid=f"rank {r}", **DISC)))
        # black on the pale disc in every theme (the theme's ink may be white)
        ax.text(
            x, y, f"r{r}", fontsize=fontsize, zorder=9, fontweight="bold", color="black", **CENTRE
        )
    written = {}
    for move, _, _, _ in frame.moves:
        for c in move.dst_chunks:
            written[(move.dst, c)] = REDUCE_COLOUR if move.reduce else COPY_COLOUR
    key = _draw_buffers(ax, frame, k, n_chunks, positions, angles, written, cells)
    _draw_moves(ax, frame, n_chunks, positions, discs, fontsize)
    gap, depth, _ = _cell_geometry(k, n_chunks)
    reach = _radius(k) + gap + n_chunks * depth + 0.05
    ax.set_xlim(-reach, reach)
    ax.set_ylim(-reach, reach)
    return key


def _draw(fig, result, frame, cells="count"):
    """Draw ``frame`` of ``result`` into the empty Figure ``fig``."""
    ax = fig.add_axes((0.02, 0.02, 0.8, 0.86))
    key = draw_circle(ax, result, frame, cells)
    fig.suptitle(frame.title, x=0.42, y=0.975, fontsize="xx-large", fontweight="bold", wrap=True)
    fig.text(
        0.42,
        0.915,
        frame_subtitle(result, frame),
        ha="center",
        va="top",
        fontsize="medium",
        wrap=True,
    )

    draw_cell_key(fig, key, (0.84, 0.3, 0.025, 0.5))
    fig.legend(
        handles=move_handles(),
        loc="lower right",
        fontsize="small",
        frameon=False,
        bbox_to_anchor=(0.995, 0.03),
    )
    note = "buffers read outward:\nchunk 0 nearest the rank;\noutlined = written now"
    fig.text(0.84, 0.22, note, fontsize="small", va="top", wrap=True)
    return ax


def move_handles():
    """Legend entries of the two kinds of arrow (the receiver adds, or copies)."""
    return [
        Line2D([], [], color=REDUCE_COLOUR, lw=2, marker=">", label=say("reduce: receiver adds")),
        Line2D([], [], color=COPY_COLOUR, lw=2, marker=">", label=say("copy: receiver overwrites")),
    ]


def _figure(k):
    size = 8.5 if k <= 8 else 10
    return Figure(figsize=current().size((size * 1.2, size)), dpi=100)  # slides: 16:9


def step_number(result, step):
    """``step`` as an int in 0..n_steps, or a ConfigError naming the valid range."""
    n_steps = result.schedule.n_steps
    where = f"this {result.algorithm} {result.collective} of {n_steps} steps"
    try:
        number = operator.index(step)
    except TypeError:
        number = None
    if number is None or isinstance(step, bool) or not 0 <= number <= n_steps:
        choose = f"choose 1..{n_steps}, or 0 for the initial state" if n_steps else "choose 0"
        raise ConfigError(f"step {step!r} is not in {where}: {choose}")
    return number


@styled
def ring_figure(result, step=1, cells="count"):
    """One step of a collective as a Figure.

    Parameters
    ----------
    result : CollectiveResult
        What ``cluster.all_reduce(...)`` (or any cluster collective) returned, numeric
        or count-only, on at most 16 ranks (:data:`~collsim.viz.limits.MAX_RING_RANKS`).
    step : int
        The step to draw, counted from 1 as the title counts it ("step 3 of 6");
        ``0`` draws the state before the first step.
    cells : {"count", "sources"}
        Colour each buffer cell by how many ranks contributed, or stripe it with the
        colour of each rank that did (:mod:`collsim.viz.cells`).
    """
    check_ring_ranks(result.schedule.ranks)
    cell_style(result.schedule.ranks, cells)  # a wrong name, before any drawing
    number = step_number(result, step)
    frame = ring_frames(result)[number]
    fig = _figure(result.schedule.ranks)
    _draw(fig, result, frame, cells)
    return fig


def ring_movie(result, cells="count"):
    """The step-through as an :class:`~collsim.viz.animation.Animation`: the initial
    state, then one frame per step, each frame's title its caption."""
    check_ring_ranks(result.schedule.ranks)
    cell_style(result.schedule.ranks, cells)
    frames = ring_frames(result)
    fig = _figure(result.schedule.ranks)

    def show(index):
        fig.clear()
        _draw(fig, result, frames[index], cells)

    title = f"{result.algorithm} {result.collective} on {result.group.size} ranks, step by step"
    captions = tuple(f.title if f.step == 0 else f"step {f.step}: {f.title}" for f in frames)
    return Animation(fig, captions, show, title.replace("_", "-"))


def ring_animation(result, path, fps=1.0, dpi=None):
    """Write the step-through as an animation: the initial state, then one frame per step
    (2(K-1)+1 frames for a ring all-reduce).  Returns the number of frames.

    The suffix of ``path`` picks the format: ``.gif``, or ``.html`` for a self-contained
    lecture page (:mod:`collsim.viz.lecture_page`: play, pause and step buttons, a slider,
    ←/→, PageUp/PageDown and space to step, each step's caption as text, fitted to the
    window), which opens in any browser.  ``dpi`` defaults to what makes a frame at least
    1,200 pixels wide.  The file is the same bytes every run.
    """
    if Path(path).suffix.lower() not in ANIMATIONS:
        raise ConfigError(f"animation {str(path)!r}: end the file name in .gif or .html")
    check_rate(fps, "fps", MAX_FPS)
    return write_animation(ring_movie(result), path, fps=fps, dpi=dpi)
