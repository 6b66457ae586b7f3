"""Where one-shot, two-shot and NCCL's algorithms cross over on a machine, by the model.

The closed forms (:mod:`collsim.collectives.formulas`) on a preset's NVLink hop (α, β
from the topology, as ``auto`` reads them) give, for K GPUs of one node:

* one-shot (α + (K-1)S/β) beats two-shot (2α + 2(K-1)/K·S/β) below
  S* = αβ·K/((K-1)(K-2)); for K = 2 always;
* two-shot beats the textbook ring at every size (the same bytes, 2 steps not 2(K-1));
* NCCL's best topology-aware all-reduce on the node (the ring on NVLink, or NVLS where
  the NVSwitch reduces) overtakes two-shot above the size :func:`crossovers` finds.

docs/inference.md sets these beside vLLM's thresholds; ``collsim infer --crossovers``
prints them, and :func:`choice_grid` gives the fastest of them at every size and group
size (``collsim viz all-reduce-choice`` draws it).

Examples
--------
>>> rows = crossovers("dgx-h100", ranks=(2, 8))
>>> [(r.ranks, r.one_to_two_shot) for r in rows]   # bytes; inf: one-shot always
[(2, inf), (8, 35314.28571428572)]
>>> rows[1].nccl_algorithm, rows[1].two_shot_to_nccl > 2**20
('nvls', True)
>>> cell = choice_grid("dgx-h100", ranks=(8,), sizes=(512,))[0].cells[0]
>>> cell.fastest, round(cell.ring / cell.seconds, 1)  # 512 B: the ring pays 14 hops
('one_shot', 13.7)
"""

import math
from typing import NamedTuple

from ..errors import ConfigError
from ..hardware import preset, topology
from .auto import fabric_of
from .formulas import closed_form, one_shot_crossover
from .hardware_forms import hardware_cost

__all__ = ["Crossover", "crossovers", "SizeTimes", "ChoiceRow", "choice_grid", "vllm_choice"]

LARGEST = 2.0**40  # bytes: past this nothing is searched (a TiB all-reduce)
# vLLM's custom all-reduce (custom_all_reduce.py's max_size; custom_all_reduce.cuh's
# one-shot rule on fully NVLink-connected GPUs): sizes in bytes
VLLM_MAX_SIZE = 8 * 2**20  # larger messages go to NCCL
VLLM_ONE_SHOT_BELOW = ((4, 512 * 2**10), (8, 256 * 2**10))  # (world size at most, bytes)


class Crossover(NamedTuple):
    """The model's crossover sizes for K GPUs of one node of a machine."""

    machine: str  # the preset's name
    ranks: int  # K, GPUs in the group (one node)
    alpha: float  # s: the NVLink hop's latency, as auto reads it
    beta: float  # bytes/s: the hop's bandwidth
    one_to_two_shot: float  # bytes: one-shot is faster below, two-shot above (inf: never)
    nccl_algorithm: str  # NCCL's fastest topology-aware algorithm at large sizes
    two_shot_to_nccl: float  # bytes: two-shot is faster below, NCCL's above (inf: never)


def _two_shot_minus_nccl(size, ranks, fabric, algorithm):
    two = closed_form("all_reduce", "two_shot", ranks, size, fabric.intra_alpha, fabric.intra_beta)
    return two.time_s - hardware_cost(algorithm, 1, ranks, size, fabric).time_s


def _first_win(ranks, fabric, algorithm):
    """The smallest size (bytes, to 0.1 %) where ``algorithm`` beats two-shot, or inf."""
    sizes = [2.0 ** (e / 4) for e in range(4 * 10, 4 * int(math.log2(LARGEST)) + 1)]
    previous = None
    for size in sizes:
        if _two_shot_minus_nccl(size, ranks, fabric, algorithm) > 0:
            if previous is None:
                return size
            low, high = previous, size  # bisect: two-shot wins at low, NCCL at high
            while high / low > 1.001:
                middle = math.sqrt(low * high)
                if _two_shot_minus_nccl(middle, ranks, fabric, algorithm) > 0:
                    high = middle
                else:
                    low = middle
            return high
        previous = size
    return math.inf


