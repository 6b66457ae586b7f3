"""``collsim exec -n K script.py [args...]``: run an unmodified mpi4py script on K simulated
ranks, as ``mpirun -n K --tag-output python script.py args...`` runs it on a real cluster."""

import argparse
import copy
import sys

from .. import units
from ..errors import DeadlockError, WatchdogTimeout
from ..runtime.guards import EXEC_OPS_BASE
from .common import Formatter, add_cluster_arguments, check_int, cluster_from_args
from .exit_status import Meaning
from .guards import GUARD_FLAGS, add_guard_arguments, guards_from_args
from .paths import check_output_path

__all__ = [
    "register",
    "run_exec",
    "script_argv",
    "summary_lines",
    "unmatched_warning",
    "INTERRUPTED",
]

INTERRUPTED = 130  # the exit status of a run stopped by Ctrl-C (128 + SIGINT), as a shell's

EXIT_STATUS = Meaning(
    ok="the script ran on every rank (a message left unmatched only warns, unless --strict)",
    failed="a rank raised (or exited non-zero), the script would hang, or a "
    "guard stopped it; 130 Ctrl-C",
)

DESCRIPTION = """\
Run an ordinary mpi4py program, unchanged, on K ranks of a virtual cluster.

What runs where: every rank runs the whole script, as `mpirun -n K python script.py` does,
each in its own thread of this one process (one thread at a time, in simulated-time order, so
every run is the same). A thread the script starts makes MPI calls of its own, as under
MPI_THREAD_MULTIPLE; its join(), Event and Queue waits take simulated time. Within the run
`from mpi4py import MPI` is collsim's MPI (collsim.mpi): messages and collectives move the
real arrays over the simulated network (--topology, --bandwidth, --latency), with the
algorithm --algorithm names. A real mpi4py,
if installed, is not touched. A script that imports torch runs its torch.distributed calls
(real tensors) on collsim's torch backend: init_process_group() with any backend name, or none,
is collsim's (pip install 'collsim[torch]'; without torch such a script is refused, exit 2).
collsim.distributed is the same API on numpy arrays (`import collsim.distributed as dist`).

Time: MPI.Wtime() is simulated time. Communication takes the time the network model gives;
the Python between the calls is FREE (0 s) unless the program says what it costs with
collsim.compute(seconds=...) or collsim.compute(flops=...). So a ping-pong measures the
link's latency and bandwidth exactly, and a compute loop takes no time at all.

Output: each rank's lines are prefixed with its rank as `mpirun --tag-output` prefixes them
([1,0]<stdout>:...), so the output compares line for line with a real run's. At the end
collsim prints, to stderr, the simulated time, the bytes each rank sent and, with --trace,
writes the Chrome/Perfetto trace (open it at ui.perfetto.dev).

A rank that raises stops the run with its traceback (exit 1); a program that would hang on a
real cluster stops at once with a report naming each rank, the call it is blocked in and its
line. A program that loops for ever stops at a guard (--max-ops, --max-time), with a report
of what each rank was doing; Ctrl-C stops any run at once, says where each rank was and
exits 130. A message no rank received is a warning at the end, as at MPI_Finalize (exit 0;
--strict makes it an error). Each rank's __main__ is its own module, so unittest.main(),
doctest.testmod() and pickle find the script's classes and functions; so is every module
in the script's folder (each rank imports its own copy, as each mpirun process does).

Differences from mpirun: the ranks share one interpreter, so library modules (numpy, ...)
are imported once for all ranks (their module-level state is shared), sys.argv is the same
for every rank, and so is sys.stdout (doctest's examples that communicate may mix the
ranks' output).

examples:
  collsim exec -n 4 examples/mpi_pi.py
  collsim exec -n 2 --latency 2us --bandwidth 25GB/s examples/mpi_ping_pong.py
  collsim exec -n 8 --topology switch --algorithm tree examples/mpi_parallel_sum.py
  collsim exec -n 6 examples/mpi_split.py 2 3      # a 2 x 3 grid of ranks
  collsim exec -n 4 --trace ring.json examples/mpi_ring_pass.py

Everything after the script is the script's own argv, as with mpirun: put collsim's flags
before it.
"""


def register(subparsers):
    p = subparsers.add_parser(
        "exec",
        help="run an unmodified mpi4py script on K simulated ranks (like mpirun -n K)",
        description=DESCRIPTION,
        formatter_class=Formatter,
    )
    p.add_argument(
        "--algorithm",
        "-a",
        default=None,
        help="the algorithm MPI collectives run: ring (default, MPICH's choice for large "
        "messages), tree, halving_doubling, naive, direct, or auto",
    )
    p.add_argument(
        "--trace",
        metavar="FILE",
        default=None,
        help="write the run's Chrome/Perfetto trace JSON here",
    )
    p.add_argument("script", help="the Python file every rank runs (as __main__)")
    p.add_argument(
        "args", nargs=argparse.REMAINDER, help="the script's own arguments (its sys.argv[1:])"
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="a message no rank received is an error (exit 1); by default it is "
        "a warning, as mpirun reports it at MPI_Finalize and exits 0",
    )
    add_cluster_arguments(
        p,
        ranks=4,
        rank_flags=("-n", "-np", "--np", "--ranks", "-k"),
        rank_help="number of ranks, as mpirun's -n / -np",
    )
    add_guard_arguments(p, max_ops_default=f"{EXEC_OPS_BASE:,} + 4K(K-1)")
    p.set_defaults(func=run_exec)


