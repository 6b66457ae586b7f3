"""One problem trained twice: on one device, and with the mesh trainer on a cluster.

:func:`single_device` is the oracle (plain numpy), :func:`train_on_cluster` the one call of
the mesh trainer (:func:`collsim.parallel.mesh.train`) that every scheme of ``collsim verify``
makes, :class:`ClusterRun` what a check reads of that run, and :func:`report_of` the
:class:`~collsim.verify.VerifyReport` of the pair.
"""

import copy
from dataclasses import dataclass

from .. import topology as topo
from ..nn import mse_loss
from ..parallel.mesh import train
from ..runtime import Cluster
from .compare import TOLERANCE
from .report import VerifyReport

__all__ = ["single_device", "train_on_cluster", "ClusterRun", "report_of", "STEP_FIELDS"]


def single_device(model, batches, optimizer, loss_fn=mse_loss):
    """The oracle: train a copy of ``model`` on the full batches with numpy alone.

    Returns one dict per step: ``loss``, ``output``, ``input_grad``, ``grads`` (before
    the step) and ``params`` (after it).
    """
    model, optimizer = copy.deepcopy(model), copy.deepcopy(optimizer)
    steps = []
    for x, target in batches:
        y, ctx = model.forward(x)
        loss, dy = loss_fn(y, target)
        dx, grads = model.backward(ctx, dy)
        optimizer.step(model.params, grads)
        params = {k: v.copy() for k, v in model.params.items()}
        steps.append(
            {"loss": float(loss), "output": y, "input_grad": dx, "grads": grads, "params": params}
        )
    return steps


STEP_FIELDS = ("loss", "output", "input_grad", "grads", "params")  # what each step compares


@dataclass
class ClusterRun:
    """What :func:`verify` reads of a trainer's run, whichever trainer ran it."""

    steps: list  # per step: a dict of STEP_FIELDS, every array in single-device shape
    bytes_sent: list  # per rank, whole run
    bytes_by_group: dict  # (dimension, collective) -> bytes sent per rank
    time_s: float  # simulated seconds of the whole run
    overlap: list  # per rank: accounting.Overlap
    buckets: list  # elements per gradient bucket of rank 0
    dp_replica_diff: float  # 0.0 when the data-parallel replicas are identical
    tp_replica_diff: float  # 0.0 when replicated parameters agree across each TP group
    trace: object = None  # the run's trace: memory events and transfers

    @classmethod
    def of(cls, trained):
        """From the mesh trainer's :class:`~collsim.parallel.mesh.MeshRun`."""
        steps = [{k: getattr(step, k) for k in STEP_FIELDS} for step in trained.steps]
        return cls(
            steps,
            list(trained.run.stats.bytes_sent),
            trained.bytes_by_group,
            trained.time,
            trained.overlap,
            trained.buckets,
            trained.dp_replica_diff,
            trained.tp_replica_diff,
            trained.trace,
        )


def train_on_cluster(
    problem, config, batches, optimizer, *, bandwidth, latency, compute_rate, gpus_per_node=None
):
    """Train ``problem``'s rank modules as ``config`` lays them out, on one switch (or, given
    ``gpus_per_node``, on :func:`~collsim.topology.hierarchical` nodes: ``bandwidth`` and
    ``latency`` inside a node, the topology's 50GB/s and 5us NICs between nodes): the one
    call of the mesh trainer (:func:`collsim.parallel.mesh.train`)."""
    ranks = config.world_size
    if gpus_per_node is None:
        graph = topo.switch(ranks, bandwidth, latency)
    else:
        graph = topo.hierarchical(
            ranks // gpus_per_node, gpus_per_node, intra=bandwidth, intra_latency=latency
        )
    cluster = Cluster(graph, compute_rate=compute_rate)
    # verify compares with its own oracle: no second one-device run inside the trainer
    trained = train(
        problem.make_units,
        batches,
        config,
        cluster=cluster,
        optimizer=optimizer,
        in_layout=problem.in_layout,
        out_layout=problem.out_layout,
        check=False,
    )
    return ClusterRun.of(trained)


def report_of(scheme, shown, problem, found, run, formula_bytes, **findings):
    """The :class:`VerifyReport` of one run: it matches when nothing went non-finite, every
    array is within :data:`TOLERANCE` of one device and the replicas stayed identical.
    ``findings`` are the scheme's own (``sharding=`` or ``context=``)."""
    replicas_ok = run.dp_replica_diff == 0.0 and run.tp_replica_diff == 0.0
    return VerifyReport(
        scheme=scheme,
        config=shown,
        description=problem.description,
        per_step=found.per_step,
        max_abs_diff=found.max_abs_diff,
        max_rel_diff=found.max_rel_diff,
        match=bool(not found.nonfinite and found.max_rel_diff <= TOLERANCE and replicas_ok),
        dp_replica_diff=run.dp_replica_diff,
        tp_replica_diff=run.tp_replica_diff,
        bytes_sent=run.bytes_sent,
        bytes_by_group=run.bytes_by_group,
        formula_bytes=formula_bytes,
        time_s=run.time_s,
        overlap=run.overlap,
        buckets=run.buckets,
        nonfinite=found.nonfinite,
        trace=run.trace,
        **findings,
    )
