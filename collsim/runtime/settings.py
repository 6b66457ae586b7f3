"""Checks of the ``Cluster(...)`` settings that need a model beyond the plain network: the
wire protocol (:mod:`collsim.hardware.protocols`) and the faults
(:mod:`collsim.runtime.faults`).  ``Cluster`` calls them only when there is something to
check, so a plain ring with neither never imports them.

Examples
--------
>>> import collsim
>>> protocol_setting("LL128", machine=None).name
'll128'
>>> protocol_setting(None, machine=collsim.hardware.preset("dgx-h100"))
'auto'
"""

from ..errors import ConfigError
from ..hardware.protocols import check_protocol
from .faults import Faults

__all__ = ["faults_setting", "protocol_setting"]


def protocol_setting(protocol, machine):
    """``"auto"``, a :class:`~collsim.hardware.protocols.Protocol`, or ``None`` (no
    protocol model): the cluster's ``protocol`` as given, checked; ``None`` means
    ``"auto"`` on a hardware preset (``machine``) and no protocol model elsewhere."""
    if protocol is None:
        return "auto" if machine is not None else None
    if isinstance(protocol, str) and protocol.strip().lower() == "auto":
        return "auto"
    return check_protocol(protocol)


def faults_setting(faults, topology, max_time):
    """The cluster's :class:`~collsim.runtime.faults.Faults`, checked against the
    topology and the ``max_time`` guard, or None when it lists nothing."""
    if not isinstance(faults, Faults):
        raise ConfigError(
            f"Cluster(faults={faults!r}): give a collsim.runtime.faults.Faults, e.g. "
            "Faults.parse(slow_link=['2-3:0.25'])"
        )
    return faults.check(topology, max_time) if faults else None
