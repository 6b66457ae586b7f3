"""A program's own subclasses of MPI's handle classes, as mpi4py lets them be written:
``__new__(cls, handle=None)`` hands ``super().__new__`` a handle of the base kind (often
another one than its caller gave: a Dup, a Create_cart), and the calls that make a new
handle of the same kind (Dup, Clone, Incl, Info.Dup ...) give the subclass back, where
mpi4py's do (checked against mpi4py 4.1.2 on Open MPI: Split, Create and Create_cart give
the base classes)."""

import pickle

import pytest

import collsim
from collsim import mpi as MPI


class MyComm(MPI.Comm):
    def __new__(cls, comm=None):
        if comm is not None and comm != MPI.COMM_NULL:
            comm = comm.Clone()
        return super().__new__(cls, comm)


class MyIntracomm(MPI.Intracomm):
    def __new__(cls, comm=None):
        if comm is not None and comm != MPI.COMM_NULL:
            comm = comm.Dup()
        return super().__new__(cls, comm)


class MyCartcomm(MPI.Cartcomm):
    def __new__(cls, comm=None):
        if comm is not None and comm != MPI.COMM_NULL:
            comm = comm.Create_cart([comm.size])
        return super().__new__(cls, comm)


class MyRequest(MPI.Request):
    def __new__(cls, request=None):
        return super().__new__(cls, request)

    def test(self):  # a program's own lowercase call, of another signature than mpi4py's
        return MPI.Request.Test(self)


class MyPrequest(MPI.Prequest):
    def __new__(cls, request=None):
        return super().__new__(cls, request)

    def wait(self):
        return MPI.Prequest.Wait(self)


class MyInfo(MPI.Info):
    def __new__(cls, info=None):
        return MPI.Info.__new__(cls, info)


class MyGroup(MPI.Group):
    pass


class MyOp(MPI.Op):
    def __new__(cls, op=None):
        return super().__new__(cls, op)


def _run(main, n):
    return collsim.exec(main, n=n).returns


@pytest.mark.parametrize("n", [1, 3])
def test_communicator_subclasses_take_the_handle_their_new_gives(n):
    def main():
        world = MPI.COMM_WORLD
        mine = MyIntracomm(world)  # a Dup of COMM_WORLD, as this __new__ says
        plain = MyComm(world)
        cart = MyCartcomm(world)
        made = {
            "intracomm": type(mine),
            "dup": type(mine.Dup()),
            "clone": type(mine.Clone()),
            "split": type(mine.Split(0, world.rank)),
            "comm clone": type(plain.Clone()),
            "cart": type(cart),
            "cart dup": type(cart.Dup()),
            "cart sub": type(cart.Sub([True])),
            "null": MyIntracomm() == MPI.COMM_NULL,
        }
        made["ident"] = mine.Compare(world)
        made["sum"] = mine.allreduce(world.rank) + plain.allreduce(1) + cart.allreduce(1)
        made["dims"] = cart.dims
        return made

    for made in _run(main, n):
        assert made["intracomm"] is made["dup"] is made["clone"] is MyIntracomm
        assert made["split"] is MPI.Intracomm  # Split makes an Intracomm, in mpi4py too
        assert made["comm clone"] is MyComm
        assert made["cart"] is made["cart dup"] is MyCartcomm
        assert made["cart sub"] is MPI.Cartcomm
        assert made["null"]
        assert made["ident"] == MPI.CONGRUENT  # a Dup: the same ranks, another context
        assert made["sum"] == n * (n - 1) // 2 + 2 * n
        assert made["dims"] == [n]


def test_a_topology_subclass_refuses_a_communicator_without_its_topology():
    class Bare(MPI.Cartcomm):
        pass

    def main():
        with pytest.raises(TypeError, match="expecting a topology communicator"):
            Bare(MPI.COMM_WORLD)
        graph = MPI.COMM_WORLD.Create_graph([1, 2], [1, 0])
        with pytest.raises(TypeError, match="expecting a Cartesian communicator"):
            Bare(graph)  # mpi4py's words, not the subclass's name
        return True

    assert _run(main, 2) == [True, True]


