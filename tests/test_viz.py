"""The pictures: what is drawn, checked against the schedule, trace or plan it came from.

Every test inspects the artists of the Figure (arrows, cells, blocks, colour bars) rather
than only checking that a file exists.  Headless (Agg, set in conftest).
"""

import re
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure
from PIL import Image

import collsim
from collsim import cli
from collsim.errors import ConfigError
from collsim.network.trace import Trace
from collsim.parallel.pipeline.runner import pipeline_step
from collsim.parallel.pipeline.schedules import PipelinePass, build_schedule
from collsim.viz.ring import chunk_label, ring_animation, ring_figure, ring_frames
from collsim.viz.scaling import scaling_figure, scaling_rows
from collsim.viz.sweep import sweep, sweep_figure
from collsim.viz.timeline import timeline_figure
from collsim.viz.traffic import topology_layout, traffic_figure
from collsim.viz.utilization import utilization, utilization_figure

T = collsim.topology
UNITS = re.compile(r"\(.+\)$")  # "bytes carried (MiB)", "utilisation (% of link bandwidth)"


def run(g, algorithm="ring", collective="all_reduce", count=4096):
    return collsim.Cluster(g).collective(
        collective, count=count, dtype="float32", algorithm=algorithm
    )


def gids(fig, prefix):
    return sorted(
        a.get_gid() for a in fig.axes[0].patches if (a.get_gid() or "").startswith(prefix)
    )


def colourbar_label(fig):
    """The label of the figure's colour bar (the axes a colour bar draws into)."""
    (cax,) = [ax for ax in fig.axes if hasattr(ax, "_colorbar")]
    return cax.get_ylabel()


# -- ring: arrows are the schedule's moves ------------------------------------------------

CASES = [
    (T.ring(8), "ring", "all_reduce"),
    (T.switch(8), "tree", "all_reduce"),
    (T.switch(8), "halving_doubling", "all_reduce"),
    (T.switch(6), "halving_doubling", "all_reduce"),
    (T.switch(5), "naive", "all_reduce"),
    (T.ring(4), "direct", "all_to_all"),
    (T.ring(5), "ring", "broadcast"),
]


