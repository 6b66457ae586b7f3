"""Ring attention: each cp rank keeps its queries, the K/V blocks travel round the ring.

Rank r of a cp group holds its tokens of the sequence (``(B, S/cp, D)`` in the group's
layout, :mod:`~collsim.parallel.context.layouts`).  The forward projects its q, k, v,
then runs cp steps: at step s (1-based) it holds the K/V block of rank (r − s + 1) mod cp,
scores its queries against it (the causal mask from the *global* token positions, so it
is exact for either layout) and folds them into an online softmax -- running max m,
running sum l and running output o, all rescaled by exp(m_old − m_new) at every step, as
FlashAttention does -- while the block goes on to rank r+1 (and the next arrives from
r−1): the isend/irecv are posted before the step's compute, so the transfer overlaps it.
After cp steps o/l is the attention output.  The context keeps q, k, v, o and the
log-sum-exp m + log l per query, never an (S × S) matrix.

The backward circulates K/V again; each step recomputes the block's probabilities from q,
k and the saved log-sum-exp, adds to dq locally and to the dK/dV partial sums, which
travel one hop behind their block and arrive home after the cp-th hop.  Closed forms for
the bytes and FLOPs are in :mod:`~collsim.parallel.context.formulas`.

Examples
--------
>>> import numpy as np, collsim
>>> from collsim.nn import MultiHeadAttention
>>> from collsim.runtime.group import Group
>>> from collsim.parallel.context.layouts import gather_sequence, shard_sequence
>>> rng = np.random.default_rng(0)
>>> attn = MultiHeadAttention.init(8, 2, rng)  # d_model 8, 2 heads, causal
>>> x = rng.uniform(-1, 1, (1, 8, 8))  # (B, S, D)
>>> group = Group([0, 1])
>>> def program(rank):
...     ring = RingAttention.from_full(attn, group, rank.id, layout="balanced")
...     y, ctx = yield from ring.forward(rank, shard_sequence(x, 2, rank.id, "balanced"))
...     return y
>>> result = collsim.Cluster(collsim.topology.ring(2)).run(program)
>>> y = gather_sequence(result.returns, "balanced")
>>> bool(np.allclose(y, attn.forward(x)[0], rtol=0, atol=1e-12))
True
>>> sorted((t.src, t.dst, t.tag.kind, t.tag.step, t.nbytes) for t in result.trace.transfers)
[(0, 1, 'kv', 1, 512), (1, 0, 'kv', 1, 512)]
"""

import copy
import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ...errors import ConfigError
from ..modules import LAYER_PASS_KINDS, LayerPass, layer_compute
from .formulas import score_flops
from .layouts import check_sequence, token_positions

__all__ = ["RingAttention", "RingMessage", "RingStep"]


class RingMessage(NamedTuple):
    """The tag of a ring-attention transfer: what it carries, in which pass, at which step.

    ``kind`` is ``"kv"`` (a K/V block, stacked ``(2, B, H, S/cp, hd)``) or ``"dkv"`` (the
    dK/dV partial sums of a block, same shape); ``phase`` is ``"forward"`` or
    ``"backward"``; ``step`` the 1-based ring step after whose compute (dkv) or during
    whose compute (kv) it travels.  It always goes from cp rank r to r+1.

    >>> RingMessage("kv", "forward", "attn", 1).to_args()
    {'kind': 'kv', 'phase': 'forward', 'layer': 'attn', 'step': 1}
    """

    kind: str  # "kv" or "dkv"
    phase: str  # "forward" or "backward"
    layer: str
    step: int  # 1..cp

    def to_args(self):
        """The fields as a JSON-ready dict, for the Chrome/Perfetto export's ``args``."""
        return self._asdict()


@dataclass(frozen=True)
class RingStep(LayerPass):
    """A compute span of one ring step: a :class:`LayerPass` with the 1-based ``step``
    and the cp rank ``kv_owner`` whose K/V block it scored against.

    >>> RingStep("forward", "attn", 2, 1).label
    'F attn ring step 2 (K/V of cp rank 1)'
    """

    step: int
    kv_owner: int

    @property
    def label(self):
        kind = LAYER_PASS_KINDS[self.kind]
        return f"{kind} {self.layer} ring step {self.step} (K/V of cp rank {self.kv_owner})"


