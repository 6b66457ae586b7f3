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

import difflib
import inspect
import os
from dataclasses import dataclass
from functools import cached_property

from .. import topology as topo
from ..errors import ConfigError, DeadlockError, UnmatchedMessagesError
from ..network import MODELS
from ..network.trace import Stats, Trace
from ..units import parse_flops
from .caches import ClusterCaches
from .collective_calls import CollectiveCalls
from .execution import Execution
from .guards import DEFAULT_MAX_EVENTS, DEFAULT_MAX_TIME, check_guard, default_max_ops
from .rank import Rank
from .unyielded import forgotten, unyielded_error

__all__ = ["Cluster", "RunResult"]


@dataclass
class RunResult:
    """What :meth:`Cluster.run` returns; ``stats`` (bytes sent and received per rank and
    per link, message counts: a :class:`~collsim.network.trace.Stats`) is read from the
    trace when first asked for, so a run whose counts nobody reads does not pay for them."""

    returns: list  # per-rank return values of the programs
    time: float  # simulated seconds until the last event, from the engine only
    trace: Trace  # every transfer and compute span
    events: int  # events the engine processed
    ranks: int  # the cluster's size: how many ranks the counts cover

    @cached_property
    def stats(self) -> Stats:
        return self.trace.stats(self.ranks)


def _fast_setting(fast):
    """``fast`` checked, or, when None, read from ``COLLSIM_FAST`` (default on)."""
    if fast is None:
        value = os.environ.get("COLLSIM_FAST", "").strip()
        if value not in ("", "0", "1"):
            raise ConfigError(
                f"COLLSIM_FAST={value!r}: give 0 (the reference path alone) or 1 (the fast "
                "path where it applies, the default)"
            )
        return value != "0"
    if not isinstance(fast, bool):
        raise ConfigError(f"fast={fast!r}: give True or False")
    return fast


