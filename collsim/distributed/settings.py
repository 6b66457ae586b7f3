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
choose one of ring, tree, halving_doubling, naive, one_shot, two_shot, pat, direct, auto \
(or a dict {collective: algorithm})
"""

import contextlib
from dataclasses import dataclass, field

from ..collectives.registry import algorithm_setting

__all__ = ["Settings", "configure", "configured", "current", "algorithm_for"]

# the collsim collectives this package's calls run (gather, scatter and uneven
# all-to-alls run over point-to-point and take no algorithm)


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
    return algorithm_setting(algorithm)
