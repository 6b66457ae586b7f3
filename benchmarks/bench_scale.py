"""How far does the count-only path scale?  A K-rank ring all-reduce, one fresh process per K.

Each K runs ``collsim.Cluster(collsim.topology.ring(K)).all_reduce(count=..., dtype="float32",
algorithm="ring")`` on a fixed per-rank size (``--size``, default 1 MiB) with no data: the
same schedule, network and trace as a numeric run, without the additions.  Every K runs in
a child process of its own, so that its peak memory is its own, with a time limit
(``--timeout``) and a memory limit (``--max-rss``: the parent watches the child's resident
memory and stops it there, so a run that would not fit says so instead of swapping the
machine).  The table gives, per K:

* transfers: counted in the run's statistics, checked to be 2K(K-1) (and the records too);
* build: ``collsim.collectives.registry.build("all_reduce", "ring", K)`` alone, timed first;
* call: the ``all_reduce`` call (which builds its schedule again unless collsim caches it);
* run: the call without the build (call - build, or the call itself when the schedule is
  cached); transfers/s: transfers per second of the whole call;
* peak RSS of the child (``getrusage``) and bytes per transfer: the peak's growth over
  the child's resident memory before the build, divided by the transfers (what the run
  holds: schedule, network state and the trace as collsim keeps it);
* records: the seconds to build the trace's transfer records afterwards
  (``trace.transfers``, what a reader of the trace asks for) and bytes per record, the
  same growth with the peak after that (``--no-records`` skips it); a run stopped here
  keeps its other figures;
* simulated time, checked against the closed form 2(K-1)(alpha + S/(K beta)) of the ring
  topology's own alpha (edge ``latency``) and beta (edge ``bandwidth``), within 1e-9.

Every figure is one run (a fresh process per K; no best-of, the runs are long).

    python benchmarks/bench_scale.py                     # K = 256, 1024, 4096
    python benchmarks/bench_scale.py --ranks 1024        # only this K
    python benchmarks/bench_scale.py --quick             # K = 64, 256: a few seconds
    python benchmarks/bench_scale.py --size 64MiB --timeout 120

Wall-clock time and memory are only measured here, never inside collsim.
"""

import argparse
import dataclasses
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import collsim
from collsim.errors import CollsimError
from collsim.units import format_size, format_time, parse_size

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_engine import command_line, machine_line, parse_ranks

SIZES = (256, 1024, 4096)
QUICK_SIZES = (64, 256)
SLOW_ON_UNBATCHED = 4096  # about 16x the transfers of 1,024 ranks, 31 s there before batching
ITEMSIZE = 4  # float32


@dataclasses.dataclass
class ScaleRun:
    """What one child measured for one K (sent to the parent as one JSON line)."""

    ranks: int
    transfers: int
    build_s: float  # registry.build alone
    call_s: float  # the all_reduce call
    run_s: float  # the call without the build
    schedule_cached: bool  # whether registry.build hands back the same schedule twice
    baseline_rss: int  # bytes, peak RSS before the build
    peak_rss: int  # bytes, getrusage's ru_maxrss
    simulated_s: float
    closed_form_s: float


def peak_bytes():
    """The process's peak resident memory so far, in bytes (getrusage's ru_maxrss).  The
    baseline is read from the same counter: /proc's current RSS is synced lazily and can
    read above it."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # KiB on Linux


def ring_alpha_beta(graph):
    """(latency s, bandwidth B/s) of the ring's links, all alike on the preset."""
    latencies = {data["latency"] for _, _, data in graph.edges(data=True)}
    bandwidths = {data["bandwidth"] for _, _, data in graph.edges(data=True)}
    assert len(latencies) == len(bandwidths) == 1, (latencies, bandwidths)
    return latencies.pop(), bandwidths.pop()


