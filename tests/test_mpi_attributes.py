"""MPI attribute caching as MPI-3.1 section 6.7 defines it and mpi4py exposes it (the
oracle: the standard's rules, and mpi4py's reading of ``copy_fn``: None/False no copy,
True the same object, a function's result, NotImplemented no copy): keys of
``Comm``/``Datatype``, values per rank, copy callbacks on ``Dup``, delete callbacks on
``Delete_attr``/``Free``/a new ``Set_attr``/``Finalize`` (``COMM_SELF``'s), callback
failures as ``MPI.ERR_OTHER``, bad keys as ``MPI.ERR_KEYVAL``, the predefined keys still
read, and ``Win`` refused."""

import pytest
from fuzzkit import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

import collsim
from collsim import mpi as MPI
from collsim.runtime import blocking


def run(k, main):
    return blocking.run(collsim.Cluster(collsim.topology.ring(k)), main).returns


def comm():
    return MPI.COMM_WORLD.Dup()


def datatype():
    return MPI.INT.Dup()


MAKERS = {"Comm": comm, "Datatype": datatype}


@settings(max_examples=5, deadline=None)
@given(k=st.integers(1, 4))
def test_each_rank_keeps_its_own_value_on_the_shared_comm_world(k):
    def main():
        key = MPI.Comm.Create_keyval()
        assert key != MPI.KEYVAL_INVALID
        world = MPI.COMM_WORLD
        before = world.Get_attr(key)
        world.Set_attr(key, [world.rank])
        return before, key, world.Get_attr(key)

    returns = run(k, main)
    assert [r[0] for r in returns] == [None] * k
    assert [r[2] for r in returns] == [[r] for r in range(k)]
    assert len({r[1] for r in returns}) == 1  # every rank numbers its keys alike


@pytest.mark.parametrize("kind", MAKERS)
@pytest.mark.parametrize(
    "copy_fn, copied",
    [(None, "none"), (False, "none"), (True, "same"), (lambda o, k, v: v + ["c"], "new")],
)
def test_dup_copies_as_the_keys_copy_fn_says(kind, copy_fn, copied):
    def main():
        obj = MAKERS[kind]()
        key = type(obj).Create_keyval(copy_fn, None)
        value = ["v"]
        obj.Set_attr(key, value)
        assert obj.Get_attr(key) is value
        got = obj.Dup().Get_attr(key)
        obj.Delete_attr(key)
        assert obj.Get_attr(key) is None
        return got, value

    got, value = run(2, main)[0]
    expected = {"none": None, "same": value, "new": ["v", "c"]}[copied]
    assert got == expected and (copied != "same" or got is value)


@pytest.mark.parametrize("kind", MAKERS)
def test_a_copy_fn_sees_the_old_object_and_notimplemented_means_no_copy(kind):
    def main():
        obj, seen = MAKERS[kind](), []

        def copy_fn(handle, keyval, value):
            seen.append((handle == obj, bool(handle), keyval, value, handle))
            return NotImplemented

        key = type(obj).Create_keyval(copy_fn)
        obj.Set_attr(key, "value")
        dup = obj.Dup()
        same, alive, keyval, value, handle = seen[0]
        return dup.Get_attr(key), (same, alive, keyval == key, value), bool(handle)

    got, seen_in_call, alive_after = run(1, main)[0]
    assert got is None
    assert seen_in_call == (True, True, True, "value")
    assert not alive_after  # the handle passed in is null after the call, as in mpi4py


@pytest.mark.parametrize("kind", MAKERS)
def test_delete_fn_runs_on_delete_attr_on_free_and_when_a_value_is_replaced(kind):
    def main():
        obj, deleted = MAKERS[kind](), []
        key = type(obj).Create_keyval(None, lambda o, k, v: deleted.append(v))
        obj.Set_attr(key, "first")
        obj.Set_attr(key, "second")  # the old value goes first
        obj.Delete_attr(key)
        obj.Set_attr(key, "third")
        obj.Free()
        return deleted

    assert run(1, main)[0] == ["first", "second", "third"]


