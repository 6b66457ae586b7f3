"""An MoE step on the clock: each rank's compute and its dispatch and combine messages.

One row per rank, two lanes: the compute spans on top (router, experts, forward and
backward, from the trace's :class:`~collsim.parallel.modules.LayerPass` records) and the
messages it sent below, coloured by the exchange they belong to (the forward dispatch and
combine, and the backward's two, read from each transfer's
:class:`~collsim.collectives.all_to_allv.RaggedTransfer` record).  The rank whose experts
computed longest is named: the combine waits for it, so its compute sits on the critical
path between the dispatch and the combine, and every rank's forward ends when its last
combine message arrives (dashed).

Examples
--------
>>> from collsim.parallel.experts.step import expert_parallel_step
>>> from collsim.nn import MoE, RouterConfig
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> moe = MoE.init(4, 8, RouterConfig(experts=4, top_k=2), rng)
>>> run = expert_parallel_step(moe, rng.normal(size=(8, 4)), rng.normal(size=(8, 4)), ep=2)
>>> fig = moe_timeline_figure(run.trace, run.loads)
>>> fig.axes[0].get_yticklabels()[0].get_text()
'rank 0'
"""

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..collectives.all_to_allv import RaggedTransfer
from ..parallel.experts.step import FORWARD_CALLS
from ..parallel.modules import LayerPass
from .style import PALETTE, current, say, styled, themed

__all__ = ["moe_timeline_figure", "EXCHANGES", "exchange_of"]

# what a message belongs to -> (legend words, colour); Okabe-Ito, apart for every reader
EXCHANGES = {
    "dispatch": ("dispatch (tokens out)", PALETTE[1]),
    "combine": ("combine (outputs back)", PALETTE[2]),
    "dispatch-grad": ("backward: output gradients out", PALETTE[4]),
    "combine-grad": ("backward: input gradients back", PALETTE[5]),
    "other": ("counts, gradient all-reduce", "#BBBBBB"),  # a grey that stays apart
}
COMPUTE = {
    "forward": ("compute: forward", PALETTE[0]),
    "backward": ("compute: backward", PALETTE[3]),
}


def exchange_of(transfer):
    """Which of :data:`EXCHANGES` a transfer belongs to, by its record's call.

    >>> from collsim.collectives.all_to_allv import RowMove
    >>> move = RowMove(0, 1, range(0, 1), range(0, 1))
    >>> exchange_of(type("T", (), {"meta": RaggedTransfer("combine-grad-intra", 1, move)}))
    'combine-grad'
    """
    meta = transfer.meta
    if not isinstance(meta, RaggedTransfer):
        return "other"
    if meta.call in FORWARD_CALLS:
        return FORWARD_CALLS[meta.call]
    base = meta.call.removesuffix("-inter").removesuffix("-intra")
    return base if base in EXCHANGES else "other"


@styled
def moe_timeline_figure(trace, loads, title=None):
    """Ranks × simulated time (µs) of one MoE step (``loads``: the run's ``RankLoad``s)."""
    ranks = len(loads)
    end = max([c.end for c in trace.computes] + [t.end for t in trace.transfers] + [1e-12])
    fig = Figure(figsize=current().size((12.0, 1.6 + 0.9 * ranks)), layout="constrained")
    ax = fig.subplots()
    us = 1e6
    for c in trace.computes:
        if isinstance(c.meta, LayerPass):
            colour = COMPUTE["forward" if c.meta.kind == "forward" else "backward"][1]
            ax.broken_barh(
                [(c.start * us, (c.end - c.start) * us)],
                (c.rank - 0.42, 0.4),
                facecolor=colour,
                edgecolor=themed("#000000"),
                linewidth=0.3,
            )
    for t in trace.transfers:
        colour = EXCHANGES[exchange_of(t)][1]
        ax.broken_barh(
            [(t.start * us, (t.end - t.start) * us)],
            (t.src + 0.02, 0.4),
            facecolor=colour,
            alpha=0.85,
            linewidth=0,
        )
    combine_end = [t.end for t in trace.transfers if exchange_of(t) == "combine"]
    if combine_end:
        ax.axvline(max(combine_end) * us, color=themed("#000000"), linestyle="--", linewidth=1.2)
    straggler = max(loads, key=lambda load: (load.expert_compute, -load.rank)).rank
    ax.set_yticks(range(ranks), [say("rank {rank}", rank=r) for r in range(ranks)])
    ax.get_yticklabels()[straggler].set_fontweight("bold")
    ax.set_ylim(ranks - 0.5, -0.5)
    ax.set_xlim(0, end * us * 1.01)
    ax.set_xlabel(say("simulated time ({unit})", unit="µs"))
    ax.grid(axis="x", alpha=0.3)
    shown = {exchange_of(t) for t in trace.transfers}
    handles = [Patch(facecolor=c, label=say(w)) for w, c in COMPUTE.values()]
    handles += [Patch(facecolor=c, label=say(w)) for k, (w, c) in EXCHANGES.items() if k in shown]
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.16 - 0.04 * (ranks < 4)),
        ncol=3,
        fontsize="small",
        frameon=False,
    )
    ax.set_title(
        title
        or say(
            "MoE step: rank {rank}'s experts computed longest; the combine waits for them "
            "(dashed: the last combine message)",
            rank=straggler,
        ),
        fontsize="large",
    )
    return fig