class Cluster(CollectiveCalls):
    """K ranks on a topology, each able to run a generator program.

    Parameters
    ----------
    topology : networkx.DiGraph
        From :mod:`collsim.topology` (a preset or :func:`~collsim.topology.from_graph`).
    model : {"maxmin", "ideal"}
        ``"maxmin"`` shares links fairly among flows; ``"ideal"`` ignores other flows.
    compute_rate : str or float, optional
        FLOP/s of one rank, for ``rank.compute(flops=...)``: ``"100TFLOP/s"``, a number,
        or ``"inf"`` for free computation.  Default: the machine's GPU on a hardware preset
        (:mod:`collsim.hardware`, e.g. 989 TFLOP/s on ``dgx-h100``), else 100 TFLOP/s.
    max_ops : int, optional
        Guard on the operations the rank programs issue (each yielded operation, and
        each message an exchange or a collective's schedule sends): past it the run
        stops with a :class:`~collsim.errors.SimulationLimitError` naming the looping
        ranks and what they yield.  Default ``1_000_000 + 4·K·(K-1)``, a few seconds of
        a runaway on a small cluster and room for two all-reduces over all K ranks.
    max_time : float or str
        Guard on simulated seconds (default 86,400: one day).
    max_events : int
        Backstop on engine events (default 200 million).
    protocol : {None, "auto", "simple", "ll128", "ll"}
        NCCL's wire protocol for the collectives' messages (see
        :mod:`collsim.hardware.protocols`): ``"auto"`` picks one per call by size, as
        NCCL's tuner does; a name forces it, as ``NCCL_PROTO`` does.  ``None``, the
        default, is ``"auto"`` on a hardware preset and no protocol model elsewhere.
    faults : Faults, optional
        Stragglers and failures (:mod:`collsim.runtime.faults`): slow ranks and links,
        links that fail and ranks that crash at given times.  A run they stall ends with
        a :class:`~collsim.errors.WatchdogTimeout` naming the culprit, the watchdog's
        timeout after its last progress.

    fast : bool, optional
        Whether a collective run alone (``cluster.all_reduce(...)`` and its siblings) may
        take the fast path (:mod:`collsim.fast`), which gives the same outputs, times and
        trace as the reference path, faster.  ``False`` runs the reference path alone:
        every transfer a message on the event engine, the plain code a debugger steps
        through.  Default: the environment variable ``COLLSIM_FAST`` (``0`` or ``1``),
        else ``True``.
    guard_flags : dict, optional
        For a command that builds the cluster from its flags: the flag that sets each
        guard (``{"max_ops": "--max-ops"}``), which a runaway's message then names.
    choice : {"nccl", "closed_form", "simulated"}, default "nccl"
        Who decides ``algorithm="auto"`` (the default on a hardware preset): NCCL's own
        cost model (:mod:`collsim.collectives.nccl_model`, among the algorithms collsim
        runs there), collsim's closed forms on the topology's links, or a count-only run
        of each candidate.  Where NCCL's model does not apply (a generic topology, nodes
        of unequal size) the closed forms decide.
    tuner : rules of NCCL's example tuner plugin (``nccl_tuner_file.read_rules(path)``), of
        which the first that matches a call decides ``choice="nccl"``'s pick, as under NCCL.

    Every guard takes ``math.inf`` to switch it off; the numbers and why they were
    chosen are in :mod:`collsim.runtime.guards`.  The collective methods
    (:meth:`all_reduce` and its siblings) are in :mod:`collsim.runtime.collective_calls`.
    """

    def __init__(
        self,
        topology,
        model="maxmin",
        compute_rate=None,
        max_time=DEFAULT_MAX_TIME,
        max_events=DEFAULT_MAX_EVENTS,
        max_ops=None,
        protocol=None,
        faults=None,
        guard_flags=None,
        fast=None,
        choice="nccl",
        tuner=(),
    ):
        self.size = topo.check_topology(topology, "Cluster")
        if not isinstance(model, str) or model not in MODELS:
            raise ConfigError(f"unknown network model {model!r}: choose one of {', '.join(MODELS)}")
        self.topology = topology
        self.model = model
        machine = topology.graph.get("machine")
        if compute_rate is None:  # the machine's GPU (a checked number) or 100 TFLOP/s
            self.compute_rate = 100e12 if machine is None else float(machine.compute_rate)
        else:
            self.compute_rate = parse_flops(compute_rate)
        self.max_time = check_guard("max_time", max_time)
        self.max_events = check_guard("max_events", max_events, integer=True)
        default = default_max_ops(self.size)
        self.max_ops = default if max_ops is None else check_guard("max_ops", max_ops, integer=True)
        self.protocol = self.faults = None  # a plain network: no protocol model, no faults
        if protocol is not None or machine is not None:
            from .settings import protocol_setting

            self.protocol = protocol_setting(protocol, machine)
        if faults is not None:
            from .settings import faults_setting

            self.faults = faults_setting(faults, topology, self.max_time)
        # the command-line flags that set the guards ({"max_ops": "--max-ops"}), when a
        # command built this cluster: a runaway's message names them instead of Cluster(...)
        self.guard_flags = dict(guard_flags or {})
        self.fast = _fast_setting(fast)
        self.choice = choice_setting(choice)
        if isinstance(tuner, str | bytes) or not hasattr(tuner, "__iter__"):
            raise ConfigError(f"tuner={tuner!r}: give read_rules(path)'s rules, or () for none")
        self.tuner = tuple(tuner)
        self._routes = {}  # (src, dst) -> (links, α, β): the topology is fixed from here
        self.caches = ClusterCaches()  # what the collectives keep between calls, for its life

    def route(self, src, dst):
        """``(links, α, β)`` of the path from rank ``src`` to rank ``dst`` by the
        topology's routing, before any fault: its directed links, summed latency (s) and
        narrowest bandwidth (bytes/s).  Kept for the cluster's life, so runs after the
        first look up nothing.

        >>> cluster = Cluster(topo.ring(4, "100GB/s", "5us"))
        >>> cluster.route(1, 3)
        (((1, 2), (2, 3)), 1e-05, 100000000000.0)
        """
        found = self._routes.get((src, dst))
        if found is None:
            links = tuple(topo.route(self.topology, src, dst))
            found = self._routes[(src, dst)] = (links, *topo.links_alpha_beta(self.topology, links))
        return found

    def __repr__(self):
        return f"Cluster({self.topology.graph.get('name')}, model={self.model!r})"

    def run(self, program, *args, **kwargs):
        """Run ``program(rank, *args, **kwargs)`` on every rank and return a :class:`RunResult`.

        ``program`` is usually a generator function; a plain function runs and returns at
        once.  Raises :class:`~collsim.DeadlockError` if ranks are left waiting forever.
        """
        if not callable(program):
            raise ConfigError(
                f"Cluster.run({program!r}): give a function of the rank, usually a generator "
                "function (def program(rank): ... yield rank.send(...))"
            )
        if not self.fast:  # the reference path: plain Python, every transfer a record
            return self._run(Trace(), program, args, kwargs)
        from ..fast import engine_run  # the fast setting's storage and collector (the seam)

        with engine_run() as trace:
            return self._run(trace, program, args, kwargs)

    def _run(self, trace, program, args, kwargs):
        """One run of ``program`` on every rank, recorded on ``trace``."""
        execution = Execution(self, trace)
        try:
            procs = []
            for rank_id in range(self.size):
                rank = Rank(rank_id, execution)
                result = program(rank, *args, **kwargs)
                if inspect.isgenerator(result):
                    procs.append(execution.spawn(rank, result, "main"))
                elif forgotten(rank._unyielded):  # it made operations: it forgot `yield`
                    raise unyielded_error(rank_id, rank._unyielded, 0.0, result, plain=True)
                else:
                    procs.append(_Returned(result))
            try:
                execution.run()
            except DeadlockError as exc:
                exc.trace = execution.trace  # what ran until the hang, for pictures
                _record_faults(execution)
                raise
            except UnmatchedMessagesError as exc:  # every rank ended: the run is complete
                _record_faults(execution)
                exc.result = self._result(execution, procs)
                raise
            _record_faults(execution)
            return self._result(execution, procs)
        finally:
            # the execution's processes, mailboxes and bound handlers refer to each other;
            # cut those cycles now so that its buffers (gigabytes in a numeric collective)
            # are freed when the caller drops the result, not at some later GC pass
            execution.release()

    def _result(self, execution, procs):
        # the run ends when its last rank does: the engine's clock may have run on to a
        # flow's finish scheduled before a re-share sped the flow up (stale, and ignored)
        ends = [proc.ended for proc in execution.processes if proc.ended is not None]
        return RunResult(
            returns=[p.handle.value for p in procs],
            time=max(ends, default=execution.engine.now),
            trace=execution.trace,
            events=execution.engine.events,
            ranks=self.size,
        )


CHOICES = ("nccl", "closed_form", "simulated")


def choice_setting(choice):
    key = str(choice).strip().lower().replace("-", "_")
    if key not in CHOICES:
        near = difflib.get_close_matches(key, CHOICES, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ConfigError(f"choice={choice!r}{hint}: choose one of {', '.join(CHOICES)}")
    return key


def _record_faults(execution):
    """What the faults did, kept on the trace (``trace.faults``) for reports and pictures;
    a run without faults keeps None there and never imports the fault log."""
    if execution.faults:
        from .fault_log import record_faults

        record_faults(execution)


class _Returned:
    """A rank whose program was a plain function: it is done before time starts."""

    def __init__(self, value):
        self.handle = type("Done", (), {"value": value})()
