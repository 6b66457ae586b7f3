"""``mpi4py.run`` (and ``mpi4py.__main__``) under ``collsim exec``: ``python -m mpi4py
script.py`` runs a script under a real launcher and aborts every process when one
raises.  ``collsim exec -n K script.py`` is that launcher here and already ends every rank
when one raises, so the module is there (a program may import it) and its calls refuse at
once, naming the command that does what they would.

Examples
--------
>>> main()
Traceback (most recent call last):
...
NotImplementedError: mpi4py.run.main: ...collsim exec -n K script.py...
"""

__all__ = ["main", "run_command_line", "set_abort_status"]


def _refuse(call):
    raise NotImplementedError(
        f"mpi4py.run.{call}: `python -m mpi4py` runs a script under a real MPI launcher; "
        "under collsim run the script itself, `collsim exec -n K script.py` (a rank that "
        "raises ends the run, as mpi4py.run's abort does)"
    )


def main():
    _refuse("main")


def run_command_line(args=None):
    _refuse("run_command_line")


def set_abort_status(status):
    _refuse("set_abort_status")
