"""What ``algorithm="auto"`` chose for one call, and every candidate it weighed: the
records :mod:`.auto` (closed forms), :mod:`.nccl_choice` (NCCL's model) and
:mod:`.simulated_choice` (runs) all return.

Examples
--------
>>> from collsim.hardware.protocols import PROTOCOLS
>>> ring = Candidate("nccl_ring", PROTOCOLS["ll"], 15e-6)
>>> chosen = AutoChoice("all_reduce", 8, "nccl_ring", PROTOCOLS["ll"], 15e-6, (ring,), "nccl")
>>> print(chosen.info_line())
# NCCL INFO AllReduce 8 B: algorithm nccl_ring protocol ll, by NCCL's model 15 us
"""

from dataclasses import dataclass

from .. import units

__all__ = ["AutoChoice", "Candidate", "NCCL_NAMES"]

NCCL_NAMES = {
    "all_reduce": "AllReduce",
    "reduce_scatter": "ReduceScatter",
    "all_gather": "AllGather",
    "broadcast": "Broadcast",
    "reduce": "Reduce",
    "all_to_all": "AllToAll",
}


@dataclass(frozen=True)
class Candidate:
    """One (algorithm, protocol) the tuner weighed, and its closed-form time."""

    algorithm: str
    protocol: object  # a collsim.hardware.protocols.Protocol, or None (no protocol model)
    time_s: float

    @property
    def label(self):
        return self.algorithm if self.protocol is None else f"{self.algorithm}/{self.protocol}"


@dataclass(frozen=True)
class AutoChoice:
    """What ``auto`` chose for one call: the winner and every candidate, fastest first."""

    collective: str
    size: int  # S in bytes, as nccl-tests counts it
    algorithm: str
    protocol: object  # Protocol or None
    time_s: float  # the winner's predicted time
    candidates: tuple  # Candidate, fastest first
    # what predicted the times: "nccl" (NCCL's cost model, nccl_choice), "closed_form"
    # (collsim's closed forms on the topology's links) or "simulated" (each candidate run)
    source: str = "closed_form"
    rule: object = None  # the tuner file's rule that decided (nccl_tuner_file.TunerRule)
    # what NCCL's model prefers that collsim cannot run here, and why (nccl_choice)
    unrun: str = ""

    def info_line(self):
        """The choice as ``NCCL_DEBUG=INFO`` prints its tuner's, with the best time of every
        other algorithm."""
        proto = "" if self.protocol is None else f" protocol {self.protocol}"
        best = {}
        for c in self.candidates:
            if c.algorithm != self.algorithm:
                best.setdefault(c.algorithm, c)
        others = ", ".join(f"{c.label} {units.format_time(c.time_s)}" for c in best.values())
        others = f" ({others})" if others else ""
        how = {"nccl": "by NCCL's model", "simulated": "simulated"}.get(self.source, "predicted")
        if self.rule is not None:
            how = f"by tuner rule {self.rule.where}, NCCL's model"
        unrun = f"; {self.unrun}" if self.unrun else ""
        return (
            f"# NCCL INFO {NCCL_NAMES[self.collective]} {units.format_size(self.size)}: "
            f"algorithm {self.algorithm}{proto}, {how} "
            f"{units.format_time(self.time_s)}{others}{unrun}"
        )
