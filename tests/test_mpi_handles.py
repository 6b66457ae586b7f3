"""MPI handles as mpi4py has them: ``handle``/``fromhandle``, ``toint``/``fromint``,
``py2f``/``f2py`` on every handle type, predefined handles that unpickle as themselves,
handles that do not hash, mpi4py's safe ``free()``, constructors that refuse another
type, error handlers made, set, got, called and freed (the oracle: the MPI standard's
handle rules and mpi4py 4.1's documented object model)."""

import copy
import gc
import pickle
import subprocess
import sys
import textwrap

import pytest
from fuzzkit import check_api
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
from collsim import mpi as MPI
from collsim.errors import ConfigError
from collsim.runtime import blocking

NULLS = [
    MPI.COMM_NULL,
    MPI.DATATYPE_NULL,
    MPI.OP_NULL,
    MPI.REQUEST_NULL,
    MPI.GROUP_NULL,
    MPI.INFO_NULL,
    MPI.ERRHANDLER_NULL,
    MPI.WIN_NULL,
    MPI.FILE_NULL,
    MPI.SESSION_NULL,
    MPI.MESSAGE_NULL,
]
CONSTANTS = [
    MPI.COMM_WORLD,
    MPI.COMM_SELF,
    MPI.INT,
    MPI.DOUBLE,
    MPI.SUM,
    MPI.MAX,
    MPI.GROUP_EMPTY,
    MPI.INFO_ENV,
    MPI.ERRORS_RETURN,
    MPI.ERRORS_ARE_FATAL,
    MPI.ERRORS_ABORT,
    MPI.MESSAGE_NO_PROC,
]


def run(k, main):
    return blocking.run(collsim.Cluster(collsim.topology.ring(k)), main)


@pytest.mark.parametrize("handle", NULLS + CONSTANTS, ids=repr)
def test_every_handle_comes_back_from_its_number_in_each_form(handle):
    cls = type(handle)
    assert handle.handle >= 0
    for back in (cls.fromhandle(handle.handle), cls.fromint(handle.toint())):
        assert type(back) is cls and back == handle and back.handle == handle.handle
    assert cls.f2py(handle.py2f()) == handle
    with pytest.raises(AttributeError):
        handle.handle = 0


def test_distinct_objects_have_distinct_numbers_and_copies_share_theirs():
    numbers = [h.handle for h in NULLS + CONSTANTS]
    assert len(set(numbers)) == len(numbers)
    assert MPI.Comm(MPI.COMM_WORLD).handle == MPI.COMM_WORLD.handle
    assert MPI.Datatype(MPI.INT).handle == MPI.INT.handle != MPI.INT.Dup().handle


def test_a_number_no_live_object_has_is_refused_naming_it():
    with pytest.raises(ConfigError, match=r"Comm.fromhandle\(999999\)"):
        MPI.Comm.fromhandle(999999)
    with pytest.raises(ConfigError, match="no MPI.Comm has this handle"):
        MPI.Comm.fromhandle(MPI.INT.handle)  # a datatype's number is no communicator's


@pytest.mark.parametrize("handle", NULLS + CONSTANTS, ids=repr)
def test_a_predefined_handle_unpickles_as_itself_and_a_copy_as_a_copy(handle):
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(handle, protocol)) is handle
    assert copy.copy(handle) is handle and copy.deepcopy(handle) is handle
    clone = type(handle)(handle)
    back = pickle.loads(pickle.dumps(clone))
    assert back is not handle and back == handle and type(back) is type(handle)


@pytest.mark.parametrize("handle", NULLS + CONSTANTS + [MPI.Status()], ids=repr)
def test_handles_do_not_hash_as_mpi4py_s_do_not(handle):
    with pytest.raises(TypeError):
        hash(handle)


@pytest.mark.parametrize("handle", NULLS, ids=repr)
def test_constructors_make_the_null_handle_and_refuse_another_type(handle):
    cls = type(handle)
    assert cls() == handle and not cls()
    for other in [*(n for n in NULLS if type(n) is not cls), 1234, "abc"]:
        with pytest.raises(TypeError):
            cls(other)


