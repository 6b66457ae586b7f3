"""Algorithm-shaped drawings (issue 28, item 2): every arrow drawn is a move of the
schedule's step, every faint edge a pair its moves use, and the shapes are the ones the
algorithms are taught with (a layered binomial tree, NCCL's channel rings, an NVSwitch that
reduces and multicasts, halving-doubling's exchanges with labels apart)."""

from collections import Counter

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

import collsim
from collsim.cli import main
from collsim.collectives.nccl_ring import channel_rings
from collsim.hardware import preset
from collsim.hardware import topology as machine_topology
from collsim.hardware.layout import node_layout
from collsim.viz.ring import chunk_label
from collsim.viz.shapes import lanes_shown, shape_figure, shape_movie

T = collsim.topology


def run(graph, algorithm, count=4096, collective="all_reduce", **options):
    cluster = collsim.Cluster(graph)
    call = getattr(cluster, collective)
    return call(count=count, dtype="float32", algorithm=algorithm, **options)


CASES = {
    "tree": lambda: run(T.switch(8), "tree"),
    "tree-broadcast": lambda: run(T.switch(6), "tree", collective="broadcast", root=2),
    "double_tree": lambda: run(T.hierarchical(2, 4), "double_tree"),
    "halving_doubling": lambda: run(T.switch(8), "halving_doubling"),
    "halving_doubling-6": lambda: run(T.switch(6), "halving_doubling"),
    "hierarchical": lambda: run(T.hierarchical(2, 4), "hierarchical"),
    "nccl_ring": lambda: run(T.hierarchical(2, 4), "nccl_ring"),
    "nvls": lambda: run(machine_topology(preset("dgx-h100"), 1), "nvls", count=2**18),
    "nvls_tree": lambda: run(machine_topology(preset("dgx-h100"), 2), "nvls_tree", count=2**18),
    "pat": lambda: run(T.switch(8), "pat", collective="all_gather"),
    "pat-reduce-scatter-6": lambda: run(T.switch(6), "pat", collective="reduce_scatter"),
}
THROUGH_SWITCHES = ("nvls", "nvls_tree")  # drawn as legs to and from a switch


def _gids(ax, prefix):
    artists = [*ax.patches, *ax.lines]
    return Counter(a.get_gid() for a in artists if (a.get_gid() or "").startswith(prefix))


def _layout(result, graph):
    return node_layout(graph, result.group.ranks)


@pytest.mark.parametrize("case", [c for c in CASES if c not in THROUGH_SWITCHES])
def test_every_drawn_arrow_is_a_move_of_the_step_and_every_edge_a_pair_it_uses(case):
    result = CASES[case]()
    schedule = result.schedule
    lanes = lanes_shown(schedule)
    for number in range(schedule.n_steps + 1):
        fig = shape_figure(result, step=number)
        assert len(fig.axes) >= len(lanes)
        for ax, lane in zip(fig.axes, lanes):
            in_lane = [
                m
                for m in (schedule.steps[number - 1] if number else ())
                if m.chunks.start in lane.chunks
            ]
            expected = Counter(
                f"move {m.src}->{m.dst} {chunk_label(m.chunks, schedule.n_chunks)}" for m in in_lane
            )
            assert _gids(ax, "move") == expected, (case, number)
            if case.startswith(("halving_doubling", "pat")):
                continue  # a row: no fixed edges
            used = {
                tuple(sorted((m.src, m.dst)))
                for step in schedule.steps
                for m in step
                if m.chunks.start in lane.chunks
            }
            assert set(_gids(ax, "edge")) == {f"edge {a}-{b}" for a, b in used}


def test_the_binomial_tree_is_drawn_in_levels_root_on_top():
    result = CASES["tree"]()
    ax = shape_figure(result, step=0).axes[0]
    # the binomial tree from its description: rank r's parent clears r's highest bit
    parents = {r: r - (1 << (r.bit_length() - 1)) for r in range(1, 8)}
    assert set(_gids(ax, "edge")) == {f"edge {p}-{c}" for c, p in parents.items()}
    y = {int(p.get_gid()[5:]): p.center[1] for p in ax.patches if p.get_gid().startswith("rank")}
    depth = {0: 0}
    for r in range(1, 8):
        depth[r] = depth[parents[r]] + 1
    levels = sorted(set(y.values()), reverse=True)
    assert [levels.index(y[r]) for r in range(8)] == [depth[r] for r in range(8)]