@pytest.mark.parametrize("kind", MAKERS)
def test_the_copy_delete_pair_dups_and_frees_values_that_are_handles(kind):
    # mpi4py's own pattern: the value is a handle, duplicated with its object and freed
    def main():
        obj = MAKERS[kind]()
        cls = type(obj)
        key = cls.Create_keyval(lambda o, k, v: cls.Dup(v), lambda o, k, v: cls.Free(v))
        first = obj.Dup()
        obj.Set_attr(key, first)
        copy = obj.Dup()
        second = copy.Get_attr(key)
        distinct = second != first and bool(second)
        copy.Free()
        freed_with_copy = not second
        obj.Delete_attr(key)
        return distinct, freed_with_copy, not first

    assert run(2, main) == [(True, True, True)] * 2


@pytest.mark.parametrize("kind", MAKERS)
def test_nopython_values_are_c_pointers(kind):
    def main():
        obj = MAKERS[kind]()
        key = type(obj).Create_keyval(True, None, nopython=True)
        obj.Set_attr(key, -1)
        read = obj.Get_attr(key), obj.Dup().Get_attr(key)
        with pytest.raises(TypeError, match="'text'.*int"):
            obj.Set_attr(key, "text")
        return read

    assert run(1, main)[0] == (2**64 - 1, 2**64 - 1)


@pytest.mark.parametrize("kind", MAKERS)
def test_a_delete_fn_that_raises_fails_the_call_with_err_other(kind, capfd):
    def main():
        obj = MAKERS[kind]()

        def delete_fn(o, k, v):
            raise ValueError("bad delete")

        key = type(obj).Create_keyval(None, delete_fn)
        obj.Set_attr(key, "value")
        with pytest.raises(MPI.Exception) as raised:
            obj.Delete_attr(key)
        return raised.value.Get_error_class(), obj.Get_attr(key)

    assert run(1, main)[0] == (MPI.ERR_OTHER, None)  # the value is gone all the same
    assert "ValueError: bad delete" in capfd.readouterr().err


def test_a_copy_fn_that_raises_fails_the_dup_with_err_other(capfd):
    def main():
        obj, deleted = datatype(), []
        good = MPI.Datatype.Create_keyval(True, lambda o, k, v: deleted.append(v))
        bad = MPI.Datatype.Create_keyval(lambda o, k, v: 1 / 0)
        obj.Set_attr(good, "kept")
        obj.Set_attr(bad, "value")
        with pytest.raises(MPI.Exception) as raised:
            obj.Dup()
        return raised.value.Get_error_class(), deleted

    # the half-made copy's values are deleted again
    assert run(1, main)[0] == (MPI.ERR_OTHER, ["kept"])
    assert "ZeroDivisionError" in capfd.readouterr().err


def test_bad_keys_are_err_keyval_naming_the_key_and_the_rule():
    def main():
        world, key = MPI.COMM_WORLD, MPI.Comm.Create_keyval()
        refusals = []
        for call, rule in (
            (lambda: world.Get_attr(999), r"Comm.Get_attr\(999\): not a key of Comm"),
            (lambda: MPI.INT.Get_attr(MPI.KEYVAL_INVALID), r"Datatype.Get_attr\(-1\): not a"),
            (lambda: MPI.INT.Set_attr(key, 1), r"Datatype.Set_attr\(16\): not a key of"),
            (lambda: world.Set_attr(MPI.TAG_UB, 1), r"TAG_UB|predefined key"),
            (lambda: world.Delete_attr(MPI.TAG_UB), "predefined key"),
            (lambda: MPI.Comm.Free_keyval(MPI.TAG_UB), "predefined key"),
            (lambda: world.Delete_attr(key), "no value is set"),
        ):
            with pytest.raises(MPI.Exception, match=rule) as raised:
                call()
            refusals.append(raised.value.Get_error_class())
        return refusals

    assert run(1, main)[0] == [MPI.ERR_KEYVAL] * 7


