"""Names of collectives and algorithms, and the schedule builder for each pair.

The topology-aware all-reduce algorithms (``HARDWARE_ALGORITHMS``: nccl_ring,
double_tree, hierarchical, nvls) read where the group's ranks sit, a
:class:`~collsim.hardware.layout.NodeLayout` (``layout=``); nvls also the NVSwitch that
reduces (``switch=``, :func:`~collsim.collectives.nvls.nvls_switch`).  Every other
algorithm ignores both, so its schedule is the same on every topology.  ``"auto"`` is
a name too: the API resolves it per call (:mod:`collsim.collectives.auto`).

Examples
--------
>>> build("all-reduce", "hd", 4).algorithm
'halving_doubling'
>>> canonical_collective("allreduce")
'all_reduce'
>>> from collsim.hardware.layout import NodeLayout
>>> build("all_reduce", "nccl_ring", 4, layout=NodeLayout(((0, 1), (2, 3)))).n_chunks
8
"""

import difflib

from ..errors import ConfigError
from .all_to_all import direct_all_to_all
from .checks import is_int, is_power_of_two
from .collnet import COLLNET, COLLNET_BUILDERS
from .double_tree import double_tree_all_reduce
from .formulas import ALGORITHMS
from .halving_doubling import (
    halving_doubling_all_gather,
    halving_doubling_all_reduce,
    halving_doubling_reduce_scatter,
)
from .hardware_forms import HARDWARE_ALGORITHMS, MAX_PIECES
from .hierarchical import hierarchical_all_reduce
from .naive import naive_all_reduce
from .nccl_ring import nccl_ring_all_reduce
from .nvls import nvls_all_reduce
from .nvls_tree import nvls_tree_all_reduce
from .one_shot import one_shot_all_reduce
from .pat import pat_all_gather, pat_reduce_scatter
from .ring import (
    chain_broadcast,
    chain_reduce,
    ring_all_gather,
    ring_all_reduce,
    ring_reduce_scatter,
)
from .tree import tree_all_reduce, tree_broadcast, tree_reduce
from .two_shot import two_shot_all_reduce

__all__ = [
    "build",
    "canonical_collective",
    "canonical_algorithm",
    "algorithms_for",
    "BUILDERS",
    "algorithm_setting",
    "SETTING_COLLECTIVES",
    "ALGORITHMS",
    "POWER_OF_TWO_ONLY",
    "HARDWARE_BUILDERS",
    "HARDWARE_ALGORITHMS",
    "AUTO",
    "one_node",
    "PIPELINED",
]

AUTO = "auto"  # resolved per call to the algorithm (and protocol) the closed forms favour

BUILDERS = {
    ("all_reduce", "ring"): lambda k, root: ring_all_reduce(k),
    ("all_reduce", "tree"): lambda k, root: tree_all_reduce(k),
    ("all_reduce", "halving_doubling"): lambda k, root: halving_doubling_all_reduce(k),
    ("all_reduce", "naive"): lambda k, root: naive_all_reduce(k, root),
    ("all_reduce", "one_shot"): lambda k, root: one_shot_all_reduce(k),
    ("all_reduce", "two_shot"): lambda k, root: two_shot_all_reduce(k),
    ("reduce_scatter", "ring"): lambda k, root: ring_reduce_scatter(k),
    ("reduce_scatter", "halving_doubling"): lambda k, root: halving_doubling_reduce_scatter(k),
    ("all_gather", "ring"): lambda k, root: ring_all_gather(k),
    ("all_gather", "halving_doubling"): lambda k, root: halving_doubling_all_gather(k),
    ("all_gather", "pat"): lambda k, root: pat_all_gather(k),
    ("reduce_scatter", "pat"): lambda k, root: pat_reduce_scatter(k),
    ("broadcast", "tree"): tree_broadcast,
    ("broadcast", "ring"): chain_broadcast,
    ("reduce", "tree"): tree_reduce,
    ("reduce", "ring"): chain_reduce,
    ("all_to_all", "direct"): lambda k, root: direct_all_to_all(k),
}
# builders that read the group's NodeLayout (and, for nvls, the switch that reduces)
HARDWARE_BUILDERS = {
    ("all_reduce", "nccl_ring"): lambda layout, switch, pieces: nccl_ring_all_reduce(layout),
    ("all_reduce", "double_tree"): lambda layout, switch, pieces: double_tree_all_reduce(
        layout, pieces
    ),
    ("all_reduce", "hierarchical"): lambda layout, switch, pieces: hierarchical_all_reduce(layout),
    ("all_reduce", "nvls"): lambda layout, switch, pieces: nvls_all_reduce(
        layout.ranks, switch.name, switch.efficiency, pieces
    ),
    ("all_reduce", "nvls_tree"): lambda layout, switch, pieces: nvls_tree_all_reduce(
        layout, switch.names, switch.efficiency
    ),
    **COLLNET_BUILDERS,
}
PIPELINED = frozenset(("all_reduce", a) for a in ("double_tree", "nvls", *COLLNET))  # pieces=
# pairs whose builder refuses K that is not a power of two (partners r XOR 2^i)
POWER_OF_TWO_ONLY = frozenset(
    {("reduce_scatter", "halving_doubling"), ("all_gather", "halving_doubling")}
)
_ALGORITHM_ALIASES = {
    "hd": "halving_doubling",
    "rabenseifner": "halving_doubling",
    "recursive_halving_doubling": "halving_doubling",
    "recursive_halving": "halving_doubling",  # the reduce-scatter's name for it
    "recursive_doubling": "halving_doubling",  # the all-gather's
    "bruck": "pat",
    "binomial": "tree",
    "binomial_tree": "tree",
    "chain": "ring",
    "pipelined": "ring",
    "nccl": "nccl_ring",
    "rail_ring": "nccl_ring",
    "dbtree": "double_tree",
    "double_binary_tree": "double_tree",
    "2d": "hierarchical",
    "nvlink_sharp": "nvls",
    "sharp": "nvls",
    **dict(collnet="collnet_direct", collnetdirect="collnet_direct", collnetchain="collnet_chain"),
    "oneshot": "one_shot",  # vLLM's and NCCL's spellings
    "twoshot": "two_shot",
}


