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


def __getattr__(name):
    # the blocking front ends load on first use, so `import collsim` (and every command's
    # start-up) stays as light as before: collsim.exec(main, n=K) runs a function on K
    # ranks (collsim.launch); collsim.compute(seconds=...) charges compute inside one
    if name == "exec":
        from .launch import exec as run_spmd

        return run_spmd
    if name == "compute":
        from .runtime.blocking import compute

        return compute
    raise AttributeError(f"module 'collsim' has no attribute {name!r}")


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
    "compute",
]  # and collsim.exec, left out of * so that it never hides the builtin exec
