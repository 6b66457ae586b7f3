"""The strategy table of Accelerate's ND-parallelism guide, measured on the virtual cluster.

Hugging Face's guide "Accelerate ND-Parallel: A Guide to Efficient Multi-GPU Training"
(Accelerate documentation and blog, 2025) describes DP, FSDP, TP and CP and their
combinations HSDP, FSDP+TP, FSDP+CP, HSDP+TP and HSDP+TP+CP in words.  Here each one trains
the same small causal transformer for one Adam step on 2 nodes of 4 GPUs (fast links inside
a node, slower ones between nodes, a finite compute rate) with the mesh trainer
(:func:`collsim.parallel.mesh.train`), is checked against one device, and gives one
:class:`StrategyRow`: peak memory by category, bytes on intra- and inter-node links, step
time and exposed communication, all read from the trace.  :func:`claims` then states the
guide's claims next to what the rows measured, each verdict computed from the numbers.

A strategy the trainer refuses is a row that says why (``not_run``), never an error.

Examples
--------
>>> rows = strategy_table()
>>> [row.name for row in rows] == [s.name for s in STRATEGIES]
True
>>> rows[0].match, rows[-1].match, rows[-1].not_run  # every strategy of the guide runs
(True, True, None)
"""

import math
from dataclasses import asdict, dataclass, field, replace

from ..errors import CollsimError

__all__ = [
    "Shape",
    "Strategy",
    "StrategyRow",
    "Claim",
    "STRATEGIES",
    "SHAPE",
    "SOURCE",
    "NODES",
    "GPUS_PER_NODE",
    "INTRA_NODE",
    "INTER_NODE",
    "COMPUTE_RATE",
    "describe_cluster",
    "strategy_table",
    "run_strategy",
    "claims",
    "moe_twin",
]

SOURCE = (
    'Hugging Face, "Accelerate ND-Parallel: A guide to Efficient Multi-GPU Training" '
    "(8 August 2025), https://huggingface.co/blog/accelerate-nd-parallel"
)
NODES, GPUS_PER_NODE = 2, 4
INTRA_NODE, INTER_NODE = "900GB/s", "50GB/s"  # NVSwitch-class links; one 400 Gbit/s NIC a GPU
COMPUTE_RATE = "1GFLOP/s"  # slow enough that the toy model's compute can hide communication
MEMORY_KEYS = (
    "params",
    "grads",
    "optimizer",
    "activations",
    "gathered_params",
    "comm_buffers",
    "total",
)


@dataclass(frozen=True)
class Shape:
    """The model and batch every strategy trains: a causal transformer of ``layers`` blocks
    (``hidden`` wide, ``heads`` heads), a global batch of ``batch`` sequences of ``seq``
    tokens, float64 (so "matches one device" is to 1e-10)."""

    layers: int = 2
    hidden: int = 16
    heads: int = 4
    seq: int = 16
    batch: int = 8
    steps: int = 1  # Adam steps

    def describe(self):
        """One line for the table's heading.

        >>> Shape().describe()
        'causal transformer: 2 blocks, hidden 16, 4 heads, seq 16, global batch 8, 1 Adam step'
        """
        steps = f"{self.steps} Adam step{'s' if self.steps != 1 else ''}"
        return (
            f"causal transformer: {self.layers} blocks, hidden {self.hidden}, "
            f"{self.heads} heads, seq {self.seq}, global batch {self.batch}, {steps}"
        )


SHAPE = Shape()


