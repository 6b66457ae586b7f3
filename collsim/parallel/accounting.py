"""What a parallel training run communicated and how much of it hid behind compute,
read from the trace (DESIGN.md: nothing counts on the side).

* :func:`collective_bytes` -- bytes each rank sent, per collective (``"all_reduce"``,
  ``"reduce_scatter"``, ...) and, on a device mesh, per mesh dimension (``"dp"``,
  ``"tp"``).  Both are read from each transfer's tag (a
  :class:`~collsim.collectives.records.CollectiveStep`: its ``collective`` and, for a
  group of the mesh, its ``dim``), never from its label; a transfer with no dimension of
  its own (point to point, or a collective on a group of plain ranks) belongs to the one
  dimension along which its two ranks' coordinates differ.
* :func:`overlap` -- per rank: time the network was busy for it (communication), time
  its compute stream was busy, the part of communication that ran while it computed
  (overlapped) and the rest (exposed: what the step waits for).
* :func:`bytes_by_link_class` -- bytes sent inside a node and between nodes, classified
  by whether a transfer's two ranks sit on the same node (rank // gpus_per_node).

Examples
--------
>>> from collsim.collectives.records import CollectiveStep
>>> from collsim.network.trace import Trace
>>> trace = Trace()
>>> trace.add_compute(0, 0.0, 2.0, "W layer 1")
>>> tag = CollectiveStep("all_reduce", "ring", group=0, call=0, step=0)
>>> trace.add_transfer(0, 1, tag, 800, 1.0, 3.0, (), "any label at all")
>>> collective_bytes(trace, 2)
{'all_reduce': [800, 0]}
>>> o = overlap(trace, 2)[0]
>>> o.comm_s, o.overlapped_s, o.exposed_s
(2.0, 1.0, 1.0)
"""

from dataclasses import asdict, dataclass

from ..collectives.all_to_allv import RaggedTransfer
from ..collectives.records import is_collective
from ..errors import ConfigError

__all__ = [
    "collective_bytes",
    "mesh_dimension",
    "transfer_dimension",
    "overlap",
    "Overlap",
    "bytes_by_link_class",
    "ETP_GATHER",
    "ETP_SCATTER",
]

LINK_CLASSES = ("intra_node", "inter_node")


def mesh_dimension(mesh, src, dst):
    """The name of the one mesh dimension along which ``src`` and ``dst`` differ
    (``None`` if they differ along several: no group of one dimension holds both)."""
    a, b = mesh.coords(src), mesh.coords(dst)
    differ = [name for name in mesh.names if a[name] != b[name]]
    return differ[0] if len(differ) == 1 else None


def collective_bytes(trace, n_ranks, mesh=None):
    """Bytes sent per rank, keyed by collective name, or by ``(dimension, collective)``
    when a :class:`~collsim.runtime.group.RankGrid` is given.  Point-to-point
    transfers are keyed ``"send"``, MoE's token exchanges ``"all_to_allv"``."""
    out, dims = {}, {}
    for t in trace.transfers:
        tag = t.tag
        key = tag.collective if is_collective(tag) else "send"
        key = "all_to_allv" if isinstance(t.meta, RaggedTransfer) else key
        if mesh is not None:
            key = (transfer_dimension(mesh, t, dims), key)
        out.setdefault(key, [0] * n_ranks)[t.src] += t.nbytes
    return out


# the expert-tensor-parallel exchanges' all-to-allv calls (experts/etp.py): rows gathered
# over the etp group, partial outputs scattered back; every other all-to-allv is the ep one
ETP_GATHER, ETP_SCATTER = "etp-gather", "etp-scatter"


def transfer_dimension(mesh, transfer, cache=None):
    """The mesh dimension ``transfer`` moves along: its collective's group's, ``"ep"`` for
    the trainer's all-to-allvs (MoE's token dispatch and combine on the ep groups, ``"etp"``
    for the expert-tensor-parallel gather and scatter), else
    the coordinates its ranks differ in (``cache`` keeps those per rank pair)."""
    tag = transfer.tag
    if is_collective(tag) and tag.dim:
        return tag.dim
    if isinstance(transfer.meta, RaggedTransfer):
        return "etp" if transfer.meta.call in (ETP_GATHER, ETP_SCATTER) else "ep"
    pair = (transfer.src, transfer.dst)
    cache = {} if cache is None else cache
    if pair not in cache:
        cache[pair] = mesh_dimension(mesh, *pair)
    return cache[pair]


@dataclass
class Overlap:
    """One rank's communication and compute time, in simulated seconds."""

    comm_s: float  # the union of the intervals in which it sent or received
    compute_s: float  # the union of its compute spans
    overlapped_s: float  # communication while it computed
    exposed_s: float  # communication while it did not compute

    def to_dict(self):
        return asdict(self)


def _union(intervals):
    merged = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def _length(intervals):
    return sum(end - start for start, end in intervals)


def _intersection(a, b):
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def overlap(trace, n_ranks):
    """A list of :class:`Overlap`, one per rank."""
    comm = [[] for _ in range(n_ranks)]
    for t in trace.transfers:
        comm[t.src].append((t.start, t.end))
        if t.dst != t.src:
            comm[t.dst].append((t.start, t.end))
    compute = [[] for _ in range(n_ranks)]
    for c in trace.computes:
        compute[c.rank].append((c.start, c.end))
    result = []
    for r in range(n_ranks):
        busy_comm, busy_compute = _union(comm[r]), _union(compute[r])
        both = _length(_intersection(busy_comm, busy_compute))
        total = _length(busy_comm)
        result.append(Overlap(total, _length(busy_compute), both, total - both))
    return result


def bytes_by_link_class(trace, gpus_per_node):
    """Bytes of every transfer, summed over ranks, by whether its source and destination
    ranks sit on the same node (node = rank // ``gpus_per_node``, as
    :func:`collsim.topology.hierarchical` numbers them): the whole argument for HSDP is
    what crosses between nodes.

    >>> from collsim.network.trace import Trace
    >>> trace = Trace()
    >>> trace.add_transfer(0, 1, None, 100, 0.0, 1.0, (), "same node")
    >>> trace.add_transfer(1, 2, None, 30, 0.0, 1.0, (), "node 0 -> node 1")
    >>> bytes_by_link_class(trace, gpus_per_node=2)
    {'intra_node': 100, 'inter_node': 30}
    """
    if isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, int) or gpus_per_node < 1:
        raise ConfigError(
            f"gpus_per_node={gpus_per_node!r}: a node holds a whole number >= 1 of GPUs"
        )
    out = dict.fromkeys(LINK_CLASSES, 0)
    for t in trace.transfers:
        same = t.src // gpus_per_node == t.dst // gpus_per_node
        out["intra_node" if same else "inter_node"] += t.nbytes
    return out