def _normal(name):
    return str(name).strip().lower().replace("-", "_")


def canonical_collective(name):
    """``"all-reduce"``, ``"allreduce"`` -> ``"all_reduce"``; unknown names raise."""
    key = _normal(name)
    squashed = {c.replace("_", ""): c for c in ALGORITHMS}
    if key in ALGORITHMS:
        return key
    if key.replace("_", "") in squashed:
        return squashed[key.replace("_", "")]
    near = difflib.get_close_matches(key, ALGORITHMS, n=1)
    hint = f" (did you mean {near[0].replace('_', '-')!r}?)" if near else ""
    names = ", ".join(c.replace("_", "-") for c in ALGORITHMS)
    raise ConfigError(f"unknown collective {name!r}{hint}: choose one of {names}")


def canonical_algorithm(collective, name):
    """The algorithm's canonical name for ``collective``; ``None`` gives the default
    (the collective's first), ``"auto"`` stays ``"auto"``."""
    if name is None:
        return ALGORITHMS[collective][0]
    options = ALGORITHMS[collective] + HARDWARE_ALGORITHMS.get(collective, ()) + (AUTO,)
    key = _ALGORITHM_ALIASES.get(_normal(name), _normal(name))
    if key not in options:
        near = difflib.get_close_matches(key, options, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ConfigError(
            f"{collective.replace('_', '-')} has no algorithm {name!r}{hint}: "
            f"choose one of {', '.join(options)}"
        )
    return key


def algorithms_for(collective, k, layout=None, switch=None):
    """The algorithms of ``collective`` that run on ``k`` ranks, default first (what a
    sweep over every algorithm should draw).  With the group's ``layout`` the
    topology-aware ones that can run on it join: nccl_ring always, double_tree and
    hierarchical on equal nodes, nvls on one node whose NVSwitch reduces (``switch``).

    >>> algorithms_for("reduce_scatter", 6), algorithms_for("reduce_scatter", 8)
    (('ring', 'pat'), ('ring', 'halving_doubling', 'pat'))
    >>> from collsim.hardware.layout import NodeLayout
    >>> algorithms_for("all_reduce", 3, NodeLayout(((0, 1), (2,))))
    ('ring', 'tree', 'halving_doubling', 'naive', 'one_shot', 'two_shot', 'nccl_ring')
    """
    collective = canonical_collective(collective)
    power_of_two = is_power_of_two(k)
    found = tuple(
        a
        for a in ALGORITHMS[collective]
        if power_of_two or (collective, a) not in POWER_OF_TWO_ONLY
    )
    if layout is None:
        return found
    runs = {
        "nccl_ring": True,
        "double_tree": layout.gpus_per_node is not None,
        "hierarchical": layout.gpus_per_node is not None,
        "nvls": switch is not None and layout.n_nodes == 1,
        "nvls_tree": switch is not None and layout.n_nodes > 1,
        **dict.fromkeys(COLLNET, False),  # where SHARP is on, NCCL's model weighs them
    }
    return found + tuple(a for a in HARDWARE_ALGORITHMS.get(collective, ()) if runs[a])


def one_node(k):
    """The NodeLayout of ``k`` ranks on one node: what a topology without nodes is."""
    from ..hardware.layout import NodeLayout

    return NodeLayout((tuple(range(k)),))


def build(collective, algorithm, k, root=0, layout=None, switch=None, pieces=None):
    """The :class:`~collsim.collectives.schedule.Schedule` for K group ranks.

    ``layout`` (a NodeLayout of the group; default: one node), ``switch`` (an
    :class:`~collsim.collectives.nvls.NvlsSwitch`) and ``pieces`` (the pipeline depth of
    double_tree and nvls; default 1 and 16) matter to the topology-aware algorithms
    only."""
    collective = canonical_collective(collective)
    algorithm = canonical_algorithm(collective, algorithm)
    if algorithm == AUTO:
        raise ConfigError(
            "algorithm 'auto' is chosen per call from the size and the topology: run the "
            "collective (cluster.all_reduce(..., algorithm='auto')) or name an algorithm"
        )
    if not 0 <= root < k:
        raise ConfigError(f"root {root} is not a group rank: choose 0..{k - 1}")
    if (collective, algorithm) not in HARDWARE_BUILDERS:
        return BUILDERS[(collective, algorithm)](k, root)
    layout = one_node(k) if layout is None else layout
    if layout.ranks != k:
        raise ConfigError(f"layout of {layout.ranks} ranks for a group of {k}")
    if algorithm == "nvls":
        if layout.n_nodes > 1:
            raise ConfigError(
                f"nvls on a group spanning {layout.n_nodes} nodes: in-switch reduction runs "
                "inside one node; take a group inside one node, or use 'nccl_ring'"
            )
        if switch is None:
            raise ConfigError(
                "nvls needs a node whose NVSwitch reduces (reduces=True, NVLink SHARP, as "
                "on dgx-h100); use algorithm 'nccl_ring' or 'ring' here"
            )
    if algorithm == "nvls_tree" and (layout.n_nodes == 1 or switch is None):
        raise ConfigError(
            "nvls_tree needs a group of whole nodes, two or more, whose NVSwitches reduce "
            "(NVLink SHARP, as on dgx-h100 --nodes 2); inside one node use 'nvls'"
        )
    if pieces is None:
        pieces = 16 if algorithm == "nvls" else 1
    elif not (is_int(pieces) and 1 <= pieces <= MAX_PIECES):
        raise ConfigError(f"pieces={pieces!r}: a pipeline of 1..{MAX_PIECES} pieces")
    return HARDWARE_BUILDERS[(collective, algorithm)](layout, switch, pieces)


SETTING_COLLECTIVES = (
    "all_reduce",
    "reduce_scatter",
    "all_gather",
    "broadcast",
    "reduce",
    "all_to_all",
)


def algorithm_setting(algorithm, who="configure"):
    """``{collective: algorithm}`` of a front end's algorithm setting (what ``collsim exec
    --algorithm`` or ``collsim.mpi.configure`` take): None (each collective's default), one
    name (the collectives that have it; the others keep their default) or a dict.

    >>> algorithm_setting("tree")
    {'all_reduce': 'tree', 'broadcast': 'tree', 'reduce': 'tree'}
    >>> algorithm_setting({"allreduce": "hd"})
    {'all_reduce': 'halving_doubling'}
    """
    if algorithm is None:
        return {}
    if isinstance(algorithm, dict):
        chosen = {}
        for name, value in algorithm.items():
            collective = canonical_collective(name)
            if collective not in SETTING_COLLECTIVES:
                raise ConfigError(
                    f"{who}(algorithm={{{name!r}: ...}}): choose collectives "
                    f"from {', '.join(SETTING_COLLECTIVES)}"
                )
            chosen[collective] = canonical_algorithm(collective, value)
        return chosen
    if not isinstance(algorithm, str):
        raise ConfigError(
            f"{who}(algorithm={algorithm!r}): give a name such as 'ring', "
            "a dict {collective: algorithm}, or None"
        )
    chosen = {}
    for collective in SETTING_COLLECTIVES:
        try:
            chosen[collective] = canonical_algorithm(collective, algorithm)
        except ConfigError:
            continue  # this collective keeps its default
    if not chosen:
        names = list(dict.fromkeys(a for c in SETTING_COLLECTIVES for a in ALGORITHMS[c]))
        raise ConfigError(
            f"{who}(algorithm={algorithm!r}): no collective has that algorithm: choose "
            f"one of {', '.join([*names, AUTO])} (or a dict {{collective: algorithm}})"
        )
    return chosen
