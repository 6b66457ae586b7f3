"""Run greedy decoding on a cluster and read back the tokens, the times and the all-reduces.

Examples
--------
Two TP ranks on a switch generate what one device generates:

>>> import numpy as np, collsim
>>> from collsim.nn import Decoder, DecoderConfig
>>> model = Decoder.init(DecoderConfig(vocab=32, hidden=16, heads=4, layers=2))
>>> prompt = np.array([[1, 2, 3]])
>>> run = generate_on_cluster(model, prompt, 4, InferenceSplit(tp=2),
...                           collsim.Cluster(collsim.topology.switch(2)))
>>> bool(np.array_equal(run.tokens, model.generate(prompt, 4).tokens))
True
>>> len(run.all_reduces), run.all_reduces[-1].message_bytes  # 2 a layer a step; B·hidden·8
(16, 128)
"""

from typing import NamedTuple

from ...collectives.records import is_collective
from ...errors import ConfigError
from ...nn.decoder import check_prompt
from .config import InferenceSplit
from .program import decode_program
from .shard import RankWeights

__all__ = ["AllReduceCall", "InferenceRun", "generate_on_cluster", "all_reduce_calls"]


class AllReduceCall(NamedTuple):
    """One all-reduce of one TP group, read from the trace."""

    group: int  # the group's id in the run (one TP group per pipeline stage)
    call: int  # its position in the group's sequence: 0, 1, ...
    algorithm: str  # the algorithm that ran
    steps: int  # the schedule's steps that moved data
    message_bytes: int  # the buffer each rank reduced: B·T·hidden·8 (T = 1 when decoding)
    received_bytes: int  # the most bytes one rank received in it
    start: float  # simulated seconds: its first transfer starts
    end: float  # simulated seconds: its last transfer ends

    @property
    def seconds(self):
        return self.end - self.start


class InferenceRun(NamedTuple):
    """What :func:`generate_on_cluster` returns."""

    tokens: object  # (B, new_tokens) int64: the generated ids (the last stage's)
    logits: object  # (B, new_tokens, vocab): the logits each id was chosen from
    token_times: tuple  # simulated seconds at which each token was known
    all_reduces: tuple  # AllReduceCall per all-reduce, in the order they started
    outputs: list  # RankOutput per rank (every last-stage rank holds tokens and logits)
    result: object  # the cluster's RunResult: trace, stats, time

    @property
    def decode_step_seconds(self):
        """Simulated seconds between consecutive tokens (the decode steps)."""
        return tuple(b - a for a, b in zip(self.token_times, self.token_times[1:], strict=False))


def all_reduce_calls(trace, message_bytes):
    """The TP groups' all-reduces of a run's trace; ``message_bytes[call]`` is the buffer
    size of a group's call number ``call`` (every TP group makes the same sequence)."""
    calls = {}
    for t in trace.transfers:
        if not is_collective(t.tag) or (t.tag.collective, t.tag.dim) != ("all_reduce", "tp"):
            continue
        key = (t.tag.group, t.tag.call)
        entry = calls.setdefault(key, {"alg": t.tag.algorithm, "steps": set(), "recv": {}})
        entry["steps"].add(t.tag.step)
        entry["recv"][t.dst] = entry["recv"].get(t.dst, 0) + t.nbytes
        entry["start"] = min(entry.get("start", t.start), t.start)
        entry["end"] = max(entry.get("end", t.end), t.end)
    found = [
        AllReduceCall(
            group,
            call,
            e["alg"],
            len(e["steps"]),
            message_bytes[call],
            max(e["recv"].values()),
            e["start"],
            e["end"],
        )
        for (group, call), e in calls.items()
    ]
    return tuple(sorted(found, key=lambda c: (c.start, c.group, c.call)))


def generate_on_cluster(model, prompt, new_tokens, split, cluster, roofline=None):
    """Greedy generation of ``new_tokens`` after ``prompt`` with ``split`` on ``cluster``:
    ranks ``0 .. tp·pp-1`` serve; any further ranks of the cluster stay idle.  With a
    :class:`~.roofline.Roofline`, each compute span takes the longer of its FLOPs at the
    peak and its HBM reads at the bandwidth (otherwise its FLOPs at the cluster's rate)."""
    if not isinstance(split, InferenceSplit):
        raise ConfigError(f"split must be an InferenceSplit, got {split!r}")
    split.check(model.config)
    prompt = check_prompt(prompt, model.config, new_tokens)
    split.check_prompt(prompt.shape[1])
    if cluster.size < split.world_size:
        raise ConfigError(
            f"tp={split.tp} x pp={split.pp} needs {split.world_size} ranks, but the cluster "
            f"has {cluster.size}: give a cluster of at least {split.world_size} ranks"
        )
    if roofline is not None:
        roofline.check()
    weights = [RankWeights.from_model(model, split, r) for r in range(split.world_size)]
    result = cluster.run(decode_program(weights, split, prompt, new_tokens, roofline))
    result.returns[split.world_size :] = []  # the idle ranks returned nothing
    # the last stage's last CP rank holds the logits (its TP rank 0 reports them)
    last = result.returns[split.world_size - split.tp]
    return InferenceRun(
        last.tokens,
        last.logits,
        last.token_times,
        all_reduce_calls(result.trace, _message_bytes(model, split, prompt, new_tokens)),
        result.returns,
        result,
    )


def _message_bytes(model, split, prompt, new_tokens):
    """Bytes of each call of a TP group, in order: it reduces (B, T, hidden) twice a layer,
    T its CP rank's run of the prompt at the prefill and 1 after (float64)."""
    batch, prompt_len = prompt.shape
    per_step = 2 * len(model.blocks) // split.pp
    lengths = [prompt_len // split.cp] + [1] * (new_tokens - 1)
    return [batch * t * model.config.hidden * 8 for t in lengths for _ in range(per_step)]
