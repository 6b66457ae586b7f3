"""Saving the training state of a sharded run: a full state dict against a sharded one.

The state is what a run needs to resume: the fp32 master weights and the optimizer state
(Adam's ``m`` and ``v``), 12 bytes per parameter. PyTorch FSDP and Accelerate offer two ways
to save it (``StateDictType.FULL_STATE_DICT`` / ``SHARDED_STATE_DICT``):

* **full**: every shard is all-gathered and the first rank of the data-parallel group keeps
  the whole state (FSDP's ``rank0_only``): one file anyone can load, at the price of 12Ψ
  bytes on one rank and a gather of everything;
* **sharded**: each rank writes its own 1/N shard (12Ψ/N bytes of write buffer), with no
  communication; loading needs the same sharding (or a re-shard).

:func:`save_state` runs inside a rank program after the last step; the buffers are charged to
the run's tracker as ``comm_buffers`` named ``"full state dict"`` or ``"sharded state dict"``,
so each one's memory peak is read from the trace (:func:`state_dict_peaks`).
"""

from dataclasses import dataclass

import numpy as np

from ...errors import ConfigError

__all__ = ["STATE_DICTS", "save_state", "SavedState", "state_dict_peaks"]

STATE_DICTS = ("full", "sharded")
_NAMES = {"full": "full state dict", "sharded": "sharded state dict"}


@dataclass
class SavedState:
    """What one rank saved: ``tensors[key]`` is ``{"master", "m", "v"}`` (flat arrays: the
    rank's shard, or the whole padded state on the keeping rank of a full save)."""

    kind: str
    rank: int
    whole: bool  # this rank holds the whole state (full save, first rank of its group)
    tensors: dict


def check_state_dict(kind):
    if kind not in STATE_DICTS:
        raise ConfigError(f"state_dict={kind!r} is not one of {', '.join(STATE_DICTS)}")
    return kind


def _state_shards(sync, optimizer):
    """``{key: {"master": shard, "m": shard, "v": shard}}`` of a ZeRO rank."""
    masters = sync.master_shards()
    out = {}
    for key, master in masters.items():
        state = getattr(optimizer, "state", {}).get(sync.state_key(key), {})
        out[key] = {"master": master} | {k: state[k] for k in ("m", "v") if k in state}
    return out


def save_state(rank, sync, optimizer, group, kind):
    """Save this rank's part of the state as ``kind`` (a generator; use ``yield from``)."""
    shards = _state_shards(sync, optimizer)
    elements = sum(a.size for tensors in shards.values() for a in tensors.values())
    if kind == "sharded":
        block = rank.alloc("comm_buffers", _NAMES[kind], elements, bytes_per_element=4)
        saved = SavedState(
            kind,
            rank.id,
            False,
            {k: {n: a.copy() for n, a in t.items()} for k, t in shards.items()},
        )
        rank.free(block)  # written out
        return saved
    keeper = group.index(rank.id) == 0
    block = rank.alloc(
        "comm_buffers", _NAMES[kind], elements * group.size if keeper else 0, bytes_per_element=4
    )
    tensors = {}
    for key, parts in shards.items():
        tensors[key] = {}
        for name, array in parts.items():
            whole = yield from rank.all_gather(np.ascontiguousarray(array), group=group)
            if keeper:
                tensors[key][name] = whole
    rank.free(block)
    return SavedState(kind, rank.id, keeper, tensors if keeper else {})


def state_dict_peaks(trace, n_ranks):
    """Per rank, the most bytes its state-dict buffers held at once, read from the trace."""
    held, peak = [0] * n_ranks, [0] * n_ranks
    for event in trace.memory:
        if event.name in _NAMES.values():
            held[event.rank] += event.nbytes
            peak[event.rank] = max(peak[event.rank], held[event.rank])
    return peak
