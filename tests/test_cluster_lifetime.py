"""A dropped cluster frees everything it made (issue 25, "a dropped cluster is never freed").

Property tests and sweeps build a cluster per case.  When something outside a cluster
kept it (a module-level table keyed by clusters whose values pointed back at their key,
caches keyed by topologies), every cluster a process made stayed alive with its working
block: 50 ring all-reduces of 4 MiB a rank kept 1.6 GB.  Here 200 fresh clusters each run
numeric calls of every collective and one of a rank program, a training run, an ``exec``
run and an ``auto`` call on a hardware preset; after each is dropped a weak reference to
it must be dead at once, with the cyclic collector on and with it off (reference
counting alone must free it: no cycle through the cluster's own structures), and the
process's resident memory must not grow by more than a few clusters' working blocks.
Its topology must be gone after the next collection: a networkx graph refers to itself
once its ``edges`` view is cached, so only the collector frees it, but nothing of
collsim's may keep it.
"""

import contextlib
import gc
import os
import weakref

import numpy as np
import pytest

import collsim
from collsim import hardware, topology
from collsim.collectives.api import run_collective
from collsim.collectives.formulas import ALGORITHMS
from collsim.errors import DeadlockError, SimulationLimitError, WatchdogTimeout
from collsim.launch import RankError
from collsim.launch import exec as exec_spmd
from collsim.parallel.config import ParallelConfig
from collsim.parallel.mesh import train
from collsim.parallel.pipeline.runner import toy_batch, toy_model
from collsim.runtime.faults import Faults

CLUSTERS = 200
K = 4
# elements per rank of the large all-reduce: its working block is K x 64 Ki x 4 B = 1 MiB,
# so 200 clusters kept alive would hold 200 MiB
LARGE = 1 << 16
# resident growth allowed over the loop: a few working blocks and allocator slack; far
# below 200 kept blocks
MAX_GROWTH = 32 << 20
PAIRS = [(name, algorithm) for name, algorithms in ALGORITHMS.items() for algorithm in algorithms]


