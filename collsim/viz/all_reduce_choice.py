"""Which all-reduce is fastest for a small message: one-shot, two-shot, the ring or NVLS,
at each message size and number of GPUs of one node, by the closed forms on the machine's
NVLink hop (:func:`collsim.collectives.small_messages.choice_grid`).

Each cell is coloured by the fastest algorithm and says how many times slower the ring
(2(K-1) steps) would be there; a dashed line in each row marks where vLLM's custom
all-reduce changes its choice (:func:`~collsim.collectives.small_messages.vllm_choice`),
so the model's crossover and vLLM's thresholds are read side by side.

Examples
--------
>>> from collsim.collectives.small_messages import choice_grid
>>> fig = all_reduce_choice_figure(choice_grid("dgx-h100", ranks=(2, 8), sizes=(512, 2**26)))
>>> [t.get_text() for t in fig.axes[0].texts]  # 2 GPUs, then 8; 512 B, then 64 MiB
['one-shot\\nring ×2.0', 'one-shot\\nring ×1.0', 'one-shot\\nring ×13.7', 'NVLS\\nring ×1.2']
"""

from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from ..collectives.small_messages import vllm_choice
from ..errors import ConfigError
from ..units import format_size
from .ink import ink_on
from .style import PALETTE, current, say, styled, themed

__all__ = ["all_reduce_choice_figure", "ALGORITHM_COLOURS", "ALGORITHM_NAMES"]

# Okabe-Ito, apart for colour-blind readers (tests/test_viz_style.py)
ALGORITHM_COLOURS = {
    "one_shot": PALETTE[0],
    "two_shot": PALETTE[1],
    "ring": PALETTE[2],
    "nvls": PALETTE[4],
}
ALGORITHM_NAMES = {"one_shot": "one-shot", "two_shot": "two-shot", "ring": "ring", "nvls": "NVLS"}


@styled
def all_reduce_choice_figure(rows, title=None):
    """The fastest all-reduce per (GPUs, size) of ``rows`` (from ``choice_grid``); returns a
    Figure.  Rows are group sizes (top: fewest GPUs), columns message sizes."""
    if not rows or not rows[0].cells:
        raise ConfigError("all_reduce_choice_figure needs at least one group size and size")
    sizes = [cell.size for cell in rows[0].cells]
    fig = Figure(
        figsize=current().size((max(7.0, 1.05 * len(sizes) + 1.5), 1.9 + 0.62 * len(rows))),
        layout="constrained",
    )
    ax = fig.subplots()
    seen = []
    for y, row in enumerate(rows):
        for x, cell in enumerate(row.cells):
            colour = ALGORITHM_COLOURS[cell.fastest]
            seen += [cell.fastest] if cell.fastest not in seen else []
            ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=colour, edgecolor="white"))
            slower = say("ring ×{ratio}", ratio=f"{cell.ring / cell.seconds:.1f}")
            label = say(ALGORITHM_NAMES[cell.fastest])
            ax.text(
                x,
                y,
                f"{label}\n{slower}",
                ha="center",
                va="center",
                fontsize="x-small",
                color=ink_on(to_rgb(colour)),
            )
        _vllm_marks(ax, row.ranks, sizes, y)
    ax.set_xlim(-0.5, len(sizes) - 0.5)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xticks(range(len(sizes)), [format_size(round(s)) for s in sizes])
    ax.set_yticks(range(len(rows)), [str(row.ranks) for row in rows])
    ax.set_xlabel(say("message size S (bytes a GPU)"))
    ax.set_ylabel(say("GPUs"))
    handles = [Patch(color=ALGORITHM_COLOURS[a], label=say(ALGORITHM_NAMES[a])) for a in seen]
    handles.append(
        Patch(
            facecolor="none",
            edgecolor=themed("#000000"),
            linestyle="--",
            label=say("vLLM changes its choice"),
        )
    )
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles))
    fig.suptitle(
        title
        or say(
            "Fastest all-reduce on one {machine} node (closed forms, α–β)", machine=rows[0].machine
        )
    )
    return fig


def _vllm_marks(ax, ranks, sizes, y):
    """Dashed boundaries in row ``y`` where vLLM's choice changes, between two sizes' cells."""
    for x in vllm_boundaries(ranks, sizes):
        ax.plot([x + 0.5] * 2, [y - 0.5, y + 0.5], "--", linewidth=2.5, color=themed("#000000"))


def vllm_boundaries(ranks, sizes):
    """The cells x after which vLLM's choice changes (one-shot, two-shot, NCCL)."""
    choices = [vllm_choice(ranks, s) for s in sizes]
    return [x for x, (a, b) in enumerate(zip(choices, choices[1:])) if a != b]
