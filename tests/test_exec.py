"""collsim.exec and exec_script (collsim/launch.py): the scoped mpi4py import hook, the
per-rank tagged output, errors that name the rank and its line, no thread left behind, and
the same trace byte for byte on every run."""

import sys
import threading
import types

import numpy as np
import pytest

import collsim
from collsim import launch
from collsim.errors import ConfigError, DeadlockError
from collsim.runtime import blocking


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ---- the import hook is scoped ------------------------------------------------------------


def _which_mpi():
    import mpi4py.MPI as dotted
    from mpi4py import MPI

    return MPI.__name__, dotted is MPI


def test_mpi4py_is_collsims_inside_the_run_and_absent_after():
    assert "mpi4py" not in sys.modules
    result = launch.exec(_which_mpi, n=2, echo=False)
    assert result.returns == [("collsim.mpi", True)] * 2
    assert not [name for name in sys.modules if name.split(".")[0] == "mpi4py"]


def test_a_real_mpi4py_in_sys_modules_is_back_after_the_run(monkeypatch):
    fake, fake_mpi = types.ModuleType("mpi4py"), types.ModuleType("mpi4py.MPI")
    fake.MPI = fake_mpi
    monkeypatch.setitem(sys.modules, "mpi4py", fake)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", fake_mpi)
    before = dict(sys.modules)
    assert launch.exec(_which_mpi, n=2, echo=False).returns[0] == ("collsim.mpi", True)
    assert sys.modules["mpi4py"] is fake and sys.modules["mpi4py.MPI"] is fake_mpi
    assert {k: v for k, v in sys.modules.items() if k.startswith("mpi4py")} == {
        k: v for k, v in before.items() if k.startswith("mpi4py")
    }


def test_the_hook_is_undone_when_a_rank_raises(monkeypatch):
    fake = types.ModuleType("mpi4py")
    monkeypatch.setitem(sys.modules, "mpi4py", fake)

    def boom():
        from mpi4py import MPI  # noqa: F401

        raise RuntimeError("boom")

    with pytest.raises(launch.RankError):
        launch.exec(boom, n=2, echo=False)
    assert sys.modules["mpi4py"] is fake and "mpi4py.MPI" not in sys.modules
    assert sys.stdout is sys.__stdout__ or not isinstance(sys.stdout, launch.TaggedWriter)


# ---- output, tagged per line ----------------------------------------------------------------


def _chatty():
    rank = blocking.current_rank()
    print(f"hello from {rank.id}", end="")  # one line in three writes
    print("!")
    print(f"two\nlines {rank.id}")
    print(f"oops {rank.id}", file=sys.stderr)
    if rank.id == 1:
        print("no newline", end="")


def test_each_line_is_tagged_with_its_rank_as_tag_output_does(capsys):
    result = launch.exec(_chatty, n=2)
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        "[1,0]<stdout>:hello from 0!",
        "[1,0]<stdout>:two",
        "[1,0]<stdout>:lines 0",
        "[1,1]<stdout>:hello from 1!",
        "[1,1]<stdout>:two",
        "[1,1]<stdout>:lines 1",
        "[1,1]<stdout>:no newline",
    ]
    assert err.splitlines() == ["[1,0]<stderr>:oops 0", "[1,1]<stderr>:oops 1"]
    assert result.stdout == [
        "hello from 0!\ntwo\nlines 0\n",
        "hello from 1!\ntwo\nlines 1\nno newline",
    ]
    assert result.stderr == ["oops 0\n", "oops 1\n"]


def test_echo_false_keeps_the_output_without_printing_it(capsys):
    result = launch.exec(_chatty, n=2, echo=False)
    assert capsys.readouterr() == ("", "")
    assert result.stdout[0].startswith("hello from 0!")


def test_stdout_is_the_callers_again_after_the_run():
    saved = sys.stdout, sys.stderr
    launch.exec(_chatty, n=1, echo=False)
    assert (sys.stdout, sys.stderr) == saved


# ---- a function, its arguments and its cluster ----------------------------------------------


def _shift(scale, offset=0.0):
    rank = blocking.current_rank()
    right, left = (rank.id + 1) % rank.size, (rank.id - 1) % rank.size
    handle = blocking.call(rank.isend(right, np.full(4, scale * rank.id + offset)))
    got = blocking.call(rank.recv(left))
    blocking.call(rank.wait(handle))
    return float(got[0])


def test_returns_per_rank_values_and_the_run():
    result = launch.exec(_shift, n=4, args=(10.0,), kwargs={"offset": 1.0}, echo=False)
    assert result.returns == [31.0, 1.0, 11.0, 21.0]
    assert result.bytes_sent == [32] * 4
    assert result.time == pytest.approx(5e-6 + 32 / 100e9)
    assert isinstance(result.run, collsim.RunResult)


