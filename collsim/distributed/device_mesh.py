"""``init_device_mesh`` and ``DeviceMesh``: torch's device mesh with named dimensions.

The grid arithmetic is collsim's own :class:`~collsim.runtime.group.RankGrid` (the
last dimension varies fastest, as in torch); each dimension's process group is the
slice through the calling rank, a :class:`~collsim.runtime.group.Group` whose ``dim``
names the dimension, so every transfer of its collectives records which dimension it
belongs to.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.runtime import blocking
>>> from collsim import distributed as dist
>>> def main():
...     mesh = dist.init_device_mesh("cuda", (2, 3), mesh_dim_names=("dp", "tp"))
...     tp = mesh["tp"]
...     return (mesh.get_group("tp").ranks, mesh.get_local_rank("dp"), tp.size(),
...             tp.mesh.tolist(), mesh.get_coordinate())
>>> blocking.run(collsim.Cluster(collsim.topology.switch(6)), main).returns[4]
((3, 4, 5), 1, 3, [3, 4, 5], [1, 1])
"""

import math

import numpy as np

from ..collectives.checks import is_int
from ..errors import ConfigError
from ..runtime.group import Group, RankGrid
from .process_group import init_process_group, is_initialized, make_group, state

__all__ = ["DeviceMesh", "init_device_mesh"]


class DeviceMesh:
    """Global ranks laid on a grid (``mesh``, an array of ranks), with optional names.

    Made by every rank, as in torch; each rank's mesh holds the groups through it.
    ``mesh["tp"]`` is the 1-D mesh along ``"tp"`` through this rank, ``mesh.get_group("dp")``
    its data-parallel process group.
    """

    def __init__(self, device_type, mesh, *, mesh_dim_names=None, _parent=None):
        if not isinstance(device_type, str) or not device_type:
            raise ConfigError(
                f"DeviceMesh(device_type={device_type!r}): give a device type "
                "name such as 'cuda' or 'cpu'"
            )
        try:
            grid = np.asarray(mesh)
        except (ValueError, TypeError):
            raise ConfigError(
                f"DeviceMesh(mesh={mesh!r}): give a rectangular array of "
                "ranks, e.g. [[0, 1], [2, 3]]"
            ) from None
        if grid.ndim == 0:
            raise ConfigError(
                f"DeviceMesh(mesh={mesh!r}): a mesh has one dimension or more, e.g. [0, 1, 2, 3]"
            )
        given_names = mesh_dim_names
        names = (
            tuple(f"dim{i}" for i in range(grid.ndim)) if mesh_dim_names is None else mesh_dim_names
        )
        if isinstance(names, str):
            raise ConfigError(f"mesh_dim_names={names!r}: give a tuple of names, e.g. ({names!r},)")
        self._grid = RankGrid(grid.shape, names, ranks=grid)  # checks ranks and names
        self.device_type = device_type
        self.mesh = self._grid.grid
        self.mesh_dim_names = None if given_names is None else self._grid.names
        if _parent is not None:  # a slice: the parent's groups, no new ones
            self._me, self._groups = _parent._me, {n: _parent._groups[n] for n in names}
            return
        if not is_initialized():  # as torch's DeviceMesh does, make the default group
            init_process_group()
        st = state("DeviceMesh")
        self._me = st.rank.id
        world = st.rank.size
        if self.mesh.max() >= world:
            raise ConfigError(
                f"DeviceMesh(mesh={self.mesh.tolist()}): rank "
                f"{int(self.mesh.max())} does not exist: the run's ranks are "
                f"0..{world - 1}"
            )
        self._groups = {}
        if self._me in self.mesh:
            for name in self._grid.names:
                slice_ = self._grid.group(name, self._me)
                dim = None if given_names is None else name
                self._groups[name] = make_group(st, Group(slice_.ranks, dim=dim))

    # -- the shape -------------------------------------------------------------------------

    @property
    def ndim(self):
        return self.mesh.ndim

    @property
    def shape(self):
        return tuple(self.mesh.shape)

    def _dim(self, mesh_dim, call):
        """The internal name of ``mesh_dim`` (a name, an index, or None on a 1-D mesh)."""
        names = self._grid.names
        if mesh_dim is None:
            if self.ndim == 1:
                return names[0]
            raise ConfigError(
                f"DeviceMesh.{call}(): this mesh has {self.ndim} dimensions "
                f"{self._choices()}: name one"
            )
        if is_int(mesh_dim):
            if not -self.ndim <= mesh_dim < self.ndim:
                raise ConfigError(
                    f"DeviceMesh.{call}({mesh_dim!r}): a {self.ndim}-D mesh "
                    f"has dimensions 0..{self.ndim - 1}"
                )
            return names[mesh_dim]
        if self.mesh_dim_names is None or mesh_dim not in self.mesh_dim_names:
            raise ConfigError(
                f"DeviceMesh.{call}({mesh_dim!r}): no such dimension; the "
                f"mesh has {self._choices()}"
            )
        return mesh_dim

    def _choices(self):
        if self.mesh_dim_names is None:
            return f"0..{self.ndim - 1} (no names)"
        return str(list(self.mesh_dim_names))

    def size(self, mesh_dim=None):
        """The number of ranks of the mesh, or along ``mesh_dim``."""
        if mesh_dim is None:
            return int(self.mesh.size)
        return self.shape[self._grid.names.index(self._dim(mesh_dim, "size"))]

    # -- this rank ---------------------------------------------------------------------------

    def get_rank(self):
        """The calling rank's global rank."""
        return self._me

    def get_coordinate(self):
        """This rank's index along every dimension, or None if it is not in the mesh."""
        if self._me not in self.mesh:
            return None
        return list(self._grid.coords(self._me).values())

    def get_local_rank(self, mesh_dim=None):
        """This rank's index along ``mesh_dim`` (its rank in that dimension's group)."""
        name = self._dim(mesh_dim, "get_local_rank")
        self._member("get_local_rank")
        return self._grid.coords(self._me)[name]

    def get_group(self, mesh_dim=None):
        """The process group along ``mesh_dim`` through this rank."""
        name = self._dim(mesh_dim, "get_group")
        self._member("get_group")
        return self._groups[name]

    def get_all_groups(self):
        """The process group of every dimension, in order."""
        self._member("get_all_groups")
        return [self._groups[n] for n in self._grid.names]

    def _member(self, call):
        if self._me not in self.mesh:
            raise ConfigError(
                f"DeviceMesh.{call}(): rank {self._me} is not in this mesh {self.mesh.tolist()}"
            )

    # -- slicing -----------------------------------------------------------------------------

    def __getitem__(self, names):
        """The sub-mesh along ``names`` (a name or a tuple of names, in the mesh's order)
        through this rank."""
        wanted = (names,) if isinstance(names, str) else names
        if self.mesh_dim_names is None:
            raise ConfigError(
                f"mesh[{names!r}]: this mesh has no mesh_dim_names to slice "
                "by; make it with mesh_dim_names=(...)"
            )
        if not isinstance(wanted, tuple) or not wanted:
            raise ConfigError(
                f"mesh[{names!r}]: give a dimension name or a tuple of them, "
                f"from {list(self.mesh_dim_names)}"
            )
        for n in wanted:
            if n not in self.mesh_dim_names:
                raise ConfigError(
                    f"mesh[{names!r}]: no dimension {n!r}; the mesh has {list(self.mesh_dim_names)}"
                )
        axes = [self.mesh_dim_names.index(n) for n in wanted]
        if axes != sorted(set(axes)):
            order = tuple(n for n in self.mesh_dim_names if n in wanted)
            raise ConfigError(
                f"mesh[{names!r}]: name the dimensions once each, in the mesh's "
                f"order: mesh[{order!r}]"
            )
        if tuple(wanted) == self.mesh_dim_names:
            return self
        self._member("__getitem__")
        where = self._grid.coords(self._me)
        index = tuple(slice(None) if n in wanted else where[n] for n in self.mesh_dim_names)
        return DeviceMesh(
            self.device_type, self.mesh[index], mesh_dim_names=tuple(wanted), _parent=self
        )

    def __repr__(self):
        names = "" if self.mesh_dim_names is None else f", mesh_dim_names={self.mesh_dim_names}"
        return f"DeviceMesh('{self.device_type}', {self.mesh.tolist()}{names})"