def test_free_keyval_keeps_values_already_set_and_refuses_new_ones():
    def main():
        obj, deleted = comm(), []
        key = MPI.Comm.Create_keyval(True, lambda o, k, v: deleted.append(v))
        obj.Set_attr(key, "old")
        assert MPI.Comm.Free_keyval(key) == MPI.KEYVAL_INVALID
        kept = obj.Get_attr(key), obj.Dup().Get_attr(key)
        with pytest.raises(MPI.Exception, match="freed"):
            obj.Set_attr(key, "new")
        obj.Free()
        return kept, deleted

    assert run(1, main)[0] == (("old", "old"), ["old"])


def test_the_predefined_keys_still_read():
    def main():
        world = MPI.COMM_WORLD
        return world.Get_attr(MPI.TAG_UB), world.Get_attr(MPI.HOST)

    tag_ub, host = run(2, main)[0]
    assert tag_ub >= 32767 and host is None  # MPI's minimum for TAG_UB


def test_keys_die_with_their_run():
    key = run(1, lambda: MPI.Comm.Create_keyval())[0]

    def main():
        with pytest.raises(MPI.Exception, match="not a key"):
            MPI.COMM_WORLD.Get_attr(key)
        return True

    assert run(1, main) == [True]


def test_a_topology_made_from_a_comm_does_not_copy_its_attributes():
    # MPI copies attributes on Dup only (a Cartesian or graph communicator starts bare)
    def main():
        world = MPI.COMM_WORLD
        key = MPI.Comm.Create_keyval(True)
        world.Set_attr(key, "kept")
        graph = world.Create_dist_graph_adjacent([], [])
        return graph.Get_attr(key), world.Dup().Get_attr(key)

    assert run(2, main) == [(None, "kept")] * 2


@pytest.mark.parametrize("kind", MAKERS)
@pytest.mark.parametrize("argument", ["copy_fn", "delete_fn"])
def test_a_callback_that_cannot_be_called_is_refused_when_the_key_is_made(kind, argument):
    with pytest.raises(TypeError, match=rf"{kind}.Create_keyval\({argument}=5\): give a func"):
        getattr(MPI, kind).Create_keyval(**{argument: 5})


def test_win_keys_are_refused_naming_win():
    with pytest.raises(NotImplementedError, match=r"MPI\.Win\.Create_keyval: one-sided"):
        MPI.Win.Create_keyval()


def exec_lines(tmp_path, source, n=2):
    """Each rank's printed lines when ``collsim exec -n n`` runs ``source``."""
    program = tmp_path / "program.py"
    program.write_text(source)
    outcome = run_cli(["exec", "-n", str(n), str(program)], timeout=120)
    assert outcome.status == 0, outcome.stderr
    out = outcome.stdout.splitlines()
    return [
        [line.split(":", 1)[1] for line in out if line.startswith(f"[1,{r}]<stdout>:")]
        for r in range(n)
    ]


def test_an_mpi4py_program_caches_attributes_under_collsim_exec(tmp_path):
    source = (
        "from mpi4py import MPI\n"
        "key = MPI.Comm.Create_keyval(copy_fn=True)\n"
        "comm = MPI.COMM_WORLD.Dup()\n"
        "comm.Set_attr(key, {'rank': comm.rank})\n"
        "print(comm.Dup().Get_attr(key)['rank'], MPI.Comm.Free_keyval(key))\n"
    )
    assert exec_lines(tmp_path, source) == [["0 -1"], ["1 -1"]]


def test_finalize_deletes_comm_selfs_attributes_first(tmp_path):
    # MPI-3.1 section 8.7.1: Finalize frees COMM_SELF's attributes before anything else,
    # so a delete callback there is a library's last word
    source = (
        "from mpi4py import MPI\n"
        "key = MPI.Comm.Create_keyval(delete_fn=lambda comm, k, v: print('cleanup', v))\n"
        "MPI.COMM_SELF.Set_attr(key, MPI.COMM_WORLD.rank)\n"
        "MPI.Finalize()\n"
        "print('finalized', MPI.Is_finalized())\n"
    )
    assert exec_lines(tmp_path, source) == [
        [f"cleanup {rank}", "finalized True"] for rank in (0, 1)
    ]