def run_exec(args):
    from .. import launch

    check_int(
        args.ranks, "-n", minimum=1, maximum=launch.MAX_EXEC_RANKS, hint="one thread per rank"
    )
    launch.load_script(args.script)  # a missing file or a syntax error, before anything
    launch.check_algorithm(args.algorithm, flag="--algorithm")
    if args.trace is not None:
        launch.check_trace(check_output_path(args.trace, "--trace"), flag="--trace")
    guards = guards_from_args(args, args.ranks)
    cluster = cluster_from_args(args, guard_flags=GUARD_FLAGS, **guards)
    try:
        result = launch.exec_script(
            args.script,
            argv=script_argv(args),
            cluster=cluster,
            algorithm=args.algorithm,
            strict=args.strict,
        )
    except DeadlockError as exc:  # the report, said of the script (a copy: same fields)
        what = "stalled" if isinstance(exc, WatchdogTimeout) else "would hang forever"
        error = copy.copy(exc)
        error.args = (f"{args.script} on {cluster.size} ranks {what}: {exc}",)
        raise error from None
    except KeyboardInterrupt as exc:  # Ctrl-C: where each rank was, as the status says
        sys.stdout.flush()
        print(
            f"collsim exec: interrupted (Ctrl-C): {args.script} on {cluster.size} ranks",
            *getattr(exc, "__notes__", ()),
            sep="\n",
            file=sys.stderr,
        )
        return INTERRUPTED
    sys.stdout.flush()
    if result.unmatched:  # what MPI_Finalize warns of; the run itself completed
        print(unmatched_warning(result.unmatched_report), file=sys.stderr)
    for line in summary_lines(result, args):
        print(line, file=sys.stderr)
    if args.trace is not None:
        try:
            result.trace.to_chrome(args.trace)
        except OSError as exc:
            from ..errors import ConfigError

            raise ConfigError(f"--trace {args.trace}: cannot write it ({exc.strerror})") from None
        print(f"# trace written to {args.trace} (open it at ui.perfetto.dev)", file=sys.stderr)
    return 0


def unmatched_warning(report):
    """The warning for messages no rank received, as MPI implementations give at finalize;
    ``report`` is the run's sentences about them (``ExecResult.unmatched_report``).

    >>> print(unmatched_warning(["rank 0 sent to rank 1 with tag 3, but rank 1 never ..."]))
    collsim exec: warning: messages left unmatched at the end (--strict: an error):
      rank 0 sent to rank 1 with tag 3, but rank 1 never ...
    """
    head = "collsim exec: warning: messages left unmatched at the end (--strict: an error):"
    return "\n".join([head] + [f"  {line}" for line in report])


def script_argv(args, command_line=None):
    """The script's arguments as typed: ``collsim``'s main() writes ``--shift -1`` as
    ``--shift=-1`` for its own flags, which the script must not see, so on the command line
    they are read back from ``sys.argv`` (where the parsed ones came from).

    >>> ns = argparse.Namespace(script="a.py", args=["--shift=-1"])
    >>> script_argv(ns, ["collsim", "exec", "-n", "2", "a.py", "--shift", "-1"])
    ['--shift', '-1']
    """
    from .common import join_negative_values

    raw = list(sys.argv if command_line is None else command_line)[1:]
    for start in range(len(raw) - 1, -1, -1):  # the last "a.py" whose tail parses to args
        tail = raw[start + 1 :]
        if raw[start] == args.script and join_negative_values(tail) == args.args:
            return tail
    return list(args.args)  # called in-process (main(argv)): what was given


def summary_lines(result, args):
    """The lines printed to stderr after the run: time and bytes sent per rank."""
    sent = result.bytes_sent
    network = (
        f"{args.topology}, {args.bandwidth} per link, {args.latency} latency"
        if args.topology
        in ("ring", "bidirectional_ring", "fully_connected", "switch", "torus2d", "hierarchical")
        else args.topology
    )
    lines = [
        f"# collsim exec: {args.script} on {len(sent)} ranks ({network})",
        f"# simulated time {units.format_time(result.time)}; bytes sent "
        f"{units.format_size(sum(sent))} in all",
    ]
    per_rank = [f"r{r} {units.format_size(b)}" for r, b in enumerate(sent)]
    for start in range(0, len(per_rank), 8):
        lead = "# bytes sent per rank: " if start == 0 else "#" + " " * 21
        lines.append(lead + ", ".join(per_rank[start : start + 8]))
    return lines
