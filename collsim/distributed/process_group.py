"""The default process group of each rank: ``init_process_group``, ``get_rank`` and
friends, and the :class:`ProcessGroup` every group is.

torch.distributed keeps one default process group per process.  Here every rank of a
blocking run (``collsim exec`` or :func:`collsim.runtime.blocking.run`) is a thread, so
each rank keeps its own state, found from the rank whose code is running; nothing is
shared between runs.  A group's id (which point-to-point tags carry) is agreed on by its
ranks without talking: the n-th group of the same ranks that a rank makes gets the same
id on every member.

Examples
--------
>>> import collsim
>>> from collsim.runtime import blocking
>>> from collsim.distributed.groups import new_group
>>> def main():
...     init_process_group(backend="collsim")
...     pair = new_group([0, 1])
...     return get_rank(), get_world_size(), get_rank(pair), get_world_size(pair)
>>> blocking.run(collsim.Cluster(collsim.topology.ring(3)), main).returns
[(0, 3, 0, 2), (1, 3, 1, 2), (2, 3, -1, -1)]
"""

import weakref
from collections import Counter

from ..collectives.checks import is_int
from ..errors import ConfigError
from ..runtime import blocking
from ..runtime.group import Group

__all__ = [
    "ProcessGroup",
    "init_process_group",
    "destroy_process_group",
    "is_initialized",
    "is_available",
    "get_backend",
    "get_rank",
    "get_world_size",
    "group",
    "GroupMember",
    "BACKENDS",
]

# every name torch scripts pass; all of them run on the simulator
BACKENDS = ("collsim", "nccl", "gloo", "mpi", "ucc")
DEVICES = ("cpu", "cuda")  # as in torch's per-device backend strings, "cpu:gloo,cuda:nccl"


class ProcessGroup:
    """A group of global ranks, as one rank sees it (``rank()`` is its place in it).

    ``ranks`` are sorted, as torch's ``new_group`` sorts them; ``group`` is the runtime
    :class:`~collsim.runtime.group.Group` its collectives run over; ``id`` is what its
    point-to-point tags carry (:mod:`collsim.distributed.tags`).
    """

    __slots__ = ("group", "id", "owner", "destroyed")

    def __init__(self, group, group_id, owner):
        self.group, self.id, self.owner = group, group_id, owner
        self.destroyed = False

    @property
    def ranks(self):
        return self.group.ranks

    def rank(self):
        """The owner's group rank, or -1 where it is not a member (as torch returns)."""
        return self.group.index(self.owner) if self.owner in self.group else -1

    def size(self):
        return self.group.size

    def name(self):
        return f"collsim:{self.id}"

    def __repr__(self):
        dim = "" if self.group.dim is None else f", dim={self.group.dim!r}"
        return f"ProcessGroup(id={self.id}, ranks={list(self.ranks)}{dim})"


class _RankState:
    """What one rank's ``init_process_group`` set up.

    It holds its rank weakly: the run keeps it (``execution.front_ends``), and a strong
    reference back to the rank would make a cycle of the run with itself.
    """

    __slots__ = ("_rank", "world", "backend", "groups")

    def __init__(self, rank, backend):
        self._rank = weakref.ref(rank)
        self.world = None  # the default ProcessGroup
        self.backend = backend  # the name the program gave (get_backend says it back)
        self.groups = []  # every group made since, the world's first

    @property
    def rank(self):
        return self._rank()


class _RunState:
    """collsim.distributed's state for one run, kept by the run itself
    (``execution.front_ends["distributed"]``), so it dies with the run."""

    def __init__(self):
        self.ranks = {}  # rank id -> its _RankState, from init_process_group
        # rank id -> Counter of (ranks, dim) -> groups it made of them, kept past a
        # destroy_process_group so that a group made after a new init is a new group
        self.made = {}
        self.group_ids = {}  # (ranks, dim, n) -> id: the same for every member


