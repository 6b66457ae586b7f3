"""``MPI.Group``: an ordered set of processes, to build communicators from (``Create``).

A group is a tuple of cluster ranks; ``Get_rank`` is the calling rank's position in it
(``MPI.UNDEFINED`` outside).  The set operations keep MPI's order: ``Union`` is the first
group then the second's new members, ``Intersection`` and ``Difference`` the first's order.

Examples
--------
>>> g = Group((0, 1, 2, 3))
>>> g.Incl([3, 1]).ranks, g.Excl([0]).ranks, g.Range_incl([(0, 3, 2)]).ranks
((3, 1), (1, 2, 3), (0, 2))
>>> Group.Translate_ranks(g.Incl([3, 1]), [0, 1], g)
[3, 1]
>>> Group.Compare(g, g.Incl([3, 2, 1, 0])) == SIMILAR
True
"""

from ..collectives.checks import is_int
from ..runtime import blocking
from .exceptions import ERR_GROUP, ERR_RANK, mpi_error
from .handletable import Handle, is_constant, predefine
from .status import PROC_NULL, UNDEFINED

__all__ = ["Group", "GROUP_EMPTY", "GROUP_NULL", "IDENT", "CONGRUENT", "SIMILAR", "UNEQUAL"]

IDENT, CONGRUENT, SIMILAR, UNEQUAL = 0, 1, 2, 3  # MPI's comparison results


class Group(Handle):
    """An ordered set of cluster ranks (``Group()`` is ``MPI.GROUP_NULL``)."""

    def _construct(self, ranks=None):
        if isinstance(ranks, Group):
            ranks = ranks.ranks
        elif ranks is not None and (
            isinstance(ranks, (str, bytes, Handle)) or not hasattr(ranks, "__iter__")
        ):
            raise TypeError(f"MPI.Group({ranks!r}): give an MPI.Group to copy, or nothing")
        self.ranks = None if ranks is None else tuple(int(r) for r in ranks)

    def _members(self, call):
        if self.ranks is None:
            raise mpi_error(ERR_GROUP, f"Group.{call} on MPI.GROUP_NULL: give a group")
        return self.ranks

    def Get_size(self):
        return len(self._members("Get_size"))

    def Get_rank(self):
        me = blocking.current_rank().id
        members = self._members("Get_rank")
        return members.index(me) if me in members else UNDEFINED

    size = property(Get_size)
    rank = property(Get_rank)

    def _positions(self, ranks, call):
        members = self._members(call)
        ranks = [int(r) for r in ranks]
        bad = [r for r in ranks if not is_int(r) or not 0 <= r < len(members)]
        if bad or len(set(ranks)) != len(ranks):
            raise mpi_error(
                ERR_RANK,
                f"Group.{call}({ranks}): ranks are distinct ints in 0..{len(members) - 1}",
            )
        return ranks

    def Incl(self, ranks):
        members = self._members("Incl")
        return type(self)._made(members[r] for r in self._positions(ranks, "Incl"))

    def Excl(self, ranks):
        members, gone = self._members("Excl"), set(self._positions(ranks, "Excl"))
        return type(self)._made(m for i, m in enumerate(members) if i not in gone)

    def _ranges(self, ranges):
        chosen = []
        for first, last, stride in ranges:
            chosen += range(first, last + (1 if stride > 0 else -1), stride)
        return chosen

    def Range_incl(self, ranges):
        return self.Incl(self._ranges(ranges))

    def Range_excl(self, ranges):
        return self.Excl(self._ranges(ranges))

    def Union(self, other):
        mine = self._members("Union")
        return type(self)._made(mine + tuple(r for r in other._members("Union") if r not in mine))

    def Intersection(self, other):
        theirs = set(other._members("Intersection"))
        return type(self)._made(r for r in self._members("Intersection") if r in theirs)

    Intersect = Intersection

    def Difference(self, other):
        theirs = set(other._members("Difference"))
        return type(self)._made(r for r in self._members("Difference") if r not in theirs)

    def Translate_ranks(self, ranks=None, group=None):
        """The positions in ``other`` of ``ranks`` of this group (``UNDEFINED`` where
        absent; ``PROC_NULL`` stays); all of this group's when ``ranks`` is None."""
        members, other = self._members("Translate_ranks"), group
        ranks = range(len(members)) if ranks is None else ranks
        if other is None:
            return [PROC_NULL if r == PROC_NULL else members[r] for r in ranks]
        theirs = other._members("Translate_ranks")
        out = []
        for r in ranks:
            if r == PROC_NULL:
                out.append(PROC_NULL)
            else:
                who = members[r]
                out.append(theirs.index(who) if who in theirs else UNDEFINED)
        return out

    def Compare(self, other):
        a, b = self._members("Compare"), other._members("Compare")
        if a == b:
            return IDENT
        return SIMILAR if set(a) == set(b) and len(a) == len(b) else UNEQUAL

    def Dup(self):
        return type(self)._made(self.ranks)

    def Free(self):
        if is_constant(self):
            raise mpi_error(ERR_GROUP, f"Free() of {self!r}: a predefined group cannot be freed")
        self.ranks = None

    def __eq__(self, other):
        if not isinstance(other, Group):
            return NotImplemented
        return self.ranks == other.ranks

    def _handle_key(self):
        return self.ranks

    def _nullify(self):
        self.ranks = None

    def __bool__(self):
        return self.ranks is not None

    def __repr__(self):
        return "MPI.GROUP_NULL" if self.ranks is None else f"<MPI.Group {list(self.ranks)}>"


GROUP_NULL = Group()
GROUP_EMPTY = Group(())
predefine(GROUP_NULL=GROUP_NULL, GROUP_EMPTY=GROUP_EMPTY)