@pytest.mark.parametrize("g, algorithm, collective", CASES, ids=lambda c: str(c))
def test_each_ring_frame_has_exactly_the_moves_of_its_step(g, algorithm, collective):
    result = run(g, algorithm, collective)
    schedule = result.schedule
    for s in (0, schedule.n_steps // 2, schedule.n_steps - 1):  # 0-based schedule index
        fig = ring_figure(result, step=s + 1)  # the step as people count it
        expected = sorted(
            f"move {m.src}->{m.dst} {chunk_label(m.chunks, schedule.n_chunks)}"
            for m in schedule.steps[s]
        )
        assert gids(fig, "move") == expected
        labels = {t.get_gid(): t.get_text() for t in fig.axes[0].texts if t.get_gid()}
        for m in schedule.steps[s]:
            assert labels[f"label {m.src}->{m.dst}"] == chunk_label(m.chunks, schedule.n_chunks)
        # one cell per chunk per rank; the cells written in this step are outlined
        assert len(gids(fig, "cell")) == schedule.ranks * schedule.n_chunks
        thick = {
            p.get_gid()
            for p in fig.axes[0].patches
            if p.get_gid().startswith("cell") and p.get_linewidth() > 1
        }
        assert thick == {f"cell r{m.dst} c{c}" for m in schedule.steps[s] for c in m.dst_chunks}


def test_ring_title_names_phase_and_step_and_cells_count_contributions():
    result = run(T.ring(8))
    fig = ring_figure(result, step=3)
    assert fig.get_suptitle() == "reduce-scatter 3/7  (step 3 of 14)"
    assert ring_figure(result, step=10).get_suptitle() == "all-gather 3/7  (step 10 of 14)"
    assert ring_figure(result, step=0).get_suptitle() == "initial state"
    # the cells' colours are the contributions after the step, from the schedule's replay
    frame = ring_frames(result)[3]
    cmap_cells = {
        p.get_gid(): p.get_facecolor()
        for p in fig.axes[0].patches
        if p.get_gid().startswith("cell")
    }
    full = [(r, c) for r in range(8) for c in range(8) if len(frame.holdings[r][c]) == 4]
    assert len(full) == 8  # after 3 steps each rank holds one chunk summed over 4 ranks
    colours = {cmap_cells[f"cell r{r} c{c}"] for r, c in full}
    assert len(colours) == 1
    assert "(ranks)" in colourbar_label(fig) and UNITS.search(colourbar_label(fig))


def test_ring_frames_read_bytes_and_times_from_the_trace():
    result = run(T.ring(4), count=4000)
    frames = ring_frames(result)
    assert len(frames) == result.schedule.n_steps + 1
    by_step = {}
    for t in result.trace.transfers:
        by_step.setdefault(t.tag.step, []).append(t)
    for frame in frames[1:]:
        # frame.step counts from 1; the trace tag holds the 0-based schedule index
        traced = sorted((t.src, t.dst, t.nbytes, t.start, t.end) for t in by_step[frame.step - 1])
        drawn = sorted((m.src, m.dst, n, a, b) for m, n, a, b in frame.moves)
        assert drawn == traced


@pytest.mark.parametrize("step", [7, -1, 2.5, True, "3"])
def test_ring_figure_rejects_a_step_outside_the_schedule(step):
    with pytest.raises(ConfigError, match=r"choose 1\.\.6, or 0 for the initial state"):
        ring_figure(run(T.ring(4)), step=step)


def test_gif_has_one_frame_per_step_plus_the_initial_state(tmp_path):
    k = 4
    result = run(T.ring(k))
    path = tmp_path / "ring.gif"
    assert ring_animation(result, path, dpi=30) == 2 * (k - 1) + 1
    with Image.open(path) as gif:
        assert gif.format == "GIF" and gif.n_frames == 2 * (k - 1) + 1


# -- traffic and utilisation: bytes from the trace ----------------------------------------


def test_traffic_draws_every_link_sized_by_the_bytes_it_carried():
    g = T.switch(8)
    result = run(g, "naive", count=2**16)
    fig = traffic_figure(g, result)
    links = {p.get_gid(): p for p in fig.axes[0].patches if p.get_gid().startswith("link")}
    assert set(links) == {f"link {u}->{v}" for u, v in g.edges}
    widths = {gid: p.get_linewidth() for gid, p in links.items()}
    # the root's links carry K-1 buffers each (gather in, send back out): the widest two
    widest = max(widths.values())
    assert {gid for gid, w in widths.items() if w == widest} == {"link switch->0", "link 0->switch"}
    assert all(w < widest for gid, w in widths.items() if "0" not in gid.split(" ")[1])
    assert len(gids(fig, "switch")) == 1 and len(gids(fig, "rank")) == 8
    label = colourbar_label(fig)
    assert label == "bytes carried (MiB)" and UNITS.search(label)
    assert "naive all-reduce" in fig.get_suptitle()


def test_layouts_suit_the_topology():
    circle = topology_layout(T.ring(8))
    assert all(abs(np.hypot(*p) - 1) < 1e-9 for p in circle.values())
    assert circle[0] == pytest.approx((0.0, 1.0))  # rank 0 on top
    torus = topology_layout(T.torus2d(3, 4))
    assert torus[7] == (3.0, -1.0)  # row 1, column 3
    hier = topology_layout(T.hierarchical(2, 4))
    assert hier["node0"][1] > hier[0][1] > hier["fabric"][1]  # node switch above its GPUs
    assert max(hier[r][0] for r in range(4)) < min(hier[r][0] for r in range(4, 8))
    for g in (T.torus2d(4, 4), T.hierarchical(2, 8), T.bidirectional_ring(16)):
        fig = traffic_figure(g, run(g, "halving_doubling"))
        assert len(gids(fig, "link")) == g.number_of_edges()


def test_utilization_is_the_traced_bytes_over_bandwidth_and_time():
    g = T.switch(8)
    result = run(g, "naive", count=2**22)  # 16 MiB: the latency is a small part of each span
    edges, links, share = utilization(g, result.trace, bins=100)
    assert share.max() <= 1 + 1e-9
    width = edges[1] - edges[0]
    carried = result.trace.stats(8).link_bytes
    for row, link in enumerate(links):  # integrating the map gives back every link's bytes
        total = share[row].sum() * g.edges[link]["bandwidth"] * width
        assert total == pytest.approx(carried[link], rel=1e-9)
    root = links.index(("switch", 0))
    # the gather saturates the root's down-link once the first bytes arrive (after α)
    assert share[root, 1:40].min() > 0.999
    fig = utilization_figure(g, result)
    assert colourbar_label(fig) == "utilisation (% of link bandwidth)"
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()][root] == "switch → r0"


