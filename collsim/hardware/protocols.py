"""NCCL's wire protocols: Simple, LL128 and LL, each a latency per message and a payload
fraction.

NCCL moves a message with one of three protocols (NCCL docs, ``NCCL_PROTO``):

* **LL** (low latency) writes 8-byte stores of 4 bytes of data and a 4-byte flag, so the
  receiver polls the data itself, no fence: the lowest latency, half the bandwidth;
* **LL128** stores 128-byte lines of 120 bytes of data and an 8-byte flag (NVLink keeps them
  in order): near-full bandwidth at a low latency;
* **Simple** sends whole buffers and signals with a memory fence after each: all of the
  bandwidth, the highest latency.

Here a protocol adds its latency to every message (by the slowest link class on the
message's path) and carries ``efficiency`` bytes of payload per byte on the wire.  The
latencies are NCCL's own model of one ring step (``hwLat`` in NCCL's
``src/graph/tuning.cc``, Ring row, in microseconds), which is also what its tuner compares
when it picks a protocol by message size -- as ``collsim run --protocol auto`` does.

Examples
--------
>>> ll = PROTOCOLS["ll"]
>>> ll.efficiency, ll.latency_for("nvlink")
(0.5, 6e-07)
>>> check_protocol("LL128").name
'll128'
"""

import difflib
from dataclasses import dataclass, replace

from ..errors import ConfigError

__all__ = [
    "Protocol",
    "PROTOCOLS",
    "check_protocol",
    "LINK_CLASSES",
    "slowest_class",
    "message_alpha_beta",
]

# the link classes of a hardware topology's edges (edge attribute ``link_class``), fastest
# first: a path is as slow as its slowest class
LINK_CLASSES = ("nvlink", "pcie", "cpu", "net")


@dataclass(frozen=True)
class Protocol:
    """One protocol: its payload fraction and its latency per message, by link class.

    ``hop_latency`` is a tuple of ``(link class, seconds)`` pairs (a tuple, so that the
    record can sit in a transfer's hashable tag)."""

    name: str
    efficiency: float  # payload bytes per byte on the wire
    hop_latency: tuple  # ((link class, seconds), ...)
    # NCCL's base latency of the call (its cost model's per-call term, seconds): carried
    # by the first step's messages only (with_launch), so a call pays it once
    launch: float = 0.0

    def latency_for(self, link_class):
        """Seconds this protocol adds to a message whose slowest link is ``link_class``
        (with the call's base latency, on a first step's messages)."""
        for name, seconds in self.hop_latency:
            if name == link_class:
                return seconds + self.launch
        return self.launch

    def with_launch(self, seconds):
        """This protocol for a call's first step: its messages also pay ``seconds``, the
        base latency NCCL's cost model charges once per call.

        >>> simple = PROTOCOLS["simple"]
        >>> first = simple.with_launch(8.4e-6)
        >>> str(first), round(first.latency_for("nvlink") * 1e6, 1), first == simple
        ('simple', 11.8, False)
        """
        return replace(self, launch=float(seconds))

    def on_hop(self, alpha, beta, link_class):
        """``(α, β)`` of a hop once this protocol carries it: its latency for the hop's
        link class added to α, β times its payload fraction.

        >>> PROTOCOLS["ll"].on_hop(1e-6, 100e9, "nvlink")
        (1.6e-06, 50000000000.0)
        """
        return alpha + self.latency_for(link_class), beta * self.efficiency

    def __str__(self):
        return self.name


def _us(nvlink, pcie, net):
    # NCCL models the cpu (inter-socket) hop as a PCI one
    return (
        ("nvlink", nvlink * 1e-6),
        ("pcie", pcie * 1e-6),
        ("cpu", pcie * 1e-6),
        ("net", net * 1e-6),
    )


PROTOCOLS = {
    # 4 data bytes in each 8-byte store (data + flag)
    "ll": Protocol("ll", 4 / 8, _us(nvlink=0.6, pcie=1.0, net=2.7)),
    # 120 data bytes in each 128-byte line
    "ll128": Protocol("ll128", 120 / 128, _us(nvlink=1.9, pcie=2.5, net=4.0)),
    # the whole buffer, one fence per chunk
    "simple": Protocol("simple", 1.0, _us(nvlink=3.4, pcie=5.7, net=14.0)),
}


def check_protocol(name):
    """The :class:`Protocol` called ``name`` (any case); a ConfigError names a bad one.

    >>> check_protocol("simpel")
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: unknown protocol 'simpel' (did you mean 'simple'?): choose ...
    """
    if isinstance(name, Protocol):
        return name
    key = str(name).strip().lower()
    if key not in PROTOCOLS:
        near = difflib.get_close_matches(key, PROTOCOLS, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ConfigError(
            f"unknown protocol {name!r}{hint}: choose one of {', '.join(PROTOCOLS)}, or auto"
        )
    return PROTOCOLS[key]


def slowest_class(classes):
    """The slowest of the link classes of a path (``None`` for an empty path).

    >>> slowest_class(["nvlink", "net", "nvlink"])
    'net'
    """
    order = {name: i for i, name in enumerate(LINK_CLASSES)}
    found = [c for c in classes if c in order]
    return max(found, key=order.__getitem__) if found else None


def message_alpha_beta(graph, src, dst, protocol=None):
    """``(α, β)`` of one message from rank ``src`` to rank ``dst`` as the network charges
    it: the path's summed latency and narrowest rate, with ``protocol`` carried on the
    path's slowest link class (what the closed forms of a protocol take).

    >>> from collsim.hardware.build import topology
    >>> alpha, beta = message_alpha_beta(topology("dgx-h100"), 0, 1, PROTOCOLS["simple"])
    >>> round(alpha * 1e6, 2), round(beta / 1e9, 1)
    (3.9, 370.8)
    """
    from ..topology import path_alpha_beta, route

    alpha, beta = path_alpha_beta(graph, src, dst)
    if protocol is None:
        return alpha, beta
    classes = [graph.edges[link].get("link_class") for link in route(graph, src, dst)]
    return protocol.on_hop(alpha, beta, slowest_class(classes))