def _run_state(rank):
    """The :class:`_RunState` of ``rank``'s run, made on first use."""
    kept = rank._execution.front_ends
    found = kept.get("distributed")
    if found is None:
        found = kept["distributed"] = _RunState()
    return found


def current_rank(call):
    """The runtime Rank running this code, or a ConfigError naming ``call``."""
    try:
        return blocking.current_rank()
    except ConfigError:
        raise ConfigError(
            f"{call}() was called outside a run of the virtual cluster: run the script "
            "under `collsim exec -n K script.py` or the function with "
            "collsim.exec(main, n=K)"
        ) from None


def state(call):
    """The current rank's state; a ConfigError naming ``call`` before init_process_group."""
    rank = current_rank(call)
    found = _run_state(rank).ranks.get(rank.id)
    if found is None:
        raise ConfigError(
            f"{call}(): rank {rank.id} has no process group yet: call "
            "init_process_group(backend='collsim') first"
        )
    return found


def make_group(st, group):
    """A ProcessGroup of ``group`` (a runtime Group) for rank ``st.rank``, with the id
    every member of the run gives the same n-th group of these ranks and dimension."""
    key = (group.ranks, group.dim)
    run = _run_state(st.rank)
    made = run.made.setdefault(st.rank.id, Counter())
    n = made[key]
    made[key] += 1
    ids = run.group_ids
    group_id = ids.setdefault((*key, n), len(ids))
    made_group = ProcessGroup(group, group_id, st.rank.id)
    st.groups.append(made_group)
    return made_group


def resolve(group, call):
    """``(rank, process group)`` of a call's ``group=`` (None: the default group), after
    checking the group is one, is alive and holds the calling rank."""
    st = state(call)
    pg = st.world if group is None else group
    if not isinstance(pg, ProcessGroup):
        hint = f": make one with new_group({list(group)!r})" if _listlike(group) else ""
        raise ConfigError(f"{call}(group={group!r}): a group is a ProcessGroup{hint}")
    if pg.destroyed:
        raise ConfigError(f"{call}(group={pg!r}): the group was destroyed")
    me = st.rank.id
    if me not in pg.group:
        raise ConfigError(
            f"{call}(group={pg!r}): rank {me} is not in group {list(pg.ranks)}; only the "
            "group's ranks call its collectives (torch skips them with a warning)"
        )
    return st.rank, pg


def peer(pg, value, what, call, group_value=None, group_what=None):
    """The global rank a call names as ``what=value`` (or as the group rank
    ``group_what=group_value``), checked to be a rank of ``pg``."""
    if group_value is not None:
        if value is not None:
            raise ConfigError(
                f"{call}({what}={value!r}, {group_what}={group_value!r}): "
                f"give {what} or {group_what}, not both"
            )
        if not is_int(group_value) or not 0 <= group_value < pg.size():
            raise ConfigError(
                f"{call}({group_what}={group_value!r}): a group rank of "
                f"{pg!r} is an int in 0..{pg.size() - 1}"
            )
        return pg.ranks[group_value]
    if not is_int(value):
        raise ConfigError(
            f"{call}({what}={value!r}): {what} is a global rank, an int in {_listing(pg.ranks)}"
        )
    if value not in pg.group:
        raise ConfigError(
            f"{call}({what}={value!r}): rank {value} is not in the group; "
            f"its ranks are {_listing(pg.ranks)}"
        )
    return int(value)


def default_root(value, group_value):
    """Global rank 0 where a call names neither ``src``/``dst`` nor its group form, as
    torch 2.13's ``gather``, ``scatter`` and the object calls default; else ``value``."""
    return 0 if value is None and group_value is None else value


def _listing(ranks):
    k = len(ranks)
    if ranks == tuple(range(k)):
        return f"0..{k - 1}"
    return str(list(ranks))


def _listlike(value):
    return isinstance(value, list | tuple | range)


# -- the torch.distributed functions ----------------------------------------------------


