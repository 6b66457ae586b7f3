"""``collsim tour``: five minutes from a point-to-point send to why ring all-reduce wins."""

import numpy as np

from .. import topology, units
from ..course.language import current_language, parse_language
from ..course.width import display_width, rjust
from ..runtime import Cluster
from ..teach.tour_text import tour_text
from .common import Formatter
from .console import pause

__all__ = ["register", "run"]

DESCRIPTION = """\
A five-minute tour of collsim (the short version of lessons 2 and 4):

  1. four ranks exchange arrays point to point; every transfer is in the trace
  2. data parallel, the batch-64, dp=4 example: the averaged gradient is one device's
  3. a ring all-reduce on four ranks, step by step
  4. bytes each rank sends: ring 2(K-1)/K of the buffer whatever K is, naive (K-1)x at the root
  5. time on one switch: ring against naive, simulated and by the closed form

Pauses between parts when standard input is a terminal (--no-pause to run straight through;
with standard input closed or redirected it never waits).  Steps are numbered from 1, as in
`collsim step`: "step 1 of 6"; the initial state, before any transfer, is shown first.

--lang ja prints the tour in Japanese (the same runs and the same numbers); without --lang
the language comes from COLLSIM_LANG (en or ja), else from the locale (LC_ALL, LC_MESSAGES
or LANG starting with "ja"); English is the default.
"""


def register(subparsers):
    p = subparsers.add_parser(
        "tour",
        help="a five-minute tour: start here",
        description=DESCRIPTION,
        formatter_class=Formatter,
    )
    p.add_argument("--no-pause", action="store_true", help="do not wait for Enter")
    p.add_argument(
        "--lang",
        default=None,
        help="en (English) or ja (Japanese); default: COLLSIM_LANG, else ja when "
        "LC_ALL/LC_MESSAGES/LANG starts with 'ja', else en",
    )
    p.set_defaults(func=run)


def _title(text):
    print(f"\n== {text} " + "=" * max(0, 74 - display_width(text)))


def _exchange(rank):
    # every rank sends its id to the right neighbour and receives from the left one
    right, left = (rank.id + 1) % rank.size, (rank.id - 1) % rank.size
    handle = yield rank.isend(right, np.full(4, float(rank.id)))
    got = yield rank.recv(left)
    yield rank.wait(handle)
    return float(got[0])


def _data_parallel(lang):
    from ..nn import GELU, SGD, Linear, Sequential, mse_loss
    from ..parallel.data import train_data_parallel

    _title(tour_text("dp_title", lang))
    rng = np.random.default_rng(4)
    model = Sequential(Linear.init(16, 64, rng), GELU(), Linear.init(64, 16, rng))
    x, target = rng.uniform(-1, 1, (64, 16)), rng.uniform(-1, 1, (64, 16))
    cluster = Cluster(topology.switch(4, "100GB/s", "5us"))
    run = train_data_parallel(cluster, model, [(x, target)], dp=4, optimizer=SGD(lr=0.1))
    y, ctx = model.forward(x)  # one device, the whole batch
    grads = model.backward(ctx, mse_loss(y, target)[1])[1]
    diff = max(float(np.max(np.abs(run.steps[0]["grads"][k] - grads[k]))) for k in grads)
    params = sum(p.size for p in model.params.values())
    sent = run.result.stats.bytes_sent[0]
    print(tour_text("dp_what", lang))
    print(tour_text("dp_diff", lang, diff=f"{diff:.2g}"))
    formula = 2 * 3 / 4 * params * 8
    print(
        tour_text(
            "dp_sent",
            lang,
            sent=f"{sent:,}",
            size=units.format_size(sent),
            params=f"{params:,}",
            formula=f"{formula:,.0f}",
        )
    )


def run(args):
    lang = current_language() if args.lang is None else parse_language(args.lang)
    _title(tour_text("p2p_title", lang))
    cluster = Cluster(topology.bidirectional_ring(4, "100GB/s", "5us"))
    result = cluster.run(_exchange)
    print(tour_text("p2p_what", lang))
    print(tour_text("p2p_received", lang, values=result.returns))
    for t in result.trace.transfers:
        print(
            tour_text(
                "p2p_transfer",
                lang,
                src=t.src,
                dst=t.dst,
                size=units.format_size(t.nbytes),
                start=units.format_time(t.start),
                end=units.format_time(t.end),
                path=" -> ".join(str(u) for u, _ in t.links),
                last=t.links[-1][1],
            )
        )
    print(tour_text("p2p_time", lang, time=units.format_time(result.time)))
    pause(args)

    _data_parallel(lang)
    pause(args)

    _title(tour_text("ring_title", lang))
    ring4 = Cluster(topology.ring(4, "100GB/s", "5us"))
    buffers = [np.full(8, float(r + 1)) for r in range(4)]  # r + 1: rank 0 adds 1, not 0
    starts = [float(b[0]) for b in buffers]
    out = ring4.all_reduce(buffers, algorithm="ring")
    print(tour_text("ring_start", lang, values=starts))
    if tour_text("ring_legend", lang):  # the step views print as in `collsim step`
        print(tour_text("ring_legend", lang))
    for view in out.steps(include_initial=True):
        print(view)
        pause(args)
    terms = "+".join(f"{v:g}" for v in starts)
    print(tour_text("ring_end", lang, values=out.outputs[0][:4].tolist(), terms=terms))

    _title(tour_text("bytes_title", lang))
    size = 64 * 2**20
    columns = [
        rjust(tour_text(key, lang), width)
        for key, width in (("bytes_ring", 16), ("bytes_fraction", 14), ("bytes_naive", 16))
    ]
    print(f"{'K':>5} " + " ".join(columns))
    for k in (2, 4, 8, 16, 64):
        c = Cluster(topology.switch(k, "100GB/s", "5us"))
        ring = c.all_reduce(count=size // 4, dtype="float32", algorithm="ring")
        naive = c.all_reduce(count=size // 4, dtype="float32", algorithm="naive")
        per = ring.stats.bytes_sent[0]
        print(
            f"{k:>5} {units.format_size(per):>16} {per / size:>14.3f} "
            f"{units.format_size(max(naive.stats.bytes_sent)):>16}"
        )
    print(tour_text("bytes_summary", lang))
    pause(args)

    _title(tour_text("time_title", lang))
    from ..collectives import analytical

    c8 = Cluster(topology.switch(8, "100GB/s", "5us"))
    for algorithm in ("ring", "halving_doubling", "tree", "naive"):
        sim = c8.all_reduce(count=size // 4, dtype="float32", algorithm=algorithm)
        form = analytical(c8, "all_reduce", size, algorithm)
        print(
            tour_text(
                "time_row",
                lang,
                algorithm=algorithm,
                steps=sim.stats.steps,
                sim=units.format_time(sim.time),
                form=units.format_time(form.time_s),
            )
        )
    print(tour_text("next", lang))
    return 0
