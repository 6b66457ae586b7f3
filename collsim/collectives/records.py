"""What a collective's transfer belongs to, as typed records the trace keeps.

Every transfer a collective makes carries two records (DESIGN.md, principle 4: meaning in
fields, not in strings):

* its **tag**, a :class:`CollectiveStep`: which collective and algorithm, on which group
  (and, for a device-mesh group, which parallel dimension), which call in the group's
  sequence and which step of it.  The tag also matches each send with its receive, so it
  is hashable and equal field by field; one tag per (call, step) is shared by every rank.
* its **meta**, the schedule's own :class:`~collsim.collectives.schedule.ChunkMove`: which
  chunks moved between which group ranks, reduced or copied.

Accounting, the step-through and the pictures read these fields; the transfer's label
(``"all_reduce step 2 chunk 5"``) is for display only.  The Chrome/Perfetto export writes
both records' fields into each event's ``args``.

Examples
--------
>>> import numpy as np, collsim
>>> out = collsim.Cluster(collsim.topology.ring(3)).all_reduce([np.ones(6)] * 3)
>>> first = out.trace.transfers[0]
>>> first.tag                                    # the repr counts steps from 1
CollectiveStep(all_reduce ring, group 0, call #0, step 1)
>>> first.tag.collective, first.tag.step, first.tag.number
('all_reduce', 0, 1)
>>> first.meta                                   # the schedule's move: chunks, reduce
ChunkMove(src=0, dst=1, chunks=range(2, 3), reduce=True)
>>> first.tag.to_args()
{'collective': 'all_reduce', 'algorithm': 'ring', 'group': 0, 'call': 0, 'step': 1}
"""

from typing import NamedTuple

__all__ = ["CollectiveStep", "is_collective"]


class CollectiveStep(NamedTuple):
    """The tag of every transfer of one step of one collective call.

    A named tuple, not a dataclass: the execution hashes it for every message it
    matches, and a tuple's hash is the cheapest.  Read its fields, never its positions.
    """

    collective: str  # the canonical name: "all_reduce", "reduce_scatter", ...
    algorithm: str  # "ring", "tree", "halving_doubling", ...
    group: int  # a small id of the group's ranks, per run (context.group_ids)
    call: int  # the position of this collective in the group's sequence: 0, 1, ...
    step: int  # the 0-based index in schedule.steps (people count from 1: `number`)
    dim: str = None  # the device-mesh dimension of the group ("dp", "tp"), None if plain
    # NCCL's wire protocol the step's messages use (a collsim.hardware.protocols.Protocol:
    # its latency per message and its payload fraction), None where none is modelled
    protocol: object = None

    @property
    def number(self):
        """The step as people count it, 1..n_steps ("step 1 of 6")."""
        return self.step + 1

    def __repr__(self):
        # what a deadlock report and an unmatched-message error print: steps from 1
        dim = "" if self.dim is None else f" ({self.dim})"
        return (
            f"CollectiveStep({self.collective} {self.algorithm}, group {self.group}{dim}, "
            f"call #{self.call}, step {self.number})"
        )

    def to_args(self):
        """The fields as JSON-ready ``args`` for the Chrome/Perfetto export; ``step`` is
        the 1-based number there, as every label prints it."""
        args = {
            "collective": self.collective,
            "algorithm": self.algorithm,
            "group": self.group,
            "call": self.call,
            "step": self.number,
        }
        if self.dim is not None:
            args["dim"] = self.dim
        if self.protocol is not None:
            args["protocol"] = self.protocol.name
            if self.protocol.launch:  # the call's first step pays NCCL's base latency
                args["nccl_base_latency_us"] = round(self.protocol.launch * 1e6, 6)
        return args


def is_collective(tag):
    """Whether a transfer's tag is a collective's (a :class:`CollectiveStep`)."""
    return type(tag) is CollectiveStep
