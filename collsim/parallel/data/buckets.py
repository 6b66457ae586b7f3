"""PyTorch DDP's reducer inside a rank program: gradient buckets, all-reduced as they fill.

Gradients are packed, in the order backward produces them (last layer first), into buckets
of about ``bucket_bytes``; each full bucket's all-reduce (average) starts at once on the
rank's communication stream (``rank.start``) while backward goes on computing the earlier
layers. Only what is still in flight when backward ends is *exposed*: the step waits for it.
The mesh trainer feeds one :class:`GradientBuckets` per rank and step from its model chunks'
final-gradient hook (:class:`~collsim.parallel.pipeline.chunk.ModelChunk`).

>>> import numpy as np, collsim
>>> from collsim.runtime.group import Group
>>> def program(rank):
...     buckets = GradientBuckets(rank, Group([0, 1]), bucket_bytes=16)
...     yield from buckets.add("w", np.full(2, float(rank.id)))  # 16 B: launched at once
...     yield from buckets.add("b", np.ones(1))
...     averaged = yield from buckets.wait()
...     return buckets.sizes, averaged["w"].tolist()
>>> collsim.Cluster(collsim.topology.switch(2)).run(program).returns[0]
([2, 1], [0.5, 0.5])
"""

import numpy as np

from ... import units as _units

__all__ = ["GradientBuckets", "DEFAULT_BUCKET_BYTES"]

DEFAULT_BUCKET_BYTES = 25 * 2**20  # PyTorch DDP's bucket_cap_mb=25


class GradientBuckets:
    """PyTorch DDP's reducer, inside a rank program: bucket gradients as backward produces
    them and all-reduce (average) each full bucket on the communication stream.

    Parameters
    ----------
    rank : Rank
    group : Group
        The data-parallel group: every rank in it must add the same names in the same order.
    bucket_bytes : int or str
        A bucket is launched once it holds at least this many bytes (``"25MiB"``).

    Use with ``yield from``: ``add(name, grad)`` (may launch a bucket), ``flush()``
    (launches what is left), ``wait()`` (returns ``{name: averaged gradient}``).
    """

    def __init__(self, rank, group, bucket_bytes=DEFAULT_BUCKET_BYTES, algorithm="ring"):
        self.rank, self.group, self.algorithm = rank, group, algorithm
        self.bucket_bytes = _units.parse_size(bucket_bytes)
        self._pending = []  # (name, grad) not yet launched
        self._launched = []  # (names and shapes, handle)

    @property
    def sizes(self):
        """Elements in each launched bucket, in launch order."""
        return [sum(int(np.prod(s)) for _, s in layout) for layout, _ in self._launched]

    def add(self, name, grad):
        self._pending.append((name, np.asarray(grad)))
        if sum(g.nbytes for _, g in self._pending) >= self.bucket_bytes:
            yield from self.flush()

    def flush(self):
        if not self._pending:
            return
        layout = [(name, g.shape) for name, g in self._pending]
        flat = np.concatenate([g.ravel() for _, g in self._pending])
        self._pending = []
        if self.group.size == 1:
            handle = None
            self._launched.append((layout, flat))
            return
        index = len(self._launched)
        task = self.rank.all_reduce(flat, group=self.group, algorithm=self.algorithm, op="avg")
        handle = yield self.rank.start(task, name=f"grad bucket {index}")
        self._launched.append((layout, handle))

    def wait(self):
        yield from self.flush()
        out = {}
        for layout, handle in self._launched:
            flat = handle if isinstance(handle, np.ndarray) else (yield self.rank.wait(handle))
            at = 0
            for name, shape in layout:
                size = int(np.prod(shape))
                out[name] = flat[at : at + size].reshape(shape)
                at += size
        return out
