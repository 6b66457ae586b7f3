"""What a torch.distributed message's runtime tag says, as typed records (as ``collsim.mpi``'s).

A user's point-to-point message carries a :class:`MessageTag` (the group and the user's int
tag); a call built from point-to-point messages (``gather``, ``scatter``, ``all_to_all``,
the object calls) carries a :class:`CallTag` (the group and the call). Both start with the
field ``api = "distributed"``, so they never match ``collsim.mpi``'s tags or a rank
program's own, and each is equal to the plain tuple of its fields (the matching and the
trace's order are those of the tuples these records replaced).

>>> MessageTag.on(3, 5), MessageTag.on(3, 5) == ("distributed", 3, 5)
(torch.distributed tag 5 (group 3), True)
>>> CallTag.on(0, "gather").to_args()
{'dist_group': 0, 'dist_call': 'gather'}
"""

from typing import NamedTuple

__all__ = ["TAG_ROOT", "MessageTag", "CallTag"]

TAG_ROOT = "distributed"  # the first field of every tag of this package


class MessageTag(NamedTuple):
    """The runtime tag of a ``send``/``recv``: the group's id and the user's tag."""

    api: str  # always TAG_ROOT: keeps these apart from other front ends' tags
    group: int
    tag: int

    @classmethod
    def on(cls, group, tag):
        return cls(TAG_ROOT, group, tag)

    def __repr__(self):
        return f"torch.distributed tag {self.tag} (group {self.group})"

    def to_args(self):
        """The fields for the Chrome/Perfetto export's ``args``."""
        return {"dist_group": self.group, "dist_tag": self.tag}


class CallTag(NamedTuple):
    """The runtime tag of the messages of a call built from point-to-point messages."""

    api: str  # always TAG_ROOT, as MessageTag's
    group: int
    call: str

    @classmethod
    def on(cls, group, call):
        return cls(TAG_ROOT, group, call)

    def __repr__(self):
        return f"torch.distributed {self.call} (group {self.group})"

    def to_args(self):
        """The fields for the Chrome/Perfetto export's ``args``."""
        return {"dist_group": self.group, "dist_call": self.call}
