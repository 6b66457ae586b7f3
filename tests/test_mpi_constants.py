"""``MPI.BOTTOM``, ``MPI.IN_PLACE`` and ``MPI.BUFFER_AUTOMATIC`` are int-like, as
mpi4py's are (its test_objmodel's testConstants: equal to and hashing as Open MPI's values
0, 1 and 0, no arithmetic, repr and pickle by name), and still work as buffers."""

import copy
import operator
import pickle

import numpy as np
import pytest

import collsim
from collsim import mpi as MPI

# Open MPI's C values, as mpi4py 4.1.2 on Open MPI gives int(MPI.BOTTOM) ...
VALUES = {"BOTTOM": 0, "IN_PLACE": 1, "BUFFER_AUTOMATIC": 0}


@pytest.mark.parametrize("name", sorted(VALUES))
def test_buffer_constants_are_int_like(name):
    constant, value = getattr(MPI, name), VALUES[name]
    assert int(constant) == value and constant == value and not constant != value
    assert constant != None  # noqa: E711  (the comparison is what is checked)
    assert hash(constant) == hash(value) and bool(constant) == bool(value)
    assert repr(constant) == name and constant.__reduce__() == name
    assert type(constant)() == constant
    with pytest.raises(TypeError):
        constant + 1
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(constant, protocol)) is constant
    assert copy.copy(constant) is constant is copy.deepcopy(constant)
    assert MPI.Get_address(constant) == constant


def test_bottom_is_an_index_and_in_place_is_not():
    assert operator.index(MPI.BOTTOM) == 0
    with pytest.raises(TypeError):
        operator.index(MPI.IN_PLACE)


def test_the_constants_still_work_as_buffers():
    def main():
        comm = MPI.COMM_WORLD
        data = np.full(3, float(comm.rank + 1))
        comm.Allreduce(MPI.IN_PLACE, data, op=MPI.SUM)
        comm.Send([MPI.BOTTOM, 0, MPI.BYTE], dest=MPI.PROC_NULL)
        return data.tolist()

    assert collsim.exec(main, n=3).returns == [[6.0, 6.0, 6.0]] * 3