def _one_node(machine, ranks):
    """The preset and its graph, once ``ranks`` are group sizes 2 .. GPUs of one node."""
    spec = preset(machine)
    ranks = tuple(ranks)
    if not ranks:
        raise ConfigError("ranks=(): give at least one group size, e.g. ranks=(2, 4, 8)")
    for k in ranks:
        if isinstance(k, bool) or not isinstance(k, int) or not 2 <= k <= spec.gpus_per_node:
            raise ConfigError(
                f"ranks: {k!r} GPUs: a group of one {spec.name} node has 2 .. "
                f"{spec.gpus_per_node} GPUs; nearest valid: "
                f"{min(max(int(k) if isinstance(k, int) else 2, 2), spec.gpus_per_node)}"
            )
    return spec, topology(spec), ranks


def crossovers(machine, ranks=(2, 4, 8)):
    """A :class:`Crossover` per group size in ``ranks`` on one node of preset ``machine``."""
    spec, graph, ranks = _one_node(machine, ranks)
    rows = []
    for k in ranks:
        fabric = fabric_of(graph, tuple(range(k)))
        candidates = ["nccl_ring"] + (["nvls"] if spec.intra.reduces else [])
        best = min(candidates, key=lambda a: _first_win(k, fabric, a))
        rows.append(
            Crossover(
                spec.name,
                k,
                fabric.intra_alpha,
                fabric.intra_beta,
                one_shot_crossover(k, fabric.intra_alpha, fabric.intra_beta),
                best,
                _first_win(k, fabric, best),
            )
        )
    return tuple(rows)


class SizeTimes(NamedTuple):
    """The closed forms' times (seconds) of one all-reduce of ``size`` bytes on K GPUs."""

    size: float  # bytes
    one_shot: float
    two_shot: float
    ring: float  # the textbook ring, 2(K-1) steps (NCCL's ring on one node)
    nvls: float  # in-switch reduction (inf where the switch does not reduce)

    @property
    def fastest(self):
        """The fastest algorithm's name (the first listed on a tie)."""
        names = ("one_shot", "two_shot", "ring", "nvls")
        return min(names, key=lambda name: getattr(self, name))

    @property
    def seconds(self):
        return getattr(self, self.fastest)


class ChoiceRow(NamedTuple):
    """:class:`SizeTimes` of one group size at every size asked for."""

    machine: str
    ranks: int
    cells: tuple


def choice_grid(machine, ranks=(2, 3, 4, 5, 6, 7, 8), sizes=None):
    """A :class:`ChoiceRow` per group size in ``ranks`` (GPUs of one node of preset
    ``machine``): each algorithm's closed-form time at each size of ``sizes`` (bytes;
    default 256 B to 64 MiB by powers of 4), on the NVLink hop as ``auto`` reads it."""
    sizes = tuple(sizes or (2.0 ** (8 + 2 * i) for i in range(10)))
    for size in sizes:
        _check_size(size)
    spec, graph, ranks = _one_node(machine, ranks)
    rows = []
    for k in ranks:
        fabric = fabric_of(graph, tuple(range(k)))
        a, b = fabric.intra_alpha, fabric.intra_beta

        def form(algorithm, size, k=k, a=a, b=b):
            return closed_form("all_reduce", algorithm, k, size, a, b).time_s

        cells = tuple(
            SizeTimes(
                size,
                form("one_shot", size),
                form("two_shot", size),
                form("ring", size),
                hardware_cost("nvls", 1, k, size, fabric).time_s
                if spec.intra.reduces
                else math.inf,
            )
            for size in sizes
        )
        rows.append(ChoiceRow(spec.name, k, cells))
    return tuple(rows)


def vllm_choice(world_size, size):
    """What vLLM's custom all-reduce runs for ``size`` bytes on ``world_size`` GPUs of one
    NVLink node: ``"one_shot"``, ``"two_shot"`` or ``"nccl"`` (its published thresholds,
    not this model's).

    >>> [vllm_choice(8, s) for s in (128 * 2**10, 1 * 2**20, 16 * 2**20)]
    ['one_shot', 'two_shot', 'nccl']
    """
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ConfigError(f"world_size={world_size!r} must be a whole number of GPUs >= 1")
    _check_size(size)
    if size >= VLLM_MAX_SIZE or world_size > 8:
        return "nccl"
    if world_size == 2 or any(world_size <= k and size < below for k, below in VLLM_ONE_SHOT_BELOW):
        return "one_shot"
    return "two_shot"


def _check_size(size):
    if isinstance(size, bool) or not isinstance(size, int | float) or not 0 < size < math.inf:
        raise ConfigError(f"size={size!r} must be a number of bytes > 0 (e.g. 512 or 2**20)")
