"""Files a command writes or reads, checked before any work starts.

A ``--out`` into a missing folder used to fail with a traceback after the whole run; the
check names the flag, the path and the rule it broke.  (Input files are checked where
they are read: :func:`collsim.plan.load_config` takes only a bounded regular file.)
"""

import os
from pathlib import Path

from ..errors import ConfigError

__all__ = ["check_output_path"]


def check_output_path(path, flag="--out", suffixes=None):
    """Refuse an output file that cannot be written, before any expensive work starts.

    Returns the path as a :class:`~pathlib.Path`.  ``suffixes`` (like ``(".png", ".svg")``)
    limits the file types; the error names the flag, the path and the rule it broke.

    Examples
    --------
    >>> check_output_path("out.png", suffixes=(".png",)).name
    'out.png'
    >>> check_output_path("/no/such/folder/out.png")
    Traceback (most recent call last):
    ...
    collsim.errors.ConfigError: --out /no/such/folder/out.png: folder /no/such/folder does not ...
    """
    if path is None or str(path) == "":
        raise ConfigError(f"{flag} {path!r}: give a file name, like {flag} out.png")
    out = Path(path)
    if suffixes is not None and out.suffix.lower() not in suffixes:
        raise ConfigError(
            f"{flag} {path}: unknown file type {out.suffix or '(none)'!r}; "
            f"use one of {', '.join(suffixes)}"
        )
    if out.is_dir():
        raise ConfigError(f"{flag} {path}: is a folder; give a file name inside it")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.exists():
        # a path under a regular file also lands here or below: name the file in the way
        blocker = next((p for p in parent.parents if p.exists() and not p.is_dir()), None)
        if blocker is not None or (parent.exists() and not parent.is_dir()):
            raise ConfigError(f"{flag} {path}: {blocker or parent} is a file, not a folder")
        raise ConfigError(f"{flag} {path}: folder {parent} does not exist; create it first")
    if not parent.is_dir():
        raise ConfigError(f"{flag} {path}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"{flag} {path}: folder {parent} is not writable")
    return out
