"""The machines people train on, with every number's source.

Line rates are the vendors'; the efficiencies are NCCL's own topology model (the rate per
NVLink it assumes, ``SMxx_NVLINK_BW`` in NCCL's ``src/graph/topo.h``, over the 25 GB/s
line rate of a link) or, for the NICs and the in-switch reduction, what NCCL's maintainers
report measuring.  The published figures these reproduce are checked in
``tests/test_calibration.py`` and drawn by ``benchmarks/calibration.py``.

Examples
--------
>>> sorted(PRESETS)
['dgx-a100', 'dgx-h100', 'pcie-8gpu']
>>> preset("DGX-A100").intra.effective_rate / 1e9      # 12 NVLinks x 20 GB/s
240.0
"""

import difflib

from ..errors import ConfigError
from .machine import InterNode, IntraNode, Machine

__all__ = ["PRESETS", "preset"]

GB = 1e9
NVLINK_LINE = 25 * GB  # one NVLink3 / NVLink4 link, per direction (50 GB/s both ways)

DGX_A100 = Machine(
    name="dgx-a100",
    gpu="A100-SXM4-80GB",
    gpus_per_node=8,
    compute_rate=312e12,  # A100 datasheet: 312 TFLOP/s dense BF16
    intra=IntraNode(
        kind="nvswitch",
        link_rate=NVLINK_LINE,
        links=12,  # NVLink3: 12 links, 300 GB/s per direction (600 GB/s both ways)
        efficiency=20.0 / 25.0,  # NCCL topo.h SM80_NVLINK_BW = 20 GB/s per link
        latency=0.25e-6,  # per link: GPU -> NVSwitch -> GPU is about half a microsecond
    ),
    inter=InterNode(
        nics=8,  # 8 single-port ConnectX-6 for compute traffic (DGX A100 user guide)
        nic_rate=200e9 / 8,  # HDR InfiniBand, 200 Gbit/s = 25 GB/s per direction
        # NVIDIA's figure: 24 GB/s per HDR NIC (NCCL team, NVIDIA/nccl#412 and #812, where
        # 2 x DGX A100 with 8 HDR NICs reach 192 GB/s = 8 x 24); SimAI uses 23.5
        efficiency=24.0 / 25.0,
        latency=0.6e-6,  # per link: ConnectX-6 quotes sub-0.8 us, a Quantum switch 130 ns
        fabric="rail",
    ),
    sources=(
        "NVIDIA A100 datasheet: NVLink3 600 GB/s (12 links), 312 TFLOP/s BF16",
        "NVIDIA DGX A100 user guide: 8 x ConnectX-6 HDR 200 Gb/s for compute",
        "NCCL src/graph/topo.h: SM80_NVLINK_BW 20.0 GB/s per link",
        "NCCL team (NVIDIA/nccl#412, #812): 24 GB/s per HDR NIC, 192 GB/s on 2 x DGX A100",
        "NVIDIA DGX A100 user guide: 2 x AMD EPYC 7742 CPUs; A100 is compute capability 8.0",
        "NVIDIA A100 datasheet: A100 80GB SXM HBM2e bandwidth 2,039 GB/s",
    ),
    compute_capability=80,
    cpu_vendor="amd",
    hbm_bandwidth=2039e9,  # A100 datasheet: 80GB SXM, HBM2e, 2,039 GB/s
)

