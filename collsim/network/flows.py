"""The flow-level network model: α–β links shared max-min fairly.

A transfer of ``n`` bytes over a path first pays the summed latency of the path's links
(α), then its bytes flow at a rate set by **max-min fair sharing** of every directed link
on the path among the flows active on it.  Rates are recomputed whenever a flow starts
or ends, but only for the flows connected to it through shared links (the connected
component of the flow-link graph), never for all flows, so a neighbour exchange on
1,024 ranks costs the same per transfer as on 4.

The ``"ideal"`` model ignores other flows: every message takes α + n/β on its own, as
in ASTRA-sim's congestion-unaware backend; the difference between the two is what
congestion costs.

Examples
--------
>>> from collsim import topology
>>> from collsim.network.engine import Engine
>>> engine = Engine()
>>> net = Network(engine, topology.switch(3, bandwidth="1GB/s", latency=0))
>>> done = []
>>> _ = net.transfer(0, 2, 1e9, done.append, "a")  # both flows share the down link to 2
>>> _ = net.transfer(1, 2, 1e9, done.append, "b")
>>> engine.run()
>>> done, engine.now                             # each got 0.5 GB/s: 2 s, not 1 s
(['a', 'b'], 2.0)
"""

import math

from .. import topology
from .engine import FINISH, START

__all__ = ["Network", "Flow", "MODELS"]

MODELS = ("maxmin", "ideal")


class Flow:
    """One transfer in flight: its links, bytes left, current rate and completion."""

    __slots__ = (
        "links", "beta", "nbytes", "remaining", "rate", "last", "version", "on_done", "arg"
    )  # fmt: skip

    def __init__(self, links, nbytes, on_done, arg, beta=None):
        self.links = links
        self.beta = beta  # the narrowest link's bandwidth: the rate when it is alone
        self.nbytes = nbytes
        self.remaining = float(nbytes)
        self.rate = 0.0
        self.last = 0.0
        self.version = 0
        self.on_done = on_done
        self.arg = arg


class Network:
    """Moves bytes between ranks of a topology on an :class:`Engine`'s clock.

    Parameters
    ----------
    engine : Engine
    graph : networkx.DiGraph
        A collsim topology (see :mod:`collsim.topology`).
    model : {"maxmin", "ideal"}
    """

    def __init__(self, engine, graph, model="maxmin"):
        from ..errors import ConfigError

        if model not in MODELS:
            raise ConfigError(f"unknown network model {model!r}: choose one of {MODELS}")
        self.engine = engine
        self.graph = graph
        self.model = model
        self.capacity = {(u, v): d["bandwidth"] for u, v, d in graph.edges(data=True)}
        self.latency = {(u, v): d["latency"] for u, v, d in graph.edges(data=True)}
        self.active = {link: {} for link in self.capacity}  # link -> ordered set of flows
        self._routes = {}

    def route(self, src, dst):
        """(links, α, β) of the path from ``src`` to ``dst``, cached."""
        key = (src, dst)
        found = self._routes.get(key)
        if found is None:
            links = tuple(topology.route(self.graph, src, dst))
            alpha = sum(self.latency[link] for link in links)
            beta = min((self.capacity[link] for link in links), default=math.inf)
            found = self._routes[key] = (links, alpha, beta)
        return found

    def transfer(self, src, dst, nbytes, on_done, arg=None):
        """Start moving ``nbytes`` now; call ``on_done(arg)`` when the last byte arrives.

        Returns the links the transfer crosses."""
        route = self.route(src, dst)
        self.transfer_on(route, nbytes, on_done, arg)
        return route[0]

    def transfer_on(self, route, nbytes, on_done, arg=None):
        """:meth:`transfer` along ``route``, as :meth:`route` returned it (for callers
        that need the route too and should not look it up twice)."""
        links, alpha, beta = route
        engine = self.engine
        engine.at(engine.now + alpha, START, self._begin, Flow(links, nbytes, on_done, arg, beta))

    # -- the bandwidth phase -------------------------------------------------------------

    def _begin(self, flow):
        now = self.engine.now
        flow.last = now
        if flow.nbytes == 0 or not flow.links:
            flow.on_done(flow.arg)
            return
        if self.model == "ideal":
            flow.rate = flow.beta
            self._schedule_finish(flow)
            return
        active = self.active
        alone = True
        for link in flow.links:
            sharing = active[link]
            sharing[flow] = None
            alone = alone and len(sharing) == 1
        if alone:  # the common case: no other flow on its links, so no one else changes
            flow.rate = flow.beta
            self._schedule_finish(flow)
        else:
            self._reshare(flow.links)

    def _finish(self, flow_and_version):
        flow, version = flow_and_version
        if version != flow.version:
            return  # its rate changed after this completion was scheduled
        if self.model == "maxmin":
            active, others = self.active, False
            for link in flow.links:
                sharing = active[link]
                del sharing[flow]
                others = others or bool(sharing)
            if others:
                self._reshare(flow.links)
        flow.on_done(flow.arg)

    def _schedule_finish(self, flow):
        flow.version += 1
        delay = flow.remaining / flow.rate if flow.remaining > 0 else 0.0
        self.engine.at(self.engine.now + delay, FINISH, self._finish, (flow, flow.version))

    def _reshare(self, seed_links):
        """Recompute max-min rates of the flows connected to ``seed_links``."""
        flows, links = self._component(seed_links)
        if not flows:
            return
        now = self.engine.now
        for flow in flows:  # settle the bytes moved at the old rates
            if flow.rate:
                flow.remaining -= flow.rate * (now - flow.last)
            flow.last = now
        rates = _max_min(flows, links, self.capacity, self.active)
        for flow in flows:
            new = rates[flow]
            if new != flow.rate or flow.version == 0:
                flow.rate = new
                self._schedule_finish(flow)

    def _component(self, seed_links):
        active = self.active
        links = [link for link in seed_links if active[link]]
        seen_links, seen_flows = dict.fromkeys(links), {}
        frontier = list(links)
        while frontier:
            link = frontier.pop()
            for flow in active[link]:
                if flow not in seen_flows:
                    seen_flows[flow] = None
                    for other in flow.links:
                        if other not in seen_links:
                            seen_links[other] = None
                            frontier.append(other)
        return list(seen_flows), list(seen_links)


def _max_min(flows, links, capacity, active):
    """Progressive filling: raise all rates together, freezing flows at their bottleneck."""
    if len(flows) == 1:
        return {flows[0]: min(capacity[link] for link in flows[0].links)}
    left = {link: capacity[link] for link in links}
    count = {link: len(active[link]) for link in links}
    rates = {}
    while len(rates) < len(flows):
        best, share = None, math.inf
        for link in links:  # the most constrained link; ties go to the first listed
            if count[link]:
                s = left[link] / count[link]
                if s < share:
                    best, share = link, s
        if best is None:  # only free (infinite) links remain
            for flow in flows:
                rates.setdefault(flow, math.inf)
            break
        for flow in active[best]:
            if flow in rates:
                continue
            rates[flow] = share
            for link in flow.links:
                left[link] -= share
                count[link] -= 1
    return rates
