"""The rank program of tensor- and pipeline-parallel greedy decoding.

Every rank runs the same loop, one iteration per generated token: the first iteration is
the *prefill* (the whole prompt), the others *decode* one token each.  In a layer a rank
computes its heads over its KV cache and its MLP columns, and leaves each with a partial
sum: two all-reduces over the TP group per layer per step (Megatron's ``g``), the only
communication tensor parallelism needs at inference (no backward, so no ``f``).  Stage
``s`` sends its activations ``(B, T, hidden)`` to stage ``s+1`` (TP rank to TP rank); the
last stage picks the token and sends it back to the first, which embeds it next step.

Compute spans carry a :class:`DecodePass` record; pipeline messages a
:class:`StageHandoff`: meaning in fields, labels for display.  Given a
:class:`~.roofline.Roofline`, a span takes the longer of its FLOPs at the GPU's peak and its
HBM reads (the weights it multiplies by and the KV cache it attends over, at the declared
precision) at the GPU's bandwidth; without one, its FLOPs at the cluster's rate.
"""

from typing import NamedTuple

import numpy as np

from ...nn import GELU, greedy_token
from ...nn.kv_cache import cached_attention, cached_attention_flops
from .context import decode_attention, prefill_attention

__all__ = ["DecodePass", "StageHandoff", "RankOutput", "decode_program"]

ACTIVATIONS, TOKENS = 1, 2  # message tags: stage to stage, last stage to first
_GELU = GELU()  # stateless: one instance serves every rank


class DecodePass(NamedTuple):
    """What a compute span of a decode run belongs to."""

    step: int  # 1 = prefill (the prompt), 2.. = decode steps
    layer: int | None  # the full model's layer index, None for the embeddings or head
    part: str  # "attention", "mlp", "embed" or "head"

    @property
    def label(self):
        where = "" if self.layer is None else f" L{self.layer}"
        return f"step {self.step}{where} {self.part}"


class StageHandoff(NamedTuple):
    """What a pipeline message of a decode run carries."""

    step: int  # as DecodePass.step
    what: str  # "activations" (stage to stage) or "token" (last stage to first)


class RankOutput(NamedTuple):
    """What one rank's program returns."""

    tokens: object  # (B, new_tokens) int64 ids on the last stage, else None
    logits: object  # (B, new_tokens, vocab) on the last stage's last CP rank, else None
    token_times: tuple  # simulated seconds when each token was known (last stage)
    cache_bytes: int  # bytes of this rank's KV cache (its heads, its layers)
    step_costs: tuple = ()  # SpanCost per step of this rank's spans, summed (with a roofline)


class Charge:
    """How a rank's compute spans are timed: FLOPs at the cluster's rate, or the roofline
    of FLOPs and HBM reads; it sums each step's costs for the report."""

    def __init__(self, roofline):
        self.roofline = roofline
        self.steps = {}  # step -> the SpanCost of each of its spans

    def span(self, rank, flops, elements_read, meta):
        """The compute operation of one span, to yield."""
        if self.roofline is None:
            return rank.compute(flops=flops, label=meta.label, meta=meta)
        cost = self.roofline.cost_of(flops, elements_read)
        self.steps.setdefault(meta.step, []).append(cost)
        return rank.compute(seconds=cost.seconds, label=meta.label, meta=meta)

    def costs(self):
        """Each step's spans as one SpanCost: their FLOPs and bytes summed."""
        return tuple(
            self.roofline.cost(sum(c.flops for c in spans), sum(c.bytes_read for c in spans))
            for _, spans in sorted(self.steps.items())
        )


def elements(*parts):
    """Weights held by modules (their params) and plain arrays, counted in elements."""
    return sum(
        sum(a.size for a in p.params.values()) if hasattr(p, "params") else p.size for p in parts
    )


def _kv_read(cache):
    """Elements of keys and values an attention over ``cache`` reads."""
    batch, heads, _, head_dim = cache.keys.shape
    return 2 * batch * heads * cache.length * head_dim


def _all_reduce(rank, partial, group, algorithm):
    if group.size == 1:
        return partial
    return (yield from rank.all_reduce(partial, group=group, algorithm=algorithm))


class Groups(NamedTuple):
    """The groups one rank communicates in, and whether it keeps the generated tokens'
    keys and values (the last CP rank does)."""

    tp: object  # collsim.runtime.group.Group of its TP ranks
    cp: object  # ... of its CP ranks
    cp_rank: int
    keeps: bool


def _attention(rank, layer, a, cache, groups, algorithm, step):
    """This rank's heads over the tokens ``a``: with the whole cache here, or split by CP."""
    batch, new, _ = a.shape
    if groups.cp.size == 1:
        flops = cached_attention_flops(layer.attn, batch, new, cache.length)
        return cached_attention(layer.attn, a, cache), flops
    if step == 1:  # prefill: every query against the whole prompt's keys
        out = yield from prefill_attention(rank, layer.attn, a, cache, groups.cp, groups.cp_rank)
        return out, cached_attention_flops(layer.attn, batch, new, groups.cp.size * new - new)
    out = yield from decode_attention(
        rank, layer.attn, a, cache, groups.cp, groups.keeps, algorithm
    )
    return out, cached_attention_flops(layer.attn, batch, new, cache.length - new)