DGX_H100 = Machine(
    name="dgx-h100",
    gpu="H100-SXM5-80GB",
    gpus_per_node=8,
    compute_rate=989e12,  # H100 SXM datasheet: 989 TFLOP/s dense BF16 (1,979 sparse)
    intra=IntraNode(
        kind="nvswitch",
        link_rate=NVLINK_LINE,
        links=18,  # NVLink4: 18 links, 450 GB/s per direction (900 GB/s both ways)
        efficiency=20.6 / 25.0,  # NCCL topo.h SM90_NVLINK_BW = 20.6 GB/s: 370.8 GB/s
        latency=0.25e-6,
        reduces=True,  # third-generation NVSwitch: NVLink SHARP (NCCL's NVLS algorithm)
        # the switch's reduce/multicast throughput as a fraction of the links' rate: NCCL's
        # maintainers quote ~480 GB/s NVLS busbw, algbw ~275 GB/s, on 8 x H100
        # (NVIDIA/nccl-tests#212): 275 / 370.8 = 0.74 of the effective NVLink rate
        reduce_efficiency=0.74,
    ),
    inter=InterNode(
        nics=8,  # 8 x ConnectX-7 (DGX H100 user guide)
        nic_rate=400e9 / 8,  # NDR InfiniBand, 400 Gbit/s = 50 GB/s per direction
        efficiency=47.0 / 50.0,  # NVIDIA: 46-48 GB/s per NDR NIC (NVIDIA/nccl-tests#290)
        latency=0.6e-6,
        fabric="rail",
    ),
    sources=(
        "NVIDIA H100 datasheet: NVLink4 900 GB/s (18 links), 989 TFLOP/s BF16 dense",
        "NVIDIA DGX H100 user guide: 8 x ConnectX-7 NDR 400 Gb/s, NVSwitch with SHARP",
        "NCCL src/graph/topo.h: SM90_NVLINK_BW 20.6 GB/s per link",
        "NCCL team (NVIDIA/nccl-tests#212): NVLS ~480 GB/s busbw, ~275 GB/s algbw on 8 x H100",
        "NCCL team (NVIDIA/nccl-tests#290): 46-48 GB/s per NDR NIC",
        "NVIDIA DGX H100 user guide: 2 x Intel Xeon Platinum 8480C; H100 is compute capability 9.0",
        "NVIDIA H100 datasheet: H100 SXM GPU memory bandwidth 3.35 TB/s (80GB HBM3)",
    ),
    compute_capability=90,
    cpu_vendor="intel",
    hbm_bandwidth=3.35e12,  # H100 datasheet: H100 SXM (80GB HBM3), 3.35 TB/s
)

PCIE_8GPU = Machine(
    name="pcie-8gpu",
    gpu="A100-PCIe-80GB",
    gpus_per_node=8,
    compute_rate=312e12,  # A100 PCIe: the same 312 TFLOP/s BF16
    intra=IntraNode(
        kind="pcie",
        link_rate=32 * GB,  # PCIe Gen4 x16: 16 GT/s x 16 lanes, ~32 GB/s per direction
        efficiency=0.75,  # NCCL's PCI model: Gen3 x16 is 12 GB/s of 16 (PCI_BW, topo.h)
        latency=0.5e-6,
        gpus_per_switch=2,  # 4 PCIe switches, 2 per CPU socket
        switches_per_cpu=2,
        cpu_link_rate=22 * GB,  # NCCL topo.h SRP_QPI_BW (Sapphire Rapids UPI) = 22 GB/s
        cpu_link_efficiency=1.0,  # already NCCL's effective figure
    ),
    inter=InterNode(
        nics=4,  # one 200 Gbit/s NIC per PCIe switch
        nic_rate=200e9 / 8,
        efficiency=24.0 / 25.0,  # as dgx-a100's HDR NICs
        latency=0.6e-6,
        fabric="switch",
    ),
    sources=(
        "PCI-SIG: PCIe Gen4 x16 = 16 GT/s x 16 lanes (~32 GB/s per direction)",
        "NCCL src/graph/topo.h: PCI_BW 12 GB/s for Gen3 x16 (0.75 of line), SRP_QPI_BW 22",
        "NCCL team (NVIDIA/nccl#412): 24 GB/s per HDR NIC",
        "NVIDIA A100 datasheet: A100 80GB PCIe HBM2e bandwidth 1,935 GB/s",
    ),
    hbm_bandwidth=1935e9,  # A100 datasheet: 80GB PCIe, 1,935 GB/s
)

PRESETS = {m.name: m for m in (DGX_A100, DGX_H100, PCIE_8GPU)}


def preset(name):
    """The :class:`~collsim.hardware.machine.Machine` of a preset name (any case)."""
    key = str(name).strip().lower().replace("_", "-")
    if key not in PRESETS:
        near = difflib.get_close_matches(key, PRESETS, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ConfigError(
            f"unknown machine {name!r}{hint}: choose one of {', '.join(PRESETS)}, "
            "or give a machine file (.toml or .json)"
        )
    return PRESETS[key]
