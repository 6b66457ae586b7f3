"""The choice map: which algorithm and protocol wins at each message size and GPU count,
one panel per chooser (NCCL's cost model, collsim's simulation) stacked, as a grid of
coloured cells with the pair written in each.

Examples
--------
>>> panel = ChoicePanel("NCCL's model", ((8, ("ring/ll", "ring/simple")),))
>>> fig = choice_map_figure([panel], sizes=[8, 2**30], title="AllReduce on dgx-h100")
>>> [text.get_text() for text in fig.axes[0].texts]
['ring\\nLL', 'ring\\nSimple']
"""

from typing import NamedTuple

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..units import format_size

__all__ = ["ChoicePanel", "choice_map_figure"]

# one colour per algorithm (Okabe-Ito, readable by colour-blind viewers); the protocol is
# the shade: LL light, LL128 middle, Simple full
ALGORITHM_COLOURS = {
    "ring": "#0072B2",
    "tree": "#E69F00",
    "nvls": "#009E73",
    "nvls_tree": "#CC79A7",
    "pat": "#D55E00",
    "collnet_direct": "#56B4E9",
    "collnet_chain": "#F0E442",
}
PROTOCOL_SHADE = {"ll": 0.45, "ll128": 0.7, "simple": 1.0}
PROTOCOL_NAMES = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}


class ChoicePanel(NamedTuple):
    """One chooser's map: ``rows`` of ``(GPUs, labels)``, a label per size such as
    ``"ring/ll"`` (NCCL's names)."""

    title: str
    rows: tuple


def _colour(label):
    from matplotlib.colors import to_rgb

    algorithm, protocol = label.split("/")
    base = to_rgb(ALGORITHM_COLOURS.get(algorithm, "#999999"))
    shade = PROTOCOL_SHADE.get(protocol, 1.0)
    return tuple(1 - shade * (1 - c) for c in base)  # mixed with white: lighter = less


def choice_map_figure(panels, sizes, title):
    """A Figure of one grid per panel: sizes across, GPU counts down, each cell coloured by
    its algorithm (the protocol lighter or darker) and labelled with the pair."""
    # panels stacked, so two choosers line up size by size and the page stays landscape
    height = 1.4 + sum(1.3 + 0.55 * len(panel.rows) for panel in panels)
    fig = Figure(figsize=(max(6.0, 0.75 * len(sizes)), height), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    seen = {}
    for ax, panel in zip(axes, panels):
        for y, (_gpus, labels) in enumerate(panel.rows):
            for x, label in enumerate(labels):
                ax.add_patch(_cell(x, y, _colour(label)))
                algorithm, protocol = label.split("/")
                seen.setdefault(label, _colour(label))
                ax.text(
                    x,
                    y,
                    f"{algorithm}\n{PROTOCOL_NAMES.get(protocol, protocol)}",
                    ha="center",
                    va="center",
                    fontsize="x-small",
                )
        ax.set_xlim(-0.5, len(sizes) - 0.5)
        ax.set_ylim(len(panel.rows) - 0.5, -0.5)
        ax.set_xticks(range(len(sizes)), [format_size(s) for s in sizes], rotation=45, ha="right")
        ax.set_yticks(range(len(panel.rows)), [str(g) for g, _ in panel.rows])
        ax.set_xlabel("message size S")
        ax.set_ylabel("GPUs")
        ax.set_title(panel.title)
    handles = [Patch(color=c, label=label) for label, c in sorted(seen.items())]
    width = fig.get_figwidth()  # a legend entry takes about 1.8 inches: no wider than the page
    columns = max(1, min(len(handles), int(width // 1.8)))
    fig.legend(handles=handles, loc="outside lower center", ncols=columns)
    fig.suptitle(title)
    return fig


def _cell(x, y, colour):
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=colour, edgecolor="white", linewidth=1)
