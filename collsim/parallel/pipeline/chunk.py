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

from ...nn import ctx_nbytes

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
    recompute : bool
        Full activation recomputation (Megatron's ``--recompute-granularity full``, per
        unit): the forward keeps only each unit's input; the backward runs the unit's
        forward again first (its FLOPs charged again) and holds that activation only while
        the unit's backward needs it.
    prefetch : {"none", "forward", "backward", "both"}
        FSDP: before a unit's forward (backward), start the all-gather of the unit that runs
        next (``unit.prefetch(rank)``), so it overlaps this unit's compute.
    on_pass : generator function ``(grads)``, optional
        Called (with ``yield from``) at the end of every weight-gradient pass with that
        pass's gradients, which are then not accumulated here (ZeRO-2 reduce-scatters them
        at once and keeps only its shard).
    """

    def __init__(self, rank, units, on_final=None, on_pass=None, prefetch="none", recompute=False):
        self.rank, self.units = rank, list(units)
        self.on_final, self.on_pass = on_final, on_pass
        self.prefetch = prefetch  # FSDP: "none", "forward", "backward" or "both"
        self.recompute = recompute  # full activation recomputation, unit by unit
        self.grads = {}  # name -> gradient summed over this step's micro-batches
        self._pass = {}  # this pass's gradients, for on_pass

    @property
    def params(self):
        """Name -> the array each unit computes with (what an optimizer updates)."""
        return {_join(p, k): v for p, unit in self.units for k, v in unit.params.items()}

    def _prefetch(self, units, i, direction):
        """Start the gather of ``units[i + 1]`` (the next to run) if prefetching that way."""
        if self.prefetch in (direction, "both") and i + 1 < len(units):
            _, upcoming = units[i + 1]  # (prefix, unit)
            if hasattr(upcoming, "prefetch"):
                yield from upcoming.prefetch(self.rank)

    def forward(self, x):
        ctxs, blocks = [], []
        for i, (prefix, unit) in enumerate(self.units):
            yield from self._prefetch(self.units, i, "forward")
            y, ctx = yield from unit.forward(self.rank, x)  # (B, S, H) through the chunk
            ctx = {"recompute_from": x} if self.recompute else ctx
            ctxs.append(ctx)
            blocks.append(self._charge(f"saved by {prefix or 'unit'}", ctx))
            x = y
        return x, {"units": ctxs, "blocks": blocks}

    def _charge(self, name, ctx):
        """Charge activations saved for backward at the declared 2 bytes an element (bf16);
        the verification numerics are float64, 8 bytes an element."""
        return self.rank.alloc("activations", name, ctx_nbytes(ctx) // 8)

    def _context(self, prefix, unit, unit_ctx):
        """The unit's saved activations, recomputed from its input if they were dropped;
        a recomputed one is charged to the tracker until :meth:`_drop` (a generator)."""
        if "recompute_from" not in unit_ctx:
            return unit_ctx
        rerun = getattr(unit, "recompute", unit.forward)  # FSDP: gathered for the backward
        _, ctx = yield from rerun(self.rank, unit_ctx["recompute_from"])
        ctx["recomputed"] = self._charge(f"recomputed {prefix or 'unit'}", ctx)
        return ctx

    def _drop(self, ctx):
        if "recomputed" in ctx:
            self.rank.free(ctx.pop("recomputed"))

    def backward(self, ctx, dy, final=False):
        """Input and weight gradient unit by unit, last unit first (autograd's order)."""
        order, n = list(reversed(self.units)), len(self.units)
        for i, ((prefix, unit), unit_ctx) in enumerate(zip(order, reversed(ctx["units"]))):
            yield from self._prefetch(order, i, "backward")
            unit_ctx = yield from self._context(prefix, unit, unit_ctx)
            dy, grads = yield from unit.backward(self.rank, unit_ctx, dy)
            self._drop(unit_ctx)
            self.rank.free(ctx["blocks"][n - 1 - i])  # this unit's saved activations
            yield from self._add(prefix, grads, final)
        yield from self._end_pass()
        return dy

    def backward_input(self, ctx, dy):
        """Input gradients only (zero-bubble's ``B``); keeps each unit's ``dy`` for ``W``."""
        dys, order, n = [], list(reversed(self.units)), len(self.units)
        for i, (prefix, unit) in enumerate(order):
            yield from self._prefetch(order, i, "backward")
            j = n - 1 - i  # this unit's place in forward order
            unit_ctx = yield from self._context(prefix, unit, ctx["units"][j])
            ctx["units"][j] = unit_ctx  # recomputed: kept for the W pass
            dys.append(dy)  # the gradient at this unit's output, for its W
            dy = yield from unit.backward_input(self.rank, unit_ctx, dy)
        ctx["dys"] = dys  # last unit first
        return dy

    def backward_weight(self, ctx, final=False):
        """Weight gradients from what :meth:`backward_input` kept, last unit first."""
        pairs = zip(
            reversed(self.units), reversed(ctx["units"]), ctx.pop("dys"), reversed(ctx["blocks"])
        )
        for (prefix, unit), unit_ctx, unit_dy, block in pairs:
            grads = yield from unit.backward_weight(self.rank, unit_ctx, unit_dy)
            self._drop(unit_ctx)
            self.rank.free(block)  # this unit's saved activations
            yield from self._add(prefix, grads, final)
        yield from self._end_pass()

    def _end_pass(self):
        if self.on_pass is not None:
            grads, self._pass = self._pass, {}
            yield from self.on_pass(grads)

    def _add(self, prefix, grads, final):
        for name in reversed(list(grads)):  # DDP fills its buckets in reverse order
            key = _join(prefix, name)
            if self.on_pass is not None:
                self._pass[key] = grads[name]
                continue
            if key in self.grads:
                self.grads[key] = self.grads[key] + grads[name]
            else:
                self.grads[key] = np.array(grads[name], copy=True)
            if final and self.on_final is not None:
                yield from self.on_final(key, self.grads[key])