def _layer(rank, layer, x, cache, groups, algorithm, step, layer_id, charge):
    """One block on this rank's share: two partial sums, two TP all-reduces."""
    a = layer.ln1.forward(x)[0]
    partial, flops = yield from _attention(rank, layer, a, cache, groups, algorithm, step)
    flops += layer.ln1.flops(x.shape)["forward"]
    read = elements(layer.ln1, layer.attn, layer.attn_bias) + _kv_read(cache)
    yield charge.span(rank, flops, read, DecodePass(step, layer_id, "attention"))
    h = x + ((yield from _all_reduce(rank, partial, groups.tp, algorithm)) + layer.attn_bias)
    b = layer.ln2.forward(h)[0]
    inner = layer.fc1.forward(b)[0]  # (B, T, ffn/tp)
    partial = layer.fc2.forward(_gelu(inner))[0]  # (B, T, hidden), a partial sum
    flops = layer.ln2.flops(x.shape)["forward"] + layer.fc1.flops(b.shape)["forward"]
    flops += _GELU.flops(inner.shape)["forward"] + layer.fc2.flops(inner.shape)["forward"]
    read = elements(layer.ln2, layer.fc1, layer.fc2, layer.mlp_bias)
    yield charge.span(rank, flops, read, DecodePass(step, layer_id, "mlp"))
    return h + ((yield from _all_reduce(rank, partial, groups.tp, algorithm)) + layer.mlp_bias)


def _pick_token(rank, weights, x, groups, step, charge):
    """On the last stage: the logits of the last token and the greedy choice, made on the
    CP rank that holds the last position and broadcast to the others (a generator of
    ``(token, logits or None)``)."""
    batch = x.shape[0]
    logits = None
    if groups.keeps:
        final = weights.ln_f.forward(x[:, -1])[0]  # (B, hidden): the last token
        flops = weights.ln_f.flops(final.shape)["forward"]
        flops += weights.head.flops(final.shape)["forward"]
        read = elements(weights.ln_f, weights.head)
        yield charge.span(rank, flops, read, DecodePass(step, None, "head"))
        logits = weights.head.forward(final)[0]  # (B, vocab)
    token = greedy_token(logits) if groups.keeps else np.zeros(batch, dtype=np.int64)
    if groups.cp.size > 1:
        token = yield from rank.broadcast(token, root=groups.cp.size - 1, group=groups.cp)
    return token, logits


def decode_program(all_weights, split, prompt, new_tokens, roofline=None):
    """The rank program: ``all_weights[r]`` is rank r's :class:`RankWeights`; compute is
    timed by ``roofline`` (a :class:`~.roofline.Roofline`) if given."""
    stage_size = split.cp * split.tp  # ranks of one pipeline stage
    run = split.check_prompt(prompt.shape[1])  # prompt tokens a CP rank prefills

    def program(rank):
        if rank.id >= len(all_weights):  # a rank of the cluster that does not serve
            return None
        weights = all_weights[rank.id]
        charge = Charge(roofline)
        keeps = weights.cp_rank == split.cp - 1
        groups = Groups(
            split.grid.group("tp", rank.id), split.grid.group("cp", rank.id), weights.cp_rank, keeps
        )
        first, last = weights.stage == 0, weights.stage == split.pp - 1
        # the same TP and CP rank on the previous, next, first and last stage (picotron's names)
        pp_prev_rank, pp_next_rank = rank.id - stage_size, rank.id + stage_size
        first_stage_rank = rank.id % stage_size
        last_stage_rank = (split.pp - 1) * stage_size + first_stage_rank
        cache = weights.new_cache(prompt.shape[0], run + (new_tokens if keeps else 0))
        position = weights.cp_rank * run  # of this rank's first token
        ids = prompt[:, position : position + run]
        tokens, logits, times = [], [], []
        for step in range(1, new_tokens + 1):
            if first:
                x = weights.embeddings.lookup(ids, position)  # (B, T, hidden)
            else:
                x = yield rank.recv(pp_prev_rank, tag=ACTIVATIONS)
            for layer, layer_cache, layer_id in zip(
                weights.layers, cache, weights.layer_ids, strict=True
            ):
                x = yield from _layer(
                    rank, layer, x, layer_cache, groups, split.algorithm, step, layer_id, charge
                )
            position = prompt.shape[1] + step - 1  # of the next token
            if not last:
                handoff = StageHandoff(step, "activations")
                yield rank.send(pp_next_rank, x, ACTIVATIONS, "activations", handoff)
            else:
                token, step_logits = yield from _pick_token(rank, weights, x, groups, step, charge)
                tokens.append(token)
                if step_logits is not None:
                    logits.append(step_logits)
                times.append(rank.now)
            if step == new_tokens:
                break
            if split.pp > 1 and last:
                handoff = StageHandoff(step, "token")
                yield rank.send(first_stage_rank, tokens[-1], TOKENS, "token", handoff)
            if first:
                fed = tokens[-1] if last else (yield rank.recv(last_stage_rank, TOKENS))
                ids = fed[:, None]  # (B, 1): the next step decodes one token
        costs = charge.costs() if roofline is not None else ()
        return RankOutput(
            _stack(tokens), _stack(logits), tuple(times), sum(c.nbytes for c in cache), costs
        )

    return program


def _stack(rows):
    return np.stack(rows, axis=1) if rows else None


def _gelu(x):
    return _GELU.forward(x)[0]
