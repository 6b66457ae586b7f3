"""Serving many requests: continuous batching, colocated or with prefill and decode
disaggregated onto two pools of GPUs.

Every GPU is one instance of the whole model (tp = pp = 1).  A :class:`Deployment` of
``prefill = 0`` is **colocated**: each GPU takes every ``decode``-th request, prefills it
and decodes it, and its scheduler puts a waiting prefill before the next decode step
whenever its batch has room (the default of vLLM's scheduler without chunked prefill),
so the running sequences wait while a new prompt is prefilled.  With ``prefill = P`` it
is **disaggregated** (DistServe, Splitwise): P GPUs only prefill, one request at a time
in arrival order, and send each request's KV cache (every layer's keys and values: the
real array, as one flow on the network, sharing links with everything else) and its
first token to one of the D decode GPUs, which admits it into its running batch as soon
as it has arrived and there is room (continuous batching, as Orca and vLLM do).

Every request arrives at time 0 (a burst, as vLLM's serving benchmark sends with
``--request-rate inf``).  A compute span takes the roofline's time
(:mod:`.roofline`: the longer of FLOPs at the peak and HBM reads at the bandwidth); a
decode step reads the weights once for its whole batch and each sequence's KV cache.
Each request's tokens are checked against :meth:`~collsim.nn.Decoder.generate` alone.

Examples
--------
>>> import collsim
>>> from collsim.nn import Decoder, DecoderConfig
>>> from collsim.parallel.inference.roofline import Roofline
>>> model = Decoder.init(DecoderConfig(vocab=32, hidden=16, heads=2, layers=2, max_len=16))
>>> requests = workload(4, prompt_len=6, output_len=4, vocab=32, seed=0)
>>> run = serve(model, requests, Deployment(prefill=1, decode=1, batch=2),
...             collsim.Cluster(collsim.topology.switch(2)), Roofline(100e12, 2e12))
>>> [len(t) for t in run.tokens], run.matches(model)
([6, 5, 4, 3], True)
>>> run.kv_transfers[0].nbytes  # 2 layers x (keys, values) x 6 tokens x 16 wide x 8 B
3072
"""

from collections import deque
from typing import NamedTuple

import numpy as np

from ...errors import ConfigError
from ...nn import greedy_token
from .metrics import RequestTimes, serving_metrics
from .roofline import ServedShape, decode_batch, prefill

__all__ = ["Request", "Deployment", "ServingPass", "KVTransfer", "ServingRun", "workload", "serve"]


class Request(NamedTuple):
    """One request of a workload: its prompt and how many tokens it generates."""

    id: int
    prompt: np.ndarray  # (T,) int64 token ids
    output_tokens: int  # tokens to generate (the first comes from the prefill)


class Deployment(NamedTuple):
    """How the GPUs serve: ``prefill`` GPUs only prefill (0: colocated), ``decode`` GPUs
    decode (colocated: every GPU does both); a decode step carries at most ``batch``."""

    prefill: int
    decode: int
    batch: int

    @property
    def gpus(self):
        return self.prefill + self.decode

    @property
    def disaggregated(self):
        return self.prefill > 0

    def check(self):
        for name in ("prefill", "decode", "batch"):
            value = getattr(self, name)
            low = 0 if name == "prefill" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"deployment {name}={value!r} must be an integer >= {low}")
        return self


class ServingPass(NamedTuple):
    """What a compute span of a serving run is: a prefill of one request, or a decode step."""

    phase: str  # "prefill" or "decode"
    requests: tuple  # the ids it computes for

    @property
    def label(self):
        ids = ",".join(map(str, self.requests))
        return (
            f"{self.phase} r{ids}"
            if len(self.requests) < 6
            else f"{self.phase} x{len(self.requests)}"
        )


class KVTransfer(NamedTuple):
    """A request's KV cache, sent from its prefill GPU to its decode GPU."""

    request: int
    src: int
    dst: int
    nbytes: int  # the arrays' bytes: 2 · layers · prompt tokens · hidden · 8 (float64)
    start: float  # simulated seconds
    end: float


