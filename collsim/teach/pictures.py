"""A lesson's pictures: shown in the notebook under a Jupyter kernel, saved as PNG in a script.

Examples
--------
>>> import os, tempfile
>>> from matplotlib.figure import Figure
>>> os.environ["COLLSIM_LESSON_OUT"] = tempfile.mkdtemp()
>>> fig = Figure(figsize=(1, 1))
>>> show(fig, "empty").name      # doctest: +ELLIPSIS
[picture saved: ...empty.png]
'empty.png'
"""

import os
from pathlib import Path

from .messages import message
from .slots import lesson_language

__all__ = ["show"]


def show(fig, name):
    """Display a figure in a notebook; in a script, save it as PNG and print the path.

    Pictures go to ``$COLLSIM_LESSON_OUT`` (default ``./collsim-lesson-pictures``).
    """
    if _in_kernel():
        # as PNG bytes, not display(fig): a Figure shows as an image only under Jupyter's
        # own matplotlib backend, and MPLBACKEND=Agg (set by `collsim lesson`, CI, a
        # terminal) turns it into the text "<Figure size 1020x850 with 2 Axes>"; this needs
        # no setup cell
        import io

        from IPython.display import Image, display

        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=100)
        _close(fig)
        display(Image(data=png.getvalue(), format="png"))
        return None
    folder = Path(os.environ.get("COLLSIM_LESSON_OUT", "collsim-lesson-pictures"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    fig.savefig(path, dpi=100)
    _close(fig)
    print(message("picture_saved", lesson_language(), path=path))
    return path


def _in_kernel():
    """True inside a Jupyter kernel (IPython's kernel app), where a picture is displayed."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in shell.config


def _close(fig):
    import matplotlib.pyplot as plt

    plt.close(fig)
