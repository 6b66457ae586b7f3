"""One forward and backward of an MoE layer on an ep group, and the same on one device.

:func:`expert_parallel_step` runs :class:`~collsim.parallel.experts.ExpertParallelMoE` on a
switch of ``ep`` ranks: rank r holds tokens ``r·T/ep .. (r+1)·T/ep`` and experts
``r·E/ep .. (r+1)·E/ep``, its loss is the mean squared error over its tokens (plus the
auxiliary loss), and the gradients are reduced by ``sync`` (:func:`.sync.sync_grads`).
:func:`dense_step` is the oracle: :class:`collsim.nn.MoE` on all the tokens at once, the
mean over all of them, capacity counted per rank's block as the ranks count it.  Both give
an :class:`MoEGrads`; the run also gives each rank's load (:class:`RankLoad`), read from
the run: rows its experts computed, bytes from the trace, time, memory peak.

Examples
--------
>>> import numpy as np
>>> from collsim.nn import MoE, RouterConfig
>>> rng = np.random.default_rng(0)
>>> moe = MoE.init(4, 8, RouterConfig(experts=4, top_k=2), rng)
>>> x, target = rng.normal(size=(8, 4)), rng.normal(size=(8, 4))
>>> run = expert_parallel_step(moe, x, target, ep=2)
>>> oracle = dense_step(moe, x, target, ep=2)
>>> max_rel_diff(run.result, oracle) < 1e-12
True
>>> sum(load.rows_received for load in run.loads)  # 8 tokens x 2 experts, none dropped
16
"""

from dataclasses import dataclass

import numpy as np

from ...collectives.all_to_allv import RaggedTransfer
from ...collectives.records import CollectiveStep
from ...errors import ConfigError
from ...network.memory import memory_peaks
from ...nn.losses import mse_loss
from ...runtime.cluster import Cluster
from ...runtime.group import Group
from ...topology import hierarchical, switch
from ..modules import LayerPass
from .hierarchical import check_nodes
from .layer import ExpertParallelMoE
from .sync import sync_grads

__all__ = [
    "MoEGrads",
    "RankLoad",
    "ExpertParallelStep",
    "expert_parallel_step",
    "dense_step",
    "max_rel_diff",
]


@dataclass(frozen=True)
class MoEGrads:
    """A step's output, input gradient, parameter gradients and loss."""

    y: np.ndarray  # (T, d)
    dx: np.ndarray  # (T, d)
    grads: dict  # "router" (d, E), "w_gate", "w_up" (E, d, f), "w_down" (E, f, d)
    loss: float


@dataclass(frozen=True)
class RankLoad:
    """What one rank carried in the step, read from the run."""

    rank: int
    rows_sent: int  # slots of its tokens (kept choices and padding), its own experts' too
    rows_received: int  # rows its experts computed, from every source rank
    dropped: int  # its tokens' choices that capacity dropped
    dispatch_sent: int  # bytes, forward token dispatch (rows to other ranks)
    dispatch_received: int  # bytes
    combine_sent: int  # bytes, forward combine (outputs back)
    combine_received: int  # bytes
    inter_node_sent: int  # bytes of its forward dispatch and combine sent to another node
    expert_compute: float  # s: its experts' compute, forward and backward
    finished: float  # s: when it finished forward and backward (before the gradient sync)
    peak_memory: int  # bytes of activations it held at once (bf16, as registered)


@dataclass(frozen=True)
class ExpertParallelStep:
    """The cluster's step: the assembled result, every rank's load, and the run."""

    result: MoEGrads
    loads: tuple  # RankLoad per rank
    expert_counts: np.ndarray  # (ep, E) rows each source rank sent to each expert
    node_tokens: np.ndarray  # (ep, nodes) distinct tokens each rank sent to each node
    time: float  # s: the step's simulated time, the slowest rank's
    trace: object


@dataclass(frozen=True)
class _RankOutcome:
    y: np.ndarray
    dx: np.ndarray
    grads: dict
    loss: float
    expert_counts: np.ndarray
    dropped: int
    rows_received: int
    finished: float
    forward_end: float  # s: when its forward pass ended
    node_tokens: np.ndarray  # (nodes,) its distinct tokens with a slot on each node


def _blocks(x, ep, what):
    if len(x) % ep:
        raise ConfigError(f"{what}: {len(x)} tokens do not split over ep={ep} ranks equally")
    return np.split(np.asarray(x, dtype=np.float64), ep)


