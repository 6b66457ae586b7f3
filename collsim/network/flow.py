"""What the network moves and where: one transfer in flight (:class:`Flow`) and the path
it takes between two ranks (:class:`Route`), as :class:`collsim.network.flows.Network`
finds and shares them.
"""

from typing import NamedTuple

__all__ = ["Flow", "Route", "Rescheduled"]


class Route(NamedTuple):
    """The path a transfer from one rank to another takes, as
    :meth:`~collsim.network.flows.Network.route` finds it.  A named tuple: read by field
    name; it still unpacks, for the fast path.

    >>> from collsim import topology
    >>> from collsim.network.engine import Engine
    >>> from collsim.network.flows import Network
    >>> route = Network(Engine(), topology.ring(4, "1GB/s", "2us")).route(0, 1)
    >>> route.links, route.alpha, route.beta
    (((0, 1),), 2e-06, 1000000000.0)
    """

    links: tuple  # the directed links crossed, in order
    alpha: float  # their summed latency (s): paid before the first byte flows
    beta: float  # the narrowest link's bandwidth (bytes/s): the rate of a flow alone
    shares: tuple  # each link's table of the flows on it (Network.active[link])


class Rescheduled(NamedTuple):
    """A flow's finish event once its rate changed: valid while the flow's ``version`` is
    still this one (a flow's first finish is the flow itself, with version 1)."""

    flow: "Flow"
    version: int


class Flow:
    """One transfer in flight: its links, bytes left, current rate and completion.

    When its last byte arrives the network calls :meth:`arrived`: ``on_done(arg)``.  The
    runtime's messages are a subclass (:class:`collsim.runtime.matching.Transfer`) whose
    arrival delivers the message itself, so that a message in flight is one object."""

    __slots__ = (
        "links",
        "beta",
        "nbytes",
        "remaining",
        "rate",
        "last",
        "version",
        "on_done",
        "arg",
        "legs",  # once rerouted: [(links, bytes moved on them)] of the paths it left
        "shares",  # the active table of each of its links (Network.active[link]), or None
        "share",  # ... the one link's, when it has one (most flows)
    )

    def __init__(self, links, nbytes, on_done, arg, beta=None, shares=()):
        self.links = links
        self.on_shares(shares)
        self.beta = beta  # the narrowest link's bandwidth: the rate when it is alone
        self.nbytes = nbytes
        self.remaining = float(nbytes)
        self.rate = 0.0
        self.last = 0.0
        self.version = 0
        self.on_done = on_done
        self.arg = arg
        self.legs = None

    def arrived(self):
        """The last byte arrived (called by the network once, at that instant)."""
        self.on_done(self.arg)

    def on_shares(self, shares):
        """Take the active tables of its links, ``shares``: one link's table is kept as
        ``share`` (most flows cross one link, and need no tuple), several as
        ``shares``."""
        if len(shares) == 1:
            self.share, self.shares = shares[0], None
        else:
            self.share, self.shares = None, shares