@dataclass(frozen=True)
class Strategy:
    """One row of the guide: its ``name``, its sizes in Accelerate's ``ParallelismConfig``
    names (``dp_replicate``, ``dp_shard``, ``cp``, ``tp``; product 8) and what that is as
    :class:`~collsim.parallel.config.ParallelConfig` fields (``config``)."""

    name: str
    dp_replicate: int
    dp_shard: int
    cp: int
    tp: int
    sharded: bool  # FSDP: parameters, gradients and optimizer state sharded (ZeRO-3)
    what: str  # one line on how the 8 ranks are used
    ep: int = 1  # > 1: the MoE twin of the model, its experts over ep of the dp x cp ranks

    @property
    def sizes(self):
        return {
            "dp_replicate": self.dp_replicate,
            "dp_shard": self.dp_shard,
            "cp": self.cp,
            "tp": self.tp,
            "ep": self.ep,
        }

    @property
    def config(self):
        """The ParallelConfig keyword arguments: dp = replicate x shard, ZeRO-3 (FSDP) over
        dp_shard x cp when ``sharded``, and ``t_f=0`` so a pass costs only the layers' own
        FLOPs at the cluster's rate (a rank doing 1/tp of the work takes 1/tp of the time)."""
        dp = self.dp_replicate * self.dp_shard
        out = {"dp": dp}
        if self.sharded:
            out["zero"] = 3
        if self.dp_replicate > 1 or not self.sharded and dp > 1:
            out["dp_replicate"] = self.dp_replicate if self.sharded else dp
        out |= {k: v for k, v in (("cp", self.cp), ("tp", self.tp), ("ep", self.ep)) if v > 1}
        return out | {"t_f": 0}


# TP stays inside a node (tp <= 4, neighbouring ranks); the replicate dimension is outermost,
# so with 2 replicas each node holds one (Accelerate's mesh order dp_replicate, dp_shard, cp, tp)
STRATEGIES = (
    Strategy("DP", 8, 1, 1, 1, False, "8 replicas, gradients all-reduced"),
    Strategy("FSDP", 1, 8, 1, 1, True, "one model sharded over all 8 (ZeRO-3)"),
    Strategy("TP", 2, 1, 1, 4, False, "tp over a node's 4 GPUs, a replica per node"),
    Strategy("CP", 2, 1, 4, 1, False, "ring attention over a node's 4 GPUs"),
    Strategy("HSDP", 2, 4, 1, 1, True, "sharded in a node, replicated across nodes"),
    Strategy("FSDP+TP", 1, 2, 1, 4, True, "tp=4 in a node, sharded over the 2 nodes"),
    Strategy("FSDP+CP", 1, 2, 4, 1, True, "cp=4 in a node, sharded over shard x cp = 8"),
    Strategy("HSDP+TP", 2, 2, 1, 2, True, "tp=2 x shard=2 in a node, nodes replicate"),
    Strategy("HSDP+TP+CP", 2, 1, 2, 2, True, "tp=2 x cp=2 in a node, nodes replicate"),
    # not in the guide: expert parallelism (torchtitan, Megatron-Core) on the MoE twin
    Strategy("EP", 8, 1, 1, 1, False, "MoE twin: 8 experts, one a GPU, tokens cross nodes", 8),
    Strategy("DP+EP", 8, 1, 1, 1, False, "MoE twin: ep=4 in a node, nodes hold copies", 4),
)


@dataclass(frozen=True)
class StrategyRow:
    """What one strategy measured (``None`` everywhere when ``not_run`` gives the trainer's
    reason).  Memory is the busiest rank's peak per category (bytes); bytes are sent per rank
    (the mean over the 8), by link class and by mesh dimension; times in simulated seconds."""

    name: str
    sizes: dict
    config: dict
    what: str
    match: bool = None
    max_error: float = None
    peak_memory_bytes: dict = None
    intra_node_bytes: int = None
    inter_node_bytes: int = None
    inter_node_messages: int = None  # transfers between nodes, all ranks together
    bytes_by_dim: dict = field(default=None)  # dim -> {"intra_node": b, "inter_node": b}
    step_time_s: float = None
    exposed_comm_s: float = None  # the rank with the most exposed communication
    not_run: str = None
    trace: object = field(default=None, repr=False, compare=False)  # the run's, for --trace

    def to_dict(self):
        """The row as plain values, without its trace."""
        return {k: v for k, v in asdict(replace(self, trace=None)).items() if k != "trace"}


@dataclass(frozen=True)
class Claim:
    """One claim of the guide, and whether the rows agree (``"agrees"``, ``"disagrees"`` or
    ``"not measured"`` when a row it needs did not run), with the numbers that decided."""

    claim: str
    verdict: str
    evidence: str

    def to_dict(self):
        return asdict(self)


