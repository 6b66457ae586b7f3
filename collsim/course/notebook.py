"""A lesson as a Jupyter notebook, converted from its percent-format file by jupytext.

jupytext, ipykernel and nbclient are the optional extra ``collsim[notebook]``; without
them the conversion is refused with the command that installs them.  The notebook needs no
setup cell for its pictures: ``collsim.teach.show`` sees the IPython kernel and displays
each figure as a PNG whatever matplotlib's backend is.
"""

from pathlib import Path

from ..errors import ConfigError
from .catalog import read_lesson

__all__ = ["INSTALL", "notebook_path", "write_notebook"]

INSTALL = "pip install 'collsim[notebook]'"
KERNEL = {"name": "python3", "display_name": "Python 3", "language": "python"}


def _jupytext():
    try:
        import jupytext
    except ImportError:
        raise ConfigError(
            f"--notebook needs jupytext (with ipykernel to run it): {INSTALL}"
        ) from None
    return jupytext


def notebook_path(lesson):
    """Where the notebook of the lesson file ``lesson`` goes: beside it, ``.ipynb``."""
    return Path(lesson).with_suffix(".ipynb")


def write_notebook(lesson, target=None):
    """Write the lesson file ``lesson`` as a notebook; returns its path.

    An existing notebook is the student's work (answers typed in Jupyter): it is refused,
    never overwritten.
    """
    jupytext = _jupytext()
    target = Path(target) if target else notebook_path(lesson)
    if target.exists():
        raise ConfigError(
            f"{target} exists and may hold your answers: open it in Jupyter, or move it "
            "away to write a fresh one from the lesson file"
        )
    notebook = jupytext.reads(read_lesson(lesson), fmt="py:percent")
    notebook.metadata["kernelspec"] = dict(KERNEL)
    notebook.metadata.pop("jupytext", None)  # a plain notebook, not paired with the .py
    try:
        jupytext.write(notebook, target, fmt="ipynb")
    except OSError as exc:
        raise ConfigError(f"{target}: cannot write the notebook ({exc.strerror})") from None
    return target
