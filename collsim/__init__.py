"""collsim: a virtual GPU cluster inside one Python process.

Ranks hold real numpy buffers; a discrete-event network moves them over a topology and
charges simulated time; collectives and parallel training run on it for real.

Examples
--------
>>> import collsim
>>> cluster = collsim.Cluster(collsim.topology.ring(4, bandwidth="100GB/s", latency="5us"))
>>> cluster.size
4
"""

from . import topology, units
from .errors import (
    CollsimError,
    ConfigError,
    DeadlockError,
    SimulationLimitError,
    WatchdogTimeout,
)
from .runtime import Cluster, CountOnly, Faults, Rank, RunResult

__version__ = "0.1.0"

__all__ = [
    "Cluster",
    "RunResult",
    "Rank",
    "CountOnly",
    "CollsimError",
    "ConfigError",
    "DeadlockError",
    "SimulationLimitError",
    "WatchdogTimeout",
    "Faults",
    "topology",
    "units",
]