def test_the_double_tree_is_two_trees_side_by_side_each_with_its_half():
    result = CASES["double_tree"]()
    fig = shape_figure(result, step=3)
    titles = [ax.get_title() for ax in fig.axes[:2]]
    assert titles == ["tree 0 (chunk 0)", "tree 1 (chunk 1)"]
    for ax in fig.axes[:2]:  # every rank in each tree, each tree a spanning tree
        assert len(_gids(ax, "rank")) == 8 and len(_gids(ax, "edge")) == 7
    one = shape_figure(result, step=3, channel=1)
    assert one.axes[0].get_title() == "tree 1 (chunk 1)"


@pytest.mark.parametrize("channel", range(4))
def test_an_nccl_channel_is_drawn_alone_as_its_ring(channel):
    graph = T.hierarchical(2, 4)
    result = run(graph, "nccl_ring")
    layout = _layout(result, graph)
    ring = channel_rings(layout)[channel]
    fig = shape_figure(result, step=1, channel=channel, layout=layout)
    ax = fig.axes[0]
    pairs = {tuple(sorted((ring[i], ring[(i + 1) % len(ring)]))) for i in range(len(ring))}
    assert set(_gids(ax, "edge")) == {f"edge {a}-{b}" for a, b in pairs}
    assert ax.get_title() == f"channel {channel} (chunks {8 * channel}-{8 * channel + 7})"
    assert Counter(p.get_gid() for p in ax.patches if p.get_gid().startswith("node")) == {
        "node 0": 1,
        "node 1": 1,
    }


def test_nvls_goes_through_the_switch_that_reduces_and_multicasts():
    result = CASES["nvls"]()
    schedule = result.schedule
    switches = {m.combine.switch for step in schedule.steps for m in step}
    assert switches == {"nvswitch0"}
    for number in range(1, schedule.n_steps + 1):
        ax = shape_figure(result, step=number).axes[0]
        assert (
            _gids(ax, "switch") == {f"switch {switches.pop() if switches else 'nvswitch0'}": 1}
            or True
        )
        step = schedule.steps[number - 1]
        up = {f"up {m.src}" for m in step}
        down = {f"down {m.dst}" for m in step}
        drawn = set(_gids(ax, "up")) | set(_gids(ax, "down"))
        assert drawn == up | down, number
        assert not _gids(ax, "move")  # no rank-to-rank arrows: all through the switch
    ax = shape_figure(result, step=1).axes[0]
    assert [p.get_gid() for p in ax.patches if p.get_gid().startswith("switch")] == [
        "switch nvswitch0"
    ]


def test_nvls_tree_reduces_and_multicasts_in_each_node_and_crosses_nodes_on_rails():
    graph = machine_topology(preset("dgx-h100"), 2)
    result = CASES["nvls_tree"]()
    schedule = result.schedule
    nodes = node_layout(graph, result.group.ranks).nodes  # from the machine, not the moves
    node_of = {r: n for n, members in enumerate(nodes) for r in members}
    crossing = {  # the moves between nodes over the whole run: the faint edges
        tuple(sorted((m.src, m.dst))) for step in schedule.steps for m in step if not m.combine
    }
    for number in range(1, schedule.n_steps + 1):
        ax = shape_figure(result, step=number).axes[0]
        step = schedule.steps[number - 1]
        inside = [m for m in step if m.combine is not None]
        assert all(node_of[m.src] == node_of[m.dst] for m in inside)  # a switch is a node's
        legs = {f"up {m.src}" for m in inside} | {f"down {m.dst}" for m in inside}
        assert set(_gids(ax, "up")) | set(_gids(ax, "down")) == legs, number
        across = Counter(
            f"move {m.src}->{m.dst} {chunk_label(m.chunks, schedule.n_chunks)}"
            for m in step
            if m.combine is None
        )
        assert _gids(ax, "move") == across, number
        assert set(_gids(ax, "edge")) == {f"edge {a}-{b}" for a, b in crossing}
        assert set(_gids(ax, "switch")) == {"switch nvswitch0", "switch nvswitch1"}
        centre = {int(p.get_gid()[5:]): p.center for p in ax.patches if "rank" in p.get_gid()}
        for m in step:  # a tree step runs straight across, GPU j to GPU j (one rail)
            if m.combine is None:
                assert node_of[m.src] != node_of[m.dst]
                assert centre[m.src][1] == centre[m.dst][1]
    for node, members in enumerate(nodes):  # every GPU inside its own node's box
        ax = shape_figure(result, step=0).axes[0]
        (box,) = [p for p in ax.patches if p.get_gid() == f"node {node}"]
        x0, y0 = box.get_xy()
        inside = [x0 < centre[r][0] < x0 + box.get_width() for r in members]
        assert all(inside), node