def test_runs_on_a_given_cluster_or_topology():
    cluster = collsim.Cluster(collsim.topology.switch(3, bandwidth="10GB/s", latency="1us"))
    on_cluster = launch.exec(_shift, cluster=cluster, args=(1.0,), echo=False)
    assert on_cluster.time == pytest.approx(2e-6 + 32 / 10e9)  # two links through the switch
    graph = collsim.topology.fully_connected(3, bandwidth="10GB/s", latency="1us")
    on_graph = launch.exec(_shift, topology=graph, args=(1.0,), echo=False)
    assert on_graph.time == pytest.approx(1e-6 + 32 / 10e9)
    assert launch.exec(_shift, n=3, topology="switch", args=(1.0,), echo=False).returns == [
        2.0,
        0.0,
        1.0,
    ]


@pytest.mark.parametrize(
    ("kwargs", "bad"),
    [
        ({"n": 0}, "n=0"),
        ({"n": -3}, "n=-3"),
        ({"n": 2**62}, f"n={2**62}"),
        ({"n": 2.5}, "n=2.5"),
        ({"n": "4"}, "n='4'"),
        ({"n": None}, "give n="),
        ({"n": 4, "topology": "moebius"}, "'moebius'"),
        ({"n": 4, "cluster": collsim.Cluster(collsim.topology.ring(3))}, "n=4"),
        ({"n": 4, "algorithm": "warp"}, "'warp'"),
        ({"n": 2, "trace": "/no/such/folder/t.json"}, "/no/such/folder"),
        ({"n": 2, "trace": "/"}, "is a folder"),
        ({"n": 2, "trace": "/dev/full"}, "/dev/full"),
    ],
    ids=str,
)
def test_bad_arguments_are_refused_naming_them_before_any_thread(kwargs, bad):
    before = threading.active_count()
    with pytest.raises(ConfigError, match=None) as caught:
        launch.exec(_shift, args=(1.0,), echo=False, **kwargs)
    assert bad in str(caught.value)
    assert threading.active_count() == before


# ---- errors: the rank, its last frame, the deadlock report; no thread left behind -----------


def _raises_on_rank_2():
    rank = blocking.current_rank()
    if rank.id == 2:
        {}["missing"]  # the line the error must name
    blocking.call(rank.recv((rank.id + 1) % rank.size))


def test_a_rank_that_raises_is_named_with_its_line_and_the_others_state(capsys):
    before = threading.active_count()
    with pytest.raises(launch.RankError) as caught:
        launch.exec(_raises_on_rank_2, n=3)
    error = caught.value
    assert error.rank == 2 and isinstance(error.error, KeyError)
    line = _raises_on_rank_2.__code__.co_firstlineno + 3
    assert error.where == f"{__file__}:{line}, in _raises_on_rank_2"
    assert str(error).startswith("rank 2 raised KeyError: 'missing'")
    assert "rank 0: blocked at test_exec.py" in str(error)
    err = capsys.readouterr().err
    assert "[1,2]<stderr>:Traceback (most recent call last):" in err
    assert "[1,2]<stderr>:KeyError: 'missing'" in err
    assert "collsim" + "/runtime" not in err  # only the user's frames
    assert threading.active_count() == before


def _both_recv_first():
    rank = blocking.current_rank()
    buf = blocking.call(rank.recv(1 - rank.id))  # both wait: neither sends
    blocking.call(rank.send(1 - rank.id, buf))


def test_a_deadlock_names_every_rank_and_the_line_and_leaves_no_thread():
    before = threading.active_count()
    with pytest.raises(DeadlockError) as caught:
        launch.exec(_both_recv_first, n=2, echo=False)
    line = _both_recv_first.__code__.co_firstlineno + 2
    report = str(caught.value)
    for rank in (0, 1):
        assert f"rank {rank} waits in recv from rank {1 - rank}" in report
    assert f"test_exec.py:{line}" in report
    assert threading.active_count() == before


def test_a_nested_run_is_refused():
    def nested():
        return launch.exec(_shift, n=2, args=(1.0,), echo=False)

    with pytest.raises(launch.RankError) as caught:
        launch.exec(nested, n=1, echo=False)
    assert "one run at a time" in str(caught.value)


# ---- scripts ------------------------------------------------------------------------------

SCRIPT = """\
import sys
import numpy as np
from collsim.runtime import blocking

rank = blocking.current_rank()
print(__name__, sys.argv[1:], rank.id)
if rank.id == 0:
    blocking.call(rank.send(1, np.arange(3.0)))
elif rank.id == 1:
    print(blocking.call(rank.recv(0)).sum())
"""


def test_a_script_runs_as_main_with_its_argv_and_sys_is_restored(tmp_path):
    path = _write(tmp_path, "prog.py", SCRIPT)
    argv, syspath = list(sys.argv), list(sys.path)
    result = launch.exec_script(path, n=2, argv=["a", "-b"], echo=False)
    assert result.stdout == ["__main__ ['a', '-b'] 0\n", "__main__ ['a', '-b'] 1\n3.0\n"]
    assert (sys.argv, sys.path) == (argv, syspath)