def describe_cluster():
    """One line on the cluster every row runs on.

    >>> describe_cluster()
    '2 nodes x 4 GPUs: 900 GB/s links inside a node, 50 GB/s between nodes, 1 GFLOP/s per GPU'
    """
    from ..units import format_flops, format_rate, parse_flops, parse_rate

    return (
        f"{NODES} nodes x {GPUS_PER_NODE} GPUs: {format_rate(parse_rate(INTRA_NODE))} links "
        f"inside a node, {format_rate(parse_rate(INTER_NODE))} between nodes, "
        f"{format_flops(parse_flops(COMPUTE_RATE))} per GPU"
    )


def run_strategy(strategy, shape=SHAPE):
    """Train ``shape``'s model with ``strategy`` on 2 nodes x 4 GPUs; a :class:`StrategyRow`."""
    from .. import topology
    from ..nn import Adam
    from ..parallel.config import ParallelConfig
    from ..parallel.mesh import train
    from ..parallel.runs.pipeline import toy_batch, toy_model
    from ..runtime import Cluster

    base = dict(
        name=strategy.name, sizes=strategy.sizes, config=strategy.config, what=strategy.what
    )
    model = toy_model(layers=shape.layers, hidden=shape.hidden, heads=shape.heads, seed=0)
    if strategy.ep > 1:
        model = moe_twin(model, experts=8)
    batches = [
        toy_batch(shape.batch, seq=shape.seq, hidden=shape.hidden, seed=1 + s)
        for s in range(shape.steps)
    ]
    cluster = Cluster(
        topology.hierarchical(NODES, GPUS_PER_NODE, INTRA_NODE, INTER_NODE),
        compute_rate=COMPUTE_RATE,
    )
    try:
        config = ParallelConfig(**strategy.config)
        run = train(model, batches, config, cluster=cluster, optimizer=Adam(1e-2, eps=1e-6))
    except CollsimError as exc:  # the trainer's refusal is the row's content
        return StrategyRow(**base, not_run=str(exc))
    return StrategyRow(**base, **_measure(run, shape.steps))


def _measure(run, steps):
    from ..network.memory import busiest, memory_peaks
    from ..parallel.accounting import bytes_by_link_class

    n = run.mesh.size
    peak = busiest(memory_peaks(run.trace, n)).to_dict()
    links = bytes_by_link_class(run.trace, GPUS_PER_NODE)
    return dict(
        match=bool(run.match),
        max_error=float(run.max_error) if math.isfinite(run.max_error) else None,
        peak_memory_bytes={k: peak[k] for k in MEMORY_KEYS},
        intra_node_bytes=links["intra_node"] // n,
        inter_node_bytes=links["inter_node"] // n,
        inter_node_messages=sum(_crosses(t) for t in run.trace.transfers),
        bytes_by_dim=_bytes_by_dim(run, n),
        step_time_s=run.time / steps,
        exposed_comm_s=max(o.exposed_s for o in run.overlap) / steps,
        trace=run.trace,
    )


def _crosses(transfer):
    return transfer.src // GPUS_PER_NODE != transfer.dst // GPUS_PER_NODE


def moe_twin(model, experts):
    """``model`` with every block's MLP an MoE of ``experts`` experts of the MLP's size,
    top-2, routed by a fresh router (the attention and norms are the model's own)."""
    import numpy as np

    from ..nn import MoE, MoEMLP, RouterConfig, Sequential, TransformerBlock

    rng = np.random.default_rng(0)
    blocks = []
    for block in model:
        width = block.mlp.fc1.out_features
        moe = MoE.init(block.attn.d_model, width, RouterConfig(experts, top_k=2), rng)
        blocks.append(TransformerBlock(block.ln1, block.attn, block.ln2, MoEMLP(moe)))
    return Sequential(*blocks)


