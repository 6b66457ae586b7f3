"""Names of collectives and algorithms, and the schedule builder for each pair.

Examples
--------
>>> build("all-reduce", "hd", 4).algorithm
'halving_doubling'
>>> canonical_collective("allreduce")
'all_reduce'
"""

import difflib

from ..errors import ConfigError
from .all_to_all import direct_all_to_all
from .checks import is_power_of_two
from .formulas import ALGORITHMS
from .halving_doubling import (
    halving_doubling_all_gather,
    halving_doubling_all_reduce,
    halving_doubling_reduce_scatter,
)
from .naive import naive_all_reduce
from .ring import (
    chain_broadcast,
    chain_reduce,
    ring_all_gather,
    ring_all_reduce,
    ring_reduce_scatter,
)
from .tree import tree_all_reduce, tree_broadcast, tree_reduce

__all__ = ["build", "canonical_collective", "canonical_algorithm", "algorithms_for", "BUILDERS",
           "ALGORITHMS", "POWER_OF_TWO_ONLY"]  # fmt: skip

BUILDERS = {
    ("all_reduce", "ring"): lambda k, root: ring_all_reduce(k),
    ("all_reduce", "tree"): lambda k, root: tree_all_reduce(k),
    ("all_reduce", "halving_doubling"): lambda k, root: halving_doubling_all_reduce(k),
    ("all_reduce", "naive"): lambda k, root: naive_all_reduce(k, root),
    ("reduce_scatter", "ring"): lambda k, root: ring_reduce_scatter(k),
    ("reduce_scatter", "halving_doubling"): lambda k, root: halving_doubling_reduce_scatter(k),
    ("all_gather", "ring"): lambda k, root: ring_all_gather(k),
    ("all_gather", "halving_doubling"): lambda k, root: halving_doubling_all_gather(k),
    ("broadcast", "tree"): tree_broadcast,
    ("broadcast", "ring"): chain_broadcast,
    ("reduce", "tree"): tree_reduce,
    ("reduce", "ring"): chain_reduce,
    ("all_to_all", "direct"): lambda k, root: direct_all_to_all(k),
}
# pairs whose builder refuses K that is not a power of two (partners r XOR 2^i)
POWER_OF_TWO_ONLY = frozenset({("reduce_scatter", "halving_doubling"),
                               ("all_gather", "halving_doubling")})  # fmt: skip
_ALGORITHM_ALIASES = {
    "hd": "halving_doubling",
    "rabenseifner": "halving_doubling",
    "recursive_halving_doubling": "halving_doubling",
    "recursive_halving": "halving_doubling",  # the reduce-scatter's name for it
    "recursive_doubling": "halving_doubling",  # the all-gather's
    "binomial": "tree",
    "binomial_tree": "tree",
    "chain": "ring",
    "pipelined": "ring",
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
    """The algorithm's canonical name for ``collective``; ``None`` gives the default."""
    options = ALGORITHMS[collective]
    if name is None:
        return options[0]
    key = _ALGORITHM_ALIASES.get(_normal(name), _normal(name))
    if key not in options:
        near = difflib.get_close_matches(key, options, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ConfigError(
            f"{collective.replace('_', '-')} has no algorithm {name!r}{hint}: "
            f"choose one of {', '.join(options)}"
        )
    return key


def algorithms_for(collective, k):
    """The algorithms of ``collective`` that run on ``k`` ranks, default first (what a
    sweep over every algorithm should draw).

    >>> algorithms_for("reduce_scatter", 6), algorithms_for("reduce_scatter", 8)
    (('ring',), ('ring', 'halving_doubling'))
    """
    collective = canonical_collective(collective)
    power_of_two = is_power_of_two(k)
    return tuple(a for a in ALGORITHMS[collective]
                 if power_of_two or (collective, a) not in POWER_OF_TWO_ONLY)  # fmt: skip


def build(collective, algorithm, k, root=0):
    """The :class:`~collsim.collectives.schedule.Schedule` for K group ranks."""
    collective = canonical_collective(collective)
    algorithm = canonical_algorithm(collective, algorithm)
    if not 0 <= root < k:
        raise ConfigError(f"root {root} is not a group rank: choose 0..{k - 1}")
    return BUILDERS[(collective, algorithm)](k, root)
