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

__version__ = "0.1.0"

# Every name loads on first use, so that `collsim --version` and `collsim lesson list` start
# without numpy, networkx or matplotlib (issue 27); `from collsim import Cluster` and
# `collsim.topology.ring(...)` work as before.  Name -> (module, attribute or None).
_LAZY = {
    "topology": ("collsim.topology", None),
    "units": ("collsim.units", None),
    "CollsimError": ("collsim.errors", "CollsimError"),
    "ConfigError": ("collsim.errors", "ConfigError"),
    "DeadlockError": ("collsim.errors", "DeadlockError"),
    "SimulationLimitError": ("collsim.errors", "SimulationLimitError"),
    "WatchdogTimeout": ("collsim.errors", "WatchdogTimeout"),
    "Cluster": ("collsim.runtime", "Cluster"),
    "CountOnly": ("collsim.runtime", "CountOnly"),
    "Faults": ("collsim.runtime", "Faults"),
    "Rank": ("collsim.runtime", "Rank"),
    "RunResult": ("collsim.runtime", "RunResult"),
    # collsim.exec(main, n=K) runs a function on K ranks; collsim.compute(seconds=...)
    # charges compute inside one (the blocking front ends)
    "exec": ("collsim.launch", "exec"),
    "compute": ("collsim.runtime.blocking", "compute"),
}


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'collsim' has no attribute {name!r}")
    import importlib

    module_name, attribute = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value  # looked up once
    return value


def __dir__():
    return sorted([*globals(), *_LAZY])


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
