"""``MPI.Pickle``: how an object becomes bytes, in one stream or with out-of-band buffers.

``dumps_oob`` pickles with protocol 5 (PEP 574, whatever ``PROTOCOL`` says: out-of-band
buffers exist only there) and hands every contiguous buffer of at least ``THRESHOLD``
bytes (a numpy array's memory) out of the stream, uncopied, as a ``memoryview`` of bytes;
smaller ones stay in the stream.  ``mpi4py.util.pkl5`` sends the stream and each buffer as
messages of their own, so a large array travels as itself, not inside a pickle.

Examples
--------
>>> import numpy as np
>>> p = Pickle()
>>> p.THRESHOLD = 1024
>>> data, bufs = p.dumps_oob({"w": np.zeros(1000), "b": np.zeros(4)})
>>> [b.nbytes for b in bufs]                  # the 8000-byte array, not the 32-byte one
[8000]
>>> p.loads_oob(data, bufs)["w"].shape
(1000,)
"""

import pickle as _pickle

__all__ = ["Pickle", "DEFAULT_THRESHOLD"]

DEFAULT_THRESHOLD = 256 * 1024  # mpi4py's MPI4PY_PICKLE_THRESHOLD default, in bytes


class Pickle:
    """Pickles objects; ``Pickle(other)`` starts with ``other``'s settings.  ``PROTOCOL``
    None reads as the highest protocol, ``THRESHOLD`` None as 256 KiB (mpi4py's
    defaults); a negative protocol means the highest, as for :func:`pickle.dumps`."""

    def __init__(self, pickle=None):
        self._protocol = None if pickle is None else pickle.PROTOCOL
        self._threshold = None if pickle is None else pickle.THRESHOLD

    @property
    def PROTOCOL(self):
        return _pickle.HIGHEST_PROTOCOL if self._protocol is None else self._protocol

    @PROTOCOL.setter
    def PROTOCOL(self, value):
        self._protocol = None if value is None else int(value)

    @property
    def THRESHOLD(self):
        return DEFAULT_THRESHOLD if self._threshold is None else self._threshold

    @THRESHOLD.setter
    def THRESHOLD(self, value):
        self._threshold = None if value is None else int(value)

    def dumps(self, obj):
        """``obj`` as one pickle stream (bytes), at ``PROTOCOL``."""
        return _pickle.dumps(obj, protocol=self.PROTOCOL)

    @staticmethod
    def loads(data):
        return _pickle.loads(data)

    def dumps_oob(self, obj):
        """``(stream, buffers)``: ``obj`` pickled with protocol 5, every buffer of at least
        ``THRESHOLD`` bytes left out of the stream as a byte ``memoryview`` (uncopied)."""
        buffers, threshold = [], self.THRESHOLD

        def out_of_band(buffer):  # pickle keeps the buffer in the stream when this is True
            view = buffer.raw()
            if view.nbytes < threshold:
                return True
            buffers.append(view)
            return False

        data = _pickle.dumps(obj, protocol=max(5, self.PROTOCOL), buffer_callback=out_of_band)
        return data, buffers

    @staticmethod
    def loads_oob(data, buffers):
        """The object of a :meth:`dumps_oob` stream and its buffers (in their order)."""
        return _pickle.loads(data, buffers=buffers)
