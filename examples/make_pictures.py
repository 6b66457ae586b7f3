"""One of each picture collsim draws, written into a folder.

Every picture is drawn from what a simulation produced (a collective's schedule and trace,
a pipeline step's trace) or, for scaling, from the planner's closed forms::

    python examples/make_pictures.py pictures/            # all of them, PNG + GIF + HTML
    python examples/make_pictures.py docs --readme        # the four PNGs docs/commands.md shows

The same pictures from the command line: ``collsim viz ring|traffic|utilization|timeline|
sweep|scaling ... --out FILE`` (each kind's ``--help`` lists its flags).
"""

import argparse
import sys
from pathlib import Path

import collsim
from collsim.parallel.runs.pipeline import pipeline_step
from collsim.viz.memory_timeline import memory_timeline_figure
from collsim.viz.output import save_figure
from collsim.viz.ring import ring_animation, ring_figure
from collsim.viz.scaling import scaling_figure
from collsim.viz.sweep import sweep_figure
from collsim.viz.timeline import timeline_figure
from collsim.viz.traffic import traffic_figure
from collsim.viz.utilization import utilization_figure

topology = collsim.topology


def ring_all_reduce(k=8):
    """A count-only ring all-reduce of 64 MiB on a ring of K ranks (no memory needed)."""
    cluster = collsim.Cluster(topology.ring(k, "100GB/s", "5us"))
    return cluster.all_reduce(count=16 * 2**20, dtype="float32", algorithm="ring")


def naive_on_switch(k=8):
    """The naive all-reduce on a switch: every buffer crosses the root's one link."""
    g = topology.switch(k, "100GB/s", "5us")
    result = collsim.Cluster(g).all_reduce(count=2**20, dtype="float32", algorithm="naive")
    return g, result


def ring_across_machines():
    """A flat ring over two machines of 8 GPUs: 2 of its 16 hops cross the slow fabric."""
    g = topology.hierarchical(2, 8, intra="300GB/s", inter="25GB/s")
    result = collsim.Cluster(g).all_reduce(count=2**22, dtype="float32", algorithm="ring")
    return g, result


def fsdp_step(ranks=4, prefetch="both"):
    """One Adam step of FSDP (ZeRO-3) with prefetch on ``ranks`` ranks, memory registered."""
    from collsim.nn import Adam
    from collsim.parallel.config import ParallelConfig
    from collsim.parallel.mesh import train
    from collsim.parallel.runs.pipeline import toy_batch, toy_model

    config = ParallelConfig(dp=ranks, zero=3, prefetch=prefetch, t_f=0)
    cluster = collsim.Cluster(topology.switch(ranks, "10GB/s", "5us"), compute_rate="1GFLOP/s")
    model = toy_model(4, hidden=16, heads=2)
    return train(
        model, [toy_batch(ranks, seq=8, hidden=16)], config, cluster=cluster, optimizer=Adam(1e-3)
    )


def fsdp_memory_figure():
    return memory_timeline_figure(
        fsdp_step(), ranks=[0], title="FSDP (ZeRO-3) on 4 ranks, prefetch both: memory of rank 0"
    )


def pictures(folder):
    """Every kind of picture; returns the paths written."""
    written = []

    def save(fig, name, dpi=110):
        path = folder / name
        save_figure(fig, path, path.suffix, dpi=dpi)
        written.append(path)

    ring = ring_all_reduce()
    save(ring_figure(ring, step=3), "ring_step.png")  # steps count from 1, as titles do
    for animation in ("ring_all_reduce.gif", "ring_all_reduce.html"):  # HTML: play/step buttons
        ring_animation(ring, folder / animation, fps=1)
        written.append(folder / animation)
    save(ring_figure(ring_all_reduce(16), step=18), "ring_step_k16.png")
    g, naive = naive_on_switch()
    save(ring_figure(naive, step=1), "naive_step.png")
    save(traffic_figure(g, naive), "traffic_naive_switch.png")
    save(utilization_figure(g, naive), "utilization_naive_switch.png")
    g, flat = ring_across_machines()
    save(traffic_figure(g, flat), "traffic_ring_two_machines.png")
    save(utilization_figure(g, flat), "utilization_ring_two_machines.png")
    save(timeline_figure(pipeline_step("1f1b", 4, 8)), "timeline_1f1b.png")
    save(timeline_figure(pipeline_step("interleaved", 4, 8, 2)), "timeline_interleaved.png")
    save(timeline_figure(pipeline_step("zb-h1", 4, 8)), "timeline_zb_h1.png")
    save(sweep_figure(collsim.Cluster(topology.switch(16))), "sweep_switch16.png")
    save(scaling_figure(), "scaling_strong.png")
    save(scaling_figure(weak=True), "scaling_weak.png")
    save(fsdp_memory_figure(), "memory_timeline_fsdp.png")
    return written


def readme_pictures(folder):
    """The four pictures docs/commands.md shows, small enough to keep in the repository."""
    small = {"dpi": 80, "pil_kwargs": {"optimize": True}}
    figures = {
        "ring_all_reduce_step.png": ring_figure(ring_all_reduce(), step=3),
        "pipeline_timeline.png": timeline_figure(pipeline_step("interleaved", 4, 8, 2)),
        "sweep_all_reduce.png": sweep_figure(collsim.Cluster(topology.switch(16))),
        "memory_timeline_fsdp.png": fsdp_memory_figure(),
    }
    written = []
    for name, fig in figures.items():
        save_figure(fig, folder / name, "png", **small)
        written.append(folder / name)
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="where to write the pictures (created if missing)")
    parser.add_argument(
        "--readme", action="store_true", help="only the four small PNGs docs/commands.md shows"
    )
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = readme_pictures(folder) if args.readme else pictures(folder)
    for path in written:
        print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
