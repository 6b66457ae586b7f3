"""Which algorithm ``collsim.distributed``'s collectives run: the cluster's default, or the
one a launcher (``collsim exec --algorithm``) configures, as ``collsim.mpi`` does.

An algorithm given by name applies to the collectives that have it (``"ring"``:
all-reduce, reduce-scatter, all-gather, broadcast, reduce); the others keep their
default (the all-to-all is always ``"direct"``).  A dict names one per collective.

Examples
--------
>>> algorithm_for("all_reduce") is None                 # the cluster's default
True
>>> with configured(algorithm="tree"):
...     algorithm_for("all_reduce"), algorithm_for("all_gather")
('tree', None)
>>> configure(algorithm="fastest")
Traceback (most recent call last):
...
collsim.errors.ConfigError: configure(algorithm='fastest'): no collective has that algorithm: \
choose one of ring, tree, halving_doubling, naive, direct, auto (or a dict \
{collective: algorithm})
"""

import contextlib
from dataclasses import dataclass, field

from ..collectives.registry import ALGORITHMS, AUTO, canonical_algorithm, canonical_collective
from ..errors import ConfigError

__all__ = ["Settings", "configure", "configured", "current", "algorithm_for"]

# the collsim collectives this package's calls run (gather, scatter and uneven
# all-to-alls run over point-to-point and take no algorithm)
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all")


@dataclass(frozen=True)
class Settings:
    """What :func:`configure` sets: collective -> algorithm (absent: the cluster's default)."""

    algorithms: dict = field(default_factory=dict)


_current = Settings()


def current():
    """The :class:`Settings` in force."""
    return _current


def configure(algorithm=None):
    """Set the algorithm later calls run (None: the cluster's defaults; a name; or a dict
    ``{"all_reduce": "tree"}``); returns the previous :class:`Settings`."""
    global _current
    previous, _current = _current, Settings(_algorithms(algorithm))
    return previous


@contextlib.contextmanager
def configured(algorithm=None):
    """:func:`configure` inside a ``with`` block (a launcher's run); then the previous."""
    global _current
    previous = configure(algorithm)
    try:
        yield _current
    finally:
        _current = previous


def algorithm_for(collective):
    """The algorithm ``collective`` runs now, or None for the cluster's default."""
    return _current.algorithms.get(collective)


def _algorithms(algorithm):
    if algorithm is None:
        return {}
    if isinstance(algorithm, dict):
        chosen = {}
        for name, value in algorithm.items():
            collective = canonical_collective(name)
            if collective not in COLLECTIVES:
                raise ConfigError(f"configure(algorithm={{{name!r}: ...}}): choose "
                                  f"collectives from {', '.join(COLLECTIVES)}")  # fmt: skip
            chosen[collective] = canonical_algorithm(collective, value)
        return chosen
    if not isinstance(algorithm, str):
        raise ConfigError(f"configure(algorithm={algorithm!r}): give a name such as 'ring', "
                          "a dict {collective: algorithm}, or None")  # fmt: skip
    chosen = {}
    for collective in COLLECTIVES:
        try:
            chosen[collective] = canonical_algorithm(collective, algorithm)
        except ConfigError:
            continue  # this collective keeps its default
    if not chosen:
        names = list(dict.fromkeys(a for c in COLLECTIVES for a in ALGORITHMS[c]))
        raise ConfigError(
            f"configure(algorithm={algorithm!r}): no collective has that algorithm: choose "
            f"one of {', '.join([*names, AUTO])} (or a dict {{collective: algorithm}})"
        )
    return chosen