def test_request_subclasses_wrap_requests_and_keep_their_own_lowercase_calls():
    def main():
        comm = MPI.COMM_SELF
        done = MyRequest(comm.Isend([MPI.BOTTOM, 0, MPI.BYTE], dest=MPI.PROC_NULL, tag=0))
        first = (type(done), done.test(), done == MPI.REQUEST_NULL)
        persistent = MyPrequest(comm.Send_init([MPI.BOTTOM, 0, MPI.BYTE], MPI.PROC_NULL))
        rounds = []
        for _ in range(3):
            persistent.Start()
            rounds.append(persistent.wait())
        persistent.Free()
        return first, type(persistent), rounds, type(MyRequest(MPI.REQUEST_NULL))

    first, kind, rounds, null_kind = _run(main, 1)[0]
    assert first == (MyRequest, True, True)
    assert kind is MyPrequest and rounds == [True, True, True]
    assert null_kind is MyRequest


def test_info_group_and_op_subclasses_make_their_own_kind():
    info = MyInfo(MPI.Info.Create({"a": "1"}))
    assert [type(i) for i in (info, info.Dup(), info.copy(), MyInfo.Create())] == [MyInfo] * 4
    back = pickle.loads(pickle.dumps(info))
    assert type(back) is MyInfo and back.items() == [("a", "1")]
    with pytest.raises(NotImplementedError, match="Info.Create_env"):
        MyInfo.Create_env()
    group = MyGroup(MPI.Group((0, 1, 2)))
    assert [type(g) for g in (group.Dup(), group.Incl([0]), group.Union(group))] == [MyGroup] * 3
    op = MyOp.Create(lambda a, b, datatype: None, commute=True)
    assert type(op) is MyOp and type(MyOp(MPI.SUM)) is MyOp and MyOp(MPI.SUM) == MPI.SUM
    op.Free()


class MyMessage(MPI.Message):
    pass


@pytest.mark.parametrize("predefined", ["MESSAGE_NULL", "MESSAGE_NO_PROC"])
def test_a_copy_of_a_predefined_message_unpickles_as_its_own_class(predefined):
    # mpi4py's test_objmodel: pickle and copy of cls(obj) give a cls, not the base class
    mine = MyMessage(getattr(MPI, predefined))
    back = pickle.loads(pickle.dumps(mine))
    assert type(back) is MyMessage and back == mine and back is not mine


def test_a_message_subclass_probes_messages_of_its_own_class():
    import numpy as np

    def main():
        comm = MPI.COMM_WORLD
        if comm.rank == 0:
            comm.Send(np.arange(3.0), dest=1, tag=5)
            return None
        message = MyMessage.Probe(comm, source=0, tag=5)
        got = np.empty(3)
        kind = type(message)
        message.Recv(got)
        nothing = MyMessage.Iprobe(comm, source=0)
        no_proc = MyMessage.Probe(comm, source=MPI.PROC_NULL)
        return kind, got.tolist(), nothing, type(no_proc), no_proc == MPI.MESSAGE_NO_PROC

    assert _run(main, 2)[1] == (MyMessage, [0.0, 1.0, 2.0], None, MyMessage, True)


class MyStatus(MPI.Status):
    def __new__(cls, status=None):
        return super().__new__(cls, status)


def test_a_status_subclass_copies_the_status_its_new_gives():
    import copy

    status = MPI.Status()
    status.source, status.tag = 3, 7
    mine = MyStatus(status)
    assert (type(mine), mine.source, mine.tag) == (MyStatus, 3, 7)
    assert MyStatus().source == MPI.ANY_SOURCE
    twin = copy.copy(mine)
    assert (type(twin), twin.tag) == (MyStatus, 7)
    assert type(pickle.loads(pickle.dumps(mine))) is MyStatus
