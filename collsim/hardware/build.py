"""A machine and a node count as a collsim topology (a networkx graph).

Each GPU is rank ``node * gpus_per_node + local``.  Links carry their effective rate as
``bandwidth`` (what the network model uses), the vendor's ``line_rate``, a ``latency`` and
a ``link_class`` (``nvlink``, ``pcie``, ``cpu`` or ``net``); switches carry a ``role``.
Routing is by least latency, then fewest hops, so a GPU reaches a NIC on another rail
through NVLink to the GPU on that rail when that is shorter, as NCCL's PXN does.

Examples
--------
>>> g = topology("dgx-a100", nodes=2)
>>> g.graph["name"], g.number_of_nodes() - 16     # 16 GPUs; 2 NVSwitches, 8 rails, a spine
('dgx-a100x2', 11)
>>> from collsim.topology import route
>>> route(g, 0, 1)                               # inside a node: through the NVSwitch
[(0, 'nvswitch0'), ('nvswitch0', 1)]
>>> route(g, 0, 8)                               # GPU 0 of each node: one rail switch
[(0, 'rail0'), ('rail0', 8)]
>>> g.edges[0, "rail0"]["link_class"], g.edges[0, "rail0"]["bandwidth"] / 1e9
('net', 24.0)
"""

from dataclasses import replace

import networkx as nx

from ..errors import ConfigError
from .machine import Machine
from .presets import preset

__all__ = ["topology", "MAX_NODES"]

MAX_NODES = 512  # 4,096 GPUs of 8: past it, use the closed form


def topology(machine, nodes=1, sharp=None):
    """The topology of ``nodes`` machines (a :class:`Machine` or a preset name).

    ``sharp=True`` turns on in-network reduction in the network's switches (InfiniBand
    SHARP, what NCCL's CollNet runs on); None keeps the machine's ``inter.sharp``.

    >>> g = topology("dgx-h100", nodes=2, sharp=True)
    >>> g.graph["name"], g.nodes["rail0"]["reduces"], g.nodes["nvswitch0"]["reduces"]
    ('dgx-h100x2+sharp', True, True)
    """
    if not isinstance(machine, Machine):
        machine = preset(machine)
    if sharp is not None:
        if not isinstance(sharp, bool):
            raise ConfigError(f"sharp={sharp!r}: give True (SHARP on), False or None")
        machine = replace(machine, inter=replace(machine.inter, sharp=sharp))
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= MAX_NODES:
        raise ConfigError(f"nodes {nodes!r}: give a whole number of nodes in 1..{MAX_NODES}")
    if nodes > 1 and machine.inter.nics == 0:
        raise ConfigError(
            f"machine {machine.name!r} has no NICs (inter.nics = 0), so {nodes} nodes "
            "cannot reach each other; nearest valid: nodes 1"
        )
    name = machine.name if nodes == 1 else f"{machine.name}x{nodes}"
    name += "+sharp" if machine.inter.sharp else ""
    g = nx.DiGraph(
        name=name,
        routing="shortest",
        machine=machine,
        nodes=nodes,
        gpus_per_node=machine.gpus_per_node,
    )
    per = machine.gpus_per_node
    for n in range(nodes):
        for local in range(per):
            g.add_node(n * per + local, kind="rank", node=n, local=local)
    for n in range(nodes):
        if machine.intra.kind == "nvswitch":
            _nvswitch_node(g, machine, n)
        else:
            _pcie_node(g, machine, n)
    if nodes > 1:
        _network(g, machine, nodes)
    return g


def _link(g, u, v, line_rate, efficiency, latency, link_class):
    for a, b in ((u, v), (v, u)):
        g.add_edge(
            a,
            b,
            bandwidth=line_rate * efficiency,
            line_rate=line_rate,
            latency=latency,
            link_class=link_class,
        )


def _nvswitch_node(g, machine, n):
    i, per = machine.intra, machine.gpus_per_node
    switch = f"nvswitch{n}"
    g.add_node(switch, kind="switch", role="nvswitch", node=n, reduces=i.reduces)
    for local in range(per):
        _link(g, n * per + local, switch, i.per_gpu_rate, i.efficiency, i.latency, "nvlink")


def _pcie_node(g, machine, n):
    i, per = machine.intra, machine.gpus_per_node
    switches = per // i.gpus_per_switch
    cpus = -(-switches // i.switches_per_cpu)
    for c in range(cpus):
        g.add_node(f"cpu{n}.{c}", kind="switch", role="cpu", node=n)
    for c in range(cpus - 1):  # sockets in a chain (two sockets: one UPI link)
        _link(
            g,
            f"cpu{n}.{c}",
            f"cpu{n}.{c + 1}",
            i.cpu_link_rate,
            i.cpu_link_efficiency,
            i.latency,
            "cpu",
        )
    for s in range(switches):
        sw = f"pcie{n}.{s}"
        g.add_node(sw, kind="switch", role="pcie", node=n)
        _link(
            g, sw, f"cpu{n}.{s // i.switches_per_cpu}", i.link_rate, i.efficiency, i.latency, "pcie"
        )
    for local in range(per):
        _link(
            g,
            n * per + local,
            f"pcie{n}.{local // i.gpus_per_switch}",
            i.link_rate,
            i.efficiency,
            i.latency,
            "pcie",
        )


def _nic_host(machine, n, j):
    """Where NIC j of node n plugs in: its own GPU when every GPU has a NIC (GPUDirect
    RDMA on a DGX), else a PCIe switch (or, on an NVSwitch node, GPU j * per / nics)."""
    per, nics = machine.gpus_per_node, machine.inter.nics
    if machine.intra.kind == "pcie":
        switches = per // machine.intra.gpus_per_switch
        return f"pcie{n}.{j % switches}"
    return n * per + j * per // nics


def _network(g, machine, nodes):
    net = machine.inter
    # with SHARP every network switch can sum what crosses it (collectives/collnet.py)
    if net.fabric == "switch":
        g.add_node("fabric", kind="switch", role="fabric", reduces=net.sharp)
    else:
        g.add_node("spine", kind="switch", role="spine", reduces=net.sharp)
    for j in range(net.nics):
        leaf = "fabric"
        if net.fabric == "rail":
            leaf = f"rail{j}"
            g.add_node(leaf, kind="switch", role="rail", rail=j, reduces=net.sharp)
            # a non-blocking spine: each leaf's uplink carries every node's NIC at once
            _link(g, leaf, "spine", net.nic_rate * nodes, net.efficiency, net.latency, "net")
        for n in range(nodes):
            _link(
                g, _nic_host(machine, n, j), leaf, net.nic_rate, net.efficiency, net.latency, "net"
            )
