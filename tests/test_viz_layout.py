"""Every `collsim viz` kind, at its defaults, in every style and theme, and on two DGX
machines, draws no text outside the figure and no text on top of other text (issue 28,
items 1 and 6).

The check records the box of every text matplotlib actually draws (titles, labels, tick
labels, legends, notes, numbers on bars and cells) while the figure renders, as a reader
would see them, and compares the boxes: one that leaves the canvas is clipped, two that
intersect are unreadable; a label faint on its box (the dark theme's white ink on a white
box) is too.  About 35 s of CPU for its 52 renders (`pytest tests/test_viz_layout.py`).
"""

import itertools

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgba
from matplotlib.text import Text

from collsim import cli
from collsim.cli import viz as _registers_the_kinds  # noqa: F401
from collsim.cli.viz_kinds import KINDS
from collsim.viz.ink import contrast

TOLERANCE_PX = 1.0  # anti-aliasing may touch the edge or a neighbour by a pixel

# the small flags a kind needs to stay quick; none changes what the picture is made of
DEFAULT_ARGS = {kind: [] for kind in KINDS}
# two DGX machines (16 GPUs, 8 rails), where the issue found overlapping region labels,
# an annotation sticking out of its panel and 64 utilization rows
DGX2 = ["--topology", "dgx-a100", "--nodes", "2"]
PRESET_ARGS = {
    "ring": ["all-reduce", *DGX2],
    "traffic": ["all-reduce", *DGX2],
    "utilization": ["all-reduce", *DGX2],
    "sweep": ["all-reduce", *DGX2],
}


def drawn_texts(fig, monkeypatch):
    """(text, box in pixels) of every non-empty text drawn when ``fig`` renders."""
    seen = []
    draw = Text.draw

    def record(text, renderer):
        draw(text, renderer)
        if text.get_visible() and text.get_text().strip() and text.get_alpha() != 0:
            seen.append((text, text.get_window_extent(renderer)))

    monkeypatch.setattr(Text, "draw", record)
    FigureCanvasAgg(fig).draw()
    monkeypatch.setattr(Text, "draw", draw)
    return seen


MIN_CONTRAST = 3.0  # WCAG 2's floor for large text; below it a label fades into its box


def _fill_under(text, box):
    """The face colour of the topmost filled shape under the middle of ``text`` (drawn
    before it), or None: what a label in a drawing is read against."""
    centre = ((box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2)
    under = [
        p
        for p in text.axes.patches
        if p.get_visible()
        and p.get_fill()
        and p.get_zorder() < text.get_zorder()
        and p.contains_point(centre)
    ]
    if not under:
        return None
    return max(under, key=lambda p: p.get_zorder()).get_facecolor()


def layout_problems(fig, monkeypatch):
    """Report lines for every text outside the figure, every pair that overlaps, and every
    text on a box (a label's bbox) or on the figure's own background that does not contrast
    with it (white ink on a white box in the dark theme)."""
    width, height = fig.canvas.get_width_height()
    texts = drawn_texts(fig, monkeypatch)
    problems = []
    for text, box in texts:
        patch = text.get_bbox_patch()
        ground = patch.get_facecolor() if patch is not None else None
        if ground is None and text.axes is None and text.get_figure(root=False) is fig:
            ground = fig.get_facecolor()  # a title or note straight on the figure
        if ground is None and text.axes is not None:
            ground = _fill_under(text, box)  # a rank's name on its disc, a node's on its box
        if ground is not None and ground[3] >= 0.5:
            ratio = contrast(to_rgba(text.get_color()), ground)
            if ratio < MIN_CONTRAST:
                problems.append(f"faint: {text.get_text()!r} at contrast {ratio:.1f}")
    for text, box in texts:
        if (
            box.x0 < -TOLERANCE_PX
            or box.y0 < -TOLERANCE_PX
            or box.x1 > width + TOLERANCE_PX
            or box.y1 > height + TOLERANCE_PX
        ):
            problems.append(f"clipped: {text.get_text()!r} at {box.bounds} in {width}x{height}")
    for (a, box_a), (b, box_b) in itertools.combinations(texts, 2):
        shrunk_a = box_a.expanded(1, 1).padded(-TOLERANCE_PX)
        if shrunk_a.overlaps(box_b.padded(-TOLERANCE_PX)):
            problems.append(f"overlap: {a.get_text()!r} and {b.get_text()!r}")
    return problems


def draw(kind, argv, monkeypatch, tmp_path):
    """The figure ``collsim viz KIND argv`` saves, taken at the save (in its dpi), as the
    CLI draws it."""
    from collsim.viz import output

    saved = []

    def keep(fig, out, fmt, dpi=150, **kwargs):
        fig.set_dpi(dpi)
        saved.append(fig)

    monkeypatch.setattr(output, "save_figure", keep)
    assert cli.main(["viz", kind, *argv, "--out", str(tmp_path / "out.png")]) == 0
    (fig,) = saved
    return fig


LOOKS = [("paper", "light"), ("slides", "light"), ("slides", "dark"), ("paper", "dark")]


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("style_name,theme", LOOKS)
def test_every_kind_draws_its_text_inside_and_apart(kind, style_name, theme, monkeypatch, tmp_path):
    argv = [*DEFAULT_ARGS[kind], "--style", style_name, "--theme", theme]
    fig = draw(kind, argv, monkeypatch, tmp_path)
    assert layout_problems(fig, monkeypatch) == []


@pytest.mark.parametrize("kind", sorted(PRESET_ARGS))
@pytest.mark.parametrize("style_name", ["paper", "slides"])
def test_two_dgx_machines_draw_their_text_inside_and_apart(kind, style_name, monkeypatch, tmp_path):
    fig = draw(kind, [*PRESET_ARGS[kind], "--style", style_name], monkeypatch, tmp_path)
    assert layout_problems(fig, monkeypatch) == []


# the pictures the issue found broken; each failed this check before the fix
FOUND_BROKEN = {
    "70B subtitle clipped at the right": ["memory", "--model", "llama2-70b", "--world-size", "64"],
    "sweep region labels overlap": ["sweep", "--topology", "dgx-h100", "--nodes", "2"],
    "step names crowd the top axis": [
        "utilization",
        "--topology",
        "dgx-a100",
        "--nodes",
        "4",
        "--all-links",
    ],
}


@pytest.mark.parametrize("case", sorted(FOUND_BROKEN))
def test_the_pictures_the_issue_found_broken_now_read(case, monkeypatch, tmp_path):
    kind, *argv = FOUND_BROKEN[case]
    assert layout_problems(draw(kind, argv, monkeypatch, tmp_path), monkeypatch) == []


def test_the_checker_finds_clipped_and_overlapping_text(monkeypatch):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4, 3))
    fig.text(0.5, 0.5, "one label", fontsize=12)
    fig.text(0.52, 0.5, "another label", fontsize=12)  # on top of the first
    fig.text(0.95, 0.1, "past the right edge", fontsize=12)
    problems = layout_problems(fig, monkeypatch)
    assert any(p.startswith("overlap: 'one label' and 'another label'") for p in problems)
    assert any(p.startswith("clipped: 'past the right edge'") for p in problems)


