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
import os
from dataclasses import dataclass
from functools import cached_property

from .. import topology as topo
from ..errors import ConfigError, DeadlockError, UnmatchedMessagesError
from ..hardware.protocols import check_protocol
from ..network import MODELS
from ..network.trace import Stats, Trace
from ..units import parse_flops
from .caches import ClusterCaches
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


class Cluster:
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

    Every guard takes ``math.inf`` to switch it off; the numbers and why they were
    chosen are in :mod:`collsim.runtime.guards`.
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
    ):
        self.size = topo.check_topology(topology, "Cluster")
        if not isinstance(model, str) or model not in MODELS:
            raise ConfigError(f"unknown network model {model!r}: choose one of {', '.join(MODELS)}")
        self.topology = topology
        self.model = model
        if compute_rate is None:
            machine = topology.graph.get("machine")
            compute_rate = 100e12 if machine is None else machine.compute_rate
        self.compute_rate = parse_flops(compute_rate)
        self.max_time = check_guard("max_time", max_time)
        self.max_events = check_guard("max_events", max_events, integer=True)
        default = default_max_ops(self.size)
        self.max_ops = default if max_ops is None else check_guard("max_ops", max_ops, integer=True)
        self.protocol = _protocol_setting(protocol, topology)
        self.faults = _faults_setting(faults, topology, self.max_time)
        # the command-line flags that set the guards ({"max_ops": "--max-ops"}), when a
        # command built this cluster: a runaway's message names them instead of Cluster(...)
        self.guard_flags = dict(guard_flags or {})
        self.fast = _fast_setting(fast)
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
            found = self._routes[(src, dst)] = (links, *topo.links_alpha_beta(self.topology,
                                                                              links))  # fmt: skip
        return found

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
        if not callable(program):
            raise ConfigError(
                f"Cluster.run({program!r}): give a function of the rank, usually a generator "
                "function (def program(rank): ... yield rank.send(...))"
            )
        collecting = gc.isenabled()
        if self.fast:  # a speed setting: the reference path (fast=False) leaves it on
            gc.disable()
        try:
            execution = Execution(self)
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
            if "execution" in locals():
                execution.release()
            if collecting:
                gc.enable()

    def _result(self, execution, procs):
        return RunResult(
            returns=[p.handle.value for p in procs],
            time=execution.engine.now,
            trace=execution.trace,
            events=execution.engine.events,
            ranks=self.size,
        )

    # -- collectives on the whole cluster (or a group), from plain code -------------------

    def collective(self, name, buffers=None, **options):
        """Run collective ``name`` once; see :func:`collsim.collectives.api.run_collective`.

        ``name`` is any spelling of a collective (``"all_reduce"``, ``"all-reduce"``,
        ``"allreduce"``); ``options`` are those of the named method below.

        >>> import numpy as np, collsim
        >>> cluster = collsim.Cluster(collsim.topology.ring(2))
        >>> cluster.collective("all-reduce", [np.ones(2), np.ones(2)]).outputs[0].tolist()
        [2.0, 2.0]
        """
        from ..collectives.api import run_collective

        return run_collective(self, name, buffers, **options)

    def all_reduce(
        self,
        buffers=None,
        *,
        protocol=None,
        algorithm=None,
        op="sum",
        group=None,
        count=None,
        dtype="float32",
        root=0,
    ):
        """Every rank ends with the reduction of every rank's buffer.

        Parameters
        ----------
        buffers : list of numpy.ndarray, optional
            One array per group rank, all of one shape and dtype (float64, float32,
            float16, int64 or int32): the numeric mode, which moves the values.  Leave
            it out for the count-only mode, which moves sizes alone (``count``, ``dtype``).
        algorithm : {"ring", "tree", "halving_doubling", "naive"}, optional
            Default ``"ring"``; also ``"hd"`` or ``"rabenseifner"`` for halving-doubling
            and ``"binomial"`` for the tree.
        op : {"sum", "avg", "prod", "max", "min"}, default "sum"
            Or anything whose ``.name`` is one (``torch.distributed.ReduceOp.SUM``).
            Integer ``avg`` truncates toward zero, as NCCL's ``ncclAvg`` does.
        group : list of int or Group, optional
            The ranks taking part (default: all), in group order.
        count : int, optional
            Count-only mode: elements per rank (an int >= 0, as nccl-tests counts them).
        dtype : {"float32", "float64", "float16", "bfloat16", "int64", "int32"}
            Count-only mode: the element type, for its size.
        root : int, default 0
            The group rank the ``"naive"`` algorithm gathers to (ignored by the others).
        protocol : {None, "auto", "simple", "ll128", "ll"}, optional
            NCCL's wire protocol for this call (default: the cluster's ``protocol``); every
            collective method takes it.

        Returns
        -------
        CollectiveResult
            ``outputs[r]`` (same shape as the input; ``None`` in count-only mode),
            ``stats`` (bytes per rank, steps), ``time`` (simulated s), ``trace``,
            ``steps()`` (the step-through).

        Examples
        --------
        >>> import numpy as np, collsim
        >>> cluster = collsim.Cluster(collsim.topology.ring(4, "100GB/s", "5us"))
        >>> out = cluster.all_reduce([np.full((2, 3), r) for r in range(4)], op="avg")
        >>> out.outputs[0].tolist(), out.stats.steps
        ([[1, 1, 1], [1, 1, 1]], 6)
        >>> cluster.all_reduce(count=2**20, dtype="bfloat16", algorithm="tree").stats.steps
        4
        """
        return self.collective(
            "all_reduce",
            buffers,
            protocol=protocol,
            algorithm=algorithm,
            op=op,
            group=group,
            count=count,
            dtype=dtype,
            root=root,
        )

    def reduce_scatter(
        self,
        buffers=None,
        *,
        protocol=None,
        algorithm=None,
        op="sum",
        group=None,
        count=None,
        dtype="float32",
    ):
        """Group rank r ends with part r of the reduction, split along the first axis.

        As torch's ``reduce_scatter_tensor``: a (12, 5) buffer on 4 ranks gives each a
        (3, 5) part, so K must divide the first axis of an N-D buffer.  A 1-D buffer may
        split unevenly: its first ``n mod K`` parts are one element longer.

        Parameters
        ----------
        buffers : list of numpy.ndarray, optional
            One array per group rank, one shape and dtype; leave out for count-only.
        algorithm : {"ring"}, optional
            The only one (default).
        op : {"sum", "avg", "prod", "max", "min"}, default "sum"
        group : list of int or Group, optional
            The ranks taking part (default: all).
        count : int, optional
            Count-only mode: elements in each rank's input.
        dtype : str, default "float32"
            Count-only mode: the element type (see :meth:`all_reduce`).

        Returns
        -------
        CollectiveResult

        Examples
        --------
        >>> import numpy as np, collsim
        >>> cluster = collsim.Cluster(collsim.topology.ring(4))
        >>> out = cluster.reduce_scatter([np.ones((12, 5))] * 4)
        >>> out.outputs[1].shape, float(out.outputs[1][0, 0]), out.stats.steps
        ((3, 5), 4.0, 3)
        """
        return self.collective(
            "reduce_scatter",
            buffers,
            protocol=protocol,
            algorithm=algorithm,
            op=op,
            group=group,
            count=count,
            dtype=dtype,
        )

    def all_gather(
        self,
        buffers=None,
        *,
        protocol=None,
        algorithm=None,
        group=None,
        count=None,
        dtype="float32",
    ):
        """Every rank ends with every rank's buffer, concatenated along the first axis.

        As torch's ``all_gather_into_tensor``: a (3, 5) buffer on 4 ranks gives (12, 5),
        group rank r's rows at ``[3 * r : 3 * r + 3]``; a 0-d buffer gives (K,).

        Parameters
        ----------
        buffers : list of numpy.ndarray, optional
            One array per group rank, one shape and dtype; leave out for count-only.
        algorithm : {"ring"}, optional
            The only one (default).
        group : list of int or Group, optional
            The ranks taking part (default: all).
        count : int, optional
            Count-only mode: elements in each rank's input (S/K of nccl-tests' S).
        dtype : str, default "float32"
            Count-only mode: the element type (see :meth:`all_reduce`).

        Returns
        -------
        CollectiveResult

        Examples
        --------
        >>> import numpy as np, collsim
        >>> cluster = collsim.Cluster(collsim.topology.ring(4))
        >>> out = cluster.all_gather([np.full((3, 5), r) for r in range(4)])
        >>> out.outputs[0].shape, out.outputs[0][:, 0].tolist()
        ((12, 5), [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3])
        """
        return self.collective(
            "all_gather",
            buffers,
            protocol=protocol,
            algorithm=algorithm,
            group=group,
            count=count,
            dtype=dtype,
        )

    def broadcast(
        self,
        buffers=None,
        *,
        protocol=None,
        root=0,
        algorithm=None,
        group=None,
        count=None,
        dtype="float32",
    ):
        """Every rank ends with group rank ``root``'s buffer (same shape).

        Parameters
        ----------
        buffers : list of numpy.ndarray, optional
            One array per group rank (only the root's values matter; all must have one
            shape and dtype, as the receivers' buffers do in torch); leave out for
            count-only.
        root : int, default 0
            The sending group rank, 0..K-1.
        algorithm : {"tree", "ring"}, optional
            Default ``"tree"`` (binomial); ``"ring"`` (or ``"chain"``) is the pipelined
            chain root -> root+1 -> ... along the ring's links, in K chunks.
        group : list of int or Group, optional
            The ranks taking part (default: all).
        count : int, optional
            Count-only mode: elements per rank.
        dtype : str, default "float32"
            Count-only mode: the element type (see :meth:`all_reduce`).

        Returns
        -------
        CollectiveResult

        Examples
        --------
        >>> import numpy as np, collsim
        >>> cluster = collsim.Cluster(collsim.topology.ring(4))
        >>> out = cluster.broadcast([np.full(4, r) for r in range(4)], root=2, algorithm="ring")
        >>> [o.tolist() for o in out.outputs][3], out.stats.steps
        ([2, 2, 2, 2], 6)
        """
        return self.collective(
            "broadcast",
            buffers,
            protocol=protocol,
            root=root,
            algorithm=algorithm,
            group=group,
            count=count,
            dtype=dtype,
        )

    def reduce(
        self,
        buffers=None,
        *,
        protocol=None,
        root=0,
        algorithm=None,
        op="sum",
        group=None,
        count=None,
        dtype="float32",
    ):
        """Group rank ``root`` ends with the reduction (same shape); the others get ``None``.

        Parameters
        ----------
        buffers : list of numpy.ndarray, optional
            One array per group rank, one shape and dtype; leave out for count-only.
        root : int, default 0
            The receiving group rank, 0..K-1.
        algorithm : {"tree", "ring"}, optional
            Default ``"tree"`` (binomial); ``"ring"`` (or ``"chain"``) is the pipelined
            chain root+1 -> root+2 -> ... -> root along the ring's links: the ring
            broadcast run backwards, in the same steps and time.
        op : {"sum", "avg", "prod", "max", "min"}, default "sum"
        group : list of int or Group, optional
            The ranks taking part (default: all).
        count : int, optional
            Count-only mode: elements per rank.
        dtype : str, default "float32"
            Count-only mode: the element type (see :meth:`all_reduce`).

        Returns
        -------
        CollectiveResult

        Examples
        --------
        >>> import numpy as np, collsim
        >>> cluster = collsim.Cluster(collsim.topology.ring(3))
        >>> out = cluster.reduce([np.arange(3) * r for r in range(3)], root=1, op="max")
        >>> out.outputs
        [None, array([0, 2, 4]), None]
        """
        return self.collective(
            "reduce",
            buffers,
            protocol=protocol,
            root=root,
            algorithm=algorithm,
            op=op,
            group=group,
            count=count,
            dtype=dtype,
        )

    def all_to_all(
        self,
        buffers=None,
        *,
        protocol=None,
        algorithm=None,
        group=None,
        count=None,
        dtype="float32",
    ):
        """Part j of group rank r's buffer ends as part r of rank j's (same shape).

        As torch's ``all_to_all_single``: parts are equal blocks along the first axis
        (1-D: of the elements), so K must divide it.

        Parameters
        ----------
        buffers : list of numpy.ndarray, optional
            One array per group rank, one shape and dtype; leave out for count-only.
        algorithm : {"direct"}, optional
            The only one (default): step s sends part r+s straight to rank r+s.
        group : list of int or Group, optional
            The ranks taking part (default: all).
        count : int, optional
            Count-only mode: elements per rank, a multiple of K.
        dtype : str, default "float32"
            Count-only mode: the element type (see :meth:`all_reduce`).

        Returns
        -------
        CollectiveResult

        Examples
        --------
        >>> import numpy as np, collsim
        >>> cluster = collsim.Cluster(collsim.topology.switch(2))
        >>> out = cluster.all_to_all([np.array([[0, 1], [2, 3]]), np.array([[4, 5], [6, 7]])])
        >>> out.outputs[0].tolist(), out.outputs[1].tolist()
        ([[0, 1], [4, 5]], [[2, 3], [6, 7]])
        """
        return self.collective(
            "all_to_all",
            buffers,
            protocol=protocol,
            algorithm=algorithm,
            group=group,
            count=count,
            dtype=dtype,
        )


