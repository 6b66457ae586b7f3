"""What travels: pickled objects as uint8 arrays, and buffers checked as they land.

The lowercase calls pickle their object (with the highest protocol, as mpi4py does) into
a uint8 array, so the bytes the simulator counts and times are the pickle's.  A buffer
receive (``Recv``, ``Irecv``) copies the message into the user's buffer once it has
arrived, refusing a message of another datatype or one longer than the buffer (MPI's
``MPI_ERR_TRUNCATE``); a shorter one fills the front, and its Status says how much came.

Examples
--------
>>> import numpy as np
>>> from .specs import buffer_of
>>> unpickle(pickled({"a": [1, 2]}), "recv")
{'a': [1, 2]}
>>> out = np.zeros(4)
>>> land(buffer_of(out, "Recv(buf=...)"), np.arange(3.0), "Recv", "rank 1 (tag 0)")
>>> out.tolist()
[0.0, 1.0, 2.0, 0.0]
"""

from typing import NamedTuple

import numpy as np

from ..errors import ConfigError, shorten
from . import rc
from .datatypes import BYTE, datatype_of
from .exceptions import ERR_TRUNCATE, ERR_TYPE, mpi_error

__all__ = ["pickled", "unpickle", "land", "MessageTag", "CollectiveTag"]


class MessageTag(NamedTuple):
    """The runtime tag of a point-to-point message: its communicator's context id and the
    user's tag (a tuple, so ``TagPrefix((context,))`` is that communicator's ANY_TAG).

    >>> MessageTag(0, 5), MessageTag(0, 5).to_args()
    (MPI tag 5 (communicator 0), {'mpi_context': 0, 'mpi_tag': 5})
    """

    context: int
    tag: int

    def __repr__(self):
        return f"MPI tag {self.tag} (communicator {self.context})"

    def to_args(self):
        """The fields for the Chrome/Perfetto export's ``args``."""
        return {"mpi_context": self.context, "mpi_tag": self.tag}


class CollectiveTag(NamedTuple):
    """The runtime tag of a message of a collective that runs over point-to-point: the
    communicator's collective context id, the call's number there and the call."""

    context: int
    call: int
    name: str

    def __repr__(self):
        return f"MPI {self.name} call #{self.call} (communicator {self.context})"

    def to_args(self):
        return {"mpi_context": self.context, "mpi_call": self.call, "mpi_collective": self.name}


def pickled(obj, call="send"):
    """``obj`` pickled into a read-only uint8 array (what a lowercase call sends)."""
    try:
        data = rc.dumps(obj)  # MPI.pickle's functions and protocol, the rank's
    except Exception as exc:  # pickling runs the object's own code: anything may fail
        raise ConfigError(
            f"{call}: {shorten(obj)} (a {type(obj).__name__}) cannot be pickled ({exc}): the "
            "lowercase calls send picklable objects (mpi4py raises the pickling error)"
        ) from None
    return np.frombuffer(data, dtype=np.uint8)


def unpickle(value, call="recv"):
    """The object a lowercase send pickled into ``value`` (the bytes of any message: a
    ``Send`` of a pickle's bytes reads as that object, an empty one as None)."""
    if not isinstance(value, np.ndarray):
        raise mpi_error(ERR_TYPE, f"{call} received {value!r}, which is not a message")
    if value.size == 0:  # an empty message (a Send of no bytes): None, as in mpi4py
        return None
    try:
        return rc.loads(value.reshape(-1).view(np.uint8).tobytes())
    except Exception as exc:
        what = (
            f"{value.size} bytes that are not a pickle ({exc})"
            if value.dtype == np.uint8
            else f"a {value.dtype} buffer of {value.size} elements"
        )
        raise mpi_error(
            ERR_TYPE,
            f"{call} received {what}, sent with an uppercase call (Send, Isend): receive "
            "buffers with Recv into an array",
        ) from None


def land(buffer, value, call, origin):
    """Copy the arrived message ``value`` into ``buffer``; ``origin`` says whence."""
    if (
        buffer.datatype != BYTE
        and value.size
        and value.dtype.itemsize != buffer.data.dtype.itemsize
    ):
        sent = datatype_of(value.dtype)
        sent = repr(sent) if sent is not None else str(value.dtype)
        raise mpi_error(
            ERR_TYPE,
            f"{call}: a {sent} message ({value.dtype}) from {origin} arrived in a "
            f"{buffer.datatype!r} buffer: sender and receiver must use one datatype "
            f"(receive into a {value.dtype} array, or with MPI.BYTE)",
        )
    data = value.reshape(-1)
    if buffer.datatype == BYTE or buffer.data.dtype == np.uint8:
        data = data.view(np.uint8)
    elif data.dtype != buffer.data.dtype:  # same size (BYTE and SIGNED_CHAR), or empty
        data = data.view(np.uint8).view(buffer.data.dtype)
    if data.size > buffer.count:
        raise mpi_error(
            ERR_TRUNCATE,
            f"{call}: the message of {data.size} {buffer.datatype!r} elements "
            f"({value.nbytes} bytes) from {origin} is longer than the receive buffer of "
            f"{buffer.count}: give a buffer of at least {data.size}",
        )
    buffer.data[: data.size] = data
    buffer.store()