def init_process_group(
    backend=None,
    init_method=None,
    timeout=None,
    world_size=-1,
    rank=-1,
    store=None,
    group_name="",
    pg_options=None,
    device_id=None,
):
    """Bind the calling rank of the run to its default group (all ranks of the cluster).

    Every torch backend name (``"collsim"``, ``"nccl"``, ``"gloo"``, ``"mpi"``, ``"ucc"``,
    or the per-device form ``"cpu:gloo,cuda:nccl"``) runs on the simulator;
    ``world_size`` and ``rank``, if given, must be the run's.  ``init_method``,
    ``timeout``, ``store``, ``pg_options`` and ``device_id`` are accepted and ignored.
    """
    me = current_rank("init_process_group")
    backend = check_backend(backend)
    run = _run_state(me)
    if me.id in run.ranks:
        raise ConfigError(
            f"init_process_group(): rank {me.id} initialized its process group already "
            "(call destroy_process_group() first to start again)"
        )
    check_rank_and_size(me, rank, world_size)
    st = run.ranks[me.id] = _RankState(me, backend)
    st.world = make_group(st, Group(range(me.size)))


def check_rank_and_size(me, rank, world_size):
    """Refuse an ``init_process_group`` ``rank``/``world_size`` that is not the run's."""
    if world_size not in (-1, None) and world_size != me.size:
        raise ConfigError(
            f"init_process_group(world_size={world_size!r}): this run has {me.size} ranks: "
            f"pass world_size={me.size} or leave it out"
        )
    if rank not in (-1, None) and rank != me.id:
        raise ConfigError(
            f"init_process_group(rank={rank!r}) was called by rank {me.id}: pass "
            f"rank={me.id} (get_rank() after init) or leave it out"
        )


def destroy_process_group(group=None):
    """Forget the default group and every group made since (``group=None``), or ``group``."""
    st = state("destroy_process_group")
    if group is None:
        del _run_state(st.rank).ranks[st.rank.id]
        for made in st.groups:
            made.destroyed = True
        return
    _, pg = resolve(group, "destroy_process_group")
    pg.destroyed = True


def is_initialized():
    """Whether the calling rank has called :func:`init_process_group` (False outside a run)."""
    try:
        me = blocking.current_rank()
        return me.id in _run_state(me).ranks
    except ConfigError:
        return False


def is_available():
    return True


def get_backend(group=None):
    """The backend name given to :func:`init_process_group` (``"collsim"`` by default)."""
    return resolve_any(group, "get_backend")[0].backend


def check_backend(backend):
    """``backend`` in lower case: a name of BACKENDS, or torch's per-device form such as
    ``"cpu:gloo,cuda:nccl"``; every one runs on the simulator."""
    if backend is None:
        return "collsim"
    parts = backend.lower().replace(",", ":").split(":") if isinstance(backend, str) else [None]
    if not all(p in BACKENDS or p in DEVICES for p in parts):
        raise ConfigError(
            f"init_process_group(backend={backend!r}): choose one of "
            f"{', '.join(map(repr, BACKENDS))} (all run on the simulator)"
        )
    return backend.lower()


def resolve_any(group, call):
    """Like :func:`resolve` but a non-member may ask (get_rank gives -1 then)."""
    st = state(call)
    pg = st.world if group is None else group
    if not isinstance(pg, ProcessGroup):
        raise ConfigError(f"{call}(group={group!r}): a group is a ProcessGroup")
    return st, pg


def get_rank(group=None):
    """This rank's place in ``group`` (default: its global rank); -1 if not a member."""
    return resolve_any(group, "get_rank")[1].rank()


def get_world_size(group=None):
    """The size of ``group`` (default: every rank); -1 if this rank is not a member."""
    st, pg = resolve_any(group, "get_world_size")
    return pg.size() if st.rank.id in pg.group else -1


class _GroupNamespace:
    """``group.WORLD``: the calling rank's default group, as ``torch.distributed.group``."""

    @property
    def WORLD(self):  # torch's name
        return state("group.WORLD").world


group = GroupMember = _GroupNamespace()
