"""Where in the user's code a rank is: the line of its blocking call, or the line it runs.

Frames inside collsim, torch (where it is imported) and the standard library's thread
primitives (``threading``, ``queue``, ``concurrent.futures``) are not the user's: an
``Event.wait()`` is reported at the user's line that called it, not at threading.py's.
"""

import concurrent.futures
import queue
import sys
import threading
from pathlib import Path

__all__ = ["callsite", "user_frame"]

_HERE = str(Path(__file__).resolve().parents[2])  # collsim/: frames inside it are not the user's
_STDLIB = (
    threading.__file__,
    queue.__file__,
    str(Path(concurrent.futures.__file__).parent),
)


def callsite():
    """``"ring.py:12 in main"`` of the first frame outside collsim: the user's call."""
    return user_frame(sys._getframe(2))


def user_frame(frame):
    """``"ring.py:12 in main"`` of ``frame`` or the first frame it was called from that is
    outside collsim, torch and the thread primitives (None if there is none)."""
    libraries = (_HERE, *_STDLIB, *_torch_folder())
    while frame is not None and frame.f_code.co_filename.startswith(libraries):
        frame = frame.f_back
    if frame is None:
        return None
    return f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno} in {frame.f_code.co_name}"


def _torch_folder():
    """torch's folder where torch is imported: a torch.distributed call's line is the
    script's that made it, not torch's inside it (torch is never imported here)."""
    torch = sys.modules.get("torch")
    found = getattr(torch, "__file__", None)
    return (str(Path(found).parent),) if found else ()
