"""Real machines: hardware presets, machine files, NCCL's protocols and node layouts.

>>> from collsim import hardware
>>> g = hardware.topology("dgx-h100", nodes=2)
>>> g.graph["name"], len([n for n, k in g.nodes(data="kind") if k == "rank"])
('dgx-h100x2', 16)
>>> print(hardware.preset("dgx-a100").describe())          # doctest: +NORMALIZE_WHITESPACE
dgx-a100: 8 x A100-SXM4-80GB, 312 TFLOP/s each, HBM 2.039 TB/s
  NVSwitch: 12 NVLinks x 25 GB/s = 300 GB/s per GPU per direction, 240.0 GB/s effective
  network: 8 NICs x 200 Gbit/s (24.0 GB/s effective each), rail fabric
"""

from .build import MAX_NODES, topology
from .files import FILE_SUFFIXES, load, loads
from .layout import NodeLayout, node_layout
from .machine import InterNode, IntraNode, Machine
from .presets import PRESETS, preset
from .protocols import PROTOCOLS, Protocol, check_protocol

__all__ = [
    "topology",
    "preset",
    "load",
    "loads",
    "PRESETS",
    "Machine",
    "IntraNode",
    "InterNode",
    "NodeLayout",
    "node_layout",
    "PROTOCOLS",
    "Protocol",
    "check_protocol",
    "MAX_NODES",
    "FILE_SUFFIXES",
]
