"""Without torch, `collsim exec` of a torch.distributed script is refused before the run
(exit 2) with the command that installs it; scripts that do not import torch run as before.
Runs whether or not torch is installed: the subprocess hides it."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parent / "data" / "torch_programs" / "every_call.py"
# `import torch` fails and torch cannot be found, as where it was never installed
WITHOUT_TORCH = "import sys; sys.modules['torch'] = None; from collsim.cli import main; "


def collsim_exec_without_torch(script):
    code = WITHOUT_TORCH + f"sys.exit(main(['exec', '-n', '2', {str(script)!r}]))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_a_torch_script_without_torch_says_how_to_install_it_and_exits_2():
    done = collsim_exec_without_torch(SCRIPT)
    assert done.returncode == 2, done.stderr
    assert "imports torch, which is not installed" in done.stderr
    assert "pip install 'collsim[torch]'" in done.stderr
    assert "every_call.py" in done.stderr
    assert done.stdout == ""  # refused before any rank ran


def test_a_script_without_torch_still_runs_where_torch_is_missing(tmp_path):
    script = tmp_path / "hello.py"
    script.write_text("from mpi4py import MPI\nprint(MPI.COMM_WORLD.Get_rank())\n")
    done = collsim_exec_without_torch(script)
    assert done.returncode == 0, done.stderr
    assert "[1,1]<stdout>:1" in done.stdout