class RingAttention:
    """Cp rank ``cp_rank``'s ring attention over its ``(B, S/cp, D)`` tokens.

    Every weight is replicated (a copy of the full module's, ``shard_axes`` all None);
    each rank's weight gradients cover its own tokens, so they sum over the cp group to
    the full gradient.  Build it with :meth:`from_full`.

    Parameters
    ----------
    attn : collsim.nn.MultiHeadAttention
        Used as it is (its arrays are this rank's parameters).
    group : collsim.runtime.group.Group
        The cp group, in ring order: rank ``group.ranks[i]`` holds cp chunk(s) of index i.
    cp_rank : int
        This rank's index in ``group``.
    layout : {"balanced", "contiguous"}
    seq : int or None
        The full sequence length, if known when building; checked against the input.
    """

    def __init__(self, attn, group, cp_rank, layout="balanced", seq=None, name="attn"):
        check_sequence(seq if seq is not None else 2 * group.size, group.size, layout)
        if (
            isinstance(cp_rank, bool)
            or not isinstance(cp_rank, int)
            or not (0 <= cp_rank < group.size)
        ):
            raise ConfigError(
                f"cp_rank={cp_rank!r} is not a rank of the cp group {list(group.ranks)} "
                f"(size {group.size}): choose 0..{group.size - 1}"
            )
        self.attn, self.group, self.cp_rank = attn, group, cp_rank
        self.layout, self.seq, self.name = layout, seq, name
        self.shard_axes = dict.fromkeys(attn.params)

    @classmethod
    def from_full(cls, attn, group, cp_rank, layout="balanced", seq=None, name="attn"):
        """Cp rank ``cp_rank``'s module for ``attn`` (all weights copied)."""
        return cls(copy.deepcopy(attn), group, cp_rank, layout, seq, name)

    def __repr__(self):
        return f"RingAttention({self.attn!r}, cp={self.group.size}, layout={self.layout!r})"

    @property
    def params(self):
        return self.attn.params

    # ---- ring bookkeeping -------------------------------------------------------------

    @property
    def cp(self):
        return self.group.size

    def _neighbours(self):
        """Global ranks of cp rank r+1 (where blocks go) and r−1 (where they come from)."""
        ranks = self.group.ranks
        return ranks[(self.cp_rank + 1) % self.cp], ranks[(self.cp_rank - 1) % self.cp]

    def _owner(self, step):
        """The cp rank whose K/V block this rank holds at 0-based ``step``."""
        return (self.cp_rank - step) % self.cp

    def _check(self, rank, x):
        if self.group.ranks[self.cp_rank] != rank.id:
            raise ConfigError(
                f"RingAttention holds cp rank {self.cp_rank} of group {list(self.group.ranks)} "
                f"(rank {self.group.ranks[self.cp_rank]}) but runs on rank {rank.id}: build "
                "it with cp_rank=group.index(rank.id)"
            )
        B, T, _ = self.attn.output_shape(np.shape(x))
        seq = T * self.cp
        if self.seq is not None and seq != self.seq:
            raise ConfigError(
                f"RingAttention got {T} tokens on cp rank {self.cp_rank}, i.e. seq={seq} over "
                f"cp={self.cp}, but was built for seq={self.seq}: give (B, {self.seq // self.cp}"
                f", {self.attn.d_model}) per rank"
            )
        check_sequence(seq, self.cp, self.layout)
        return B, T, seq

    def _mask(self, seq, owner):
        """(T, T) True where a query may see the key (None: no mask), from global positions."""
        if not self.attn.causal:
            return None
        queries = token_positions(seq, self.cp, self.cp_rank, self.layout)
        keys = token_positions(seq, self.cp, owner, self.layout)
        return queries[:, None] >= keys[None, :]

    def _block_flops(self, batch, seq, owner, pass_):
        """FLOPs of this rank's queries against ``owner``'s block: one score per (query,
        key) pair the causal mask keeps, the diagonal included (every pair without one)."""
        cost = batch * self.attn.n_heads * score_flops(self.attn.head_dim, pass_)
        mask = self._mask(seq, owner)
        pairs = (seq // self.cp) ** 2 if mask is None else int(mask.sum())
        return float(pairs * cost)

    def attention_flops(self, x_shape):
        """This rank's attention FLOPs (projections excluded) per pass for input
        ``x_shape``: ``{"forward": ..., "backward_input": ...}``; the sum of its ring steps'
        compute spans, and :func:`~collsim.parallel.context.formulas.causal_attention_flops`
        in closed form.  ``backward_weight`` does no attention work."""
        B, T, _ = self.attn.output_shape(x_shape)
        seq = T * self.cp
        check_sequence(seq, self.cp, self.layout)
        owners = [self._owner(s) for s in range(self.cp)]
        return {
            "forward": sum(self._block_flops(B, seq, o, "forward") for o in owners),
            "backward_input": sum(self._block_flops(B, seq, o, "backward") for o in owners),
        }

    def _projection_flops(self, batch, tokens):
        return 2 * batch * tokens * self.attn.d_model * self.attn.n_heads * self.attn.head_dim

    def _step_compute(self, rank, kind, step, flops):
        record = RingStep(kind, self.name, step + 1, self._owner(step))
        return rank.compute(flops=flops, label=record.label, meta=record)

    # ---- forward ----------------------------------------------------------------------

    def forward(self, rank, x):
        B, T, seq = self._check(rank, x)
        x = np.asarray(x)
        a = self.attn
        yield layer_compute(rank, "forward", self.name, 3 * self._projection_flops(B, T))
        q, k, v = (a._project(x, w, b) for w, b in ((a.wq, a.bq), (a.wk, a.bk), (a.wv, a.bv)))
        scale = 1.0 / math.sqrt(a.head_dim)
        kv = np.stack([k, v])  # (2, B, H, T, hd): the block that travels
        m = np.full(q.shape[:-1], -np.inf)  # (B, H, T) running max
        total = np.zeros(q.shape[:-1])  # (B, H, T) running sum of exp(score - m)
        o = np.zeros_like(q)  # (B, H, T, hd) running unnormalised output
        ring = _RingBuffers(rank, f"{self.name} K/V block", kv.size)
        for step in range(self.cp):
            handles = ()
            if step < self.cp - 1:  # post the next block's transfer before computing
                handles = yield from self._pass_kv(rank, kv, "forward", step, ring)
            owner = self._owner(step)
            flops = self._block_flops(B, seq, owner, "forward")
            yield self._step_compute(rank, "forward", step, flops)
            mask = self._mask(seq, owner)
            if mask is None or mask.any():  # a block wholly in the future adds nothing
                m, total, o = _fold_block(m, total, o, _scores(q, kv[0], scale, mask), kv[1])
            if handles:
                kv = (yield rank.wait(*handles))[1]
                ring.arrived()
        ring.done()
        o = o / total[..., None]  # (B, H, T, hd) the attention output per head
        y = a._merge(o)  # (B, T, H*hd)
        yield layer_compute(rank, "forward", self.name, self._projection_flops(B, T))
        out = y @ a.wo if a.bo is None else y @ a.wo + a.bo  # (B, T, D)
        ctx = {"x": x, "q": q, "k": k, "v": v, "o": o, "lse": m + np.log(total), "y": y, "seq": seq}
        return out, ctx

    def _pass_kv(self, rank, kv, phase, step, ring):
        """Post the K/V block's hop to the next cp rank and the receive of the previous
        rank's (the buffer charged to ``ring``); returns the two handles to wait for."""
        nxt, prev = self._neighbours()
        tag = RingMessage("kv", phase, self.name, step + 1)
        suffix = "" if phase == "forward" else " (backward)"
        label = f"{self.name} K/V ring step {step + 1}{suffix}"
        ring.incoming()
        return (
            (yield rank.isend(nxt, kv, tag=tag, label=label)),
            (yield rank.irecv(prev, tag=tag)),
        )

    # ---- backward ---------------------------------------------------------------------

    def backward_input(self, rank, ctx, dy):
        x, q, o, lse, seq = ctx["x"], ctx["q"], ctx["o"], ctx["lse"], ctx["seq"]
        dy = np.asarray(dy)
        if dy.shape != x.shape:
            raise ConfigError(f"RingAttention: dy has shape {dy.shape}, the output {x.shape}")
        a, (B, T, _) = self.attn, x.shape
        scale = 1.0 / math.sqrt(a.head_dim)
        nxt, prev = self._neighbours()
        yield layer_compute(rank, "backward_input", self.name, self._projection_flops(B, T))
        do = a._split(dy @ a.wo.T)  # (B, H, T, hd) gradient at the attention output
        delta = np.sum(do * o, axis=-1)  # (B, H, T): rowsum(dP * P) of the softmax backward
        dq = np.zeros_like(q)
        kv = np.stack([ctx["k"], ctx["v"]])  # (2, B, H, T, hd)
        dkv_sends = []
        ring = _RingBuffers(rank, f"{self.name} K/V block", kv.size)
        for step in range(self.cp):
            handles, dkv_in = (), None
            if step < self.cp - 1:
                handles = yield from self._pass_kv(rank, kv, "backward", step, ring)
            if step > 0:  # the block's dK/dV so far, from the ranks it visited before
                dkv_in = yield rank.irecv(prev, tag=RingMessage("dkv", "backward", self.name, step))
            owner = self._owner(step)
            flops = self._block_flops(B, seq, owner, "backward")
            yield self._step_compute(rank, "backward_input", step, flops)
            mask = self._mask(seq, owner)
            dkv = np.zeros_like(kv)
            if mask is None or mask.any():
                dq_block, dkv = _block_backward(q, kv, do, lse, delta, scale, mask)
                dq += dq_block
            if dkv_in is not None:
                dkv = dkv + (yield rank.wait(dkv_in))
            if self.cp > 1:  # on to the next rank; after the last step that is the owner
                tag = RingMessage("dkv", "backward", self.name, step + 1)
                label = f"{self.name} dK/dV ring step {step + 1}"
                dkv_sends.append((yield rank.isend(nxt, dkv, tag=tag, label=label)))
            if handles:
                kv = (yield rank.wait(*handles))[1]
                ring.arrived()
        ring.done()
        if self.cp > 1:  # this rank's own dK/dV, home after the cp-th hop
            home = RingMessage("dkv", "backward", self.name, self.cp)
            dkv = yield rank.wait((yield rank.irecv(prev, tag=home)))
            yield rank.wait(*dkv_sends)
        d = {"dq": a._merge(dq), "dk": a._merge(dkv[0]), "dv": a._merge(dkv[1])}  # (B, T, H*hd)
        ctx["dys"] = (dy, d)
        yield layer_compute(rank, "backward_input", self.name, 3 * self._projection_flops(B, T))
        return d["dq"] @ a.wq.T + d["dk"] @ a.wk.T + d["dv"] @ a.wv.T  # (B, T, D)

    def backward_weight(self, rank, ctx, dy):
        kept = ctx.get("dys")
        if kept is None or kept[0] is not dy:
            yield from self.backward_input(rank, ctx, dy)
            kept = ctx["dys"]
        a, d = self.attn, kept[1]
        B, T, D = ctx["x"].shape
        yield layer_compute(rank, "backward_weight", self.name, 4 * self._projection_flops(B, T))
        inner = a.n_heads * a.head_dim
        x2 = ctx["x"].reshape(-1, D)  # (B*T, D) this rank's tokens only
        grads = {}
        for name in ("q", "k", "v"):
            g2 = d["d" + name].reshape(-1, inner)  # (B*T, H*hd)
            grads["w" + name] = x2.T @ g2
            grads["b" + name] = g2.sum(axis=0)
        dy2 = np.asarray(dy).reshape(-1, D)
        grads["wo"] = ctx["y"].reshape(-1, inner).T @ dy2
        grads["bo"] = dy2.sum(axis=0)
        return {name: grads[name] for name in self.params}  # this rank's share, params order

    def backward(self, rank, ctx, dy):
        dx = yield from self.backward_input(rank, ctx, dy)
        return dx, (yield from self.backward_weight(rank, ctx, dy))


def _scores(q, k, scale, mask):
    """(B, H, Tq, Tk) scaled scores, -inf where the mask hides the key."""
    scores = (q @ k.swapaxes(-1, -2)) * scale
    return scores if mask is None else np.where(mask, scores, -np.inf)


def _fold_block(m, total, o, scores, v):
    """One online-softmax step: fold a block's scores and values into the running max
    ``m``, sum ``total`` and output ``o``.

    Every row has a finite max after the first step (a rank's own block holds each
    query's own key), so exp(m_old - m_new) is never nan."""
    m_new = np.maximum(m, scores.max(axis=-1))  # (B, H, T)
    rescale = np.exp(m - m_new)  # shrinks what was summed under the old max
    p = np.exp(scores - m_new[..., None])  # (B, H, T, Tk), 0 where masked
    return m_new, rescale * total + p.sum(axis=-1), rescale[..., None] * o + p @ v


def _block_backward(q, kv, do, lse, delta, scale, mask):
    """dq of this rank's queries and (dk, dv) of the block's keys, from the recomputed
    probabilities P = exp(scores - lse)."""
    k, v = kv
    p = np.exp(_scores(q, k, scale, mask) - lse[..., None])  # (B, H, Tq, Tk)
    dv = p.swapaxes(-1, -2) @ do  # (B, H, Tk, hd)
    dscores = p * (do @ v.swapaxes(-1, -2) - delta[..., None]) * scale  # (B, H, Tq, Tk)
    return dscores @ k, np.stack([dscores.swapaxes(-1, -2) @ q, dv])


class _RingBuffers:
    """The K/V blocks a rank holds for the ring beyond its own, charged to the run's memory
    tracker as communication buffers (bf16): the block being received, and the one received
    last step until its successor arrives. Its own K and V are activations (in ``ctx``)."""

    def __init__(self, rank, name, elements):
        self.rank, self.name, self.elements = rank, name, elements
        self.current = self.pending = None

    def incoming(self):
        self.pending = self.rank.alloc("comm_buffers", self.name, self.elements)

    def arrived(self):
        if self.current is not None:
            self.rank.free(self.current)
        self.current, self.pending = self.pending, None

    def done(self):
        if self.current is not None:
            self.rank.free(self.current)
        self.current = None
