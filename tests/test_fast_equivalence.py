"""The fast path's one contract, checked at its seam: ``Cluster(topo, fast=True)`` and
``Cluster(topo, fast=False)`` give byte-identical outputs, simulated times, traces and byte
counts, on every collective x algorithm x kind of topology, numeric and count-only.

Also the switch itself: ``fast=`` and ``COLLSIM_FAST`` choose the path, a bad value is
refused naming it (exit 2 through the CLI), and the reference path never imports the fast
package.
"""

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest

import collsim
from collsim import hardware, topology
from collsim.cli import main
from collsim.collectives.formulas import ALGORITHMS
from collsim.collectives.hardware_forms import HARDWARE_ALGORITHMS
from collsim.errors import ConfigError
from collsim.network.trace import TransferLog

K = 8
TOPOLOGIES = {
    "ring": lambda: topology.ring(K, "100GB/s", "5us"),
    "switch": lambda: topology.switch(K, "25GB/s", "1us"),
    "dgx-a100 x2": lambda: hardware.topology("dgx-a100", nodes=2),
    "dgx-h100": lambda: hardware.topology("dgx-h100"),  # NVLS reduces inside one node
}
HARDWARE_TOPOLOGY = {"nvls": "dgx-h100", "nvls_tree": "dgx-h100 x2"}
GENERIC = [(name, algo) for name, algos in ALGORITHMS.items() for algo in algos]
HARDWARE = [(name, algo) for name, algos in HARDWARE_ALGORITHMS.items() for algo in algos]
CASES = [(name, algo, topo) for name, algo in GENERIC for topo in TOPOLOGIES]
# NVLS-Tree across two nodes whose NVSwitches reduce: only the hardware cases run there
TOPOLOGIES["dgx-h100 x2"] = lambda: hardware.topology("dgx-h100", nodes=2)
# CollNet where the network's switches reduce (InfiniBand SHARP)
TOPOLOGIES["dgx-a100 x2 sharp"] = lambda: hardware.topology("dgx-a100", nodes=2, sharp=True)
HARDWARE_TOPOLOGY.update(collnet_direct="dgx-a100 x2 sharp", collnet_chain="dgx-a100 x2 sharp")
CASES += [(name, algo, HARDWARE_TOPOLOGY.get(algo, "dgx-a100 x2")) for name, algo in HARDWARE]


def _inputs(name, k, count):
    rng = np.random.default_rng(k * 1000 + count)  # random floats: any other order shows
    shape = (k * count,) if name == "all_to_all" else (count,)
    return [rng.uniform(-1, 1, shape).astype("float64") for _ in range(k)]


def _fingerprint(result):
    """Everything a caller reads, as bytes: outputs, time, trace (Chrome JSON), counts."""
    outputs = [
        None if out is None else (out.dtype.str, out.shape, out.tobytes()) for out in result.outputs
    ]
    stats = result.stats
    return {
        "outputs": outputs,
        "time": float(result.time).hex(),
        "trace": hashlib.sha256(result.trace.to_chrome().encode()).hexdigest(),
        "transfers": result.trace.transfer_count,
        "bytes": (stats.bytes_sent, stats.bytes_received, dict(stats.link_bytes), stats.steps),
    }


def _run(topo, fast, name, algorithm, mode):
    cluster = collsim.Cluster(TOPOLOGIES[topo](), fast=fast)
    k = cluster.size
    options = dict(algorithm=algorithm, root=3 % k, op="sum")
    count = 3 if name == "all_to_all" else 2 * k + 3  # uneven chunks
    if mode == "numeric":
        return cluster.collective(name, _inputs(name, k, count), **options)
    count *= k if name == "all_to_all" else 1
    return cluster.collective(name, count=count, dtype="float32", **options)


def test_the_cases_cover_every_collective_and_algorithm():
    assert {(n, a) for n, a, _ in CASES} == set(GENERIC) | set(HARDWARE)


@pytest.mark.parametrize("mode", ["numeric", "count-only"])
@pytest.mark.parametrize("name, algorithm, topo", CASES, ids=str)
def test_fast_and_reference_paths_are_byte_identical(name, algorithm, topo, mode):
    fast = _run(topo, True, name, algorithm, mode)
    reference = _run(topo, False, name, algorithm, mode)
    assert fast.algorithm == reference.algorithm and fast.protocol == reference.protocol
    assert _fingerprint(fast) == _fingerprint(reference)


def test_fast_false_runs_every_transfer_on_the_engine():
    out = collsim.Cluster(topology.ring(4), fast=False).all_reduce(count=64)
    # the engine counts a start and a finish per transfer; the trace holds records one by
    # one, none of the fast path's column blocks
    assert out.run.events >= 2 * out.trace.transfer_count == 2 * 24
    assert type(out.trace.store) is TransferLog  # every transfer a Transfer record
    fast = collsim.Cluster(topology.ring(4)).all_reduce(count=64)
    assert fast.trace.store.blocks  # the fast path did take this one


