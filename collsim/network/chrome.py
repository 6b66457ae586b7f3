"""A trace in the Chrome/Perfetto JSON trace format, with arrows from each send to its receive.

One process per rank and one thread per stream (compute, sends, receives); a transfer is a
span on its sender's send thread and on its receiver's receive thread, and a *flow* (the
format's ``"ph": "s"`` / ``"ph": "f"`` pair with one ``id``) links the two, so Perfetto and
chrome://tracing draw an arrow from the send to the receive it matched.  Several runs can
share one file (:func:`chrome_json` with several parts): each run's ranks get their own
processes, named after the run.

Examples
--------
>>> import json
>>> from collsim.network.trace import Trace
>>> trace = Trace()
>>> trace.add_transfer(0, 1, 0, 800, 0.0, 1e-6, ((0, 1),), "send")
>>> events = json.loads(chrome_json([ChromePart(trace)]))["traceEvents"]
>>> [(e["ph"], e["pid"], e["tid"]) for e in events if e["ph"] in "sf"]
[('s', 0, 1), ('f', 1, 2)]
"""

import json
from dataclasses import asdict, dataclass, is_dataclass

from .memory import CATEGORIES, replay

__all__ = ["ChromePart", "chrome_json", "write_chrome", "STREAMS", "RUN_PIDS"]

STREAMS = ((0, "compute"), (1, "comm: send"), (2, "comm: recv"))  # thread id, name
FLOW_CAT = "transfer"  # the category of a transfer's spans and of its flow
RUN_PIDS = 100_000  # process ids a run takes in a file of several: run i's rank r is i·this + r


@dataclass(frozen=True)
class ChromePart:
    """One run's trace in a Chrome file: ``name`` (``""`` for a file of one run) prefixes
    its process names ("FSDP: rank 3"); ``pid_base`` is added to its ranks."""

    trace: object
    name: str = ""
    pid_base: int = 0


def chrome_json(parts):
    """The Chrome/Perfetto JSON text of ``parts`` (a list of :class:`ChromePart`).

    A compute span's record (``meta``) appears as its event's ``args``; a typed transfer
    tag's fields (``to_args()``) and its record's (``meta``: a collective's chunks) join its
    transfer's.  Flow ids count transfers across all parts in order, so the text is the
    same bytes for the same runs.
    """
    meta, events, flow_id = [], [], 0
    for part in parts:
        ranks = set()
        for c in part.trace.computes:
            ranks.add(c.rank)
            args = {} if c.meta is None else _record_args(c.meta)
            pid = part.pid_base + c.rank
            events.append(_span(c.label or "compute", pid, 0, c.start, c.end, args))
        for t in part.trace.transfers:
            ranks.update((t.src, t.dst))
            events += _transfer_events(t, part.pid_base, flow_id)
            flow_id += 1
        for event, held in replay(part.trace.memory):
            ranks.add(event.rank)
            events.append(_counter(part.pid_base + event.rank, event.time, held))
        meta += _names(part, sorted(ranks))
    return json.dumps({"traceEvents": meta + events, "displayTimeUnit": "ns"}, sort_keys=True)


def write_chrome(parts, path):
    """Write :func:`chrome_json` of ``parts`` to ``path``; returns the text."""
    text = chrome_json(parts)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return text


def _transfer_events(t, pid_base, flow_id):
    """The send span, the receive span and the flow from one to the other."""
    args = {"bytes": t.nbytes, "tag": str(t.tag), "src": t.src, "dst": t.dst}
    if hasattr(t.tag, "to_args"):  # a typed tag: its fields too
        args |= t.tag.to_args()
    if t.meta is not None:  # and the transfer's record (a collective's chunk move)
        args |= _record_args(t.meta)
    name = t.label or "transfer"
    src, dst = pid_base + t.src, pid_base + t.dst
    # both ends sit at the transfer's start, where both spans begin, with the spans' cat:
    # Chrome's DevTools binds a flow end to the event of equal cat, pid, tid and ts, and
    # Perfetto to the span around it ("bp": "e": the receive, not the thread's next span)
    flow = {"cat": FLOW_CAT, "name": "send -> recv", "id": flow_id, "ts": t.start * 1e6}
    send = _span(f"{name} -> r{t.dst}", src, 1, t.start, t.end, args)
    receive = _span(f"{name} <- r{t.src}", dst, 2, t.start, t.end, args)
    return [
        {**send, "cat": FLOW_CAT},
        {**receive, "cat": FLOW_CAT},
        {**flow, "ph": "s", "pid": src, "tid": 1},
        {**flow, "ph": "f", "bp": "e", "pid": dst, "tid": 2},
    ]


def _names(part, ranks):
    prefix = f"{part.name}: " if part.name else ""
    out = []
    for r in ranks:
        pid = part.pid_base + r
        out.append(
            {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"{prefix}rank {r}"}}
        )
        for tid, stream in STREAMS:
            out.append(
                {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": stream}}
            )
    return out


def _span(name, pid, tid, start, end, args):
    # Chrome trace times are microseconds
    return {
        "ph": "X",
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": start * 1e6,
        "dur": (end - start) * 1e6,
        "args": args,
    }


def _counter(pid, time, held):
    # a counter's args are its series: Perfetto draws one track each, chrome://tracing
    # stacks them; every category is written so that each series starts at its value
    return {
        "ph": "C",
        "name": "memory (bytes)",
        "pid": pid,
        "ts": time * 1e6,
        "args": {c: held[c] for c in CATEGORIES},
    }


def _record_args(record):
    """A span's record as JSON-ready ``args``: its ``to_args()``, a dataclass's fields, or
    its ``repr`` (the trace does not know the record types of the layers above it)."""
    if hasattr(record, "to_args"):
        return record.to_args()
    if is_dataclass(record) and not isinstance(record, type):
        return asdict(record)
    return {"meta": repr(record)}