def expert_parallel_step(
    moe,
    x,
    target,
    ep,
    prior=None,
    sync=sync_grads,
    bandwidth="100GB/s",
    latency="5us",
    compute_rate=100e12,
    dispatcher="alltoall",
    gpus_per_node=None,
    inter_bandwidth="50GB/s",
    inter_latency="5us",
):
    """Run one step of ``moe`` with expert parallelism over ``ep`` ranks, its tokens sent by
    ``dispatcher`` (``"alltoall"``, ``"allgather"`` or ``"hierarchical"``).  The ranks are
    one switch, or with ``gpus_per_node`` nodes of a two-level topology (``bandwidth`` and
    ``latency`` inside a node, ``inter_bandwidth`` and ``inter_latency`` per NIC)."""
    xs, targets = _blocks(x, ep, "tokens"), _blocks(target, ep, "targets")
    priors = [None] * ep if prior is None else _blocks(prior, ep, "prior")
    group = Group(range(ep))

    def program(rank):
        layer = ExpertParallelMoE.from_full(
            moe, group, rank.id, dispatcher=dispatcher, gpus_per_node=gpus_per_node
        )
        y, ctx = yield from layer.forward(rank, xs[rank.id], priors[rank.id])
        forward_end = rank.now
        loss, dy = mse_loss(y, targets[rank.id])
        dx, grads = yield from layer.backward(rank, ctx, dy)
        finished = rank.now  # before the gradient reduction, which waits for every rank
        grads = yield from sync(rank, layer, grads)
        routing = ctx["routing"]
        return _RankOutcome(
            y,
            dx,
            grads,
            float(loss) + ctx["aux_loss"],
            routing.counts(1)[0],
            routing.dropped,
            int(np.sum(ctx["per_expert"])),
            finished,
            forward_end,
            _node_tokens(routing, moe.config.experts, ep // layer.gpus_per_node),
        )

    G = ep if gpus_per_node is None else gpus_per_node
    check_nodes(ep, G, moe.config.experts)
    if G == ep:
        topology = switch(ep, bandwidth, latency)
    else:
        topology = hierarchical(ep // G, G, bandwidth, inter_bandwidth, latency, inter_latency)
    cluster = Cluster(topology, compute_rate=compute_rate)
    run = cluster.run(program)
    outs = run.returns
    grads = {"router": outs[0].grads["router"]}
    for key in ("w_gate", "w_up", "w_down"):
        grads[key] = np.concatenate([o.grads[key] for o in outs])
    result = MoEGrads(
        np.concatenate([o.y for o in outs]),
        np.concatenate([o.dx for o in outs]) / ep,
        grads,
        float(np.mean([o.loss for o in outs])),
    )
    counts = np.array([o.expert_counts for o in outs])
    phases = _forward_bytes(run.trace, [o.forward_end for o in outs], [r // G for r in range(ep)])
    loads = tuple(_load(r, outs[r], run.trace, ep, phases) for r in range(ep))
    node_tokens = np.array([o.node_tokens for o in outs])
    return ExpertParallelStep(result, loads, counts, node_tokens, run.time, run.trace)


# the forward pass's exchanges by the name each dispatcher gives them
FORWARD_CALLS = {
    "dispatch": "dispatch",
    "dispatch-inter": "dispatch",
    "dispatch-intra": "dispatch",
    "combine": "combine",
    "combine-intra": "combine",
    "combine-inter": "combine",
}


def _node_tokens(routing, experts, nodes):
    """(nodes,) distinct tokens of this rank with a slot on each node."""
    on = routing.slot_expert // (experts // nodes)
    return np.array([len(np.unique(routing.slot_token[on == m])) for m in range(nodes)])


def _forward_bytes(trace, forward_end, node_of):
    """``{(phase, "sent" | "received", rank): bytes}`` of the forward pass's dispatch and
    combine, read from the trace: the all-to-all dispatcher's transfers carry their call in
    a :class:`RaggedTransfer` record; the all-gather dispatcher's are collectives (their tag a
    :class:`CollectiveStep`) that started before the sender's forward pass ended: its
    all-gathers dispatch, its reduce-scatter combines."""
    moved = {}
    for t in trace.transfers:
        if isinstance(t.meta, RaggedTransfer):
            phase = FORWARD_CALLS.get(t.meta.call)
        elif isinstance(t.tag, CollectiveStep) and t.start < forward_end[t.src]:
            phase = {"all_gather": "dispatch", "reduce_scatter": "combine"}.get(t.tag.collective)
        else:
            continue
        if phase is None:
            continue
        for side, rank in (("sent", t.src), ("received", t.dst)):
            moved[phase, side, rank] = moved.get((phase, side, rank), 0) + t.nbytes
        if node_of[t.src] != node_of[t.dst]:
            moved["inter", "sent", t.src] = moved.get(("inter", "sent", t.src), 0) + t.nbytes
    return moved


def _load(r, out, trace, ep, moved):
    return RankLoad(
        r,
        int(out.expert_counts.sum()),
        out.rows_received,
        out.dropped,
        moved.get(("dispatch", "sent", r), 0),
        moved.get(("dispatch", "received", r), 0),
        moved.get(("combine", "sent", r), 0),
        moved.get(("combine", "received", r), 0),
        moved.get(("inter", "sent", r), 0),
        sum(c.end - c.start for c in trace.computes if c.rank == r and _expert_span(c)),
        out.finished,
        memory_peaks(trace, ep)[r].total,
    )


def _expert_span(compute):
    return isinstance(compute.meta, LayerPass) and compute.meta.layer.endswith(".experts")


def dense_step(moe, x, target, ep, prior=None):
    """The oracle: ``moe`` on all tokens on one device, capacity per block of T/ep."""
    x = np.asarray(x, dtype=np.float64)
    y, ctx = moe.forward(x, ranks=ep, prior=prior)
    loss, dy = mse_loss(y, target)
    dx, grads = moe.backward(ctx, dy)
    return MoEGrads(y, dx, grads, float(loss) + ctx["aux_loss"])


def max_rel_diff(a, b):
    """Largest ``max|a - b| / max|b|`` over the output, the input gradient and every
    parameter gradient (0 where both are all zero)."""
    pairs = [(a.y, b.y), (a.dx, b.dx)] + [(a.grads[k], b.grads[k]) for k in b.grads]
    worst = abs(a.loss - b.loss) / max(abs(b.loss), 1e-300)
    for got, want in pairs:
        scale = np.max(np.abs(want)) if want.size else 0.0
        diff = np.max(np.abs(got - want)) if want.size else 0.0
        worst = max(worst, diff / scale if scale else diff)
    return float(worst)