def test_a_scripts_own_modules_are_per_rank_and_imported_afresh_each_run(tmp_path):
    # as under mpirun, where each rank is a process: a helper module's state is the rank's
    _write(tmp_path, "helper_mod_g.py", "COUNT = []\n")
    path = _write(
        tmp_path,
        "prog.py",
        "import helper_mod_g\nhelper_mod_g.COUNT.append(1)\nprint(len(helper_mod_g.COUNT))\n",
    )
    for _ in range(2):  # each rank has its own copy; the next run starts afresh
        assert launch.exec_script(path, n=2, echo=False).stdout == ["1\n", "1\n"]
    assert "helper_mod_g" not in sys.modules


@pytest.mark.parametrize(
    ("content", "bad"),
    [
        ("x = (\n", "prog.py:1: SyntaxError"),
        (b"\xff\xfe\x00 not text", "prog.py"),
    ],
    ids=["syntax", "binary"],
)
def test_a_script_that_does_not_compile_is_refused_naming_it(tmp_path, content, bad):
    path = tmp_path / "prog.py"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ConfigError) as caught:
        launch.exec_script(path, n=2)
    assert bad in str(caught.value)


def test_sys_exit_zero_ends_a_rank_and_nonzero_stops_the_run(tmp_path):
    ok = _write(tmp_path, "ok.py", "import sys\nprint('bye')\nsys.exit(0)\nprint('never')\n")
    assert launch.exec_script(ok, n=2, echo=False).stdout == ["bye\n", "bye\n"]
    bad = _write(tmp_path, "bad.py", "import sys\nsys.exit(3)\n")
    with pytest.raises(launch.RankError) as caught:
        launch.exec_script(bad, n=2, echo=False)
    assert caught.value.status == 3 and "rank 0 called sys.exit(3)" in str(caught.value)


def test_the_same_script_twice_gives_the_same_trace_bytes(tmp_path):
    path = _write(tmp_path, "prog.py", SCRIPT)
    first, second = tmp_path / "1.json", tmp_path / "2.json"
    launch.exec_script(path, n=3, trace=first, echo=False)
    launch.exec_script(path, n=3, trace=second, echo=False)
    assert first.read_bytes() == second.read_bytes()
    assert b'"bytes": 24' in first.read_bytes()


def _futures():
    import mpi4py.futures  # noqa: F401


def test_mpi4py_submodules_other_than_mpi_say_they_are_not_there():
    with pytest.raises(launch.RankError) as caught:
        launch.exec(_futures, n=1, echo=False)
    assert isinstance(caught.value.error, ModuleNotFoundError)
    assert "only mpi4py.MPI" in str(caught.value)
    assert not [f for f in sys.meta_path if "OnlyMPI" in repr(f)]


# ---- the algorithm MPI collectives run ------------------------------------------------------


def _allreduce():
    from mpi4py import MPI

    x = np.full(64, float(MPI.COMM_WORLD.Get_rank()))
    out = np.empty_like(x)
    MPI.COMM_WORLD.Allreduce(x, out, op=MPI.SUM)
    return float(out[0])


@pytest.mark.parametrize("algorithm", ["ring", "tree", "halving_doubling"])
def test_the_algorithm_of_the_exec_call_runs_and_is_reset_after(algorithm):
    from collsim.mpi.settings import current

    result = launch.exec(_allreduce, n=4, algorithm=algorithm, echo=False)
    assert result.returns == [6.0] * 4
    messages = len(result.trace.transfers)
    if algorithm == "tree":  # the root's children send whole buffers: not the ring's bytes
        ring = launch.exec(_allreduce, n=4, echo=False)
        assert result.bytes_sent != ring.bytes_sent
    else:  # one message per rank and step: 2(K-1) steps for the ring, 2 log2 K for HD
        assert messages == 4 * {"ring": 2 * 3, "halving_doubling": 2 * 2}[algorithm]
    assert current().algorithm_for("all_reduce") is None


PICKLES_ITS_OWN_CLASS = """\
from dataclasses import dataclass

from mpi4py import MPI


@dataclass
class Point:
    x: int


def outer():
    return "each rank's own"


comm = MPI.COMM_WORLD
if comm.rank == 0:
    comm.send((Point(3), outer), dest=1)
else:
    point, function = comm.recv(source=0)
    print(point, type(point) is Point, function is outer, function())
"""


def test_a_class_the_script_defines_travels_as_it_does_between_processes(tmp_path):
    # pickle finds Point in __main__: each rank's own, as in a process of its own
    main = sys.modules["__main__"]
    path = _write(tmp_path, "points.py", PICKLES_ITS_OWN_CLASS)
    result = launch.exec_script(path, n=2, echo=False)
    assert result.stdout[1] == "Point(x=3) True True each rank's own\n"
    assert sys.modules["__main__"] is main