MIN_NAME_PX = 18  # a name's letters at 1080 lines, readable from the back of a lecture hall


@pytest.mark.parametrize("style_name", ["paper", "slides"])
def test_strategies_names_every_strategy_in_full_and_readable(style_name, monkeypatch, tmp_path):
    """Every strategy of the default table is named, none hidden by tick thinning (a
    vertical bar chart blanked every other name), and the names stay inside and apart."""
    from collsim.verify.strategies import strategy_table

    names = [row.to_dict()["name"] for row in strategy_table()]
    fig = draw("strategies", ["--style", style_name], monkeypatch, tmp_path)
    assert layout_problems(fig, monkeypatch) == []
    drawn = drawn_texts(fig, monkeypatch)
    labels = {name: [t for t, _ in drawn if t.get_text().split()[0] == name] for name in names}
    assert all(labels.values()), {name: found for name, found in labels.items() if not found}
    if style_name == "slides":
        px = {t.get_size() * fig.dpi / 72 for found in labels.values() for t in found}
        assert min(px) >= MIN_NAME_PX, px


# every algorithm drawn in its own shape (collsim.viz.shapes), on the machines it runs on
NVLS_TREE = ["--algorithm", "nvls_tree", "--topology", "dgx-h100", "--nodes", "2"]
SHAPED = {
    "tree": ["--algorithm", "tree", "--topology", "switch", "--step", "2"],
    "double_tree": ["--algorithm", "double_tree", "--topology", "dgx-a100", "--nodes", "2"],
    "halving_doubling": ["--algorithm", "hd", "--topology", "switch", "--step", "1"],
    "nvls": ["--algorithm", "nvls", "--topology", "dgx-h100", "--step", "1"],
    "nvls_tree": NVLS_TREE,
    "nvls_tree-reduce": [*NVLS_TREE, "--step", "1"],  # in-switch: 16 labelled legs a node
    "nvls_tree-multicast": [*NVLS_TREE, "--step", "4"],
    "pat": ["all-gather", "--algorithm", "pat", "--topology", "switch", "--step", "3"],
    "nccl_ring": ["--algorithm", "nccl_ring", "--topology", "dgx-a100", "--nodes", "2"],
}


@pytest.mark.parametrize("algorithm", sorted(SHAPED))
@pytest.mark.parametrize("style_name,theme", [("slides", "dark"), ("paper", "light")])
def test_every_shaped_drawing_reads_in_both_themes(
    algorithm, style_name, theme, monkeypatch, tmp_path
):
    argv = [*SHAPED[algorithm], "--style", style_name, "--theme", theme]
    fig = draw("ring", argv, monkeypatch, tmp_path)
    assert layout_problems(fig, monkeypatch) == []
