"""Process groups and the rank grid (a device mesh): which ranks a collective runs over.

A :class:`Group` is an ordered tuple of global ranks; a rank's *group rank* is its
position in it.  A :class:`RankGrid` lays ranks on a grid of named dimensions, the
last varying fastest (so in ``("dp", "tp")`` neighbouring ranks share a TP group, as
Megatron orders TP innermost); the groups along a dimension are slices of the grid.
Both are passed explicitly to whatever needs them: there is no global default group
besides "all ranks". torch calls the grid a device mesh; :class:`collsim.distributed.DeviceMesh`
is torch's per-rank handle on one (a :class:`RankGrid` and the process groups through the
calling rank), so the grid itself has the name of what it is.

Examples
--------
>>> mesh = RankGrid((2, 4), ("dp", "tp"))
>>> mesh.group("tp", 5).ranks, mesh.group("dp", 5).ranks
((4, 5, 6, 7), (1, 5))
>>> mesh.group("tp", 5)                    # a slice along "tp": its collectives say so
Group([4, 5, 6, 7], dim='tp')
>>> mesh.coords(5)
{'dp': 1, 'tp': 1}
>>> [g.ranks for g in mesh.groups("dp")]
[(0, 4), (1, 5), (2, 6), (3, 7)]
"""

import math

import numpy as np

from ..errors import ConfigError
from ..topology import MAX_RANKS

__all__ = ["Group", "RankGrid"]


class Group:
    """An ordered set of global ranks that run collectives together.

    ``dim`` names the device-mesh dimension the group is a slice along (``"tp"`` for
    ``mesh.group("tp", r)``), or is None for a group of plain ranks.  It is a record the
    group's collectives carry in their transfers' tags, so accounting reads it from a
    field; two groups of the same ranks are equal whatever their ``dim``.

    >>> Group([0, 1], dim="tp") == Group([0, 1]), Group([0, 1], dim="tp").dim
    (True, 'tp')
    """

    __slots__ = ("ranks", "_index", "dim")

    def __init__(self, ranks, dim=None):
        items = _whole_numbers(ranks, "group", "ranks")
        if not items:
            raise ConfigError(f"group {ranks!r} is empty: a group needs at least one rank")
        negative = [r for r in items if r < 0]
        if negative:
            raise ConfigError(f"group {ranks!r} names rank {negative[0]}: ranks are >= 0")
        if len(set(items)) < len(items):
            twice = next(r for i, r in enumerate(items) if r in items[:i])
            raise ConfigError(f"group {ranks!r} names rank {twice} twice: ranks must differ")
        if dim is not None and (not isinstance(dim, str) or not dim):
            raise ConfigError(f"group dim {dim!r} must be a mesh dimension's name, like 'tp'")
        self.ranks = items
        self._index = {r: i for i, r in enumerate(items)}
        self.dim = dim

    @classmethod
    def of(cls, group, world_size):
        """``None`` (all ranks), a list of ranks, or a Group -> a checked Group."""
        g = cls(range(world_size)) if group is None else group
        g = g if isinstance(g, Group) else cls(g)
        bad = [r for r in g.ranks if not 0 <= r < world_size]
        if bad:
            raise ConfigError(
                f"group {list(g.ranks)} names ranks {bad} that do not exist: the cluster's "
                f"ranks are 0..{world_size - 1}"
            )
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
        dim = "" if self.dim is None else f", dim={self.dim!r}"
        return f"Group({list(self.ranks)}{dim})"


class RankGrid:
    """Ranks ``0..prod(shape)-1`` (or ``ranks``) on a grid with named dimensions: the device
    mesh of the trainer and of :class:`collsim.distributed.DeviceMesh`."""

    def __init__(self, shape, names, ranks=None):
        given = shape
        shape = _whole_numbers(shape, "mesh shape", "sizes")
        if not shape or any(s < 1 for s in shape):
            raise ConfigError(f"mesh shape {given!r} must be one or more sizes, all >= 1")
        if isinstance(names, str) or not _is_sequence(names):
            raise ConfigError(f"mesh names {names!r} must be a list of strings, e.g. ('dp', 'tp')")
        names = tuple(names)
        if not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
            raise ConfigError(f"mesh names {names!r} must be different non-empty strings")
        if len(shape) != len(names):
            raise ConfigError(f"mesh shape {given!r} and names {names!r} differ in length")
        size = math.prod(shape)
        if size > MAX_RANKS:
            raise ConfigError(
                f"mesh shape {given!r} has {size:,} ranks, more than the {MAX_RANKS:,} collsim "
                "simulates"
            )
        if ranks is None:
            ranks = np.arange(size)
        else:
            flat = ranks.reshape(-1) if isinstance(ranks, np.ndarray) else ranks
            listed = Group(flat).ranks  # whole, distinct, >= 0
            if len(listed) != size:
                raise ConfigError(
                    f"mesh {dict(zip(names, shape))} needs {size} ranks, got {len(listed)}"
                )
            ranks = np.array(listed)
        self.shape, self.names = shape, names
        self.grid = ranks.reshape(shape)  # last dimension varies fastest

    @property
    def size(self):
        return self.grid.size

    def _axis(self, name):
        if not isinstance(name, str) or name not in self.names:
            raise ConfigError(f"mesh has no dimension {name!r}: it has {list(self.names)}")
        return self.names.index(name)

    def _where(self, rank):
        whole = isinstance(rank, int | np.integer) and not isinstance(rank, bool | np.bool_)
        where = np.argwhere(self.grid == rank) if whole else ()
        if not len(where):
            raise ConfigError(
                f"rank {rank!r} is not in this mesh: its ranks are {self.grid.min()}.."
                f"{self.grid.max()}"
            )
        return where[0]

    def coords(self, rank):
        """``{"dp": i, "tp": j}`` of a global rank."""
        return dict(zip(self.names, (int(c) for c in self._where(rank))))

    def group(self, name, rank):
        """The ranks that share every coordinate of ``rank`` except along ``name``."""
        axis = self._axis(name)
        index = list(self._where(rank))
        index[axis] = slice(None)
        return Group(self.grid[tuple(index)].tolist(), dim=name)

    def groups(self, name):
        """All groups along dimension ``name``, ordered by the other coordinates."""
        axis = self._axis(name)
        moved = np.moveaxis(self.grid, axis, -1).reshape(-1, self.shape[axis])
        return [Group(row.tolist(), dim=name) for row in moved]

    def __repr__(self):
        return f"RankGrid({dict(zip(self.names, self.shape))})"


def _is_sequence(value):
    """An ordered collection: not a string, a set or a mapping (whose order means nothing)."""
    if isinstance(value, str | bytes | set | frozenset | dict):
        return False
    if isinstance(value, np.ndarray):
        return value.ndim == 1
    return hasattr(value, "__iter__")


def _whole_numbers(values, what, items):
    """``values`` (a list, tuple, range or 1-D array of ints) as a tuple of Python ints; a
    :class:`ConfigError` naming ``values`` for anything else (a string, a float, a bool)."""
    if type(values) is range:  # every collective with group=None builds Group(range(K))
        return tuple(values)
    if not _is_sequence(values):
        raise ConfigError(f"{what} {values!r} must be a list of {items} (ints), e.g. [0, 1]")
    given, values = values, tuple(values)
    for v in values:
        if isinstance(v, bool | np.bool_) or not isinstance(v, int | np.integer):
            raise ConfigError(
                f"{what} {given!r} holds {v!r} ({type(v).__name__}): {items} are whole "
                "numbers (ints)"
            )
    return tuple(int(v) for v in values)
