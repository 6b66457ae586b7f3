"""``collsim viz compare`` (two algorithms side by side, one scale, one step clock) and
``--cells sources`` (each chunk striped by the ranks whose inputs it holds)."""

import pytest
from matplotlib.colors import to_rgba

import collsim
from collsim.cli import main
from collsim.viz.cells import rank_colours
from collsim.viz.compare import compare_figure, compare_movie
from collsim.viz.ring import ring_figure

T = collsim.topology


def results(*algorithms, k=8):
    cluster = collsim.Cluster(T.switch(k))
    return [cluster.all_reduce(count=64 * k, dtype="float32", algorithm=a) for a in algorithms]


def test_compare_draws_both_at_the_same_step_on_one_time_axis():
    ring, tree = results("ring", "tree")
    fig = compare_figure(ring, tree, step=2)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["ring: reduce-scatter 2/7  (step 2 of 14)", "tree: reduce 2/3  (step 2 of 6)"]
    clock = next(ax for ax in fig.axes if ax.get_xlabel().startswith("simulated time"))
    spans = {p.get_gid(): p for p in clock.patches}
    assert len(spans) == 14 + 6  # every step of both, on one axis
    outlined = sorted(g for g, p in spans.items() if p.get_linewidth() == 2)
    assert outlined == ["step ring 2", "step tree 2"]
    # the spans are the runs' own step times: the tree's step 2 starts when its step 1 ends
    tree_steps = tree.steps()
    start = spans["step tree 2"].get_x()
    assert start > 0 and start < spans["step tree 3"].get_x()
    assert len(list(tree_steps)) == 6


def test_an_algorithm_that_has_finished_says_so_while_the_other_goes_on():
    ring, tree = results("ring", "tree")
    fig = compare_figure(ring, tree, step=10)
    assert "tree: done in 6 steps" in [ax.get_title() for ax in fig.axes]
    movie = compare_movie(ring, tree)
    assert len(movie) == 15  # the longer one's 14 steps and the initial state
    assert movie.captions[10].endswith("tree done")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["ring", "ring"], "the same algorithm twice"),
        (["ring", "tree", "--step", "20"], "choose 0..14"),
        (["ring", "tre"], "did you mean 'tree'"),
    ],
)
def test_compare_refuses_what_it_cannot_compare_before_drawing(argv, message, tmp_path, capsys):
    out = tmp_path / "c.png"
    base = ["viz", "compare", *argv, "--topology", "switch", "--ranks", "8"]
    assert main([*base, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err and not out.exists()


def test_compare_from_the_cli_as_a_picture_and_a_page(tmp_path, capsys):
    base = ["viz", "compare", "ring", "tree", "--topology", "switch", "--ranks", "8"]
    assert main([*base, "--out", str(tmp_path / "c.svg")]) == 0
    svg = (tmp_path / "c.svg").read_text()
    assert 'id="step ring 3"' in svg and 'id="edge 0-4"' in svg  # the ring and the tree
    assert main([*base, "--out", str(tmp_path / "c.html")]) == 0
    assert "15 frames" in capsys.readouterr().out


def _stripes(ax, rank, chunk):
    return [p for p in ax.patches if p.get_gid() == f"fill r{rank} c{chunk}"]


def test_sources_stripes_each_chunk_by_the_ranks_it_holds():
    (ring,) = results("ring", k=4)
    colours = rank_colours(4)
    start = ring_figure(ring, step=0, cells="sources").axes[0]
    for r in range(4):  # before any step each rank holds only its own input: one colour
        cell = next(p for p in start.patches if p.get_gid() == f"cell r{r} c0")
        assert not _stripes(start, r, 0) and to_rgba(cell.get_facecolor()) == colours[r]
    # after the reduce-scatter (3 steps) each rank holds one chunk with all four inputs:
    # four stripes, one in each rank's colour; the numbers of "count" are gone
    done = ring_figure(ring, step=3, cells="sources").axes[0]
    for r in range(4):
        full = [c for c in range(4) if len(_stripes(done, r, c)) == 4]
        assert len(full) == 1
        stripes = _stripes(done, r, full[0])
        assert sorted(to_rgba(p.get_facecolor()) for p in stripes) == sorted(colours)
    assert not [t for t in done.texts if (t.get_gid() or "").startswith("count")]


def test_cells_from_the_cli_and_a_wrong_name_refused(tmp_path, capsys):
    out = tmp_path / "s.svg"
    base = ["viz", "ring", "--ranks", "4", "--step", "3"]
    assert main([*base, "--cells", "sources", "--out", str(out)]) == 0
    assert 'id="fill r0 c' in out.read_text()
    with pytest.raises(SystemExit) as refused:  # argparse's choices: exit 2
        main([*base, "--cells", "shade", "--out", str(out)])
    assert refused.value.code == 2
    assert "'shade'" in capsys.readouterr().err