def test_free_leaves_constants_nulls_a_copy_of_one_and_frees_what_a_program_made():
    for constant in CONSTANTS:
        constant.free()
        clone = type(constant)(constant)
        clone.free()
        assert constant and not clone
    for null in NULLS:
        null.free()
        assert not null
    made = [
        MPI.Op.Create(lambda a, b, t: None),
        MPI.Info.Create(),
        MPI.Comm.Create_errhandler(lambda comm, code: None),
        MPI.GROUP_EMPTY.Dup(),
    ]
    for handle in made:
        handle.free()
        assert not handle


def test_freeing_a_predefined_group_is_refused():
    with pytest.raises(MPI.Exception, match="GROUP_EMPTY|Group"):
        MPI.GROUP_EMPTY.Free()
    assert MPI.GROUP_EMPTY == MPI.Group([])


def test_a_communicator_made_in_a_run_has_a_number_that_lives_as_long_as_it():
    def main():
        dup = MPI.COMM_WORLD.Dup()
        number = dup.handle
        same = MPI.Intracomm.fromhandle(number)
        ok = same == dup and type(same) is MPI.Intracomm and same.Get_size() == 2
        del dup, same
        gc.collect()
        try:  # the last object of that communicator is gone: so is its number
            MPI.Intracomm.fromhandle(number)
        except MPI.Exception as exc:
            return ok, str(number) in str(exc)
        return ok, False

    assert run(2, main).returns == [(True, True), (True, True)]


def test_request_and_info_copies_are_the_same_object():
    info = MPI.Info.Create()
    MPI.Info(info).Set("cb_nodes", "4")
    assert info.Get("cb_nodes") == "4" and MPI.Info(info) == info

    def main():
        request = MPI.COMM_SELF.Isend(bytearray(1), dest=MPI.PROC_NULL)
        other = MPI.Request(request)
        same = other == request and other.handle == request.handle
        other.Wait()
        return same, bool(request), MPI.Request(MPI.REQUEST_NULL) == MPI.REQUEST_NULL

    assert run(1, main).returns == [(True, False, True)]


def test_a_status_converts_to_fortran_s_integers_and_back():
    status = MPI.Status()
    status.source, status.tag, status.error = 3, 7, MPI.ERR_TRUNCATE
    status.count = 5 * 2**32 + 12  # bytes: past 32 bits, in two halves
    fields = status.py2f()
    assert len(fields) == MPI.F_STATUS_SIZE
    assert (fields[MPI.F_SOURCE], fields[MPI.F_TAG], fields[MPI.F_ERROR]) == (
        3,
        7,
        MPI.ERR_TRUNCATE,
    )
    assert MPI.Status.f2py(fields) == status
    with pytest.raises(TypeError, match="F_STATUS_SIZE"):
        MPI.Status.f2py([1, 2])


def test_sizeof_addressof_and_handleof_take_handles_only():
    assert MPI._sizeof(MPI.COMM_WORLD) == MPI._sizeof(MPI.Comm) == 8
    assert MPI._sizeof(MPI.Status()) == MPI._sizeof(MPI.Status) == 4 * MPI.F_STATUS_SIZE
    assert MPI._handleof(MPI.SUM) == MPI.SUM.handle and MPI._addressof(MPI.SUM) != 0
    for internal in (MPI._sizeof, MPI._addressof, MPI._handleof):
        with pytest.raises(TypeError):
            internal(None)


def test_error_handlers_are_distinct_kept_by_copy_and_freed_as_handles():
    predefined = [MPI.ERRORS_RETURN, MPI.ERRORS_ARE_FATAL, MPI.ERRORS_ABORT]
    assert all(predefined) and not MPI.ERRHANDLER_NULL
    assert all(a != b for i, a in enumerate(predefined) for b in predefined[i + 1 :])

    def main():
        comm = MPI.COMM_SELF.Dup()
        mine = comm.Get_errhandler()
        comm.Set_errhandler(MPI.ERRORS_ARE_FATAL)
        got = comm.Get_errhandler()
        same = got == MPI.ERRORS_ARE_FATAL and got is not MPI.ERRORS_ARE_FATAL
        got.Free()  # the handle goes; the communicator keeps its handler
        kept = comm.Get_errhandler() == MPI.ERRORS_ARE_FATAL
        comm.Set_errhandler(mine)
        mine.Free()
        return same, got == MPI.ERRHANDLER_NULL, kept, comm.Get_errhandler() == MPI.ERRORS_RETURN

    assert run(1, main).returns == [(True, True, True, True)]