# -- pipeline timeline: one block per pass ------------------------------------------------


@pytest.mark.parametrize(
    "name, p, m, v",
    [("gpipe", 3, 4, 1), ("1f1b", 4, 8, 1), ("interleaved", 2, 4, 2), ("zb-h1", 3, 4, 1)],
)
def test_timeline_has_one_block_per_schedule_operation(name, p, m, v):
    result = pipeline_step(name, p, m, v)
    fig = timeline_figure(result)
    show = v > 1
    expected = sorted(
        f"op {s} {op.label(show)}" for s, row in enumerate(result.schedule.ops) for op in row
    )
    assert gids(fig, "op ") == expected
    # blocks sit where the trace put the passes
    blocks = {p.get_gid(): p for p in fig.axes[0].patches if p.get_gid().startswith("op ")}
    for span in result.spans:
        block = blocks[f"op {span.stage} {span.op.label(show)}"]
        assert block.get_x() * 1e-3 == pytest.approx(span.start - result.step_start, abs=1e-12)
        assert block.get_width() * 1e-3 == pytest.approx(span.end - span.start)
    assert f"bubble {result.bubble_fraction:.1%}" in fig.get_suptitle()


def test_timeline_from_a_bare_trace_and_its_idle_shading():
    sched = build_schedule("gpipe", 2, 2)  # F0 F1 B0 B1 on both stages, 1 s each
    trace = Trace()
    for stage, starts in ((0, [0, 1, 4, 5]), (1, [1, 2, 3, 4])):
        for op, t in zip(sched.ops[stage], starts):
            # the record says which pass a span is; its label is for display only
            trace.add_compute(stage, t, t + 1, "any text", PipelinePass.of(op, stage))
    fig = timeline_figure(trace, sched)
    assert len(gids(fig, "op ")) == 8
    # stage 0 waits from 2 to 4 for the gradient; stage 1 before its first and after its last
    assert gids(fig, "idle") == ["idle 0", "idle 1", "idle 1"]
    assert fig.get_suptitle().endswith("bubble 33.3%")  # (p-1)/(m+p-1) = 1/3, from the trace
    with pytest.raises(ConfigError, match="holds 0 of the schedule's 8 passes"):
        timeline_figure(trace, sched, stage_ranks=[5, 6])


# -- sweep and scaling ----------------------------------------------------------------------


def test_sweep_marks_where_the_fastest_algorithm_changes():
    cluster = collsim.Cluster(T.switch(16))
    data = sweep(cluster, sizes=[2**k for k in range(3, 27, 2)])
    changes = data.changes()
    # one-shot's 1 step wins when latency-bound; two-shot's 2 steps with the ring's bytes
    # when bandwidth-bound (on a switch every rank's link is its own)
    assert changes and changes[0][1] == "one_shot"
    assert data.fastest(len(data.sizes) - 1) == "two_shot"
    assert [r[2] for r in data.regions()] == ["one_shot", "two_shot"]
    assert not data.bandwidth_bound(0) and data.bandwidth_bound(len(data.sizes) - 1)
    assert data.bandwidth_bound_from() > changes[0][0]  # two-shot turns bandwidth-bound later
    fig = sweep_figure(cluster, data=data)
    dashed = [ln for ln in fig.axes[0].lines if (ln.get_gid() or "").startswith("change")]
    assert len(dashed) == len(changes)
    assert [
        ln.get_linestyle() for ln in fig.axes[0].lines if ln.get_gid() == "bandwidth-bound"
    ] == [":"]
    assert fig.axes[0].get_xscale() == fig.axes[0].get_yscale() == "log"
    assert [ln.get_label() for ln in fig.axes[0].lines[: len(data.times)]] == [
        "ring",
        "tree",
        "halving-doubling",
        "naive",
        "one-shot",
        "two-shot",
    ]


def test_sweep_count_only_agrees_with_the_closed_forms_where_they_hold():
    cluster = collsim.Cluster(T.switch(8))
    sizes = [2**10, 2**20]
    sim = sweep(cluster, algorithms=["ring", "halving_doubling"], sizes=sizes)
    closed = sweep(cluster, algorithms=["ring", "halving_doubling"], sizes=sizes, mode="analytical")
    for a in sim.times:
        assert sim.times[a] == pytest.approx(closed.times[a], rel=1e-9)


