"""Is this address range memory the host can read?  Asked before collsim reads a pointer
that an object says lives on a device (``__cuda_array_interface__``, a DLPack tensor of a
GPU), because collsim simulates GPUs on host memory.

An object that only says "GPU" while its memory is the host's (a test double, collsim's own
simulated devices) is read as it is.  A real GPU's pointer is not mapped readable in this
process, and reading it would end the process with a segmentation fault rather than an
error; it is refused with a BufferError that says what to pass instead.  The readable
ranges come from Linux's ``/proc/self/maps``; where there is none (macOS, Windows) device
memory is refused, as it cannot be checked.

Examples
--------
>>> import numpy as np
>>> x = np.zeros(4)
>>> readable(x.ctypes.data, x.nbytes)
True
>>> readable(8, 8)          # the first page is never mapped
False
"""

from pathlib import Path

from .exceptions import buffer_error

__all__ = ["readable", "check_host_memory"]

_MAPS = Path("/proc/self/maps")


def _readable_ranges():
    """``[(start, end), ...]`` of this process's mappings it may read, in address order
    (None where the system does not list them)."""
    try:
        lines = _MAPS.read_text().splitlines()
    except OSError:
        return None
    ranges = []
    for line in lines:
        span, perms = line.split()[:2]
        if perms.startswith("r"):
            start, end = (int(part, 16) for part in span.split("-"))
            ranges.append((start, end))
    return ranges


def readable(address, nbytes):
    """Whether ``nbytes`` bytes from ``address`` lie in readable mappings of this process
    (read fresh each call: mappings change as memory is allocated and freed)."""
    if nbytes <= 0:
        return True
    ranges = _readable_ranges()
    if ranges is None:
        return False
    want, end = address, address + nbytes
    for start, stop in ranges:  # adjacent mappings may hold one buffer between them
        if start <= want < stop:
            want = stop
            if want >= end:
                return True
    return False


def check_host_memory(address, nbytes, what):
    """Refuse device memory the host cannot read (a real GPU's), naming ``what``."""
    if not readable(address, nbytes):
        raise buffer_error(
            f"{what}: the {nbytes} bytes at {address:#x} are not memory this process can read "
            "(a real GPU's?): collsim simulates GPUs on host memory, so pass host arrays "
            "(numpy; cupy.asnumpy(x), tensor.cpu())"
        )
