"""What the closed forms say one collective call would run and cost, without running it:
the same choice as :func:`~collsim.collectives.call_plan.plan_call` makes, with its cost.

Examples
--------
>>> import collsim
>>> plan = analytical_plan(collsim.Cluster(collsim.topology.ring(4)), "all_reduce", 2**20)
>>> plan.algorithm, plan.protocol, plan.cost.steps
('ring', None, 6)
"""

from dataclasses import dataclass, replace

from ..runtime.group import Group
from ..topology import path_alpha_beta
from .auto import checked_placement, choose, fabric_of
from .call_plan import call_protocol, default_algorithm, naming_the_algorithm
from .formulas import closed_form
from .hardware_forms import HARDWARE_ALGORITHMS, hardware_cost
from .nccl_choice import call_launch
from .registry import AUTO, canonical_algorithm, canonical_collective

__all__ = ["AnalyticalPlan", "analytical_plan"]


@dataclass(frozen=True)
class AnalyticalPlan:
    """What the closed form says a call would run and cost, without running it."""

    algorithm: str  # the algorithm (``auto`` resolved)
    protocol: object  # the Protocol, or None
    cost: object  # a formulas.Cost or formulas.HardwareCost
    choice: object = None  # the AutoChoice where ``auto`` chose


def analytical_plan(cluster, name, size, algorithm=None, group=None, protocol=None):
    """The :class:`AnalyticalPlan` of one call of S = ``size`` bytes."""

    with naming_the_algorithm(algorithm):
        return _analytical_plan(cluster, name, size, algorithm, group, protocol)


def _analytical_plan(cluster, name, size, algorithm, group, protocol):
    name = canonical_collective(name)
    topology = cluster.topology
    if algorithm is None:
        algorithm = default_algorithm(name, topology)
    algorithm = canonical_algorithm(name, algorithm)
    group = Group.of(group, cluster.size)
    protocol = call_protocol(protocol, cluster)
    hardware = algorithm in HARDWARE_ALGORITHMS.get(name, ()) or algorithm == AUTO
    if not hardware and protocol is None:
        if group.size == 1:
            return AnalyticalPlan(
                algorithm, None, closed_form(name, algorithm, 1, size, 0.0, float("inf"))
            )
        alpha, beta = path_alpha_beta(topology, group.ranks[0], group.ranks[1])
        cost = closed_form(name, algorithm, group.size, size, alpha, beta)
        return AnalyticalPlan(algorithm, None, cost)
    layout, _ = checked_placement(topology, group.ranks, algorithm, name)
    # who chooses is the cluster's setting, but a plan runs nothing: no simulated choice
    who = "nccl" if getattr(cluster, "choice", None) == "nccl" else "closed_form"
    rules = getattr(cluster, "tuner", ())
    choice = choose(topology, group.ranks, name, int(size), protocol, algorithm, who, rules)
    chosen, protocol = choice.algorithm, choice.protocol
    fabric = fabric_of(topology, group.ranks)
    if chosen in HARDWARE_ALGORITHMS.get(name, ()) and layout.gpus_per_node is not None:
        cost = hardware_cost(
            chosen, layout.n_nodes, layout.gpus_per_node, size, fabric, protocol, collective=name
        )
    else:
        alpha, beta = fabric.hop(layout.n_nodes > 1, protocol)
        cost = closed_form(
            name, "ring" if chosen == "nccl_ring" else chosen, group.size, size, alpha, beta
        )
    # once a call, as a run pays it; a call of 0 bytes returns at once, as NCCL's does
    launch = call_launch(topology, name, chosen, protocol) if size else 0.0
    cost = replace(cost, time_s=cost.time_s + launch) if launch else cost
    return AnalyticalPlan(chosen, protocol, cost, choice if algorithm == AUTO else None)
