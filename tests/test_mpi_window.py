"""One-sided communication is out of collsim's scope: ``MPI.Win`` and ``MPI.WIN_NULL`` refuse
every call at once with a NotImplementedError naming it, after checking the buffer and
target specs that mpi4py checks before MPI sees the window (MPI-3.1 chapter 11 for the
calls; mpi4py's target spec: a displacement or ``[disp, count, datatype]``)."""

import pickle

import pytest

from collsim import mpi as MPI
from collsim.errors import ConfigError


def test_making_a_window_or_using_the_null_one_names_the_call():
    with pytest.raises(NotImplementedError, match=r"MPI\.Win\.Allocate: one-sided"):
        MPI.Win.Allocate(256, 1, MPI.INFO_NULL, MPI.COMM_SELF)
    for call in ("Fence", "Free", "Lock", "Flush"):
        with pytest.raises(NotImplementedError, match=rf"MPI\.Win\.{call}: one-sided"):
            getattr(MPI.WIN_NULL, call)()
    assert not MPI.WIN_NULL and MPI.WIN_NULL == MPI.WIN_NULL and isinstance(MPI.WIN_NULL, MPI.Win)
    assert pickle.loads(pickle.dumps(MPI.WIN_NULL)) is MPI.WIN_NULL
    # as in mpi4py, MPI.Win() is a new null handle, equal to WIN_NULL and not it
    fresh = MPI.Win()
    assert fresh == MPI.WIN_NULL and fresh is not MPI.WIN_NULL and not fresh


@pytest.mark.parametrize(
    "origin, target, words",
    [
        ([None, 0, 0, "B", None], None, "has 5 items"),
        ([None, 0, "B"], (0, 0, MPI.BYTE, None), "target=(0, 0, MPI.BYTE, None)"),
        ([None, 0, "B"], {1: 2}, "target={1: 2}"),
    ],
)
def test_put_and_get_check_their_specs_first(origin, target, words):
    for call in (MPI.WIN_NULL.Put, MPI.WIN_NULL.Get):
        with pytest.raises(ConfigError, match="mpi4py raises ValueError") as caught:
            call(origin, 0, target)
        assert words in str(caught.value)


@pytest.mark.parametrize("target", [None, 0, [0], [0, 0, MPI.BYTE]])
def test_a_good_spec_reaches_the_refusal(target):
    with pytest.raises(NotImplementedError, match=r"MPI\.Win\.Get"):
        MPI.WIN_NULL.Get(bytearray(4), 0, target)
    with pytest.raises(NotImplementedError, match=r"MPI\.Win\.Accumulate"):
        MPI.WIN_NULL.Accumulate(bytearray(4), 0, target, MPI.SUM)
