"""What NVIDIA's NCCL team published for all-reduce on the machines of :mod:`collsim.hardware`:
the figures collsim is calibrated against, each with who said it and where.

:data:`PUBLISHED` holds ``all_reduce_perf`` (nccl-tests) bus bandwidths at large sizes;
:data:`NCCL_RING_FLOOR` is NCCL's own model of the smallest one-node ring all-reduce.
:mod:`collsim.viz.calibration` measures collsim on the same machines and draws both.

Examples
--------
>>> [p.key for p in PUBLISHED]
['dgx-a100', 'dgx-h100/nccl_ring', 'dgx-h100/nvls', 'dgx-a100x2']
"""

from dataclasses import dataclass

__all__ = [
    "Published",
    "PUBLISHED",
    "NCCL_RING_FLOOR",
    "NCCL_RING_FLOOR_SOURCE",
    "curve_key",
    "GiB",
]

GiB = 2**30


def curve_key(preset, nodes, algorithm):
    """``"dgx-h100/nvls"``, ``"dgx-a100x2"``: the name of one curve (preset, nodes, algorithm)."""
    name = preset if nodes == 1 else f"{preset}x{nodes}"
    return name if algorithm is None else f"{name}/{algorithm}"


@dataclass(frozen=True)
class Published:
    """One figure NVIDIA's NCCL team published: all-reduce busbw on ``nodes`` x ``preset``
    with ``algorithm`` (collsim's name of what NCCL ran; ``None``: NCCL's own choice,
    collsim's default), read at ``size`` bytes."""

    preset: str
    nodes: int
    algorithm: str | None
    busbw_GBps: float  # GB/s (1e9 B/s), as nccl-tests prints it
    size: int  # bytes: nccl-tests' largest size in the run the figure comes from
    who: str
    source: str  # where it was said
    setup: str  # what was measured
    short: str  # the setup in a few words, for the picture's footnote

    @property
    def key(self):
        """``"dgx-h100/nvls"``, ``"dgx-a100x2"``: the curve it belongs to."""
        return curve_key(self.preset, self.nodes, self.algorithm)


PUBLISHED = (
    Published(
        "dgx-a100",
        1,
        None,
        230.0,
        8 * GiB,
        "Sylvain Jeaugey (NVIDIA, NCCL)",
        "github.com/NVIDIA/nccl-tests/issues/149",
        "8 x A100-SXM4 on NVSwitch: 12 NVLinks x ~20 GB/s = 240 GB/s effective, "
        "~230 GB/s after other GPU limits; run to 8G to reach it",
        "8 x A100-SXM4, NVSwitch, up to 8 GiB",
    ),
    Published(
        "dgx-h100",
        1,
        "nccl_ring",
        370.0,
        8 * GiB,
        "Sylvain Jeaugey (NVIDIA, NCCL)",
        "github.com/NVIDIA/nccl-tests/issues/212",
        "8 x H100: 450 GB/s NVLink line rate less ~20 % protocol overhead; the busbw "
        "of NCCL_ALGO=RING and of every collective but all-reduce",
        "8 x H100, NCCL_ALGO=RING (or any collective but all-reduce)",
    ),
    Published(
        "dgx-h100",
        1,
        "nvls",
        480.0,
        8 * GiB,
        "Sylvain Jeaugey (NVIDIA, NCCL)",
        "github.com/NVIDIA/nccl-tests/issues/212",
        "8 x H100, all-reduce with NVLink SHARP (NVLS, NCCL's default there): peak "
        "~480 GB/s busbw (algbw ~275 GB/s), past 256 MiB",
        "8 x H100, all-reduce with NVLink SHARP (NVLS)",
    ),
    Published(
        "dgx-a100",
        2,
        None,
        192.0,
        8 * GiB,
        "AddyLaddy (NVIDIA, NCCL)",
        "github.com/NVIDIA/nccl/issues/812",
        "2 x DGX A100, 8 x 200 Gbit/s HDR InfiniBand per node: 192 GB/s all-reduce "
        "busbw (8 NICs x 24 GB/s)",
        "2 x DGX A100, 8 x HDR 200 Gbit/s NICs per node",
    ),
)

# NCCL's own prediction of the smallest one-node ring all-reduce (src/graph/tuning.cc:
# baseLat[Ring][LL] + 2(K-1) · hwLat[NVLink][Ring][LL], K = 8), drawn as the cross
NCCL_RING_FLOOR = (6.6e-6 + 2 * 7 * 0.6e-6, "ring, LL, 8 NVLink GPUs")
NCCL_RING_FLOOR_SOURCE = (
    "NCCL's tuner model, github.com/NVIDIA/nccl src/graph/tuning.cc: baseLat 6.6 µs + "
    "2(K-1) · hwLat 0.6 µs (Ring, LL, NVLink) for K = 8 = 15.0 µs"
)
