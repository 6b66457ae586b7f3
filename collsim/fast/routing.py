"""Where a batched step's transfers go: the routes, α and β between a group's ranks, and
the links each step's moves cross, worked out once and kept on the cluster.

A training loop calls the same collective on the same group thousands of times; the
:class:`Routing` of a group and protocol (with the :class:`Layout` of each set of senders
and receivers, and the working block of its numeric calls) is what those calls share.
:mod:`collsim.fast.batched` times its steps from them.
"""

import sys

import numpy as np

from ..hardware.protocols import slowest_class

__all__ = ["Routing", "Layout", "SPARE_WORK_BYTES"]

# the largest working block a group keeps for its next call (see Routing.work)
SPARE_WORK_BYTES = 512 << 20
# the routings a cluster keeps (one per group and protocol), the oldest dropped first
_KEEP_ROUTINGS = 64


class Routing:
    """What the runs of one group with one protocol on one cluster share: every route's
    links, α and β, and the :class:`Layout` of each set of senders and receivers, kept
    for the cluster's life (a training loop calls the same collective thousands of
    times).  The cluster holds it (``cluster.caches.fast["routings"]``); it does not hold the
    cluster, which each call passes in, so that a dropped cluster is freed at once by
    reference counting, with its working block."""

    def __init__(self, ranks, protocol):
        self.ranks, self.protocol = ranks, protocol
        self.routes, self.route_ids = [], {}  # links of each route; (src, dst) -> id
        self.links = {}  # directed link -> id
        # (id(src), id(dst)) -> (src, dst, layout): the arrays are held, so their ids stay
        # theirs; and by value, (src bytes, dst bytes) -> layout
        self.by_identity, self.by_value = {}, {}
        self.spare = None  # the last numeric call's working block (see work)

    def work(self, k, n, dtype):
        """A ``(k, n)`` block for a numeric call's working buffers: the last call's when
        nothing else holds it any more (its answers, which are views of its rows, were
        all dropped), else a new one.  A training loop calls the same all-reduce again
        and again; fresh memory for each call costs a page fault per 4 KiB written, which
        made a 32 MiB call three times the additions and copies it does (PyTorch's caching
        allocator keeps its blocks for the same reason).  Only blocks up to
        SPARE_WORK_BYTES are kept, one per group, for the cluster's life."""
        spare = self.spare
        # held by self.spare, by `spare` and by getrefcount's argument: by no answer
        if (
            spare is not None
            and spare.shape == (k, n)
            and spare.dtype == dtype
            and sys.getrefcount(spare) == 3
        ):
            return spare
        self.spare = None  # a block of another shape, or one still in use, is not kept
        work = np.empty((k, n), dtype=dtype)
        if work.nbytes <= SPARE_WORK_BYTES:
            self.spare = work
        return work

    @classmethod
    def of(cls, cluster, ranks, protocol):
        kept = cluster.caches.fast.setdefault("routings", {})  # (ranks, protocol) -> Routing
        key = (ranks.tobytes(), protocol)
        routing = kept.get(key)
        if routing is None:
            if len(kept) >= _KEEP_ROUTINGS:
                kept.pop(next(iter(kept)))  # the oldest
            routing = kept[key] = cls(ranks, protocol)
        return routing

    def layout(self, cluster, step):
        # by identity first (a ring's steps share their arrays), by value when that misses
        found = self.by_identity.get((id(step.src), id(step.dst)))
        if found is not None and found[0] is step.src and found[1] is step.dst:
            return found[2]
        key = (step.src.tobytes(), step.dst.tobytes())
        layout = self.by_value.get(key)
        if layout is None:
            layout = self.by_value[key] = Layout(self, cluster, step)
        self.by_identity[(id(step.src), id(step.dst))] = (step.src, step.dst, layout)
        return layout

    def route(self, cluster, src, dst):
        """``(id, α, β, link ids)`` of the route between ranks ``src``, ``dst`` of ``cluster``."""
        found = self.route_ids.get((src, dst))
        if found is None:
            links, raw, beta = cluster.route(src, dst)
            edges = cluster.topology.edges
            slowest = slowest_class([edges[link].get("link_class") for link in links])
            alpha = raw
            if self.protocol is not None:  # its latency on the path's slowest link class
                alpha = raw + self.protocol.latency_for(slowest)
            ids = [self.links.setdefault(link, len(self.links)) for link in links]
            found = (len(self.routes), alpha, beta, ids, raw, slowest)
            self.route_ids[(src, dst)] = found
            self.routes.append(links)
        return found


class Layout:
    """What every step with the same senders and receivers shares: routes, α, β, and the
    links each move crosses (``flat``, with ``owner`` the move of each entry)."""

    def __init__(self, routing, cluster, step):
        ranks = routing.ranks
        found = [
            routing.route(cluster, s, d)
            for s, d in zip(ranks[step.src].tolist(), ranks[step.dst].tolist())
        ]
        # the links' own α and slowest class of each route, for another protocol's α
        self.bare = [(f[4], f[5]) for f in found]
        self.route = np.array([f[0] for f in found], dtype=np.int64)
        self.alpha = np.array([f[1] for f in found], dtype=np.float64)
        self.beta = np.array([f[2] for f in found], dtype=np.float64)
        self.has_links = np.array([bool(f[3]) for f in found], dtype=bool)
        self.flat = np.array([i for f in found for i in f[3]], dtype=np.int64)
        self.owner = np.repeat(np.arange(len(found)), [len(f[3]) for f in found])
        self.unique = len(np.unique(self.flat)) == len(self.flat)
        self.unique_ends = _distinct(step.src) and _distinct(step.dst)
        # one α and one β for every move, each crossing links: the uniform steps' scalars
        alphas, betas = set(self.alpha.tolist()), set(self.beta.tolist())
        same = len(alphas) == 1 and len(betas) == 1 and bool(self.has_links.all())
        self.alpha0 = alphas.pop() if same else None
        self.beta0 = betas.pop() if same else None
        # the step's ranks are all the group's, each once: readiness stays one instant
        k = len(ranks)
        self.covers = self.unique_ends and len(np.union1d(step.src, step.dst)) == k

    def alpha_with(self, protocol):
        """α of every move carried by ``protocol`` instead of the routing's: a call's
        first step, whose protocol also charges NCCL's base latency (the same sum the
        per-transfer path makes: the route's α plus the protocol's latency)."""
        return np.array([raw + protocol.latency_for(c) for raw, c in self.bare], dtype=np.float64)


def _distinct(values):
    return len(np.unique(values)) == len(values)
