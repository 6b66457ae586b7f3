"""A rank's buffer as a strip of cells, one per chunk, coloured by what the chunk holds.

Two ways to colour (``cells=``), as ``collsim viz ring --cells`` names them:

* ``"count"``: how many ranks' contributions the chunk holds, white (none) to dark green
  (all K), with the number written in the cell when it fits;
* ``"sources"``: *which* ranks contributed, one stripe per contributing rank in that
  rank's colour, as the Ultra-Scale Playbook colours each chunk by its source GPU: a
  reduce-scatter's chunks fill up with stripes, an all-gather copies finished stripes.

The cells a transfer just wrote are outlined in the transfer's colour.  The contributions
are the schedule's own (:func:`~collsim.collectives.schedule.contributions`, read through
the result's step view), never worked out here.

>>> colour_of, key = cell_style(4, "sources")
>>> len(colour_of(frozenset({0, 2})))          # two stripes: rank 0's and rank 2's colour
2
>>> cell_style(4, "shade")
Traceback (most recent call last):
...
collsim.errors.ConfigError: cells='shade': choose count or sources
"""

from dataclasses import dataclass

import numpy as np
from matplotlib import colormaps, rcParams
from matplotlib.cm import ScalarMappable
from matplotlib.colors import BoundaryNorm, ListedColormap, to_rgba
from matplotlib.patches import Patch, Polygon
from matplotlib.patheffects import Normal, Stroke

from ..errors import ConfigError
from .ink import ink_on
from .style import say

__all__ = ["CELLS", "Strip", "cell_style", "draw_strip", "draw_cell_key", "rank_colours"]

CELLS = ("count", "sources")
COUNT_CMAP = "YlGn"
EMPTY = (1.0, 1.0, 1.0, 1.0)  # a chunk that holds nothing yet


@dataclass(frozen=True)
class Strip:
    """Where a rank's cells go: from ``origin`` along the unit vector ``along`` (chunk 0
    nearest the origin), each cell ``depth`` long and ``width`` wide."""

    origin: tuple  # (x, y) of the middle of chunk 0's inner edge
    along: tuple  # unit vector from chunk 0 toward the last chunk
    depth: float  # each cell's length along the strip, data units
    width: float  # the strip's width, data units


def rank_colours(k):
    """One colour per rank: the style's colour cycle, or tab20 past its length."""
    cycle = [c["color"] for c in rcParams["axes.prop_cycle"] if "color" in c]
    if k <= len(cycle):
        return [to_rgba(c) for c in cycle[:k]]
    return [colormaps["tab20"](i % 20) for i in range(k)]


def _count_colours(k):
    greens = colormaps[COUNT_CMAP](np.linspace(0.2, 1.0, k))
    cmap = ListedColormap(np.vstack([EMPTY, greens]))
    return cmap, BoundaryNorm(np.arange(-0.5, k + 1.5), cmap.N)


def cell_style(k, cells):
    """``(colour_of, key)`` for ``cells`` ("count" or "sources") on ``k`` ranks:
    ``colour_of(holders)`` gives the stripes' colours of a chunk held from ``holders``
    (one colour for "count"), ``key`` what :func:`draw_cell_key` reads."""
    if cells not in CELLS:
        raise ConfigError(f"cells={cells!r}: choose {' or '.join(CELLS)}")
    if cells == "count":
        cmap, norm = _count_colours(k)
        return (lambda holders: [cmap(norm(len(holders)))]), ("count", k, cmap, norm)
    colours = rank_colours(k)
    return (lambda holders: [colours[r] for r in sorted(holders)] or [EMPTY]), ("sources", k)


def _corners(strip, inner, outer, left, right):
    (x0, y0), (ux, uy) = strip.origin, strip.along
    tx, ty = -uy, ux
    return [
        (x0 + ux * d + tx * w, y0 + uy * d + ty * w)
        for d, w in ((inner, left), (inner, right), (outer, right), (outer, left))
    ]


def draw_strip(ax, strip, holdings, colour_of, written, rank, numbers=None):
    """Draw one rank's cells: ``holdings[i]`` the contributors of the strip's i-th cell,
    ``written`` {i: outline colour} for the cells a transfer just wrote.  ``numbers``
    (fontsize, or None) writes the count in each cell."""
    half = strip.width / 2
    for i, holders in enumerate(holdings):
        inner, outer = i * strip.depth, (i + 1) * strip.depth
        fills = colour_of(holders)
        if len(fills) > 1:  # one stripe a contributing rank ("sources"), under the outline
            for j, fill in enumerate(fills):
                left = -half + strip.width * j / len(fills)
                right = -half + strip.width * (j + 1) / len(fills)
                corners = _corners(strip, inner, outer, left, right)
                ax.add_patch(
                    Polygon(corners, facecolor=fill, lw=0, zorder=3, gid=f"fill r{rank} c{i}")
                )
        is_new = i in written
        edge, lw = (written[i], 2.2) if is_new else ("#888888", 0.5)
        cell = Polygon(
            _corners(strip, inner, outer, -half, half),
            facecolor=fills[0] if len(fills) == 1 else "none",
            edgecolor=edge,
            lw=lw,
            zorder=3 + is_new,
            gid=f"cell r{rank} c{i}",
        )
        if is_new:  # a white halo keeps the outline visible on dark cells
            cell.set_path_effects([Stroke(linewidth=lw + 2.5, foreground="white"), Normal()])
        ax.add_patch(cell)
        if numbers:
            (x0, y0), (ux, uy) = strip.origin, strip.along
            mid = (inner + outer) / 2
            ax.text(
                x0 + ux * mid,
                y0 + uy * mid,
                str(len(holders)),
                fontsize=numbers,
                color=ink_on(fills[0]),
                zorder=6,
                ha="center",
                va="center",
                gid=f"count r{rank} c{i}",
            )


def draw_cell_key(fig, key, rect):
    """The colour key at ``rect`` (figure fraction): a colour bar of contributions
    ("count") or one patch per rank ("sources")."""
    if key[0] == "count":
        _, k, cmap, norm = key
        cax = fig.add_axes(rect)
        step = 1 if k <= 8 else max(1, k // 8)
        ticks = list(range(0, k + 1, step))
        ticks = ticks if ticks[-1] == k else [*ticks, k]
        bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), cax=cax, ticks=ticks)
        bar.set_label(say("contributions in the chunk (ranks)"), fontsize="medium")
        return
    k = key[1]
    handles = [Patch(color=c, label=f"r{r}") for r, c in enumerate(rank_colours(k))]
    left, bottom, width, height = rect
    fig.legend(
        handles=handles,
        title=say("input of rank"),
        loc="upper left",
        bbox_to_anchor=(left, bottom + height),
        ncols=1 if k <= 8 else 2,
        frameon=False,
    )