def _record_faults(execution):
    """What the faults did, kept on the trace (``trace.faults``) for reports and
    pictures: None for a run without faults."""
    if execution.faults:
        network = execution.network
        execution.trace.faults = FaultLog(execution.faults, tuple(network.reroutes),
                                          tuple(network.stalled),
                                          dict(execution._crashed))  # fmt: skip


@dataclass(frozen=True)
class FaultLog:
    """The faults of a run (``faults``) and what they did: the flows rerouted off failed
    links (:class:`~collsim.network.flows.Reroute`), the flows that stalled
    (:class:`~collsim.network.flows.Stall`) and the ranks that crashed, with their times."""

    faults: object
    reroutes: tuple
    stalls: tuple
    crashed: dict


class _Returned:
    """A rank whose program was a plain function: it is done before time starts."""

    def __init__(self, value):
        self.handle = type("Done", (), {"value": value})()


def _faults_setting(faults, topology, max_time):
    """The cluster's :class:`~collsim.runtime.faults.Faults`, checked against the
    topology, or None when there is none."""
    from .faults import Faults

    if faults is None:
        return None
    if not isinstance(faults, Faults):
        raise ConfigError(
            f"Cluster(faults={faults!r}): give a collsim.runtime.faults.Faults, e.g. "
            "Faults.parse(slow_link=['2-3:0.25'])"
        )
    return faults.check(topology, max_time) if faults else None


def _protocol_setting(protocol, topology):
    """``"auto"``, a :class:`~collsim.hardware.protocols.Protocol`, or ``None`` (no
    protocol model): the cluster's ``protocol`` as given, checked."""
    if protocol is None:
        return "auto" if topology.graph.get("machine") is not None else None
    if isinstance(protocol, str) and protocol.strip().lower() == "auto":
        return "auto"
    return check_protocol(protocol)
