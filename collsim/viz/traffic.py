"""Link load on the topology: which links carried the bytes of a run.

The topology is drawn with a layout that suits it (:func:`topology_layout`): a circle
for rings and fully connected graphs, ranks around their switch for a switch, the grid
for a 2-D torus (wrap-around links as stubs at the edges, so nothing crosses the grid),
and each machine's GPUs grouped under their node switch above a shared fabric switch for
a hierarchical cluster.  Every directed link is an arrow whose width and colour say how
many bytes it carried (both directions of a link are drawn apart); links that carried
nothing are thin and grey.  Ranks are circles, switches squares.

The bytes come from the run's trace (``trace.stats(K).link_bytes``): the naive
all-reduce's root link, or the one NIC per GPU that a hierarchical all-reduce crosses
between machines, stands out.

Examples
--------
>>> import collsim
>>> g = collsim.topology.switch(4)
>>> result = collsim.Cluster(g).all_reduce(count=1024, dtype="float32", algorithm="naive")
>>> fig = traffic_figure(g, result)
>>> fig.axes[1].get_ylabel()
'bytes carried (KiB)'
>>> len([p for p in fig.axes[0].patches if p.get_gid().startswith("link")])
8
"""

import math

import networkx as nx
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle

from ..topology import ranks_of
from ..units import format_size
from .style import current, say, styled

__all__ = ["traffic_figure", "topology_layout", "link_bytes", "byte_unit", "busiest_links"]

CMAP = "plasma_r"
IDLE = "#C8C8C8"
NODE = 0.11  # half the size of a node marker, in layout units
CENTRE = {"ha": "center", "va": "center"}
RANK_LOOK = {"facecolor": "#F2F2F2", "edgecolor": "#333333", "lw": 1.2, "zorder": 5}
SWITCH_LOOK = {"facecolor": "#5A5A5A", "edgecolor": "#222222", "lw": 1.2, "zorder": 5}
ARROW = {"arrowstyle": "-|>", "mutation_scale": 10, "zorder": 3}


def byte_unit(largest):
    """``(divisor, name)`` that shows ``largest`` bytes as a readable number.

    >>> byte_unit(3 * 2**20)
    (1048576, 'MiB')
    """
    for name, divisor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if largest >= divisor:
            return divisor, name
    return 1, "B"


def link_bytes(source, n_ranks):
    """``{(u, v): bytes}`` from a trace, or anything with a ``.trace`` (a run's or a
    collective's result), or such a dict itself."""
    if isinstance(source, dict):
        return dict(source)
    trace = getattr(source, "trace", source)
    return trace.stats(n_ranks).link_bytes


def _circle(nodes, radius=1.0):
    k = len(nodes)
    return {
        n: (
            radius * math.cos(math.pi / 2 - 2 * math.pi * i / k),
            radius * math.sin(math.pi / 2 - 2 * math.pi * i / k),
        )
        for i, n in enumerate(nodes)
    }