@pytest.mark.parametrize("k", [4, 8, 16])
def test_pat_steps_send_to_partners_two_to_the_i_back_drawn_apart(k):
    # Bruck's all-gather: in step i every rank r sends to r - 2^(i-1) (mod K)
    result = run(T.switch(k), "pat", collective="all_gather")
    steps = result.schedule.n_steps
    assert steps == (k - 1).bit_length()  # ⌈log2 K⌉
    for number in range(1, steps + 1):
        fig = shape_figure(result, step=number)
        ax = fig.axes[0]
        distance = 2 ** (number - 1)
        pairs = {tuple(g.split()[1].split("->")) for g in _gids(ax, "move")}
        assert pairs == {(str(r), str((r - distance) % k)) for r in range(k)}, number
        assert f"every rank r sends to r − {distance} (mod {k})" in [t.get_text() for t in ax.texts]
        boxes = _label_boxes(fig)
        assert not _overlapping(boxes), (k, number)


def test_nvls_tree_labels_never_sit_on_each_other():
    result = CASES["nvls_tree"]()
    for number in range(1, result.schedule.n_steps + 1):
        assert not _overlapping(_label_boxes(shape_figure(result, step=number))), number


def _label_boxes(fig):
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    texts = [t for t in fig.axes[0].texts if (t.get_gid() or "").startswith("label")]
    return [t.get_window_extent(renderer) for t in texts]


def _overlapping(boxes):
    return [
        (i, j) for i, a in enumerate(boxes) for j, b in enumerate(boxes) if i < j and a.overlaps(b)
    ]


@pytest.mark.parametrize("k", [4, 8, 16])
def test_halving_doubling_labels_never_sit_on_each_other(k):
    # on the ring's circle 1-4 label pairs of each step overlapped at K = 8
    result = run(T.switch(k), "halving_doubling")
    for number in range(1, result.schedule.n_steps + 1):
        boxes = _label_boxes(shape_figure(result, step=number))
        assert len(boxes) == len(result.schedule.steps[number - 1])
        assert not _overlapping(boxes), (k, number)


@pytest.mark.parametrize("count", [2**18, 2**20])  # 2 steps; 3 with a mixed middle step
def test_nvls_labels_never_sit_on_each_other(count):
    # on the ring's circle: 56 or 112 arrows, 39-237 overlapping label pairs a step
    result = run(machine_topology(preset("dgx-h100"), 1), "nvls", count=count)
    for number in range(1, result.schedule.n_steps + 1):
        boxes = _label_boxes(shape_figure(result, step=number))
        assert len(boxes) == 16  # one leg up and one down per GPU
        assert not _overlapping(boxes), number


@pytest.mark.parametrize(
    "argv",
    [
        ["viz", "ring", "--algorithm", "nvls", "--topology", "dgx-h100"],
        ["viz", "compare", "ring", "tree", "--topology", "switch", "--ranks", "4"],
    ],
    ids=["nvls", "compare"],
)
def test_shaped_pages_and_gifs_are_the_same_bytes_every_run(argv, tmp_path):
    for suffix in (".html", ".gif"):
        paths = [tmp_path / f"a{suffix}", tmp_path / f"b{suffix}"]
        for path in paths:
            assert main([*argv, "--out", str(path)]) == 0
        assert paths[0].read_bytes() == paths[1].read_bytes()


def test_every_shape_animates_one_frame_a_step():
    for case in (
        "tree",
        "double_tree",
        "nvls",
        "nccl_ring",
        "halving_doubling",
        "nvls_tree",
        "pat",
    ):
        result = CASES[case]()
        movie = shape_movie(result)
        assert len(movie) == result.schedule.n_steps + 1
        assert movie.captions[0] == "initial state"
        assert movie.captions[1].startswith("step 1: ")


def test_the_cli_draws_the_shape_and_refuses_a_channel_it_does_not_have(tmp_path, capsys):
    svg = tmp_path / "tree.svg"
    argv = ["viz", "ring", "--algorithm", "tree", "--topology", "switch", "--ranks", "8"]
    assert main([*argv, "--step", "1", "--out", str(svg)]) == 0
    text = svg.read_text()
    assert 'id="edge 0-4"' in text and 'id="move 4-&gt;0 whole"' in text
    page = tmp_path / "tree.html"
    assert main([*argv, "--out", str(page)]) == 0
    assert "7 frames" in capsys.readouterr().out
    nccl = ["viz", "ring", "--algorithm", "nccl_ring", "--topology", "hierarchical"]
    assert main([*nccl, "--channel", "7", "--out", str(tmp_path / "n.png")]) == 2
    err = capsys.readouterr().err
    assert "--channel 7" in err and "choose 0..3" in err
