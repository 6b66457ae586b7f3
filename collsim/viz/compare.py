"""Two algorithms of one collective side by side, at the same scale and on the same clock.

Each panel draws its algorithm in its own shape (the ring on its circle, a tree as a
tree: :mod:`collsim.viz.ring`, :mod:`collsim.viz.shapes`) at the same step number, so
"step 3" of each can be compared at a glance; an algorithm that has finished shows its
result.  Under them, one time axis for both: each algorithm's steps as spans of simulated
time (from the two runs' traces), the current step outlined, so how far each has got and
how long each step takes read on one scale.

Examples
--------
>>> import collsim
>>> cluster = collsim.Cluster(collsim.topology.switch(4))
>>> ring = cluster.all_reduce(count=256, dtype="float32", algorithm="ring")
>>> tree = cluster.all_reduce(count=256, dtype="float32", algorithm="tree")
>>> fig = compare_figure(ring, tree, step=5)
>>> [ax.get_title() for ax in fig.axes if ax.get_title()][:2]
['ring: all-gather 2/3  (step 5 of 6)', 'tree: done in 4 steps']
"""

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..errors import ConfigError
from ..units import format_size
from .animation import Animation
from .cells import draw_cell_key
from .limits import check_ring_ranks
from .ring import draw_circle, move_handles, ring_frames
from .shapes import SHAPES, check_shape, draw_shape
from .style import say
from .times import time_unit

__all__ = ["compare_figure", "compare_movie", "check_pair"]

PANELS = ((0.01, 0.3, 0.41, 0.56), (0.43, 0.3, 0.41, 0.56))  # figure fraction, per algorithm
CLOCK = (0.08, 0.11, 0.76, 0.13)  # the shared time axis (room below for its label in any style)


def check_pair(first, second):
    """Refuse two results that cannot be compared: another collective, size or group."""
    check_ring_ranks(max(first.schedule.ranks, second.schedule.ranks))
    if first.collective != second.collective:
        raise ConfigError(
            f"compare {first.algorithm} and {second.algorithm}: one is a "
            f"{first.collective}, the other a {second.collective}; compare one collective"
        )
    if (first.group.size, first.size_bytes) != (second.group.size, second.size_bytes):
        raise ConfigError(
            f"compare {first.algorithm} on {first.group.size} ranks, "
            f"{format_size(first.size_bytes)} with {second.algorithm} on {second.group.size} "
            f"ranks, {format_size(second.size_bytes)}: run both on the same group and size"
        )
    if first.algorithm == second.algorithm:
        raise ConfigError(f"compare {first.algorithm} with itself: name two algorithms")


def _spans(frames):
    """(start, end) of every step's transfers, in seconds."""
    return [(min(m[2] for m in f.moves), max(m[3] for m in f.moves)) for f in frames[1:] if f.moves]


def _panel(fig, rect, result, frame, done, layout, cells):
    name = result.algorithm.replace("_", "-")
    steps = result.schedule.n_steps
    done_in = say("{name}: done in {steps} steps", name=name, steps=steps)
    title = done_in if done else f"{name}: {frame.title}"
    if result.algorithm in SHAPES:
        lanes = check_shape(result, None, cells)[:1]  # one lane: panels keep one scale
        key = draw_shape(fig, rect, result, frame, lanes, layout, cells)
        fig.axes[-1].set_title(title)
    else:
        ax = fig.add_axes(rect)
        key = draw_circle(ax, result, frame, cells)
        ax.set_title(title)
    return key


def _clock(fig, results, spans, number):
    ax = fig.add_axes(CLOCK)
    end = max((s[-1][1] for s in spans if s), default=1e-9)
    divisor, unit = time_unit(end)
    for row, (result, steps) in enumerate(zip(results, spans)):
        for index, (start, stop) in enumerate(steps):
            current = index + 1 == number
            box = Rectangle(
                (start / divisor, row - 0.35),
                max(stop - start, 0) / divisor,
                0.7,
                fc="C0" if row == 0 else "C1",
                alpha=1.0 if current else 0.35,
                ec="black" if current else "white",
                lw=2 if current else 0.5,
                gid=f"step {result.algorithm} {index + 1}",
            )
            ax.add_patch(box)
    ax.set_yticks([0, 1], [r.algorithm.replace("_", "-") for r in results])
    ax.set_ylim(1.6, -0.6)
    ax.set_xlim(0, end / divisor)
    ax.set_xlabel(
        say("simulated time ({unit}): each step a span; the current one outlined", unit=unit)
    )
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _draw(fig, results, frames, number, layouts, cells):
    keys = []
    for rect, result, steps, layout in zip(PANELS, results, frames, layouts):
        done = number >= len(steps)
        frame = steps[min(number, len(steps) - 1)]
        keys.append(_panel(fig, rect, result, frame, done, layout, cells))
    _clock(fig, results, [_spans(f) for f in frames], number)
    first = results[0]
    what = first.collective.replace("_", "-")
    size = format_size(first.size_bytes)
    head = say("step {step}", step=number) if number else say("initial state")
    k = first.group.size
    fig.suptitle(
        say("{what} of {size} on {k} ranks: {head}", what=what, size=size, k=k, head=head),
        y=0.975,
        fontsize="xx-large",
        fontweight="bold",
    )
    draw_cell_key(fig, keys[0], (0.87, 0.4, 0.02, 0.45))
    # over the colour key, clear of the clock's axis below the panels
    fig.legend(
        handles=move_handles(), loc="lower right", frameon=False, bbox_to_anchor=(0.995, 0.86)
    )


def _figure():
    return Figure(figsize=(13.33, 7.5))  # 16:9


def compare_figure(first, second, step=1, layouts=(None, None), cells="count"):
    """Step ``step`` (from 1; 0 the initial state, up to the longer one's last step) of
    two :class:`~collsim.collectives.api.CollectiveResult` side by side; ``layouts`` are
    their groups' node layouts (hierarchical, nccl_ring)."""
    check_pair(first, second)
    results = (first, second)
    frames = [ring_frames(r) for r in results]
    last = max(len(f) for f in frames) - 1
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= last:
        raise ConfigError(
            f"step {step!r}: {first.algorithm} takes {len(frames[0]) - 1} steps and "
            f"{second.algorithm} {len(frames[1]) - 1}; choose 0..{last}"
        )
    fig = _figure()
    _draw(fig, results, frames, step, layouts, cells)
    return fig


def compare_movie(first, second, layouts=(None, None), cells="count"):
    """Both algorithms step by step on one clock, as an
    :class:`~collsim.viz.animation.Animation`: as many frames as the longer one has steps,
    plus the initial state."""
    check_pair(first, second)
    results = (first, second)
    frames = [ring_frames(r) for r in results]
    fig = _figure()
    count = max(len(f) for f in frames)

    def show(index):
        fig.clear()
        _draw(fig, results, frames, index, layouts, cells)

    names = " vs ".join(r.algorithm.replace("_", "-") for r in results)
    captions = [say("initial state")]
    for number in range(1, count):
        parts = []
        for result, steps in zip(results, frames):
            name = result.algorithm.replace("_", "-")
            done = say("{name} done", name=name)
            parts.append(f"{name} {steps[number].title}" if number < len(steps) else done)
        captions.append(say("step {step}: {what}", step=number, what="; ".join(parts)))
    return Animation(fig, tuple(captions), show, say("{names}, step by step", names=names))
