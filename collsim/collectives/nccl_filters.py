"""``NCCL_ALGO`` and ``NCCL_PROTO``: which algorithms and protocols NCCL may choose from.

NCCL reads a list of names (case does not matter), ``^`` in front to mean "all but these",
and, since NCCL 2.24, per-collective entries after a ``;`` with a prefix naming the
collective: ``"ring,tree;allreduce:tree"`` lets every collective use ring or tree and
all-reduce tree only.  Only the first entry may have no prefix.

Examples
--------
>>> allowed = parse_nccl_list("ring,tree;allreduce:tree", "algorithm")
>>> sorted(allowed["all_reduce"]), sorted(allowed["all_gather"])
(['tree'], ['ring', 'tree'])
>>> sorted(parse_nccl_list("^LL128", "protocol")["reduce_scatter"])
['ll', 'simple']
"""

import difflib

from ..errors import ConfigError
from .nccl_tables import ALGORITHMS, PROTOCOLS

__all__ = ["parse_nccl_list", "NCCL_ALGORITHM_NAMES", "NCCL_PROTOCOL_NAMES"]

# NCCL's spelling -> collsim's name
NCCL_ALGORITHM_NAMES = dict(
    zip(("tree", "ring", "collnetdirect", "collnetchain", "nvls", "nvlstree", "pat"), ALGORITHMS)
)
NCCL_PROTOCOL_NAMES = dict(zip(("ll", "ll128", "simple"), PROTOCOLS))
NCCL_FUNCTIONS = {
    "broadcast": "broadcast",
    "reduce": "reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "allreduce": "all_reduce",
}


def parse_nccl_list(text, kind):
    """``{collective: frozenset of names}`` that ``text`` (an ``NCCL_ALGO`` value for
    ``kind="algorithm"``, an ``NCCL_PROTO`` value for ``kind="protocol"``) enables."""
    names = NCCL_ALGORITHM_NAMES if kind == "algorithm" else NCCL_PROTOCOL_NAMES
    variable = "NCCL_ALGO" if kind == "algorithm" else "NCCL_PROTO"
    enabled = {coll: frozenset(names.values()) for coll in NCCL_FUNCTIONS.values()}
    entries = [e.strip() for e in str(text).split(";")]
    for position, entry in enumerate(entries):
        prefix, _, listed = entry.rpartition(":")
        if not prefix and position > 0:
            raise ConfigError(
                f"{variable}={text!r}: entry {entry!r} has no prefix; every entry after "
                "the first names its collective, e.g. 'allreduce:tree'"
            )
        targets = _collectives(prefix, variable, text) if prefix else list(enabled)
        chosen = _names(listed, names, variable, text)
        for coll in targets:
            enabled[coll] = chosen
    return enabled


def _collectives(prefix, variable, text):
    key = prefix.strip().lower().replace("_", "")
    if key not in NCCL_FUNCTIONS:
        raise ConfigError(
            f"{variable}={text!r}: unknown collective {prefix!r}{_nearest(key, NCCL_FUNCTIONS)}; "
            f"prefixes are {', '.join(NCCL_FUNCTIONS)}"
        )
    return [NCCL_FUNCTIONS[key]]


def _names(listed, names, variable, text):
    listed = listed.strip()
    invert = listed.startswith("^")
    tokens = [t.strip().lower().replace("_", "") for t in listed.lstrip("^").split(",")]
    for token in tokens:
        if token not in names:
            raise ConfigError(
                f"{variable}={text!r}: unknown name {token!r}{_nearest(token, names)}; "
                f"choose from {', '.join(names)}"
            )
    chosen = frozenset(names[t] for t in tokens)
    return frozenset(names.values()) - chosen if invert else chosen


def _nearest(word, choices):
    near = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""
