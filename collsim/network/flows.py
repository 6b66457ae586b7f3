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

Faults (:mod:`collsim.runtime.faults`) act on it through :mod:`collsim.network.faults`
(a degraded or failed link, a crashed rank).

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
from ..errors import ConfigError
from .engine import FINISH, START
from .faults import LinkFaults
from .flow import Flow, Rescheduled, Route

__all__ = ["Network", "Flow", "Route", "MODELS"]

MODELS = ("maxmin", "ideal")


class Network(LinkFaults):
    """Moves bytes between ranks of a topology on an :class:`Engine`'s clock.

    Parameters
    ----------
    engine : Engine
    graph : networkx.DiGraph
        A collsim topology (see :mod:`collsim.topology`).
    model : {"maxmin", "ideal"}
    """

    def __init__(self, engine, graph, model="maxmin"):
        if model not in MODELS:
            raise ConfigError(f"unknown network model {model!r}: choose one of {MODELS}")
        self.engine = engine
        self.graph = graph
        self.model = model
        self.capacity = {(u, v): d["bandwidth"] for u, v, d in graph.edges(data=True)}
        self.latency = {(u, v): d["latency"] for u, v, d in graph.edges(data=True)}
        self.active = {link: {} for link in self.capacity}  # link -> ordered set of flows
        # (src, dst) -> Route: route()'s cache; routes_from holds the same
        # as src -> {dst: route}, which the mailboxes read per transfer by two ranks
        # rather than by a (src, dst) key made for each
        self.routes, self.routes_from = {}, {}
        # faults: what is down, what never finishes, what moved (see the module docstring)
        self.failed = set()  # directed links that are down
        self.crashed = set()  # ranks that crashed
        self.stalled = []  # Stall records, in the order the flows stalled
        self.reroutes = []  # Reroute records, in order
        self.tracking = False  # keep "ideal" flows in `active` too, so faults can find them
        self._faulty = False  # a link failed or a rank crashed: _begin checks every flow
        self._special = model == "ideal"  # _faulty or the ideal model: _begin_special
        self._degraded = None  # (topology routing, shortest) graphs without failed links
        self._ideal = model == "ideal"
        # ranks, and each node's fastest link out and in (femtoseconds), for _direct
        self._fastest = None
        self._floats = {}  # route() keeps one object per α or β value (see there)
        # bound once, not per transfer: a bound method is one more object to make, and
        # to free once its event ran (a test may wrap these on the instance)
        self._begin_event = self._begin
        self._finish_event = self._finish
        self._schedule = engine.schedule  # the engine's own queue, two events a message

    def release(self, stopped=False):
        """Drop what refers back to this network (bound methods) once the run is over,
        and, for a run ``stopped`` midway, the flows still in flight (returned): each is
        in its links' tables and holds them (``share``), a cycle of its own."""
        self._begin_event = self._finish_event = None
        in_flight = {}
        if stopped:
            for flows in self.active.values():
                in_flight.update(flows)
                flows.clear()
        return list(in_flight)

    def route(self, src, dst):
        """The :class:`Route` from ``src`` to ``dst``, cached.

        After a link failure, a path that crossed it is replaced by the topology's next
        path on the graph without the failed links (its own routing, else the shortest
        path); where there is none, the old path is kept and a flow on it stalls."""
        key = (src, dst)
        found = self.routes.get(key)
        if found is None:
            links = self._direct(src, dst)
            if links is not None and not self.failed:  # one link: its own α and β
                alpha, beta = self.latency[links[0]], self.capacity[links[0]]
            else:
                links = links or tuple(topology.route(self.graph, src, dst))
                if self.failed and any(link in self.failed for link in links):
                    links = self._detour(src, dst) or links
                alpha = sum(self.latency[link] for link in links)
                beta = min((self.capacity[link] for link in links), default=math.inf)
            # one float object per distinct value: the routes of a uniform topology share
            # theirs, rather than keeping a copy each
            alpha = self._floats.setdefault(alpha, alpha)
            beta = self._floats.setdefault(beta, beta)
            found = self.routes[key] = self.path(links, alpha, beta)
            self.routes_from.setdefault(src, {})[dst] = found
        return found

    def path(self, links, alpha, beta):
        """The :class:`Route` over ``links``, as :meth:`transfer_on` takes it: its
        ``shares``, the table of flows on each link (``active[link]``), are found here once
        per route rather than by hashing each link twice per transfer."""
        active = self.active
        if len(links) == 1:  # most routes: no generator to run
            return Route(links, alpha, beta, (active[links[0]],))
        return Route(links, alpha, beta, tuple(active[link] for link in links))

    def _direct(self, src, dst):
        """``((src, dst),)`` where :func:`collsim.topology.route` would take the direct link
        by its own shortcut (shortest-path routing, and no detour can beat the link: the
        fastest link out of ``src`` plus the fastest into ``dst`` is no slower), else None.

        The same rule on the same integer latencies, with each node's fastest links found
        once per network instead of twice per route: a 4,096-rank ring's 8,192 neighbour
        routes cost a dict lookup each, not a walk of the graph's adjacency views."""
        fastest = self._fastest
        if fastest is None:
            fastest = self._fastest = _fastest_links(self.graph, self.latency)
        ranks, out, into, fs = fastest
        link = (src, dst)
        latency = fs.get(link)
        if latency is None or src == dst or type(src) is not int or type(dst) is not int:
            return None
        if src not in ranks or dst not in ranks:
            return None
        if topology.direct_link_wins(latency, out[src], into[dst]):
            return (link,)
        return None

    def transfer(self, src, dst, nbytes, on_done, arg=None):
        """Start moving ``nbytes`` now; call ``on_done(arg)`` when the last byte arrives.

        Returns the links the transfer crosses."""
        route = self.route(src, dst)
        self.transfer_on(route, nbytes, on_done, arg)
        return route.links

    def transfer_on(self, route, nbytes, on_done, arg=None):
        """:meth:`transfer` along ``route``, as :meth:`route` returned it (for callers
        that need the route too and should not look it up twice)."""
        flow = Flow(route.links, nbytes, on_done, arg, route.beta, route.shares)
        self.start(flow, route.alpha)

    def start(self, flow, alpha):
        """Start ``flow`` (made for one of this network's routes) now: its bytes begin to
        move after the route's latency ``alpha``; :meth:`Flow.arrived` is called when the
        last one arrives."""
        self._schedule(self.engine.now + alpha, START, self._begin_event, flow)

    # -- the bandwidth phase -------------------------------------------------------------

    def _begin(self, flow):
        if self._special:  # faults, or the ideal model: checks the common case skips
            if self._begin_special(flow):
                return
        elif not flow.nbytes or (flow.share is None and not flow.links):
            flow.arrived()  # nothing to move, or nowhere to move it
            return
        engine = self.engine
        now = flow.last = engine.now
        share = flow.share
        if share is not None:
            share[flow] = None
            alone = len(share) == 1
        else:
            alone = True
            for sharing in flow.shares:
                sharing[flow] = None
                if len(sharing) != 1:
                    alone = False
        if alone:  # the common case: no other flow on its links, so no one else changes
            # _schedule_finish's rule, written out: it finishes at its own rate, β
            rate = flow.rate = flow.beta
            version = flow.version = flow.version + 1
            remaining = flow.remaining
            time = now + (remaining / rate if remaining > 0 else 0.0)
            # a flow's first finish is the flow itself, valid while its version is 1;
            # any later one carries the version it was scheduled at (see _finish)
            event = flow if version == 1 else Rescheduled(flow, version)
            self._schedule(time, FINISH, self._finish_event, event)
        else:
            self._reshare(flow.links)

    def _begin_special(self, flow):
        """:meth:`_begin` on a network with faults or the ideal model: True once the flow
        is settled here (stalled, rerouted, delivered, or scheduled alone)."""
        flow.last = self.engine.now
        links = flow.links
        if self._faulty and links and self._blocked(flow):
            return True
        if flow.nbytes == 0 or not links:
            flow.arrived()
            return True
        if self._ideal:
            if self.tracking:  # so that a fault finds it
                for link in links:
                    self.active[link][flow] = None
            flow.rate = flow.beta
            self._schedule_finish(flow)
            return True
        return False  # max-min sharing with faults: shared as on a healthy network

    def _finish(self, event):
        # a finish scheduled at version v is stale once the flow's rate changed again
        # (its version moved on); most flows finish as first scheduled, and that event
        # is the bare flow, for version 1, with no Rescheduled record to make
        if type(event) is Rescheduled:
            flow, version = event.flow, event.version
        else:
            flow, version = event, 1
        if version != flow.version:
            return
        if not self._ideal:
            share = flow.share
            if share is not None:
                del share[flow]
                others = bool(share)
            else:
                others = False
                for sharing in flow.shares:
                    del sharing[flow]
                    if sharing:
                        others = True
            if others:
                self._reshare(flow.links)
        elif self.tracking:
            for link in flow.links:
                del self.active[link][flow]
        flow.arrived()

    def _schedule_finish(self, flow):
        version = flow.version = flow.version + 1
        remaining, engine = flow.remaining, self.engine
        delay = remaining / flow.rate if remaining > 0 else 0.0
        engine.at(
            engine.now + delay,
            FINISH,
            self._finish,
            flow if version == 1 else Rescheduled(flow, version),
        )

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


def _fastest_links(graph, latency):
    """``(rank nodes, {node: fastest link out}, {node: fastest link in}, {link: its
    latency})``, latencies in integer femtoseconds as :func:`collsim.topology.route` weighs
    them; no ranks where the topology's routing is not shortest-path (its own rules decide
    every route)."""
    if graph.graph.get("routing", "shortest") in ("dimension_order", "hierarchical"):
        return frozenset(), {}, {}, {}
    ranks = frozenset(n for n, kind in graph.nodes(data="kind") if kind == "rank")
    out, into, of_link = {}, {}, {}
    for link, seconds in latency.items():
        u, v = link
        fs = of_link[link] = topology.latency_fs(seconds)
        if fs < out.get(u, fs + 1):
            out[u] = fs
        if fs < into.get(v, fs + 1):
            into[v] = fs
    return ranks, out, into, of_link


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
