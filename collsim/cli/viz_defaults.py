"""What a ``collsim viz`` kind draws when it is given nothing to draw: a case that makes
its point at once, said on stdout, rather than a uniform picture.

* ``traffic`` and ``utilization``: the naive all-reduce on a switch, where every rank's
  bytes cross the root's one link (a ring on a ring loads every link alike);
* ``sweep``: NCCL's two all-reduce algorithms, its ring and its double binary tree, on two
  DGX A100 machines, where the tree wins the small messages and the ring the large ones
  (a ring on a ring wins everywhere);
* ``compare``: the two algorithms on a switch, where every rank is one hop from every
  other (on a ring a tree's messages cross several links);
* ``memory``: Llama 2 13B on one 8-GPU node with selective recomputation, which does not
  fit an 80 GiB GPU without ZeRO and fits from ZeRO-2 on.

A case applies only when none of the flags it sets was given (and, for a collective, to
the all-reduce, the one its algorithms serve); otherwise the kind draws what was asked,
with the ordinary defaults (``--topology ring``).
"""

from typing import NamedTuple

__all__ = ["DefaultCase", "CASES", "kind_cluster_arguments", "apply_default_case"]


class DefaultCase(NamedTuple):
    flags: dict  # args attribute -> value, set when none of ``given`` was
    given: tuple  # args attributes whose value (anything but None) means "as asked"
    says: str  # what is missing, what is drawn instead and why (printed when it applies)


NAIVE_ON_A_SWITCH = DefaultCase(
    flags={"topology": "switch", "algorithm": "naive"},
    given=("topology", "ranks", "nodes", "algorithm"),
    says="no cluster or algorithm given: drawing the naive all-reduce on a switch of 8 "
    "ranks (--topology switch --algorithm naive), whose root's one link carries every "
    "rank's bytes",
)
CASES = {
    "traffic": NAIVE_ON_A_SWITCH,
    "utilization": NAIVE_ON_A_SWITCH,
    "sweep": DefaultCase(
        flags={"topology": "dgx-a100", "nodes": 2, "algorithms": "nccl_ring,double_tree"},
        given=("topology", "ranks", "nodes", "algorithm", "algorithms"),
        says="no cluster or algorithm given: sweeping NCCL's ring and double binary tree "
        "on 2 DGX A100 machines (--topology dgx-a100 --nodes 2 --algorithms "
        "nccl_ring,double_tree): the tree wins small messages, the ring large ones",
    ),
    # every GPU one hop from every other, as on an NVSwitch: on the default ring topology
    # a tree's messages would cross several links, a cost of the wiring, not of the tree
    "compare": DefaultCase(
        flags={"topology": "switch"},
        given=("topology", "ranks", "nodes"),
        says="no cluster given: comparing them on a switch of 8 ranks (--topology switch), "
        "every GPU one hop from every other as on an NVSwitch",
    ),
    # the llama2-7b preset's 16 bytes/parameter (Rajbhandari et al. 2020) fit at ZeRO-1
    # already; 13B needs ZeRO-2, so three of the four bars tell something
    "memory": DefaultCase(
        flags={
            "model": "llama2-13b",
            "world_size": 8,
            "global_batch": 8,
            "micro_batch": 1,
            "recompute": "selective",
        },
        given=("config", "model", "params", "layers"),
        says="no model given: drawing Llama 2 13B (the llama2-13b preset) on 8 GPUs of "
        "80 GiB with selective recomputation (--model llama2-13b --world-size 8 --recompute "
        "selective): it does not fit without ZeRO, and fits from ZeRO-2 on",
    ),
}


def kind_cluster_arguments(parser, kind):
    """The cluster flags of ``kind``, whose --topology defaults to its case's (said in
    its help) and else to ring; the case is filled in before the cluster is resolved."""
    from .common import add_cluster_arguments as add

    case = CASES[kind]
    wiring = (
        f"how ranks are wired (default: {case.flags['topology']} when no "
        f"{'/'.join('--' + g.replace('_', '-') for g in case.given)} is given, as described "
        "above; ring, rank i -> i+1, when one is)"
    )
    add(parser, computes=False, topology_help=wiring)  # a collective alone computes nothing
    parser.set_defaults(topology=None, _default_cluster=lambda args: apply_default_case(args, kind))


def apply_default_case(args, kind):
    """Fill ``args`` with ``kind``'s case when none of its flags was given (said when the
    figure is written: ``args._default_says``), else give a missing --topology its
    ordinary default, ring; returns whether it applied."""
    case = CASES[kind]
    given = any(getattr(args, name, None) is not None for name in case.given)
    if given or not _all_reduce(args):
        if getattr(args, "topology", "ring") is None:
            args.topology = "ring"
        return False
    for name, value in case.flags.items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)
    # said with the file it wrote (cli/viz.py), so that input the drawing refuses leaves
    # nothing on stdout but the refusal
    args._default_says = case.says
    return True


def _all_reduce(args):
    """Whether the kind draws an all-reduce (or no collective at all: memory)."""
    from ..collectives.registry import canonical_collective
    from ..errors import ConfigError

    if not hasattr(args, "collective"):
        return True
    try:
        return canonical_collective(args.collective) == "all_reduce"
    except ConfigError:  # refused, by name, where the kind reads it
        return False
