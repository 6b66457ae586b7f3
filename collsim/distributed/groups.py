"""Process groups besides the default one: ``new_group``, ``new_subgroups`` and the
conversions between global and group ranks.

Examples
--------
>>> import collsim
>>> from collsim.runtime import blocking
>>> from collsim import distributed as dist
>>> def main():
...     dist.init_process_group()
...     mine, every = dist.new_subgroups(group_size=2)
...     me = dist.get_rank()
...     return mine.ranks, dist.get_global_rank(mine, 0), dist.get_group_rank(mine, me)
>>> blocking.run(collsim.Cluster(collsim.topology.ring(4)), main).returns[3]
((2, 3), 2, 1)
"""

from ..collectives.checks import is_int
from ..errors import ConfigError
from ..runtime.group import Group
from .process_group import make_group, peer, resolve_any, state

__all__ = [
    "new_group",
    "new_subgroups",
    "new_subgroups_by_enumeration",
    "get_global_rank",
    "get_group_rank",
    "get_process_group_ranks",
]


def new_group(
    ranks=None,
    timeout=None,
    backend=None,
    pg_options=None,
    use_local_synchronization=False,
    group_desc=None,
):
    """A process group of ``ranks`` (global ranks, sorted as torch sorts them; None: all).

    Only its members need to call it here (torch asks every rank to), but each member
    must make its groups in the same order, as in torch.
    """
    st = state("new_group")
    size = st.rank.size
    if ranks is None:
        members = Group(range(size))
    else:
        members = Group.of(ranks, size)  # whole, distinct ranks of the run, or it says why
        members = Group(sorted(members.ranks))
    return make_group(st, members)


def new_subgroups(
    group_size=None, group=None, timeout=None, backend=None, pg_options=None, group_desc=None
):
    """``(this rank's subgroup, all subgroups)``: the world cut into consecutive groups of
    ``group_size`` ranks (torch's default, the GPUs of one machine, needs a size here)."""
    size = state("new_subgroups").rank.size
    if not is_int(group_size) or not 0 < group_size <= size or size % group_size:
        fits = [d for d in range(1, size + 1) if size % d == 0]
        raise ConfigError(
            f"new_subgroups(group_size={group_size!r}): give a size that "
            f"divides the world of {size} ranks: one of {fits}"
        )
    return new_subgroups_by_enumeration(
        [list(range(start, start + group_size)) for start in range(0, size, group_size)]
    )


def new_subgroups_by_enumeration(
    ranks_per_subgroup_list, timeout=None, backend=None, pg_options=None, group_desc=None
):
    """``(this rank's subgroup or None, all subgroups)`` of the listed disjoint rank lists."""
    st = state("new_subgroups_by_enumeration")
    if not isinstance(ranks_per_subgroup_list, list | tuple) or not ranks_per_subgroup_list:
        raise ConfigError(
            f"new_subgroups_by_enumeration({ranks_per_subgroup_list!r}): give "
            "a list of rank lists, e.g. [[0, 2], [1, 3]]"
        )
    seen = set()
    for ranks in ranks_per_subgroup_list:
        members = Group.of(ranks, st.rank.size).ranks
        twice = seen.intersection(members)
        if twice:
            raise ConfigError(
                f"new_subgroups_by_enumeration({ranks_per_subgroup_list!r}): "
                f"rank {min(twice)} is in two subgroups; they must not "
                "overlap"
            )
        seen.update(members)
    groups = [new_group(ranks) for ranks in ranks_per_subgroup_list]
    mine = next((g for g in groups if st.rank.id in g.group), None)
    return mine, groups


def get_global_rank(group, group_rank):
    """The global rank of ``group_rank`` in ``group``."""
    _, pg = resolve_any(group, "get_global_rank")
    return peer(pg, None, "global_rank", "get_global_rank", group_rank, "group_rank")


def get_group_rank(group, global_rank):
    """The place of ``global_rank`` in ``group``."""
    _, pg = resolve_any(group, "get_group_rank")
    return pg.group.index(peer(pg, global_rank, "global_rank", "get_group_rank"))


def get_process_group_ranks(group):
    """The global ranks of ``group``, in group order."""
    return list(resolve_any(group, "get_process_group_ranks")[1].ranks)
