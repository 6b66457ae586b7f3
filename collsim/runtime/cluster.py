"""The virtual cluster: a topology, a network model, and ``run`` for rank programs.

Examples
--------
>>> import numpy as np, collsim
>>> def program(rank):
...     x = np.full(4, float(rank.id))
...     if rank.id == 0:
...         yield rank.send(1, x)            # completes when the data has arrived
...     elif rank.id == 1:
...         y = yield rank.recv(0)           # resumes with the array rank 0 sent
...         yield rank.compute(seconds=1e-3)
...         return float(y.sum())
>>> cluster = collsim.Cluster(collsim.topology.ring(4, bandwidth="100GB/s", latency="5us"))
>>> result = cluster.run(program)
>>> result.returns
[None, 0.0, None, None]
>>> round(result.time, 12)                  # 5 us + 32 B / 100 GB/s + 1 ms of compute
0.00100500032
>>> result.stats.bytes_sent
[32, 0, 0, 0]
"""

import gc
import inspect
from dataclasses import dataclass

from .. import topology as topo
from ..errors import ConfigError, DeadlockError
from ..network import MODELS
from ..network.trace import Stats, Trace
from ..units import parse_flops
from .execution import Execution
from .rank import Rank

__all__ = ["Cluster", "RunResult"]


@dataclass
class RunResult:
    """What :meth:`Cluster.run` returns."""

    returns: list  # per-rank return values of the programs
    time: float  # simulated seconds until the last event, from the engine only
    stats: Stats  # bytes sent/received per rank and per link, message counts
    trace: Trace  # every transfer and compute span
    events: int  # events the engine processed


class Cluster:
    """K ranks on a topology, each able to run a generator program.

    Parameters
    ----------
    topology : networkx.DiGraph
        From :mod:`collsim.topology` (a preset or :func:`~collsim.topology.from_graph`).
    model : {"maxmin", "ideal"}
        ``"maxmin"`` shares links fairly among flows; ``"ideal"`` ignores other flows.
    compute_rate : str or float
        FLOP/s of one rank, for ``rank.compute(flops=...)``: ``"100TFLOP/s"`` (the
        default), a number, or ``"inf"`` for free computation.
    max_time, max_events :
        Guards that turn a program that would run forever into an error.
    """

    def __init__(
        self,
        topology,
        model="maxmin",
        compute_rate=100e12,
        max_time=86_400.0,
        max_events=200_000_000,
    ):
        if model not in MODELS:
            raise ConfigError(f"unknown network model {model!r}: choose one of {', '.join(MODELS)}")
        self.topology = topology
        self.model = model
        self.compute_rate = parse_flops(compute_rate)
        self.max_time = max_time
        self.max_events = max_events
        self.size = len(topo.ranks_of(topology))

    def __repr__(self):
        return f"Cluster({self.topology.graph.get('name')}, model={self.model!r})"

    def run(self, program, *args, **kwargs):
        """Run ``program(rank, *args, **kwargs)`` on every rank and return a :class:`RunResult`.

        ``program`` is usually a generator function; a plain function runs and returns at
        once.  Raises :class:`~collsim.DeadlockError` if ranks are left waiting forever.
        """
        # the run allocates millions of small, acyclic objects (events, flows, trace
        # records, and a collective's schedule, built when the programs first run at
        # spawn); the cyclic collector would rescan all of them again and again
        collecting = gc.isenabled()
        gc.disable()
        try:
            execution = Execution(self)
            procs = []
            for rank_id in range(self.size):
                rank = Rank(rank_id, execution)
                result = program(rank, *args, **kwargs)
                if inspect.isgenerator(result):
                    procs.append(execution.spawn(rank, result, "main"))
                else:
                    procs.append(_Returned(result))
            execution.engine.run()
            try:
                execution.finish()
            except DeadlockError as exc:
                exc.trace = execution.trace  # what ran until the hang, for pictures
                raise
            trace = execution.trace
            return RunResult(
                returns=[p.handle.value for p in procs],
                time=execution.engine.now,
                stats=trace.stats(self.size),
                trace=trace,
                events=execution.engine.events,
            )
        finally:
            # the execution's processes, mailboxes and bound handlers refer to each other;
            # cut those cycles now so that its buffers (gigabytes in a numeric collective)
            # are freed when the caller drops the result, not at some later GC pass
            if "execution" in locals():
                execution.release()
            if collecting:
                gc.enable()

    # -- collectives on the whole cluster (or a group), from plain code -------------------

    def collective(self, name, buffers=None, **options):
        """Run collective ``name`` once; see :func:`collsim.collectives.api.run_collective`."""
        from ..collectives.api import run_collective

        return run_collective(self, name, buffers, **options)

    def all_reduce(self, buffers=None, **options):
        """``outputs[r]`` = the reduction of every buffer, for every rank."""
        return self.collective("all_reduce", buffers, **options)

    def reduce_scatter(self, buffers=None, **options):
        """``outputs[r]`` = chunk r of the reduction."""
        return self.collective("reduce_scatter", buffers, **options)

    def all_gather(self, buffers=None, **options):
        """``outputs[r]`` = every buffer, concatenated."""
        return self.collective("all_gather", buffers, **options)

    def broadcast(self, buffers=None, **options):
        """``outputs[r]`` = the root's buffer (``root=`` a group rank, default 0)."""
        return self.collective("broadcast", buffers, **options)

    def reduce(self, buffers=None, **options):
        """``outputs[root]`` = the reduction; ``None`` elsewhere."""
        return self.collective("reduce", buffers, **options)

    def all_to_all(self, buffers=None, **options):
        """``outputs[j]`` chunk r = rank r's chunk j."""
        return self.collective("all_to_all", buffers, **options)


class _Returned:
    """A rank whose program was a plain function: it is done before time starts."""

    def __init__(self, value):
        self.handle = type("Done", (), {"value": value})()
