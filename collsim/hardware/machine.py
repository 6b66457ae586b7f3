"""A machine as data: the GPUs of one node, how they are wired, and the network between
nodes.

A :class:`Machine` is what a hardware preset (:mod:`.presets`) or a machine file
(:mod:`.files`) describes and what :func:`~collsim.hardware.build.topology` turns into a
collsim topology.  Rates are bytes/s per direction; every rate has the line rate the
hardware is sold at and the **efficiency** NCCL's own topology model applies to it (the
effective rate is their product, and is what the network model uses).

Examples
--------
>>> from collsim.hardware.presets import PRESETS
>>> m = PRESETS["dgx-h100"]
>>> m.gpus_per_node, m.intra.per_gpu_rate / 1e9, round(m.intra.effective_rate / 1e9, 1)
(8, 450.0, 370.8)
"""

from dataclasses import dataclass, field, fields

from ..errors import ConfigError

__all__ = ["Machine", "IntraNode", "InterNode", "INTRA_KINDS", "FABRICS"]

INTRA_KINDS = ("nvswitch", "pcie")
FABRICS = ("rail", "switch")  # rail-aligned leaf switches with a spine, or one switch
COMPUTE_CAPABILITIES = (70, 80, 90, 100)
CPU_VENDORS = ("intel", "amd", "other")


@dataclass(frozen=True)
class IntraNode:
    """How the GPUs of one node reach each other.

    ``kind="nvswitch"``: every GPU has ``links`` NVLinks of ``link_rate`` into the node's
    NVSwitches, modelled as one switch reached at ``links * link_rate`` per direction.
    ``kind="pcie"``: each GPU has one x16 slot (``link_rate``) into a PCIe switch shared by
    ``gpus_per_switch`` GPUs; each switch has one x16 uplink to its CPU socket; sockets are
    joined by ``cpu_link_rate`` (UPI / Infinity Fabric).
    """

    kind: str
    link_rate: float  # B/s per direction of one NVLink, or of one PCIe x16 slot (line rate)
    links: int = 1  # NVLinks per GPU (1 for PCIe)
    efficiency: float = 1.0  # effective / line rate, as NCCL models it
    latency: float = 0.0  # s per link
    reduces: bool = False  # in-switch reduction (NVLink SHARP, NCCL's NVLS)
    reduce_efficiency: float = 1.0  # the switch's reduction throughput / the links' rate
    gpus_per_switch: int = 2  # pcie only
    switches_per_cpu: int = 2  # pcie only
    cpu_link_rate: float = 0.0  # pcie only: B/s between sockets (line rate)
    cpu_link_efficiency: float = 1.0

    @property
    def per_gpu_rate(self):
        """Line rate of one GPU into the node's fabric, per direction (B/s)."""
        return self.links * self.link_rate

    @property
    def effective_rate(self):
        """What the network model uses: line rate times NCCL's efficiency (B/s)."""
        return self.per_gpu_rate * self.efficiency


@dataclass(frozen=True)
class InterNode:
    """The network between nodes: ``nics`` NICs per node of ``nic_rate`` each per
    direction, into a rail-aligned fabric (NIC j of every node on leaf switch ``rail{j}``,
    leaves joined by a non-blocking spine) or one switch for every NIC."""

    nics: int = 0
    nic_rate: float = 0.0  # B/s per direction (line rate: 200 Gbit/s HDR = 25 GB/s)
    efficiency: float = 1.0
    latency: float = 0.0  # s per link (NIC to leaf, leaf to spine)
    fabric: str = "rail"
    # the network switches reduce (InfiniBand SHARP, NCCL's CollNet): off by default, as
    # NCCL_COLLNET_ENABLE is, since it needs SHARP switches and NCCL's SHARP plugin
    sharp: bool = False

    @property
    def effective_rate(self):
        return self.nic_rate * self.efficiency