def measure(k, count, records):
    """One count-only ring all-reduce on ``k`` ranks, ``count`` float32 per rank: prints
    its :class:`ScaleRun` as a JSON line and then, with ``records``, a second line once
    the trace's transfer records are built (``trace.transfers``, what a reader of the
    trace asks for), so a parent that must stop it there still has the first."""
    from collsim.collectives import registry

    cached = registry.build("all_reduce", "ring", 4) is registry.build("all_reduce", "ring", 4)
    graph = collsim.topology.ring(k)
    cluster = collsim.Cluster(graph)
    gc.collect()
    baseline = peak_bytes()  # after the imports, which is about the resident memory now
    t0 = time.perf_counter()
    schedule = registry.build("all_reduce", "ring", k)
    build = time.perf_counter() - t0
    del schedule  # the call holds its own; ours would only add to the peak
    gc.collect()
    t0 = time.perf_counter()
    out = cluster.all_reduce(count=count, dtype="float32", algorithm="ring")
    call = time.perf_counter() - t0
    peak = peak_bytes()
    transfers = sum(out.stats.messages)  # counted without building the trace's records
    assert transfers == 2 * k * (k - 1), (transfers, 2 * k * (k - 1))
    alpha, beta = ring_alpha_beta(graph)
    expected = 2 * (k - 1) * (alpha + count * ITEMSIZE / (k * beta))
    assert abs(out.time - expected) <= 1e-9 * expected, (out.time, expected)
    run = ScaleRun(
        k,
        transfers,
        build,
        call,
        call if cached else max(call - build, 0.0),
        cached,
        baseline,
        peak,
        out.time,
        expected,
    )
    print(json.dumps(dataclasses.asdict(run)), flush=True)
    if records:
        t0 = time.perf_counter()
        try:
            n_records = len(out.trace.transfers)
        except CollsimError as exc:  # more records than half the free memory holds
            need = str(exc).split("need about ")[1].split(",")[0]
            print(json.dumps({"records_refused": f"refused: would need {need}"}), flush=True)
            return
        seconds = time.perf_counter() - t0
        assert n_records == transfers, (n_records, transfers)
        print(json.dumps({"records_s": seconds, "records_peak_rss": peak_bytes()}), flush=True)