def init_device_mesh(device_type, mesh_shape, *, mesh_dim_names=None):
    """A :class:`DeviceMesh` of every rank, ``mesh_shape`` (sizes multiplying to the world
    size) with ``mesh_dim_names``; makes the default process group if there is none."""
    if not is_initialized():
        init_process_group()
    world = state("init_device_mesh").rank.size
    shape = (mesh_shape,) if is_int(mesh_shape) else mesh_shape
    if (
        not isinstance(shape, tuple | list)
        or not shape
        or not all(is_int(s) and s >= 1 for s in shape)
    ):
        raise ConfigError(
            f"init_device_mesh(mesh_shape={mesh_shape!r}): give a tuple of "
            f"sizes >= 1 whose product is the world size {world}, e.g. "
            f"({world},)"
        )
    if math.prod(shape) != world:
        raise ConfigError(
            f"init_device_mesh(mesh_shape={mesh_shape!r}): {math.prod(shape)} "
            f"ranks, but the world has {world}: the sizes must multiply to "
            f"{world}"
        )
    if mesh_dim_names is not None and (
        isinstance(mesh_dim_names, str) or len(tuple(mesh_dim_names)) != len(shape)
    ):
        raise ConfigError(
            f"init_device_mesh(mesh_dim_names={mesh_dim_names!r}): give {len(shape)} names, "
            f"one per size of mesh_shape {tuple(shape)}"
        )
    grid = np.arange(world).reshape(tuple(int(s) for s in shape))
    names = None if mesh_dim_names is None else tuple(mesh_dim_names)
    return DeviceMesh(device_type, grid, mesh_dim_names=names)