class ServingRun(NamedTuple):
    """What :func:`serve` returns."""

    deployment: Deployment
    requests: tuple  # the Requests
    tokens: list  # tokens[i]: request i's generated ids, (output_tokens,) int64
    times: tuple  # RequestTimes per request
    metrics: object  # ServingMetrics
    kv_transfers: tuple  # KVTransfer per disaggregated request, read from the trace
    result: object  # the cluster's RunResult

    def matches(self, model):
        """Every request's tokens equal one device generating it alone."""
        return all(
            np.array_equal(model.generate(r.prompt[None], r.output_tokens).tokens[0], t)
            for r, t in zip(self.requests, self.tokens, strict=True)
        )


def workload(n, prompt_len, output_len, vocab, seed=0):
    """``n`` requests with random prompts of ``prompt_len`` tokens; output lengths drawn
    uniformly from ``output_len/2 .. 3·output_len/2`` (at least 1), so that sequences
    finish at different steps and a batch is refilled as they do."""
    rng = np.random.default_rng(seed)
    low, high = max(output_len // 2, 1), max(3 * output_len // 2, 1)
    return tuple(
        Request(i, rng.integers(0, vocab, prompt_len).astype(np.int64), int(out))
        for i, out in enumerate(rng.integers(low, high + 1, n))
    )


class _Active:
    """A request being decoded: its cache, its last token, what it has generated."""

    def __init__(self, request, cache, token, time):
        self.request, self.cache, self.tokens, self.times = request, cache, [token], [time]

    @property
    def finished(self):
        return len(self.tokens) == self.request.output_tokens


def _prefill(rank, model, request, roofline):
    """Prefill one request on this GPU: (cache, first token), a generator."""
    prompt = request.prompt[None]  # (1, T)
    cache = model.new_cache(1, prompt.shape[1] + request.output_tokens)
    logits = model.logits(model.hidden_states(prompt, cache)[:, -1])  # (1, vocab)
    cost = prefill(ServedShape.of(model.config), roofline, 1, prompt.shape[1])
    meta = ServingPass("prefill", (request.id,))
    yield rank.compute(seconds=cost.seconds, label=meta.label, meta=meta)
    return cache, greedy_token(logits)  # (1,)


def _decode_step(rank, model, running, roofline):
    """One decode step of every running sequence: the weights read once for all."""
    for a in running:
        logits = model.logits(model.hidden_states(a.tokens[-1][:, None], a.cache)[:, -1])
        a.tokens.append(greedy_token(logits))
    contexts = [a.cache[0].length for a in running]
    cost = decode_batch(ServedShape.of(model.config), roofline, contexts)
    meta = ServingPass("decode", tuple(a.request.id for a in running))
    yield rank.compute(seconds=cost.seconds, label=meta.label, meta=meta)
    for a in running:
        a.times.append(rank.now)


def _finish(running, done):
    for a in [a for a in running if a.finished]:
        running.remove(a)
        done.append(a)


def _colocated(rank, model, mine, deployment, roofline):
    waiting, running, done = deque(mine), [], []
    while waiting or running:
        if waiting and len(running) < deployment.batch:  # a prefill first, if there is room
            request = waiting.popleft()
            cache, token = yield from _prefill(rank, model, request, roofline)
            running.append(_Active(request, cache, token, rank.now))
        else:
            yield from _decode_step(rank, model, running, roofline)
        _finish(running, done)
    return done


def _kv_tag(request):
    return 2 * request.id


def _pack(cache):
    """Every layer's keys and values as one array (layers, 2, B, H, T, hd)."""
    filled = [(c.keys[:, :, : c.length], c.values[:, :, : c.length]) for c in cache]
    return np.stack([np.stack(pair) for pair in filled])


def _unpack(model, request, kv):
    cache = model.new_cache(1, len(request.prompt) + request.output_tokens)
    for layer, c in zip(kv, cache, strict=True):
        c.extend(layer[0], layer[1])
    return cache


def _prefill_pool(rank, model, mine, deployment, roofline, decode_rank):
    sent, done = [], []
    for request in mine:
        cache, token = yield from _prefill(rank, model, request, roofline)
        active = _Active(request, cache, token, rank.now)
        if active.finished:
            done.append(active)
            continue
        dst = decode_rank(request)
        meta = KVTransfer(request.id, rank.id, dst, 0, 0.0, 0.0)
        sent.append((yield rank.isend(dst, _pack(cache), _kv_tag(request), "kv cache", meta)))
        sent.append((yield rank.isend(dst, token, _kv_tag(request) + 1, "first token")))
        done.append(active)  # its first token is streamed from here
    if sent:
        yield rank.wait(*sent)
    return done


class _Arriving(NamedTuple):
    """A request a decode GPU expects: the receives of its KV cache and first token."""

    request: Request
    kv: object  # Handle of the KV cache's receive
    token: object  # Handle of the first token's receive

    @property
    def arrived(self):
        return self.kv.done and self.token.done


def _decode_pool(rank, model, mine, deployment, roofline, prefill_rank):
    pending = deque()
    for request in mine:
        kv = yield rank.irecv(prefill_rank(request), _kv_tag(request))
        token = yield rank.irecv(prefill_rank(request), _kv_tag(request) + 1)
        pending.append(_Arriving(request, kv, token))
    running, done = [], []
    while pending or running:
        for arriving in [a for a in pending if a.arrived]:  # the earliest requests first
            if len(running) == deployment.batch:
                break
            pending.remove(arriving)
            cache = _unpack(model, arriving.request, arriving.kv.value)
            active = _Active(arriving.request, cache, arriving.token.value, None)
            active.times = []  # the first token's time is the prefill GPU's
            running.append(active)
        if not running:
            yield rank.wait(pending[0].kv, pending[0].token)
            continue
        yield from _decode_step(rank, model, running, roofline)
        _finish(running, done)
    return done


def serve(model, requests, deployment, cluster, roofline):
    """Serve ``requests`` on ``cluster`` as ``deployment`` says: a :class:`ServingRun`."""
    deployment.check()
    roofline.check()
    if deployment.gpus > cluster.size:
        raise ConfigError(
            f"the deployment's prefill={deployment.prefill} + decode={deployment.decode} = "
            f"{deployment.gpus} GPUs, but the cluster has {cluster.size}: give a cluster of "
            f"at least {deployment.gpus} ranks, or at most {cluster.size} GPUs"
        )
    requests = tuple(requests)
    for r in requests:
        if len(r.prompt) + r.output_tokens > model.config.max_len:
            raise ConfigError(
                f"request {r.id}: {len(r.prompt)} prompt + {r.output_tokens} output tokens "
                f"exceed the model's max_len={model.config.max_len} positions"
            )
    p, d = deployment.prefill, deployment.decode
    index = {r.id: i for i, r in enumerate(requests)}

    def prefill_rank(r):
        return index[r.id] % p

    def decode_rank(r):
        return p + index[r.id] % d

    def program(rank):
        if rank.id >= deployment.gpus:
            return []
        if not deployment.disaggregated:
            mine = [r for r in requests if decode_rank(r) == rank.id]
            return (yield from _colocated(rank, model, mine, deployment, roofline))
        if rank.id < p:
            mine = [r for r in requests if prefill_rank(r) == rank.id]
            return (yield from _prefill_pool(rank, model, mine, deployment, roofline, decode_rank))
        mine = [r for r in requests if decode_rank(r) == rank.id and r.output_tokens > 1]
        return (yield from _decode_pool(rank, model, mine, deployment, roofline, prefill_rank))

    result = cluster.run(program)
    return _collect(requests, deployment, result)


def _collect(requests, deployment, result):
    """Join each request's tokens and times from the GPUs that made them."""
    tokens, times = {}, {}
    for active in (a for returned in result.returns for a in returned or ()):
        rid = active.request.id
        # a decode GPU's tokens start with the first token its prefill GPU sent
        known = tokens.setdefault(rid, [])
        known.extend(active.tokens[1:] if known else active.tokens)
        times.setdefault(rid, []).extend(active.times)
    ordered = [np.concatenate(tokens[r.id]) for r in requests]
    request_times = tuple(
        RequestTimes(r.id, 0.0, len(r.prompt), tuple(sorted(times[r.id]))) for r in requests
    )
    transfers = tuple(
        KVTransfer(t.meta.request, t.src, t.dst, t.nbytes, t.start, t.end)
        for t in result.trace.transfers
        if isinstance(t.meta, KVTransfer)
    )
    return ServingRun(
        deployment,
        requests,
        ordered,
        request_times,
        serving_metrics(request_times),
        transfers,
        result,
    )