def test_a_handler_a_program_makes_is_called_with_the_communicator_and_the_code():
    def main():
        comm = MPI.COMM_WORLD.Dup()
        calls = []
        handler = MPI.Comm.Create_errhandler(lambda c, code: calls.append((c == comm, code)))
        comm.Set_errhandler(handler)
        handler.Free()  # the communicator still has it, as MPI counts references
        comm.Call_errhandler(MPI.ERR_OTHER)
        with pytest.raises(ValueError, match="only predefined"):
            pickle.dumps(comm.Get_errhandler())
        return calls

    assert run(2, main).returns == [[(True, MPI.ERR_OTHER)]] * 2


def test_a_rank_keeps_at_most_32_handlers_live_as_mpi4py_does():
    def main():
        made = [MPI.Intracomm.Create_errhandler(lambda c, e: None) for _ in range(32)]
        try:
            MPI.Intracomm.Create_errhandler(lambda c, e: None)
        except RuntimeError as exc:  # MPI.Exception is one, as in mpi4py
            refused = "32 error handlers" in str(exc)
        made.pop().Free()
        MPI.Intracomm.Create_errhandler(lambda c, e: None)  # room again
        return refused

    assert run(1, main).returns == [True]


def test_handle_numbers_are_the_same_run_after_run(tmp_path):
    program = tmp_path / "numbers.py"
    program.write_text(
        textwrap.dedent(
            """
            from mpi4py import MPI
            dup = MPI.COMM_WORLD.Dup()
            print(MPI.COMM_WORLD.handle, MPI.INT.handle, dup.handle, MPI.INT.Dup().handle)
            """
        )
    )
    command = [sys.executable, "-m", "collsim", "exec", "-n", "2", str(program)]
    outputs = [subprocess.run(command, capture_output=True, text=True, timeout=120) for _ in "ab"]
    assert outputs[0].returncode == 0, outputs[0].stderr
    assert outputs[0].stdout == outputs[1].stdout and outputs[0].stdout.strip()


# calls on a null (or predefined) handle and the MPI error class the standard gives them
NULL_CALLS = {
    "DATATYPE_NULL.Commit": (lambda: MPI.DATATYPE_NULL.Commit(), MPI.ERR_TYPE),
    "DATATYPE_NULL.Free": (lambda: MPI.DATATYPE_NULL.Free(), MPI.ERR_TYPE),
    "INT.Free": (lambda: MPI.INT.Free(), MPI.ERR_TYPE),
    "REQUEST_NULL.Free": (lambda: MPI.REQUEST_NULL.Free(), MPI.ERR_REQUEST),
    "REQUEST_NULL.Cancel": (lambda: MPI.REQUEST_NULL.Cancel(), MPI.ERR_REQUEST),
    "INFO_NULL.Free": (lambda: MPI.INFO_NULL.Free(), MPI.ERR_INFO),
    "INFO_NULL.Dup": (lambda: MPI.INFO_NULL.Dup(), MPI.ERR_INFO),
    "INFO_NULL.Set": (lambda: MPI.INFO_NULL.Set("key", "value"), MPI.ERR_INFO),
    "INFO_NULL.Get_nkeys": (lambda: MPI.INFO_NULL.Get_nkeys(), MPI.ERR_INFO),
    "Info.Get_nthkey(0) of none": (lambda: MPI.Info.Create().Get_nthkey(0), MPI.ERR_ARG),
    "ERRHANDLER_NULL.Free": (lambda: MPI.ERRHANDLER_NULL.Free(), MPI.ERR_ARG),
}


@pytest.mark.parametrize("call", NULL_CALLS)
def test_a_call_on_a_null_handle_raises_the_error_class_mpi_gives(call):
    function, error_class = NULL_CALLS[call]
    with pytest.raises(MPI.Exception) as caught:
        function()
    assert caught.value.Get_error_class() == error_class
    assert not MPI.INFO_NULL and MPI.INT  # and the handle is as it was


def test_communicator_calls_refuse_a_null_one_and_an_unknown_key():
    def main():
        classes = []
        for call in (
            lambda: MPI.COMM_WORLD.Compare(MPI.COMM_NULL),
            lambda: MPI.COMM_WORLD.Get_attr(MPI.KEYVAL_INVALID),
        ):
            try:
                call()
            except MPI.Exception as exc:
                classes.append(exc.Get_error_class())
        return classes

    assert run(1, main).returns == [[MPI.ERR_COMM, MPI.ERR_KEYVAL]]