def topology_layout(g):
    """Node positions suited to the topology: ``{node: (x, y)}``.

    >>> import collsim
    >>> topology_layout(collsim.topology.torus2d(2, 3))[4]
    (1.0, -1.0)
    """
    ranks = ranks_of(g)
    name = g.graph.get("name", "")
    if "shape" in g.graph:  # 2-D torus: rank r at row r // cols, column r % cols
        _, cols = g.graph["shape"]
        return {r: (float(r % cols), -float(r // cols)) for r in ranks}
    if "machine" in g.graph:
        return _hardware_layout(g, ranks)
    if "gpus_per_node" in g.graph:
        return _hierarchical_layout(g, ranks)
    switches = [n for n in g.nodes if n not in set(ranks)]
    if not switches and (
        name.startswith(("ring", "bidirectional_ring", "fully_connected")) or len(ranks) <= 2
    ):
        return _circle(ranks)
    if len(switches) == 1:
        pos = _circle(ranks)
        pos[switches[0]] = (0.0, 0.0)
        return pos
    return {n: tuple(map(float, p)) for n, p in nx.kamada_kawai_layout(g).items()}


def _hierarchical_layout(g, ranks):
    """Each machine's GPUs in a row under its node switch; the fabric switch below all."""
    per = g.graph["gpus_per_node"]
    pos = {}
    for r in ranks:
        n, local = divmod(r, per)
        pos[r] = (n * (per + 1) * 0.5 + local * 0.5, 0.0)
    for n in range(len(ranks) // per):
        pos[f"node{n}"] = (n * (per + 1) * 0.5 + (per - 1) * 0.25, 1.0)
    xs = [pos[r][0] for r in ranks]
    pos["fabric"] = ((min(xs) + max(xs)) / 2, -1.0)
    return pos


def _hardware_layout(g, ranks):
    """A hardware preset: each node's GPUs in a row, its NVSwitch (or PCIe switches under
    their CPU sockets) above them; the rail switches below, each spanning GPU j of every
    node, and the spine (or the one fabric switch) below those."""
    per = g.graph["gpus_per_node"]
    pos = {}
    for r in ranks:
        n, local = divmod(r, per)
        pos[r] = (n * (per + 1) * 0.5 + local * 0.5, 0.0)
    xs = [pos[r][0] for r in ranks]
    middle = (min(xs) + max(xs)) / 2
    levels = {"nvswitch": 1.0, "pcie": 0.8, "cpu": 1.6, "rail": -1.0, "fabric": -1.0, "spine": -2.0}
    for node, role in g.nodes(data="role"):
        if role is None:
            continue
        below = [pos[r][0] for r in g.successors(node) if g.nodes[r].get("kind") == "rank"]
        x = sum(below) / len(below) if below and role in ("nvswitch", "pcie") else middle
        if role == "rail":  # the rails side by side across the whole width, in order
            width = max(xs) - min(xs) or 1.0
            x = min(xs) + (g.nodes[node]["rail"] + 0.5) * width / _rails(g)
        pos[node] = (x, levels[role])
    for node, role in g.nodes(data="role"):
        if role == "cpu":  # over the PCIe switches it serves
            under = [pos[n][0] for n in g.successors(node) if g.nodes[n].get("role") == "pcie"]
            pos[node] = (sum(under) / len(under), levels["cpu"])
    return pos


def _rails(g):
    return sum(1 for _, role in g.nodes(data="role") if role == "rail")


def _bars(g, pos):
    """Switches drawn as bars that span the ranks they serve (hierarchical only):
    ``{switch: (left, right, y)}``; their links then run straight up and down."""
    if "gpus_per_node" not in g.graph:
        return {}
    bars = {}
    for node in g.nodes:
        if g.nodes[node].get("kind") != "switch" or g.nodes[node].get("role") in ("rail", "spine"):
            continue  # rails and the spine are boxes: their links fan out
        xs = [pos[r][0] for r in _spanned(g, node)]
        bars[node] = (min(xs) - 0.2, max(xs) + 0.2, pos[node][1])
    return bars


def _spanned(g, switch):
    """The nodes a switch's bar spans: on a hardware preset, a PCIe switch or NVSwitch
    spans its GPUs and a CPU socket its PCIe switches; otherwise every neighbour."""
    role = g.nodes[switch].get("role")
    neighbours = list(nx.all_neighbors(g, switch))
    wanted = {"nvswitch": "rank", "pcie": "rank", "cpu": "pcie"}.get(role)
    if wanted is None:
        return neighbours
    kind = "kind" if wanted == "rank" else "role"
    return [n for n in neighbours if g.nodes[n].get(kind) == wanted]


def _is_wrap(g, u, v):
    """A torus link that closes a row or a column (drawn as two stubs)."""
    if "shape" not in g.graph:
        return False
    rows, cols = g.graph["shape"]
    (ru, cu), (rv, cv) = divmod(u, cols), divmod(v, cols)
    return (ru == rv and abs(cu - cv) > 1) or (cu == cv and abs(ru - rv) > 1)


def _draw_nodes(ax, g, pos, bars, fontsize):
    """Ranks as discs, switches as dark boxes (bars spanning their GPUs when hierarchical)."""
    markers = {}
    for node, (x, y) in pos.items():
        if g.nodes[node].get("kind") == "rank":
            marker = Circle((x, y), NODE, gid=f"rank {node}", **RANK_LOOK)
            text, ink = f"r{node}", "black"
        else:
            left, right = bars.get(node, (x - 2.2 * NODE, x + 2.2 * NODE))[:2]
            corner = (left, y - NODE)
            marker = Rectangle(corner, right - left, 2 * NODE, gid=f"switch {node}", **SWITCH_LOOK)
            text, ink = (say("{node} switch", node=node) if node in bars else str(node)), "white"
        markers[node] = ax.add_patch(marker)
        ax.text(x, y, text, fontsize=fontsize, color=ink, zorder=6, fontweight="bold", **CENTRE)
    return markers


def _segments(g, pos, markers, bars, u, v):
    """How link u -> v is drawn: ``[(start, end, options), ...]`` for FancyArrowPatch."""
    if u in bars or v in bars:  # a GPU's link to a bar: straight up or down beside the GPU
        rank, bar = (v, u) if u in bars else (u, v)
        if u in bars and v in bars and _width(bars[u]) < _width(bars[v]):
            rank, bar = u, v  # two bars (a PCIe switch and the fabric): beside the narrower
        (x, y), bar_y = pos[rank], bars[bar][2]
        toward_bar = NODE if bar_y > y else -NODE
        x += -0.08 if u == rank else 0.08  # up-link and down-link side by side
        ends = [(x, y + toward_bar), (x, bar_y - toward_bar)]
        start, end = ends if u == rank else ends[::-1]
        return [(start, end, {"shrinkA": 0, "shrinkB": 0})]
    if _is_wrap(g, u, v):  # two stubs: out of u over the grid's edge, into v from the other
        (xu, yu), (xv, yv) = pos[u], pos[v]
        dx = 0.0 if xu == xv else math.copysign(0.42, xu - xv)
        dy = 0.0 if yu == yv else math.copysign(0.42, yu - yv)
        side = 0.06 if u < v else -0.06  # the two directions sit side by side
        ox, oy = (side, 0.0) if dx == 0 else (0.0, side)
        out = ((xu + ox, yu + oy), (xu + dx + ox, yu + dy + oy), {"shrinkA": 0, "shrinkB": 0})
        into = ((xv - dx + ox, yv - dy + oy), (xv + ox, yv + oy), {"shrinkA": 0, "shrinkB": 12})
        return [out, into]
    rad = 0.15 if g.has_edge(v, u) else 0.0  # both directions: two arcs apart
    bend = {"patchA": markers[u], "patchB": markers[v], "connectionstyle": f"arc3,rad={rad}"}
    return [(pos[u], pos[v], bend)]


def _width(bar):
    return bar[1] - bar[0]


def _draw_link(ax, segments, colour, width, gid):
    for i, (start, end, options) in enumerate(segments):
        name = gid if i == 0 else f"wrap {gid}"  # a link's second stub is not a second link
        look = {"color": colour, "lw": width, "gid": name, **ARROW, **options}
        ax.add_patch(FancyArrowPatch(start, end, **look))


@styled
def traffic_figure(topology, source, title=None):
    """The topology with every link drawn by the bytes it carried; returns a Figure.

    Parameters
    ----------
    topology : networkx.DiGraph
        The graph the run used (from :mod:`collsim.topology`).
    source : Trace, result with a ``.trace``, or dict
        The run: a :class:`~collsim.network.trace.Trace`, what ``cluster.run`` or a
        cluster collective returned, or ``{(u, v): bytes}``.
    title : str, optional
        Defaults to the topology's name and what the result was.
    """
    g = topology
    loads = link_bytes(source, len(ranks_of(g)))
    pos = topology_layout(g)
    largest = max(loads.values(), default=0)
    divisor, unit = byte_unit(largest)
    cmap = colormaps[CMAP]
    norm = Normalize(0, max(largest / divisor, 1e-12))
    wide = "gpus_per_node" in g.graph
    xs, ys = [p[0] for p in pos.values()], [p[1] for p in pos.values()]
    pad = 0.42 if wide else 0.55 if "shape" in g.graph else 0.3
    extent = (max(xs) - min(xs) + 2 * pad, max(ys) - min(ys) + 2 * pad)
    width = 11.0 if wide else 8.0
    height = min(9.0, max(4.5, width * extent[1] / extent[0] + 1.4))
    fig = Figure(figsize=current().size((width + 1.6, height)))  # slides: 16:9
    height = fig.get_figheight()  # the title's room is in inches of the figure drawn
    top = 1 - 1.0 / height  # room for the two title lines
    ax = fig.add_axes((0.01, 0.02, 0.86, top - 0.03))
    ax.set_aspect("equal")
    ax.axis("off")
    n = g.number_of_nodes()
    fontsize = "medium" if n <= 12 else "small" if n <= 24 else "x-small"
    bars = _bars(g, pos)
    markers = _draw_nodes(ax, g, pos, bars, fontsize)
    for u, v in g.edges:
        share = loads.get((u, v), 0) / largest if largest else 0.0
        colour, lw = (cmap(0.15 + 0.85 * share), 1.0 + 3.5 * share) if share else (IDLE, 0.7)
        _draw_link(ax, _segments(g, pos, markers, bars, u, v), colour, lw, f"link {u}->{v}")
    if wide:
        _draw_machines(ax, g, pos, fontsize)
    ax.set_xlim(min(xs) - pad, max(xs) + pad)
    ax.set_ylim(min(ys) - pad, max(ys) + pad + (0.3 if wide else 0.0))
    cax = fig.add_axes((0.89, 0.15, 0.018, top - 0.3))
    bar = fig.colorbar(ScalarMappable(norm, cmap=_shifted(cmap)), cax=cax)
    bar.set_label(say("bytes carried ({unit})", unit=unit), fontsize="medium")
    head = title or say("link load: {what}", what=_what(source) + g.graph.get("name", "topology"))
    fig.suptitle(head, fontsize="xx-large", fontweight="bold", y=1 - 0.12 / height, wrap=True)
    if loads:
        busiest = _busiest_text(busiest_links(loads), g.number_of_edges(), largest / divisor, unit)
        total = format_size(sum(loads.values()))
        note = say(
            "{busiest}  ·  all links together: {total}  ·  grey = unused",
            busiest=busiest,
            total=total,
        )
        fig.text(0.5, 1 - 0.55 / height, note, fontsize="medium", **CENTRE, wrap=True)
    return fig


def busiest_links(loads):
    """The links that carried the most bytes, in the order of ``loads``: one, or all that tie.

    >>> busiest_links({(0, 1): 5, (1, 2): 5, (2, 0): 3})
    [(0, 1), (1, 2)]
    """
    largest = max(loads.values(), default=0)
    if not largest:
        return []  # nothing moved: no link is the busiest
    return [link for link, carried in loads.items() if carried == largest]


def _busiest_text(ties, links, amount, unit):
    """Names the busiest link only when one link is; a tie is said as a tie."""
    load = f"{amount:.3g} {unit}"
    if not ties:
        return say("no link carried any bytes")
    if len(ties) == 1:
        ((u, v),) = ties
        return say("busiest link {link}: {load}", link=f"{_name(u)} → {_name(v)}", load=load)
    if len(ties) == links:
        return say("all {links} links tie at {load} each", links=links, load=load)
    shown = ", ".join(f"{_name(u)} → {_name(v)}" for u, v in ties[:3])
    more = ", …" if len(ties) > 3 else ""
    return say(
        "{n} links tie as busiest at {load} each ({shown})",
        n=len(ties),
        load=load,
        shown=shown + more,
    )


def _shifted(cmap):
    """The colour bar uses the same 15-100 % stretch of the colormap as the links."""
    from matplotlib.colors import ListedColormap

    return ListedColormap(cmap([0.15 + 0.85 * i / 255 for i in range(256)]))


def _what(source):
    """``"ring all-reduce of 4 MiB on "`` for a collective's result, else nothing."""
    if not hasattr(source, "collective"):
        return ""
    name = f"{source.algorithm} {source.collective}".replace("_", "-")
    return say("{name} of {size} on ", name=name, size=format_size(source.size_bytes))


def _name(node):
    return f"r{node}" if isinstance(node, int) else str(node)


def _draw_machines(ax, g, pos, fontsize):
    per = g.graph["gpus_per_node"]
    for n in range(len(ranks_of(g)) // per):
        xs = [pos[n * per + i][0] for i in range(per)]
        look = {"boxstyle": "round,pad=0.04", "facecolor": "#EEF3FA", "edgecolor": "#8DA9CF"}
        ax.add_patch(
            FancyBboxPatch((min(xs) - 0.3, -0.3), max(xs) - min(xs) + 0.6, 1.6, zorder=0, **look)
        )
        ax.text(
            min(xs) - 0.25,
            1.4,
            say("machine {n}", n=n),
            fontsize="medium",
            color="#3A5F95",
            va="bottom",
        )
