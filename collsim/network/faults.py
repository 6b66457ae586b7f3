"""Faults on the network: a degraded link, a failed link, a crashed rank.

:meth:`LinkFaults.scale_link` degrades a link's bandwidth, :meth:`LinkFaults.fail_link`
takes a link down (every flow crossing it is rerouted for its remaining bytes along the
topology's next path, paying that path's latency again, or stalls forever where there is
none: a :class:`Stall`), and :meth:`LinkFaults.crash_rank` stalls every flow to or from a
rank.  :class:`~collsim.network.flows.Network` has these methods; the runtime's faults
(:mod:`collsim.runtime.faults`) call them.

Examples
--------
>>> from collsim import topology
>>> from collsim.network import Engine, Network
>>> engine = Engine()
>>> net = Network(engine, topology.ring(3, bandwidth="1GB/s", latency=0))  # one way round
>>> _ = net.transfer(0, 1, 1e9, print, "arrived")
>>> engine.at(0.5, 0, lambda _: net.fail_link(0, 1))  # half-way, with no other path
>>> engine.run()
>>> [(s.remaining, s.link) for s in net.stalled]
[(500000000.0, (0, 1))]
"""

from dataclasses import dataclass

from .. import topology
from ..errors import ConfigError
from .engine import START

__all__ = ["LinkFaults", "Reroute", "Stall"]


@dataclass(frozen=True)
class Reroute:
    """A flow moved off a failed link at ``time``: ``moved`` bytes had crossed
    ``old_links``; the ``remaining`` bytes take ``new_links``."""

    src: object
    dst: object
    time: float
    moved: float
    remaining: float
    old_links: tuple
    new_links: tuple


@dataclass(frozen=True)
class Stall:
    """A flow that will never finish: from ``time`` on, ``remaining`` of its ``nbytes``
    wait forever, because of ``link`` (down, with no other path) or ``rank`` (crashed)."""

    src: object
    dst: object
    time: float
    nbytes: int
    remaining: float
    links: tuple
    link: tuple = None
    rank: int = None