def _bytes_by_dim(run, n):
    """Bytes per rank (mean) along each mesh dimension, by link class: a collective's
    dimension from its tag, MoE's all-to-allv's ep, a point-to-point send's from the
    coordinates that differ."""
    from ..parallel.accounting import transfer_dimension

    out = {}
    cache = {}
    for t in run.trace.transfers:
        dim = transfer_dimension(run.mesh, t, cache) or "other"
        cls = out.setdefault(dim, {"intra_node": 0, "inter_node": 0})
        cls["inter_node" if _crosses(t) else "intra_node"] += t.nbytes
    return {d: {k: v // n for k, v in c.items()} for d, c in sorted(out.items())}


def strategy_table(shape=SHAPE):
    """Every strategy of :data:`STRATEGIES`, in order, as a list of :class:`StrategyRow`."""
    return [run_strategy(s, shape) for s in STRATEGIES]


# -- the guide's claims, decided by the numbers ------------------------------------------


def claims(rows):
    """The guide's four claims with verdicts computed from ``rows`` (StrategyRow or dicts)."""
    from ..units import format_size

    by = {r["name"]: r for r in (_as_dict(row) for row in rows) if r["not_run"] is None}
    size = format_size
    out = []

    def need(*names):
        return all(n in by for n in names)

    def mem(name, key):
        return by[name]["peak_memory_bytes"][key]

    def state(name):
        return sum(mem(name, k) for k in ("params", "grads", "optimizer"))

    text = "FSDP cuts model-state memory (parameters, gradients, optimizer state)"
    if need("DP", "FSDP"):
        ok = state("FSDP") < state("DP")
        ev = (
            f"model state of the busiest rank: FSDP {size(state('FSDP'))} vs DP {size(state('DP'))}"
        )
        out.append(Claim(text, _verdict(ok), ev))
    else:
        out.append(Claim(text, "not measured", "needs the DP and FSDP rows"))

    text = "HSDP trades memory for fewer inter-node steps (than FSDP)"
    if need("FSDP", "HSDP"):
        h, f = by["HSDP"], by["FSDP"]
        fewer = h["inter_node_bytes"] < f["inter_node_bytes"]
        more = mem("HSDP", "total") > mem("FSDP", "total")
        ev = (
            f"inter-node bytes per rank HSDP {size(h['inter_node_bytes'])} vs FSDP "
            f"{size(f['inter_node_bytes'])} ({h['inter_node_messages']} vs "
            f"{f['inter_node_messages']} inter-node messages); peak memory HSDP "
            f"{size(mem('HSDP', 'total'))} vs FSDP {size(mem('FSDP', 'total'))}"
        )
        out.append(Claim(text, _verdict(fewer and more), ev))
    else:
        out.append(Claim(text, "not measured", "needs the FSDP and HSDP rows"))

    text = "TP belongs inside a node (no dimension moves more bytes; here none cross nodes)"
    tp_rows = [r for r in by.values() if r["sizes"]["tp"] > 1]
    if tp_rows:
        parts, ok = [], True
        for r in tp_rows:
            dims = r["bytes_by_dim"]
            tp = dims.get("tp", {"intra_node": 0, "inter_node": 0})
            rest = max((sum(v.values()) for d, v in dims.items() if d != "tp"), default=0)
            ok &= tp["inter_node"] == 0 and sum(tp.values()) >= rest
            tie = " (a tie: that dimension needs the node too)" if sum(tp.values()) == rest else ""
            parts.append(
                f"{r['name']}: tp {size(sum(tp.values()))} "
                f"({size(tp['inter_node'])} inter-node) vs the next dimension {size(rest)}{tie}"
            )
        out.append(Claim(text, _verdict(ok), "; ".join(parts)))
    else:
        out.append(Claim(text, "not measured", "needs a row with tp > 1"))

    text = "CP cuts activation memory for long sequences (same tokens per rank here)"
    pairs = [(c, b) for c, b in (("CP", "DP"), ("FSDP+CP", "FSDP")) if need(c, b)]
    if pairs:
        ok = all(mem(c, "activations") < mem(b, "activations") for c, b in pairs)
        ev = "; ".join(
            f"activations {c} {size(mem(c, 'activations'))} vs {b} {size(mem(b, 'activations'))}"
            for c, b in pairs
        )
        out.append(Claim(text, _verdict(ok), ev))
    else:
        out.append(Claim(text, "not measured", "needs the CP and DP rows"))
    return out


def _verdict(ok):
    return "agrees" if ok else "disagrees"


def _as_dict(row):
    return row.to_dict() if isinstance(row, StrategyRow) else dict(row)
