"""Process groups and the device mesh: which ranks a collective runs over.

A :class:`Group` is an ordered tuple of global ranks; a rank's *group rank* is its
position in it.  A :class:`DeviceMesh` lays ranks on a grid of named dimensions, the
last varying fastest (so in ``("dp", "tp")`` neighbouring ranks share a TP group, as
Megatron orders TP innermost); the groups along a dimension are slices of the grid.
Both are passed explicitly to whatever needs them: there is no global default group
besides "all ranks".

Examples
--------
>>> mesh = DeviceMesh((2, 4), ("dp", "tp"))
>>> mesh.group("tp", 5).ranks, mesh.group("dp", 5).ranks
((4, 5, 6, 7), (1, 5))
>>> mesh.coords(5)
{'dp': 1, 'tp': 1}
>>> [g.ranks for g in mesh.groups("dp")]
[(0, 4), (1, 5), (2, 6), (3, 7)]
"""

import math

import numpy as np

from ..errors import ConfigError

__all__ = ["Group", "DeviceMesh"]


class Group:
    """An ordered set of global ranks that run collectives together."""

    __slots__ = ("ranks", "_index")

    def __init__(self, ranks):
        ranks = tuple(int(r) for r in ranks)
        if not ranks:
            raise ConfigError("a group needs at least one rank")
        if len(set(ranks)) != len(ranks):
            raise ConfigError(f"group {list(ranks)} names a rank twice")
        self.ranks = ranks
        self._index = {r: i for i, r in enumerate(ranks)}

    @classmethod
    def of(cls, group, world_size):
        """``None`` (all ranks), a list of ranks, or a Group -> a checked Group."""
        g = cls(range(world_size)) if group is None else group
        g = g if isinstance(g, Group) else cls(g)
        bad = [r for r in g.ranks if not 0 <= r < world_size]
        if bad:
            raise ConfigError(f"group ranks {bad} do not exist: ranks are 0..{world_size - 1}")
        return g

    @property
    def size(self):
        return len(self.ranks)

    def index(self, rank):
        """The group rank of global ``rank``."""
        try:
            return self._index[rank]
        except KeyError:
            raise ConfigError(f"rank {rank} is not in group {list(self.ranks)}") from None

    def __contains__(self, rank):
        return rank in self._index

    def __eq__(self, other):
        return isinstance(other, Group) and other.ranks == self.ranks

    def __hash__(self):
        return hash(self.ranks)

    def __repr__(self):
        return f"Group({list(self.ranks)})"


class DeviceMesh:
    """Ranks ``0..prod(shape)-1`` (or ``ranks``) on a grid with named dimensions."""

    def __init__(self, shape, names, ranks=None):
        shape, names = tuple(int(s) for s in shape), tuple(names)
        if len(shape) != len(names):
            raise ConfigError(f"mesh shape {shape} and names {names} differ in length")
        if any(s < 1 for s in shape):
            raise ConfigError(f"mesh shape {shape} must be all >= 1")
        size = math.prod(shape)
        ranks = np.arange(size) if ranks is None else np.asarray(ranks)
        if ranks.size != size:
            raise ConfigError(
                f"mesh {dict(zip(names, shape))} needs {size} ranks, got {ranks.size}"
            )
        self.shape, self.names = shape, names
        self.grid = ranks.reshape(shape)  # last dimension varies fastest

    @property
    def size(self):
        return self.grid.size

    def _axis(self, name):
        if name not in self.names:
            raise ConfigError(f"mesh has no dimension {name!r}: it has {list(self.names)}")
        return self.names.index(name)

    def coords(self, rank):
        """``{"dp": i, "tp": j}`` of a global rank."""
        where = np.argwhere(self.grid == rank)
        if not len(where):
            raise ConfigError(f"rank {rank} is not in this mesh")
        return dict(zip(self.names, (int(c) for c in where[0])))

    def group(self, name, rank):
        """The ranks that share every coordinate of ``rank`` except along ``name``."""
        axis = self._axis(name)
        index = list(np.argwhere(self.grid == rank)[0])
        index[axis] = slice(None)
        return Group(self.grid[tuple(index)].tolist())

    def groups(self, name):
        """All groups along dimension ``name``, ordered by the other coordinates."""
        axis = self._axis(name)
        moved = np.moveaxis(self.grid, axis, -1).reshape(-1, self.shape[axis])
        return [Group(row.tolist()) for row in moved]

    def __repr__(self):
        return f"DeviceMesh({dict(zip(self.names, self.shape))})"