@dataclass(frozen=True)
class Machine:
    """One node type of a cluster, with the sources its numbers come from."""

    name: str
    gpu: str
    gpus_per_node: int
    compute_rate: float  # FLOP/s of one GPU (dense bf16), for rank.compute(flops=...)
    intra: IntraNode
    inter: InterNode = field(default_factory=InterNode)
    sources: tuple = ()  # where each number comes from, one line each
    # what NCCL's cost model reads beside the links (collectives/nccl_model.py): the GPUs'
    # compute capability (70 Volta, 80 Ampere, 90 Hopper, 100 Blackwell) picks its
    # per-architecture caps, and the CPU vendor its network overhead (AMD 2 us, else 1 us)
    compute_capability: int = 80
    cpu_vendor: str = "intel"
    # bytes/s one GPU reads from its HBM: with compute_rate, the roofline of a decode step
    # (collsim.parallel.inference.roofline); 0 for a machine file that does not say
    hbm_bandwidth: float = 0.0

    def __post_init__(self):
        _check(self)

    def describe(self):
        """A few lines a person reads: the fabric, its rates and where they come from."""
        i, n = self.intra, self.inter
        lines = [
            f"{self.name}: {self.gpus_per_node} x {self.gpu}, "
            f"{self.compute_rate / 1e12:g} TFLOP/s each"
            + (f", HBM {self.hbm_bandwidth / 1e12:g} TB/s" if self.hbm_bandwidth else "")
        ]
        if i.kind == "nvswitch":
            lines.append(
                f"  NVSwitch: {i.links} NVLinks x {i.link_rate / 1e9:g} GB/s = "
                f"{i.per_gpu_rate / 1e9:g} GB/s per GPU per direction, "
                f"{i.effective_rate / 1e9:.1f} GB/s effective"
                + (", in-switch reduction (NVLS)" if i.reduces else "")
            )
        else:
            lines.append(
                f"  PCIe: {i.link_rate / 1e9:g} GB/s per x16 slot per direction "
                f"({i.link_rate * i.efficiency / 1e9:g} GB/s effective), "
                f"{i.gpus_per_switch} GPUs per switch"
            )
        if n.nics:
            lines.append(
                f"  network: {n.nics} NICs x {n.nic_rate * 8 / 1e9:g} Gbit/s "
                f"({n.effective_rate / 1e9:.1f} GB/s effective each), "
                f"{n.fabric} fabric" + (", in-network reduction (SHARP)" if n.sharp else "")
            )
        return "\n".join(lines)


def _check(machine):
    """Refuse a machine whose numbers cannot describe hardware, naming the field."""
    who = f"machine {machine.name!r}"
    if not isinstance(machine.intra, IntraNode) or not isinstance(machine.inter, InterNode):
        raise ConfigError(f"{who}: intra must be an IntraNode and inter an InterNode")
    _whole(machine.gpus_per_node, f"{who}: gpus_per_node", 1, 1024)
    _positive(machine.compute_rate, f"{who}: compute_rate")
    if machine.hbm_bandwidth != 0.0:  # 0: not given
        _positive(machine.hbm_bandwidth, f"{who}: hbm_bandwidth")
    i, n = machine.intra, machine.inter
    if i.kind not in INTRA_KINDS:
        raise ConfigError(f"{who}: intra.kind {i.kind!r}: choose one of {', '.join(INTRA_KINDS)}")
    _positive(i.link_rate, f"{who}: intra.link_rate")
    _whole(i.links, f"{who}: intra.links", 1, 64)
    for f in fields(IntraNode):
        if f.name.endswith("efficiency"):
            _fraction(getattr(i, f.name), f"{who}: intra.{f.name}")
    if i.kind == "pcie":
        _whole(i.gpus_per_switch, f"{who}: intra.gpus_per_switch", 1, machine.gpus_per_node)
        _whole(i.switches_per_cpu, f"{who}: intra.switches_per_cpu", 1, 64)
        if machine.gpus_per_node % i.gpus_per_switch:
            raise ConfigError(
                f"{who}: gpus_per_node {machine.gpus_per_node} is not a multiple "
                f"of intra.gpus_per_switch {i.gpus_per_switch}"
            )
        if i.reduces:
            raise ConfigError(f"{who}: intra.reduces: only an NVSwitch reduces in the switch")
    _nonnegative(i.latency, f"{who}: intra.latency")
    _whole(n.nics, f"{who}: inter.nics", 0, 64)
    if n.nics:
        _positive(n.nic_rate, f"{who}: inter.nic_rate")
        _fraction(n.efficiency, f"{who}: inter.efficiency")
        if n.fabric not in FABRICS:
            raise ConfigError(
                f"{who}: inter.fabric {n.fabric!r}: choose one of {', '.join(FABRICS)}"
            )
    _nonnegative(n.latency, f"{who}: inter.latency")
    if not isinstance(n.sharp, bool):
        raise ConfigError(f"{who}: inter.sharp must be true or false, got {n.sharp!r}")
    if n.sharp and not n.nics:
        raise ConfigError(f"{who}: inter.sharp: a machine without NICs has no network to reduce in")
    if machine.compute_capability not in COMPUTE_CAPABILITIES:
        raise ConfigError(
            f"{who}: compute_capability {machine.compute_capability!r}: choose one of "
            f"{', '.join(map(str, COMPUTE_CAPABILITIES))} (Volta, Ampere, Hopper, Blackwell)"
        )
    if machine.cpu_vendor not in CPU_VENDORS:
        raise ConfigError(
            f"{who}: cpu_vendor {machine.cpu_vendor!r}: choose one of {', '.join(CPU_VENDORS)}"
        )


def _whole(value, what, lo, hi):
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ConfigError(f"{what} must be a whole number in {lo}..{hi}, got {value!r}")


def _positive(value, what):
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e18:
        raise ConfigError(f"{what} must be a rate > 0 (e.g. '25GB/s'), got {value!r}")


def _nonnegative(value, what):
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ConfigError(f"{what} must be a time in 0..1 s per link (e.g. '1us'), got {value!r}")


def _fraction(value, what):
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise ConfigError(
            f"{what} must be a fraction in (0, 1] (effective / line rate), got {value!r}"
        )