def child_rss(pid):
    """Resident bytes of the child ``pid`` now (0 where /proc cannot tell)."""
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def run_child(k, count, records, timeout, max_rss):
    """(ScaleRun or None, records line or None, why it stopped) of ``k`` in a fresh
    interpreter, watched for time and resident memory."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", str(k), "--count", str(count)]
    cmd += [] if records else ["--no-records"]
    with tempfile.TemporaryFile("w+") as stderr:  # a file: a full pipe would stall the child
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, text=True)
        start, largest, why = time.monotonic(), 0, ""
        while proc.poll() is None:
            largest = max(largest, child_rss(proc.pid))
            elapsed = time.monotonic() - start
            if elapsed > timeout:
                why = f"timed out after {timeout:g} s"
            elif largest > max_rss:
                why = (
                    f"stopped at {format_size(largest)} resident (--max-rss) after {elapsed:.0f} s"
                )
            if why:
                proc.kill()
                break
            time.sleep(0.1)
        stdout, _ = proc.communicate()
        stderr.seek(0)
        if not why and proc.returncode != 0:
            raise SystemExit(
                f"bench_scale: K = {k} failed (exit {proc.returncode}):\n{stderr.read()}"
            )
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    run = ScaleRun(**lines[0]) if lines else None
    records = lines[1] if len(lines) > 1 else None
    if records is not None and "records_refused" in records:
        records, why = None, records["records_refused"]
    return run, records, why


def row(k, run, records, why):
    if run is None:
        return f"| {k:>5} | {2 * k * (k - 1):>10,} | {why} |" + " |" * 9
    per_transfer = (run.peak_rss - run.baseline_rss) / run.transfers
    error = abs(run.simulated_s - run.closed_form_s) / run.closed_form_s
    if records is not None:
        per_record = (records["records_peak_rss"] - run.baseline_rss) / run.transfers
        records_cells = f"{records['records_s']:.2f} | {per_record:,.0f}"
    else:
        records_cells = f"{why or 'not built (--no-records)'} | "
    return (
        f"| {k:>5} | {run.transfers:>10,} | {run.build_s:.2f} | {run.call_s:.2f} "
        f"| {run.run_s:.2f} | {run.transfers / run.call_s:,.0f} | {format_size(run.peak_rss)} "
        f"| {per_transfer:,.0f} | {records_cells} | {format_time(run.simulated_s)} "
        f"| ok ({error:.0e}) |"
    )


def _size(text):
    try:
        return parse_size(text)
    except CollsimError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Example: python benchmarks/bench_scale.py --ranks 256,1024 --size 1MiB",
    )
    parser.add_argument("--quick", action="store_true", help="K = 64 and 256 only (seconds)")
    parser.add_argument(
        "--ranks", type=str, default=None, help="comma-separated K to run (default 256,1024,4096)"
    )
    parser.add_argument(
        "--size",
        type=_size,
        default=2**20,
        help="bytes per rank, float32, e.g. 1MiB (default) or 64MiB; a "
        "multiple of 4*K bytes so that the K chunks are equal",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds one K may run before it is stopped (600)",
    )
    parser.add_argument(
        "--max-rss",
        type=_size,
        default=8 * 2**30,
        help="resident memory at which a K is stopped (default 8GiB)",
    )
    parser.add_argument(
        "--no-records",
        action="store_true",
        help="do not build the trace's transfer records after the run",
    )
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        measure(args.child, args.count, records=not args.no_records)
        return 0
    try:
        sizes = parse_ranks(args.ranks) if args.ranks else (QUICK_SIZES if args.quick else SIZES)
    except ValueError as error:
        parser.error(str(error))
    if not args.timeout > 0:
        parser.error(f"--timeout {args.timeout}: give a positive number of seconds")
    for k in sizes:
        if args.size % (ITEMSIZE * k):
            nearest = max(1, round(args.size / (ITEMSIZE * k))) * ITEMSIZE * k
            parser.error(
                f"--size {args.size} B is not K = {k} equal float32 chunks: give a "
                f"multiple of {ITEMSIZE * k} B, such as {nearest} B"
            )
    count = args.size // ITEMSIZE

    print(machine_line())
    print(command_line(argv))
    print(
        f"count-only ring all-reduce, {format_size(args.size)} float32 per rank; one run "
        f"per K, each in a fresh process (limits {args.timeout:g} s, "
        f"{format_size(args.max_rss)} resident)"
    )
    if SLOW_ON_UNBATCHED in sizes and not args.quick:
        print(
            f"warning: K = {SLOW_ON_UNBATCHED} moves 16x the transfers of K = 1024 and can "
            "take many minutes and gigabytes on code without batched steps"
        )
    print()
    print(
        "| K ranks | transfers | build (s) | call (s) | run (s) | transfers/s | peak RSS "
        "| bytes / transfer | records (s) | bytes / record | simulated time "
        "| closed form |"
    )
    print("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--|")
    cached = False
    for k in sizes:
        run, records, why = run_child(k, count, not args.no_records, args.timeout, args.max_rss)
        cached = cached or (run is not None and run.schedule_cached)
        print(row(k, run, records, why), flush=True)
    print()
    how = (
        "run = the call (registry.build caches the schedule, so the timed build warmed it)"
        if cached
        else "run = call - build (the call builds its schedule again)"
    )
    print(
        f"{how}; transfers/s = transfers / call; bytes / transfer = (peak RSS after the "
        "call - the peak before the build) / transfers; records = building the trace's "
        "transfer records afterwards (trace.transfers), and bytes / record the same with "
        "the peak after that; closed form = 2(K-1)(alpha + S/(K beta)), its relative "
        "error in brackets"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