def test_the_environment_variable_chooses_the_path(monkeypatch):
    monkeypatch.setenv("COLLSIM_FAST", "0")
    assert collsim.Cluster(topology.ring(2)).fast is False
    assert collsim.Cluster(topology.ring(2), fast=True).fast is True  # the argument wins
    monkeypatch.setenv("COLLSIM_FAST", "1")
    assert collsim.Cluster(topology.ring(2)).fast is True
    monkeypatch.delenv("COLLSIM_FAST")
    assert collsim.Cluster(topology.ring(2)).fast is True


def test_a_bad_switch_is_refused_naming_it(monkeypatch):
    with pytest.raises(ConfigError, match=r"fast='yes': give True or False"):
        collsim.Cluster(topology.ring(2), fast="yes")
    monkeypatch.setenv("COLLSIM_FAST", "yes")
    with pytest.raises(ConfigError, match=r"COLLSIM_FAST='yes'.*give 0 .*or 1"):
        collsim.Cluster(topology.ring(2))


def test_the_cli_refuses_a_bad_environment_value_with_exit_2(monkeypatch, capsys):
    monkeypatch.setenv("COLLSIM_FAST", "fast")
    assert main(["run", "all-reduce", "--ranks", "4", "--size", "1KiB"]) == 2
    assert "COLLSIM_FAST='fast'" in capsys.readouterr().err


def test_the_cli_gives_the_same_table_on_either_path(monkeypatch, capsys):
    argv = ["run", "all-reduce", "--ranks", "4", "--size", "1KiB"]
    monkeypatch.setenv("COLLSIM_FAST", "1")
    assert main(argv) == 0
    fast = capsys.readouterr().out
    monkeypatch.setenv("COLLSIM_FAST", "0")
    assert main(argv) == 0
    assert capsys.readouterr().out == fast


def test_the_reference_path_never_imports_the_fast_package():
    code = (
        "import sys, numpy as np, collsim\n"
        "c = collsim.Cluster(collsim.topology.ring(4), fast=False)\n"
        "c.all_reduce([np.ones(8)] * 4); c.all_gather([np.ones(2)] * 4)\n"
        "print('collsim.fast' in sys.modules)\n"
        "collsim.Cluster(collsim.topology.ring(4)).all_reduce([np.ones(8)] * 4)\n"
        "print('collsim.fast' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "COLLSIM_FAST"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    assert out.stdout.split() == ["False", "True"]


def _ring_exchanges(rank, rounds):
    """``rounds`` exchanges with both neighbours, sizes varying by round and rank."""
    k = rank.size
    for step in range(rounds):
        size = ((rank.id + step) % 4) * 256  # repeats, and zeros
        yield rank.exchange(
            sends=[((rank.id + 1) % k, collsim.CountOnly(size), step)],
            recvs=[((rank.id - 1) % k, step)],
        )
    return rank.id


def _whole_run(result, n_ranks):
    """What a run gives, to compare byte for byte (stats with the order of its links)."""
    stats = result.trace.stats(n_ranks)
    return {
        "time": float(result.time).hex(),
        "returns": result.returns,
        "transfers": result.trace.transfers,
        "chrome": hashlib.sha256(result.trace.to_chrome().encode()).hexdigest(),
        "stats": (stats, list(stats.link_bytes)),
        "repr": repr(result.trace),
    }


def test_a_run_long_enough_to_pack_gives_the_same_on_both_paths():
    # > 4,096 transfers: the fast setting packs them into columns as they arrive (twice
    # here, and a tail), the reference path keeps one record each
    from collsim.fast.packed import PACK_RECORDS

    k, rounds = 64, 2 * PACK_RECORDS // 64 + 5
    fast = collsim.Cluster(topology.ring(k), fast=True).run(_ring_exchanges, rounds)
    reference = collsim.Cluster(topology.ring(k), fast=False).run(_ring_exchanges, rounds)
    assert fast.trace.transfer_count == reference.trace.transfer_count == k * rounds
    assert len(fast.trace.store.packed) == 2 and fast.trace.store.recent
    assert type(reference.trace.store) is TransferLog
    assert _whole_run(fast, k) == _whole_run(reference, k)


def test_a_collective_handed_back_to_the_engine_long_enough_to_pack_is_the_same():
    # all-to-all on a ring: flows share links, so the batched path hands the call to the
    # engine, which records 66 x 65 = 4,290 transfers (one pack) on the fast setting
    k = 66
    outs = []
    for fast in (True, False):
        cluster = collsim.Cluster(topology.ring(k, "100GB/s", "5us"), fast=fast)
        outs.append(cluster.collective("all_to_all", _inputs("all_to_all", k, 2)))
    assert outs[0].trace.transfer_count == k * (k - 1) > 4096
    assert outs[0].trace.store.packed and not outs[0].trace.store.blocks  # the engine ran
    assert _fingerprint(outs[0]) == _fingerprint(outs[1])
    assert outs[0].trace.transfers == outs[1].trace.transfers