def test_scaling_reads_the_planner_and_shows_the_node_edge():
    from collsim.plan import plan

    rows = scaling_rows({"params": "7B", "global_batch": 512}, gpus=[4, 8, 16, 64])
    assert [r["link"] for r in rows] == ["intra-node", "intra-node", "inter-node", "inter-node"]
    for r in rows:
        report = plan(params="7B", global_batch=512, world_size=r["gpus"])
        assert r["compute_s"] == pytest.approx(report.compute["time_s"])
        comm = report.communication["total"]["time_s"]
        assert r["comm_bandwidth_s"] + r["comm_latency_s"] == pytest.approx(comm)
        assert r["step_s"] == pytest.approx(r["compute_s"] + comm)
    assert rows[0]["efficiency"] > rows[-1]["efficiency"]  # strong scaling loses efficiency
    ring_steps = 2 * (64 - 1)  # the latency term is steps·α of the DP ring all-reduce
    assert rows[-1]["comm_latency_s"] == pytest.approx(ring_steps * 5e-6)
    fig = scaling_figure(gpus=[1, 4, 16, 64])
    assert "strong scaling" in fig.get_suptitle()
    assert fig.axes[0].get_yscale() == "log" and "(s)" in fig.axes[0].get_ylabel()
    assert "(%)" in fig.axes[1].get_ylabel()
    weak = scaling_rows(gpus=[8, 64], weak=True, batch_per_gpu=4)
    assert [r["global_batch"] for r in weak] == [32, 256]
    assert "weak scaling" in scaling_figure(gpus=[8, 64], weak=True).get_suptitle()


# -- the command line -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind",
    ["ring", "traffic", "utilization", "timeline", "sweep", "scaling", "memory", "memory-timeline"],
)
def test_every_kind_works_with_only_out(kind, tmp_path, capsys):
    out = tmp_path / f"{kind}.png"
    extra = ["--max-bytes", "64KiB"] if kind == "sweep" else []
    assert cli.main(["viz", kind, *extra, "--out", str(out)]) == 0
    assert out.stat().st_size > 10_000
    with Image.open(out) as image:
        assert image.width >= 1200  # sharp on a projected slide
    assert f"wrote {out}" in capsys.readouterr().out


def test_cli_writes_a_gif_and_svg_and_refuses_other_extensions(tmp_path, capsys):
    gif = tmp_path / "r.gif"
    assert cli.main(["viz", "ring", "--ranks", "3", "--fps", "4", "--out", str(gif)]) == 0
    with Image.open(gif) as image:
        assert image.n_frames == 2 * (3 - 1) + 1
    svg = tmp_path / "t.svg"
    assert (
        cli.main(["viz", "traffic", "--topology", "torus2d", "--ranks", "4", "--out", str(svg)])
        == 0
    )
    assert svg.read_text().lstrip().startswith("<?xml")
    assert cli.main(["viz", "sweep", "--out", str(tmp_path / "s.gif")]) == 2
    assert "unknown file type '.gif'; use one of .png, .svg, .pdf" in capsys.readouterr().err


def test_viz_modules_return_figures_and_never_use_pyplot():
    source = Path(collsim.__file__).parent / "viz"
    for name in ("ring", "traffic", "utilization", "timeline", "sweep", "scaling"):
        text = (source / f"{name}.py").read_text()
        assert "pyplot" not in text and "plt." not in text
    assert isinstance(ring_figure(run(T.ring(3))), Figure)


@pytest.mark.parametrize("collective", ["reduce-scatter", "all-gather"])
@pytest.mark.parametrize(
    "ranks, drawn", [(6, {"ring", "pat"}), (8, {"ring", "halving_doubling", "pat"})]
)
def test_default_sweep_draws_every_algorithm_that_runs_on_that_many_ranks(
    collective, ranks, drawn, tmp_path
):
    from collsim.cli import main

    out = tmp_path / "s.png"
    assert (
        main(
            [
                "viz",
                "sweep",
                collective,
                "--ranks",
                str(ranks),
                "--topology",
                "switch",
                "--max-bytes",
                "64KiB",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    from collsim import Cluster, topology
    from collsim.viz.sweep import sweep

    result = sweep(Cluster(topology.switch(ranks)), collective, sizes=[1024, 4096])
    assert set(result.times) == drawn