class LinkFaults:
    """The fault methods of :class:`~collsim.network.flows.Network` (which it inherits):
    they read and change its links, routes and flows in flight."""

    def scale_link(self, u, v, factor):
        """Both directions of link ``u``-``v`` (those that exist) at ``factor`` times their
        bandwidth, from now on (call it before the run starts)."""
        for link in ((u, v), (v, u)):
            if link in self.capacity:
                self.capacity[link] *= factor
        self.routes, self.routes_from = {}, {}  # their β changed

    def fail_link(self, u, v):
        """Take both directions of link ``u``-``v`` down now: reroute or stall every flow
        that crosses it; later routes go around it."""
        dead = [
            link for link in ((u, v), (v, u)) if link in self.capacity and link not in self.failed
        ]
        if not dead:
            return
        self.failed.update(dead)
        self._faulty = self._special = True
        self._degraded = None
        self.routes = {
            key: found
            for key, found in self.routes.items()
            if not any(link in self.failed for link in found.links)
        }
        self.routes_from = {}
        for (src, dst), found in self.routes.items():
            self.routes_from.setdefault(src, {})[dst] = found
        hit = {}
        for link in dead:
            hit.update(dict.fromkeys(self.active[link]))
        self._replace(hit, self._reroute)

    def crash_rank(self, rank):
        """Rank ``rank`` crashed now: every flow to or from it stalls, and so will every
        flow that would start later."""
        if rank in self.crashed:
            return
        self.crashed.add(rank)
        self._faulty = self._special = True
        links = [(rank, v) for v in self.graph.successors(rank)]
        links += [(u, rank) for u in self.graph.predecessors(rank)]
        hit = {}
        for link in links:
            for flow in self.active.get(link, ()):
                if rank in _ranks_served(flow.links):
                    hit[flow] = None
        self._replace(hit, lambda flow: self._stall(flow, rank=rank))

    def _replace(self, flows, then):
        """Take ``flows`` off their links with the bytes they moved until now, share the
        freed bandwidth among the others, then ``then(flow)`` each (in a fixed order)."""
        now, active, freed = self.engine.now, self.active, {}
        for flow in flows:
            if flow.rate:
                flow.remaining = max(0.0, flow.remaining - flow.rate * (now - flow.last))
            flow.last = now
            flow.version += 1  # its scheduled finish is void
            flow.rate = 0.0
            for link in flow.links:
                active[link].pop(flow, None)
                freed[link] = None
        if self.model == "maxmin" and freed:
            self._reshare(list(freed))
        for flow in flows:
            then(flow)

    def _reroute(self, flow):
        """Send ``flow``'s remaining bytes along the next path, or stall it."""
        src, dst = _endpoints(flow.links)
        dead = next((link for link in flow.links if link in self.failed), None)
        if src is None:  # a switch-combined transfer: its union of routes has no detour
            return self._stall(flow, link=dead)
        if src in self.crashed or dst in self.crashed:
            return self._stall(flow, rank=src if src in self.crashed else dst)
        try:
            route = self.route(src, dst)
        except ConfigError:  # not a rank-to-rank flow
            return self._stall(flow, link=dead)
        links = route.links
        if any(link in self.failed for link in links):
            return self._stall(flow, link=dead)
        old = flow.links
        before = sum(moved for _, moved in flow.legs or ())
        moved = flow.nbytes - flow.remaining - before
        flow.legs = (flow.legs or []) + [(old, moved)]
        flow.links, flow.beta, flow.rate = links, route.beta, 0.0
        flow.on_shares(route.shares)
        self.reroutes.append(Reroute(src, dst, self.engine.now, moved, flow.remaining, old, links))
        self.engine.at(self.engine.now + route.alpha, START, self._begin, flow)

    def _stall(self, flow, link=None, rank=None):
        flow.version += 1
        flow.rate = 0.0
        src, dst = _endpoints(flow.links)
        self.stalled.append(
            Stall(src, dst, self.engine.now, flow.nbytes, flow.remaining, flow.links, link, rank)
        )

    def _detour(self, src, dst):
        """The links of the next path from ``src`` to ``dst`` avoiding failed links, or
        None: the topology's own routing first, then the shortest path."""
        if self._degraded is None:
            own = self.graph.copy()
            own.remove_edges_from(self.failed)
            shortest = own.copy(as_view=False)
            shortest.graph = dict(own.graph, routing="shortest")
            self._degraded = (own, shortest)
        for graph in self._degraded:
            try:
                links = tuple(topology.route(graph, src, dst))
            except (ConfigError, KeyError):
                continue
            if not any(link in self.failed for link in links):
                return links
        return None

    def _blocked(self, flow):
        """At its start: stall a flow to or from a crashed rank, reroute one that would
        cross a failed link; True if it does not start now."""
        for rank in _ranks_served(flow.links):
            if rank in self.crashed:
                self._stall(flow, rank=rank)
                return True
        if self.failed and any(link in self.failed for link in flow.links):
            self._reroute(flow)
            return True
        return False


def _endpoints(links):
    """``(src, dst)`` of a path of links, or ``(None, None)`` if they are not one path
    (a combined transfer's union of routes)."""
    if not links:
        return None, None
    for (_, v), (u, _) in zip(links, links[1:]):
        if u != v:
            return None, None
    return links[0][0], links[-1][1]


def _ranks_served(links):
    """The ranks a flow moves data between: a path's two ends, or every integer node of a
    combined transfer's union of routes (each member's rank sends or receives)."""
    src, dst = _endpoints(links)
    if src is not None:
        return (src, dst)
    nodes = dict.fromkeys(n for link in links for n in link)
    return tuple(n for n in nodes if isinstance(n, int))
