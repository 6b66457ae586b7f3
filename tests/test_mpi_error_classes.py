"""MPI's error classes as mpi4py has them: every ``MPI.ERR_*`` of MPI 4.1, distinct and
with a string; ``MPI.Exception(code)`` carrying its code, class and string and ordering as
the int; ``Add_error_class``/``code``/``string`` and their ``Remove_*`` per rank, in the
order MPI 4.1 allows (the oracle: the MPI 4.1 standard, section 9.5)."""

import operator

import pytest

import collsim
from collsim import mpi as MPI
from collsim.runtime import blocking

# the error classes MPI 4.1 defines (its table 9.1 and 9.2, and MPI_ERR_ERRHANDLER)
MPI_41_CLASSES = """BUFFER COUNT TYPE TAG COMM RANK REQUEST ROOT GROUP OP TOPOLOGY DIMS ARG
UNKNOWN TRUNCATE OTHER INTERN IN_STATUS PENDING KEYVAL NO_MEM BASE INFO_KEY INFO_VALUE
INFO_NOKEY SPAWN PORT SERVICE NAME WIN SIZE DISP INFO LOCKTYPE ASSERT RMA_CONFLICT RMA_SYNC
RMA_RANGE RMA_ATTACH RMA_SHARED RMA_FLAVOR FILE NOT_SAME AMODE UNSUPPORTED_DATAREP
UNSUPPORTED_OPERATION NO_SUCH_FILE FILE_EXISTS BAD_FILE ACCESS NO_SPACE QUOTA READ_ONLY
FILE_IN_USE DUP_DATAREP CONVERSION IO SESSION PROC_ABORTED VALUE_TOO_LARGE ERRHANDLER
""".split()


def run(k, main):
    return blocking.run(collsim.Cluster(collsim.topology.ring(k)), main)


def test_every_mpi_41_error_class_exists_distinct_below_lastcode_with_a_string():
    codes = [getattr(MPI, f"ERR_{name}") for name in MPI_41_CLASSES]
    assert len(set(codes)) == len(codes)
    assert MPI.SUCCESS == 0 not in codes
    for code in codes:
        assert 0 < code <= MPI.ERR_LASTCODE
        assert MPI.Get_error_class(code) == code
        assert MPI.Get_error_string(code)


@pytest.mark.parametrize("code", [MPI.SUCCESS, MPI.ERR_TYPE, MPI.ERR_WIN, MPI.ERR_LASTCODE])
def test_an_exception_made_of_a_code_is_that_code(code):
    exc = MPI.Exception(code)
    assert (exc.error_code, exc.Get_error_code(), int(exc)) == (code, code, code)
    assert exc.error_class == exc.Get_error_class() == code
    assert str(exc) == exc.error_string == exc.Get_error_string()
    assert repr(exc) == f"MPI.Exception({code})"
    assert hash(exc) == hash(code) and exc == code and not exc != code
    assert bool(exc) == (code != MPI.SUCCESS)
    assert MPI.Exception(MPI.SUCCESS) <= exc <= MPI.ERR_LASTCODE
    with pytest.raises(TypeError):
        operator.lt(exc, "a string")


def test_a_negative_code_is_err_unknown_and_a_code_past_lastcode_stays():
    assert MPI.Exception(-1) == MPI.ERR_UNKNOWN
    assert MPI.Exception(MPI.ERR_LASTCODE + 1) == MPI.ERR_LASTCODE + 1


def test_a_raised_error_still_says_what_was_wrong():
    def main():
        try:
            MPI.COMM_WORLD.Bcast(bytearray(3), root=7)
        except MPI.Exception as exc:
            return exc.Get_error_class() == MPI.ERR_ROOT, str(exc)

    same_class, message = run(2, main).returns[0]
    assert same_class and "root=7" in message


def test_added_classes_codes_and_strings_per_rank_and_removed_in_reverse():
    def main():
        comm = MPI.COMM_WORLD
        errclass = MPI.Add_error_class()
        said = [errclass == comm.Get_attr(MPI.LASTUSEDCODE), MPI.Get_error_string(errclass)]
        code = MPI.Add_error_code(errclass)
        MPI.Add_error_string(code, f"rank {comm.Get_rank()}'s code")
        said += [MPI.Get_error_class(code) == errclass, MPI.Get_error_string(code)]
        refused = []
        for remove, what in [
            (MPI.Remove_error_class, errclass),  # a code of it is left
            (MPI.Remove_error_code, code),  # its string is left
            (MPI.Remove_error_class, MPI.ERR_ARG),  # predefined
            (MPI.Remove_error_string, MPI.SUCCESS),
            (MPI.Add_error_code, 10**6),  # no such class
        ]:
            with pytest.raises(MPI.Exception) as caught:
                remove(what)
            refused.append(str(what) in str(caught.value))
        MPI.Remove_error_string(code)
        MPI.Remove_error_code(code)
        MPI.Remove_error_class(errclass)
        return errclass, said, refused

    returns = run(2, main).returns
    # each rank (an MPI process) numbers its own: both get the first code past LASTCODE
    assert returns[0][0] == returns[1][0] == MPI.ERR_LASTCODE + 1
    assert returns[1][1] == [True, "", True, "rank 1's code"]
    assert returns[0][2] == [True] * 5