@contextlib.contextmanager
def _collector_off():
    """The cyclic collector off inside (reference counting alone frees), as it was after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _cycles_left():
    """``(count, kinds)`` of the objects a collection finds now: only cycles are left."""
    gc.set_debug(gc.DEBUG_SAVEALL)  # keep what it finds in gc.garbage, to name it
    try:
        found = gc.collect()
        return found, sorted({type(item).__qualname__ for item in gc.garbage})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def _every_collective(cluster, i):
    """Numeric calls of every collective, the i-th pair's algorithm also through the
    engine one transfer at a time, and one all-reduce large enough to see in memory."""
    rng = np.random.default_rng(i)
    for name in ALGORITHMS:
        getattr(cluster, name)([rng.standard_normal(2 * K) for _ in range(K)])
    name, algorithm = PAIRS[i % len(PAIRS)]
    buffers = [rng.standard_normal(2 * K) for _ in range(K)]
    cluster.fast = False  # the reference path too
    run_collective(cluster, name, buffers, algorithm=algorithm)
    cluster.fast = True
    out = cluster.all_reduce([np.full(LARGE, r, np.float32) for r in range(K)]).outputs
    assert out[K - 1][0] == sum(range(K))  # the answers are right while the cluster lives


def _rank_program(cluster):
    def program(rank):
        summed = yield from rank.all_reduce(np.full(4, float(rank.id)))
        return float(summed[0])

    assert cluster.run(program).returns == [float(sum(range(K)))] * K


def _training(cluster):
    run = train(
        toy_model(layers=2), [toy_batch(batch=4)], ParallelConfig(dp=2, tp=2), cluster=cluster
    )
    assert run.match  # equal to one device


def _exec(cluster):
    def main():
        from mpi4py import MPI  # collsim.mpi, inside the run

        comm = MPI.COMM_WORLD
        return comm.allreduce(comm.Get_rank())

    assert exec_spmd(main, cluster=cluster, echo=False).returns == [sum(range(K))] * K


def _one_cluster(i, switch=None, preset=None):
    """Build cluster i (on the given topologies, else on new ones), run its calls, and
    return weak references to it and its topology."""
    kind = i % 4
    if kind == 3:  # a hardware preset: algorithm and protocol chosen per call (auto)
        cluster = collsim.Cluster(preset or hardware.topology("dgx-a100", 1))
        out = cluster.all_reduce([np.full(LARGE, 1, np.float32)] * cluster.size)
        assert out.choice is not None and out.outputs[0][0] == cluster.size
    else:
        cluster = collsim.Cluster(switch or topology.switch(K))
        _every_collective(cluster, i)
        (_rank_program, _training, _exec)[kind](cluster)
    return weakref.ref(cluster), weakref.ref(cluster.topology)


def _resident_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads Linux's /proc")
@pytest.mark.parametrize("collector", ["on", "off"])
def test_a_dropped_cluster_is_freed_with_everything_it_made(collector):
    for i in range(4):  # once of each kind: imports, and caches of plain values, fill up
        _one_cluster(i)
    gc.collect()
    before = _resident_bytes()
    with _collector_off() if collector == "off" else contextlib.nullcontext():
        alive, graphs = [], []
        for i in range(CLUSTERS):
            cluster, graph = _one_cluster(i)
            if cluster() is not None:
                alive.append(i)
            graphs.append(graph)
        grown = _resident_bytes() - before
    assert alive == [], f"clusters {alive[:10]} (of {len(alive)}) outlived their last reference"
    assert grown < MAX_GROWTH, f"resident memory grew {grown / 2**20:.0f} MiB over 200 clusters"
    gc.collect()
    kept = [i for i, graph in enumerate(graphs) if graph() is not None]
    assert kept == [], f"the topologies of clusters {kept[:10]} (of {len(kept)}) are kept"


def test_the_batched_path_keeps_its_routes_and_block_on_the_cluster_only():
    cluster = collsim.Cluster(topology.ring(K))
    first = cluster.all_reduce([np.ones(LARGE, np.float32)] * K)
    del first  # its answers were the working block's rows: now the cluster keeps it
    (routing,) = cluster.caches.fast["routings"].values()
    block = weakref.ref(routing.spare)
    with _collector_off():
        del cluster, routing
        freed = block() is None
    assert freed  # the working block went with its cluster, by reference counting alone


def test_a_schedule_goes_with_the_last_cluster_that_runs_it():
    # a schedule is shared by the live clusters that run the same call (a 4,096-rank
    # ring's takes hundreds of MB) and must not outlive them in a module-level cache
    first, second = (collsim.Cluster(topology.ring(16)) for _ in range(2))
    first.all_reduce([np.ones(64)] * 16)
    second.all_reduce([np.ones(64)] * 16)
    (plan,) = first.caches.plans.values()
    (other,) = second.caches.plans.values()
    assert plan.schedule is other.schedule  # built once, shared
    schedule = weakref.ref(plan.schedule)
    with _collector_off():
        del first, plan
        kept_by_second = schedule() is not None
        del second, other
        freed = schedule() is None
    assert kept_by_second and freed


def test_a_run_leaves_no_reference_cycle_for_the_collector():
    # on topologies that stay alive (a networkx graph is a cycle of its own once its
    # edge view is cached), the clusters and everything their runs made must leave the
    # collector nothing to find: each is freed by reference counting as it is dropped
    switch, preset = topology.switch(K), hardware.topology("dgx-a100", 1)
    for i in range(4):
        _one_cluster(i, switch, preset)
    gc.collect()
    with _collector_off():
        for i in range(8):
            _one_cluster(i, switch, preset)
        found, kinds = _cycles_left()
    assert found == 0, f"the runs left {found} objects in reference cycles: {kinds}"


def _deadlock(cluster):
    def program(rank):  # every rank waits for its neighbour, which waits too
        yield rank.recv((rank.id + 1) % K)

    cluster.run(program)


def _error_in_a_rank(cluster):
    def program(rank):  # rank 1 raises while rank 0's send is being delivered to it
        if rank.id == 0:
            yield rank.send(1, np.ones(4))
        else:
            yield rank.recv(0)
        raise ValueError("the program's own error")

    cluster.run(program)


def _guard(cluster):
    cluster.max_ops = 50

    def program(rank):  # a runaway loop, stopped by the max_ops guard
        while True:
            yield rank.compute(seconds=1e-6)

    cluster.run(program)


def _watchdog(cluster):  # rank 1 crashes inside the all-reduce: the watchdog ends it
    cluster.all_reduce([np.ones(1 << 12)] * K)


def _exec_error(cluster):
    def main():
        import collsim.distributed as dist

        dist.init_process_group(backend="nccl")
        if dist.get_rank() == 1:
            raise ValueError("the script's own error")
        dist.all_reduce(np.ones(2))

    exec_spmd(main, cluster=cluster, echo=False)


def _exec_deadlock(cluster):
    def main():
        from mpi4py import MPI  # collsim.mpi, inside the run

        comm = MPI.COMM_WORLD
        comm.recv(source=(comm.Get_rank() + 1) % K)

    exec_spmd(main, cluster=cluster, echo=False)


FAILURES = {
    "deadlock": (_deadlock, DeadlockError),
    "error": (_error_in_a_rank, ValueError),
    "guard": (_guard, SimulationLimitError),
    "watchdog": (_watchdog, WatchdogTimeout),
    "exec-error": (_exec_error, RankError),
    "exec-deadlock": (_exec_deadlock, DeadlockError),
}
CRASH = {"watchdog": ["1@1us"]}  # the faults of a failure's cluster


@pytest.mark.parametrize("failure", list(FAILURES))
def test_a_run_that_fails_leaves_nothing_for_the_collector(failure):
    # a run stopped midway leaves handles waiting (their callbacks resume a process of
    # the run), events and flows pending, and errors whose frames hold them: all cut
    # when it ends, so that the failed run and its cluster go when the error is dropped
    run, error = FAILURES[failure]
    graph = topology.ring(K)
    faults = Faults.parse(crash_rank=CRASH[failure]) if failure in CRASH else None
    for _ in range(2):  # first calls (imports, the standard library's own caches)
        with pytest.raises(error):
            run(collsim.Cluster(graph, faults=faults))
    gc.collect()
    with _collector_off():
        cluster = collsim.Cluster(graph, faults=faults)
        gone = weakref.ref(cluster)
        with pytest.raises(error):
            run(cluster)
        del cluster
        freed = gone() is None
        found, kinds = _cycles_left()
    assert freed, "the cluster outlived the failed run and its error"
    assert found == 0, f"the failed run left {found} objects in reference cycles: {kinds}"


def test_a_calls_plan_is_a_typed_record():
    """What a collective call runs, as the cluster keeps it: a ``CallPlan`` read by name
    (issue 26: no tuple read by position on the reference path)."""
    from collsim.collectives.call_plan import CallPlan

    cluster = collsim.Cluster(topology.ring(4), fast=False)
    cluster.all_reduce([np.ones(8)] * 4)
    (plan,) = cluster.caches.plans.values()
    assert type(plan) is CallPlan
    assert (plan.schedule.algorithm, plan.choice, plan.protocol) == ("ring", None, None)
