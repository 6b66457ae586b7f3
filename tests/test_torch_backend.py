"""The collsim torch.distributed backend (issue 29, item 3): unmodified torch.distributed
scripts under `collsim exec` print what real gloo prints for them, their traffic is
collsim's (time, bytes, trace, byte-identical run to run), and what it does not run is
refused by name.

The reference is torch's own gloo backend: the same file run as K processes with
torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).  torch is imported
once for the module (a few seconds); these tests skip where it is not installed.
"""

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch", reason="pip install 'collsim[torch]'")
dist = pytest.importorskip("torch.distributed", reason="pip install 'collsim[torch]'")

import collsim  # noqa: E402
from collsim.cli import main as cli  # noqa: E402

ROOT = Path(__file__).parents[1]
EVERY_CALL = ROOT / "tests" / "data" / "torch_programs" / "every_call.py"
DDP_EXAMPLE = ROOT / "examples" / "torch_ddp_by_hand.py"
FUTURES = ROOT / "tests" / "data" / "torch_programs" / "futures.py"
DDP_MODULE = ROOT / "tests" / "data" / "torch_programs" / "ddp_module.py"
TAGGED = re.compile(r"^\[1,(\d+)\]<stdout>:(.*)$")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def under_gloo(script, k):
    """Each rank's stdout lines of ``script`` run as ``k`` gloo processes."""
    port = free_port()
    procs = [
        subprocess.Popen(
            [sys.executable, str(script)],
            env=dict(
                os.environ,
                RANK=str(r),
                LOCAL_RANK=str(r),
                WORLD_SIZE=str(k),
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(port),
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(k)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    return [out.splitlines() for out, _ in outs]


def under_collsim(capsys, *args):
    """``(exit status, each rank's stdout lines, stderr)`` of ``collsim exec *args``."""
    status = cli(["exec", *map(str, args)])
    captured = capsys.readouterr()
    lines = {}
    for line in captured.out.splitlines():
        m = TAGGED.match(line)
        if m:
            lines.setdefault(int(m.group(1)), []).append(m.group(2))
    return status, [lines.get(r, []) for r in range(len(lines))], captured.err


def same_as_gloo(capsys, program, k):
    """``(each rank's lines, collsim's stderr)`` of ``program`` under ``collsim exec -n k``,
    checked equal to gloo's."""
    expected = under_gloo(program, k)
    status, got, err = under_collsim(capsys, "-n", k, program)
    assert status == 0, err
    assert got == expected
    return got, err


@pytest.mark.parametrize("k", [3, 4])
def test_every_call_prints_what_gloo_prints(capsys, k):
    got, err = same_as_gloo(capsys, EVERY_CALL, k)
    assert any("device mesh dp" in line for line in got[0])  # the whole script ran
    assert re.search(r"simulated time \d+ us; bytes sent [\d.]+ KiB", err)


@pytest.mark.parametrize("program", [EVERY_CALL, DDP_MODULE], ids=lambda p: p.stem)
def test_a_run_twice_writes_byte_identical_traces(capsys, tmp_path, program):
    traces = []
    for name in ("first.json", "second.json"):
        status, got, err = under_collsim(capsys, "-n", 4, "--trace", tmp_path / name, program)
        assert status == 0, err
        traces.append((tmp_path / name).read_bytes())
    assert traces[0] == traces[1]
    assert b'"all_reduce' in traces[0]  # the collectives' transfers are in it


def test_the_ddp_example_matches_one_process_training_alone(capsys):
    status, got, err = under_collsim(capsys, "-n", 4, DDP_EXAMPLE)
    assert status == 0, err
    assert len(got) == 4 and all(len(lines) >= 4 for lines in got)
    gap = float(got[0][-1].rsplit(": ", 1)[1])
    assert gap < 1e-12
    assert "bytes sent" in err


def test_init_process_group_collsim_async_op_and_refusals():
    def main():
        dist.init_process_group("collsim")
        t = torch.full((4,), float(dist.get_rank()))
        work = dist.all_reduce(t, async_op=True)
        before = t.tolist()  # not yet: the all-reduce runs in simulated time
        future = dist.all_reduce(torch.ones(2), async_op=True).get_future()
        done = future.done()  # get_future waited for it: torch's C++ may wait on it
        work.wait()
        backend = dist.get_backend()
        value = future.value()[0].tolist()
        dist.destroy_process_group()
        return before, t.tolist(), work.is_completed(), backend, (done, value)

    result = collsim.exec(main, n=2, echo=False)
    before, after, completed, backend, future = result.returns[1]
    assert before == [1.0] * 4 and after == [1.0] * 4 and completed
    assert backend == "collsim"
    assert future == (True, [2.0, 2.0])
    assert result.time > 0 and result.trace.transfer_count > 0


@pytest.mark.parametrize("k", [2, 3])
def test_torchs_own_ddp_trains_as_under_gloo(capsys, k):
    # its reducer waits on the buckets' futures in C++: a pending future hung the run
    got, _ = same_as_gloo(capsys, DDP_MODULE, k)
    assert [line.split(":")[0] for line in got[0]] == [
        "step 1 gradients",
        "step 2 gradients",
        "weights",
    ]


@pytest.mark.parametrize("k", [2, 3])
def test_work_futures_give_what_gloos_give(capsys, k):
    got, _ = same_as_gloo(capsys, FUTURES, k)
    assert got[0][0] == f"all_reduce: list [{[i * k * (k + 1) // 2 for i in range(3)]}] done=True"


def test_an_unsupported_dtype_is_refused_naming_it():
    def main():
        dist.init_process_group()
        dist.all_reduce(torch.ones(2, dtype=torch.bfloat16))

    with pytest.raises(collsim.launch.RankError) as caught:
        collsim.exec(main, n=2, echo=False)
    assert isinstance(caught.value.error, TypeError)
    assert "torch.bfloat16" in str(caught.value) and "torch.float32" in str(caught.value)


def test_torch_is_as_it_was_after_a_run():
    before = dist.distributed_c10d._world, dist.init_process_group, sys.excepthook

    def main():
        dist.init_process_group()
        dist.barrier()

    collsim.exec(main, n=2, echo=False)
    assert (dist.distributed_c10d._world, dist.init_process_group, sys.excepthook) == before
    assert not dist.is_initialized()  # the main thread never joined a group


@given(
    k=st.integers(1, 5),
    rows=st.integers(0, 3),
    dtype=st.sampled_from(["int64", "int32", "uint8", "float64"]),
    seed=st.integers(0, 99),
)
def test_torch_collectives_equal_numpy_for_any_world(k, rows, dtype, seed):
    rng = np.random.default_rng(seed)
    xs = [rng.integers(0, 50, (k * rows, 2)).astype(dtype) for _ in range(k)]

    def main():
        dist.init_process_group()
        r = dist.get_rank()
        summed = torch.from_numpy(xs[r].copy())
        dist.all_reduce(summed)
        gathered = torch.zeros((k * k * rows, 2), dtype=summed.dtype)
        dist.all_gather_into_tensor(gathered, torch.from_numpy(xs[r]))
        scattered = torch.zeros((rows, 2), dtype=summed.dtype)
        dist.reduce_scatter_tensor(scattered, torch.from_numpy(xs[r].copy()))
        dist.destroy_process_group()
        return summed.numpy(), gathered.numpy(), scattered.numpy()

    total = np.add.reduce(np.stack(xs), axis=0, dtype=np.dtype(dtype))  # wraps as uint8 does
    for r, (summed, gathered, scattered) in enumerate(collsim.exec(main, n=k, echo=False).returns):
        np.testing.assert_array_equal(summed, total)
        np.testing.assert_array_equal(gathered, np.concatenate(xs))
        np.testing.assert_array_equal(scattered, total[r * rows : (r + 1) * rows])


def test_a_torch_program_that_would_hang_names_the_scripts_lines(capsys, tmp_path):
    script = tmp_path / "both_send.py"
    script.write_text(
        "import torch\nimport torch.distributed as dist\ndist.init_process_group()\n"
        "dist.send(torch.ones(2), dst=1 - dist.get_rank())\n"
    )
    status, _, err = under_collsim(capsys, "-n", 2, script)
    assert status == 1  # gloo hangs here for ever
    assert "would hang forever" in err
    assert err.count("called at both_send.py:4 in <module>") == 2  # the script's, not torch's
