"""A model chunk: consecutive rank modules run as one piece, with DDP's gradient hook.

The mesh trainer gives every pipeline stage one :class:`ModelChunk` per model chunk (one,
or ``vpp`` when interleaved).  The stage program calls its passes as generators
(``yield from``), so the units' compute spans and tensor-parallel collectives run on the
rank.  The chunk also does what PyTorch's DDP reducer hooks do: it adds each micro-batch's
weight gradients into running sums (gradient accumulation), and on the chunk's *final*
weight-gradient pass of the step it hands every unit's summed gradient to ``on_final``
the moment that unit's backward is done, last layer first, so the data-parallel
all-reduce of a bucket overlaps the backward of the layers before it.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.nn import Linear
>>> from collsim.parallel.modules import Local
>>> units = [("0", Local(Linear(np.eye(2), np.zeros(2)))), ("1", Local(Linear(np.eye(2))))]
>>> def program(rank):
...     final = []
...     def on_final(name, grad):
...         final.append(name)
...         yield from ()
...     chunk = ModelChunk(rank, units, on_final)
...     y, ctx = yield from chunk.forward(np.ones((3, 2)))
...     yield from chunk.backward(ctx, np.ones((3, 2)), final=True)
...     return final, chunk.grads["0.weight"].tolist()
>>> collsim.Cluster(collsim.topology.switch(1)).run(program).returns[0]
(['1.weight', '0.bias', '0.weight'], [[3.0, 3.0], [3.0, 3.0]])
"""

import numpy as np

__all__ = ["ModelChunk"]


def _join(prefix, name):
    return f"{prefix}.{name}" if prefix else name


class ModelChunk:
    """Rank modules ``[(prefix, unit), ...]`` run in order on ``rank``.

    Parameters
    ----------
    rank : Rank
    units : list of (prefix, rank module)
        Gradient names are ``"<prefix>.<name>"``, like the full model's parameters.
    on_final : generator function ``(name, grad)``, optional
        Called (with ``yield from``) for every parameter once its gradient is final.
    """

    def __init__(self, rank, units, on_final=None):
        self.rank, self.units, self.on_final = rank, list(units), on_final
        self.grads = {}  # name -> gradient summed over this step's micro-batches

    @property
    def params(self):
        """Name -> the array each unit computes with (what an optimizer updates)."""
        return {_join(p, k): v for p, unit in self.units for k, v in unit.params.items()}

    def forward(self, x):
        ctxs = []
        for _, unit in self.units:
            x, ctx = yield from unit.forward(self.rank, x)  # (B, S, H) through the chunk
            ctxs.append(ctx)
        return x, {"units": ctxs}

    def backward(self, ctx, dy, final=False):
        """Input and weight gradient unit by unit, last unit first (autograd's order)."""
        for (prefix, unit), unit_ctx in zip(reversed(self.units), reversed(ctx["units"])):
            dy, grads = yield from unit.backward(self.rank, unit_ctx, dy)
            yield from self._add(prefix, grads, final)
        return dy

    def backward_input(self, ctx, dy):
        """Input gradients only (zero-bubble's ``B``); keeps each unit's ``dy`` for ``W``."""
        dys = []
        for (_, unit), unit_ctx in zip(reversed(self.units), reversed(ctx["units"])):
            dys.append(dy)  # the gradient at this unit's output, for its W
            dy = yield from unit.backward_input(self.rank, unit_ctx, dy)
        ctx["dys"] = dys  # last unit first
        return dy

    def backward_weight(self, ctx, final=False):
        """Weight gradients from what :meth:`backward_input` kept, last unit first."""
        pairs = zip(reversed(self.units), reversed(ctx["units"]), ctx.pop("dys"))
        for (prefix, unit), unit_ctx, unit_dy in pairs:
            grads = yield from unit.backward_weight(self.rank, unit_ctx, unit_dy)
            yield from self._add(prefix, grads, final)

    def _add(self, prefix, grads, final):
        for name in reversed(list(grads)):  # DDP fills its buckets in reverse order
            key = _join(prefix, name)
            if key in self.grads:
                self.grads[key] = self.grads[key] + grads[name]
            else:
                self.grads[key] = np.array(grads[name], copy=True)
            if final and self.on_final is not None:
                yield from self.on_final(key, self.grads[key])