def test_info_null_has_no_keys_and_a_made_info_pickles_as_its_keys():
    for change in (
        lambda: MPI.INFO_NULL.__setitem__("k", "v"),
        lambda: MPI.INFO_NULL.update([]),
        lambda: MPI.INFO_NULL.pop("k"),
        lambda: MPI.INFO_NULL.popitem(),
    ):
        with pytest.raises(KeyError):
            change()
    assert MPI.INFO_NULL.pop("k", None) is None and MPI.INFO_NULL.copy() == MPI.INFO_NULL
    info = MPI.Info.Create({"answer": "42"})
    back = pickle.loads(pickle.dumps(info))
    assert back != info and back.items() == info.items() == [("answer", "42")]
    assert pickle.loads(pickle.dumps(MPI.Info(MPI.INFO_ENV))) == MPI.INFO_ENV


def keep_inout(inbuf, inoutbuf, datatype):
    """A user op (module-level, so that pickle finds it)."""


def test_a_user_op_pickles_but_not_one_made_from_its_number():
    op = MPI.Op.Create(keep_inout, commute=True)
    assert pickle.loads(pickle.dumps(op)).is_commutative
    with pytest.raises(ValueError):
        pickle.dumps(MPI.Op.fromint(op.toint()))


def test_request_casts_follow_mpi4py_a_persistent_request_is_no_generalized_one():
    def main():
        persistent = MPI.COMM_SELF.Send_init(b"", MPI.PROC_NULL, 0)
        same = [
            MPI.Prequest.fromhandle(persistent.handle) == persistent,
            type(MPI.Request(persistent)) is MPI.Request and MPI.Request(persistent) == persistent,
        ]
        try:
            MPI.Grequest(persistent)
        except TypeError:
            same.append(True)
        persistent.Free()
        return same

    assert run(1, main).returns == [[True, True, True]]
    with pytest.raises(NotImplementedError, match="Grequest.Start"):
        MPI.Grequest.Start(None, None, None)


def test_comm_fromhandle_gives_the_communicator_s_own_class_back():
    def main():
        cart = MPI.COMM_WORLD.Create_cart([2], periods=[True])
        number = cart.handle
        plain = MPI.Comm(cart)  # a copy typed Comm, which asks for the number too
        kinds = [type(MPI.Comm.fromhandle(plain.handle)), type(MPI.Comm.f2py(number))]
        return kinds + [type(MPI.Comm.fromhandle(MPI.COMM_WORLD.handle))]

    assert run(2, main).returns[0] == [MPI.Cartcomm, MPI.Cartcomm, MPI.Intracomm]


@settings(deadline=None)
@given(number=st.integers(-(2**70), 2**70))
def test_fuzz_any_number_is_a_handle_an_error_code_or_refused_naming_it(number):
    for cls in (MPI.Comm, MPI.Datatype, MPI.Op, MPI.Errhandler):
        outcome = check_api(cls.fromhandle, number, bad=repr(number))
        assert outcome.error is not None or cls.fromhandle(number).handle == number
    for call in (MPI.Get_error_string, MPI.Get_error_class):  # (adding would change state)
        check_api(call, number, bad=repr(number))
    for call in (MPI.Remove_error_class, MPI.Remove_error_code, MPI.Remove_error_string):
        assert check_api(call, number, bad=repr(number)).error is not None  # nothing added


def test_a_probed_message_has_a_handle_its_copies_share_and_free_keeps_it():
    def main():
        comm = MPI.COMM_SELF
        request = comm.Isend(bytearray(b"ab"), 0, 3)
        message = comm.Mprobe(0, 3)
        copy = MPI.Message(message)
        same = MPI.Message.fromhandle(message.handle) == message == copy
        distinct = message.handle not in (MPI.MESSAGE_NULL.handle, MPI.MESSAGE_NO_PROC.handle)
        message.free()  # MPI frees no probed message: it stays to be received
        got = bytearray(2)
        copy.Recv(got)
        request.Wait()
        return same, distinct, bool(message), bytes(got)

    assert run(1, main).returns[0] == (True, True, True, b"ab")
    no_proc = MPI.Message(MPI.MESSAGE_NO_PROC)
    no_proc.free()
    assert no_proc == MPI.MESSAGE_NULL and MPI.MESSAGE_NO_PROC  # the constant stays
