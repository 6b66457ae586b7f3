"""``mpi4py.rc`` and the ``MPI4PY_*`` environment, read when a rank imports ``mpi4py.MPI``:
each rank of ``collsim exec`` has its own ``rc`` and its own first import, as each process
of ``mpirun`` has.  The expected values are what real mpi4py 4.1.2 (on Open MPI 4.1.4) did
with the same settings on this machine."""

import os
import re
import textwrap
import warnings

import pytest
from fuzzkit import run_cli

from collsim.mpi.rc import Rc, read_at_import

# (environment, rc after the import, warnings) as real mpi4py 4.1.2 gave them
REAL_MPI4PY = [
    (
        {"MPI4PY_RC_THREADS": "No", "MPI4PY_RC_THREAD_LEVEL": "SINGLE"},
        {"threads": False, "thread_level": "single"},
        [],
    ),
    (
        {"MPI4PY_RC_FINALIZE": "none", "MPI4PY_RC_IRECV_BUFSZ": "-5"},
        {"finalize": "none", "irecv_bufsz": "-5"},
        ["finalize: unexpected value 'none'", "irecv_bufsz: unexpected value '-5'"],
    ),
    (
        {"MPI4PY_RC_THREADS": "y", "MPI4PY_RC_FAST_REDUCE": "t", "MPI4PY_RC_INITIALIZE": "True "},
        {"threads": True, "fast_reduce": "t", "initialize": "true "},
        ["initialize: unexpected value 'true '", "fast_reduce: unexpected value 't'"],
    ),
    (
        {"MPI4PY_RC_FINALIZE": "off", "MPI4PY_RC_IRECV_BUFSZ": "0x10", "MPI4PY_RC_ERRORS": "Abort"},
        {"finalize": False, "irecv_bufsz": "0x10", "errors": "abort"},
        ["irecv_bufsz: unexpected value '0x10'"],
    ),
    ({"MPI4PY_RC_IRECV_BUFSZ": "2048"}, {"irecv_bufsz": 2048}, []),
]


@pytest.mark.parametrize("environ, after, warned", REAL_MPI4PY)
def test_the_environment_is_read_as_real_mpi4py_reads_it(environ, after, warned):
    rc = Rc()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        found = read_at_import(rc, environ)
    assert {name: getattr(rc, name) for name in after} == after
    assert sorted(str(w.message) for w in said) == sorted(f"mpi4py.rc.{w}" for w in warned)
    assert all(w.category is RuntimeWarning for w in said)
    for name, value in after.items():  # a bad value is kept in rc, its default is used
        bad = any(w.startswith(f"{name}:") for w in warned)
        assert getattr(found.options, name) == (getattr(Rc, name) if bad else value)


def test_rc_takes_only_its_own_options_and_ints_as_booleans():
    rc = Rc(initialize=1, threads=0, irecv_bufsz=0)  # real mpi4py accepts these silently
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_at_import(rc, {}).options.threads == 0
    with pytest.raises(TypeError, match="no option 'intialize'.*initialize"):
        rc.intialize = False


def exec_program(tmp_path, body, n=2, status=0):
    path = tmp_path / "program.py"
    path.write_text(textwrap.dedent(body))
    outcome = run_cli(["exec", "-n", str(n), str(path)], timeout=120)
    assert outcome.status == status, outcome.stderr
    return outcome


def lines(stdout, rank):
    return re.findall(rf"^\[1,{rank}\]<stdout>:(.*)$", stdout, flags=re.M)


def test_every_rank_starts_with_its_own_rc_and_reads_it_at_its_own_import(tmp_path):
    body = """
        import os
        from mpi4py import rc
        print(rc.initialize, rc.errors)  # mpi4py's defaults on every rank
        rc.initialize = False
        os.environ["MPI4PY_RC_ERRORS"] = "fatal"
        os.environ["MPI4PY_PICKLE_PROTOCOL"] = "3"
        from mpi4py import MPI
        print(MPI.Is_initialized(), rc.errors, MPI.pickle.PROTOCOL)
        MPI.Init()
        print(MPI.COMM_WORLD.Get_errhandler() == MPI.ERRORS_ARE_FATAL)
    """
    out = exec_program(tmp_path, body).stdout
    for rank in (0, 1):
        assert lines(out, rank) == ["True exception", "False fatal 3", "True"]
    assert not [k for k in os.environ if k.startswith("MPI4PY_")]  # died with the run


def test_bad_options_warn_at_each_ranks_import_as_mpi4py_warns(tmp_path):
    body = """
        import warnings
        from importlib import import_module
        from mpi4py import rc
        rc.errors, rc.irecv_bufsz = "loud", -1
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            MPI = import_module("mpi4py.MPI")
        print(sorted(str(w.message) for w in said))
        print(MPI.COMM_WORLD.Get_errhandler() == MPI.ERRORS_RETURN)
    """
    out = exec_program(tmp_path, body).stdout
    for rank in (0, 1):  # each rank's import warns, and uses the defaults
        assert "mpi4py.rc.errors: unexpected value 'loud'" in lines(out, rank)[0]
        assert "mpi4py.rc.irecv_bufsz: unexpected value -1" in lines(out, rank)[0]
        assert lines(out, rank)[1] == "True"


def test_a_rank_that_deletes_mpi4py_rc_deletes_only_its_own(tmp_path):
    body = """
        import sys
        import mpi4py
        del mpi4py.rc
        del sys.modules["mpi4py.rc"]
        from mpi4py import MPI
        print(MPI.Is_initialized(), hasattr(mpi4py, "rc"))
    """
    out = exec_program(tmp_path, body).stdout
    assert lines(out, 0) == lines(out, 1) == ["True False"]


def test_pickle_settings_belong_to_a_rank_and_are_refused_outside_a_run():
    from collsim import mpi as MPI
    from collsim.errors import ConfigError

    assert (MPI.pickle.PROTOCOL, MPI.pickle.THRESHOLD) == (5, 262144)  # mpi4py's defaults
    with pytest.raises(ConfigError, match=r"MPI.pickle.PROTOCOL = 2 outside a run"):
        MPI.pickle.PROTOCOL = 2


def test_mpi_pickle_takes_other_serialisers_per_rank_and_the_lowercase_calls_use_them():
    import json
    import marshal

    import collsim
    from collsim import mpi as MPI
    from collsim.errors import ConfigError
    from collsim.runtime import blocking

    sent = {"a": [0, 1, 2], "b": "qwerty"}

    def main():
        comm = MPI.COMM_WORLD
        if comm.Get_rank() == 0:  # marshal at protocol 2: dumps(obj, protocol)
            MPI.pickle.__init__(marshal.dumps, marshal.loads, 2)
            comm.send(sent, dest=1)
            got = (MPI.pickle.PROTOCOL, MPI.pickle.loads(MPI.pickle.dumps(sent)))
            MPI.pickle.__init__()  # back to the pickle module
            return got + (MPI.pickle.PROTOCOL,)
        # JSON, whose dumps takes no protocol: dumps(obj)
        MPI.pickle.__init__(lambda o: json.dumps(o).encode(), marshal.loads)
        return MPI.pickle.PROTOCOL, comm.recv(source=0)

    result = blocking.run(collsim.Cluster(collsim.topology.ring(2)), main)
    assert result.returns == [(2, sent, 5), (None, sent)]
    # the bytes on the wire are marshal's, not pickle's
    assert result.stats.bytes_sent[0] == len(marshal.dumps(sent, 2))
    with pytest.raises(ConfigError, match=r"MPI.pickle.__init__\(<built-in function dumps>"):
        MPI.pickle.__init__(marshal.dumps, marshal.loads)
