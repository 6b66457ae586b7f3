"""The ``mpi4py`` package's modules besides ``mpi4py.MPI`` under ``collsim exec``, as
mpi4py's test_package imports them: ``mpi4py.typing`` has mpi4py's names, ``mpi4py.run``
(``python -m mpi4py``) is there and its calls refuse naming ``collsim exec``, and the
modules that need spawned workers or an MPI C library say why they are not there."""

import re

import numpy as np
from fuzzkit import run_cli

# mpi4py 4.1.2's mpi4py.typing.__all__
TYPING_NAMES = [
    "SupportsBuffer", "SupportsDLPack", "SupportsCAI", "Buffer", "Bottom", "InPlace", "Aint",
    "Count", "Displ", "Offset", "TypeSpec", "BufSpec", "BufSpecB", "BufSpecV", "BufSpecW",
    "TargetSpec",
]  # fmt: skip


def _exec(tmp_path, body, status):
    program = tmp_path / "program.py"
    program.write_text(body)
    outcome = run_cli(["exec", "-n", "2", str(program)], timeout=60)
    assert outcome.status == status, outcome.stderr
    return outcome


def _lines(stdout, rank=0):
    return re.findall(rf"^\[1,{rank}\]<stdout>:(.*)$", stdout, flags=re.M)


def test_mpi4py_typing_has_mpi4pys_names_and_they_describe_buffers(tmp_path):
    body = """
import numpy as np
import mpi4py.typing as hints
from mpi4py import MPI
print(hints.__all__)
print(isinstance(np.zeros(2), hints.SupportsDLPack), isinstance(3, hints.SupportsDLPack))
print(hints.TypeSpec == (MPI.Datatype | str), hints.Count is hints.Aint)
"""
    out = _exec(tmp_path, body, 0).stdout
    assert _lines(out) == [str(TYPING_NAMES), "True False", "True True"]
    assert _lines(out, 1) == _lines(out)


def test_mpi4py_run_imports_and_its_calls_name_collsim_exec(tmp_path):
    body = """
import mpi4py.run, mpi4py.__main__
print(callable(mpi4py.run.main), mpi4py.__main__.main is mpi4py.run.main)
mpi4py.run.main()
"""
    outcome = _exec(tmp_path, body, 1)
    assert _lines(outcome.stdout) == ["True True"]
    assert "mpi4py.run.main" in outcome.stderr and "collsim exec -n K" in outcome.stderr


def test_modules_that_need_spawned_workers_or_a_c_library_say_why(tmp_path):
    for module, why in [
        ("mpi4py.futures", "MPI.Comm.Spawn"),
        ("mpi4py.util.pool", "spawned worker processes"),
        ("mpi4py._mpiabi", "MPI C library"),
    ]:
        outcome = _exec(tmp_path, f"import {module}\n", 1)
        assert f"No module named {module!r}" in outcome.stderr and why in outcome.stderr
        assert "mpi4py.typing, mpi4py.run" in outcome.stderr


def test_the_typing_names_hold_numpy_buffers():
    from collsim.mpi import hints

    assert sorted(hints.__all__) == sorted(TYPING_NAMES)
    assert isinstance(np.arange(3), hints.SupportsDLPack)
