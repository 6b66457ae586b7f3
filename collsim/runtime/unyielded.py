"""Operations a rank program made and never yielded: the forgotten ``yield``.

``rank.recv(left)`` only builds an operation; it runs when the program yields it, and a
collective (``rank.all_reduce(x)``, a generator of operations) runs when the program
hands it on with ``yield from``.  Without the ``yield`` nothing happens and the program
goes on with the operation object itself, so the mistake would surface far away (a
``Recv(...)`` returned as the rank's result, a hang, a numpy error in a checker).

So each :class:`~collsim.runtime.rank.Rank` keeps the operations its methods built and
that were not yet yielded (``rank._unyielded``: the operation, or a :class:`Made` record
for a collective); the engine takes each one off as the program yields it, and when the
rank's program ends, what is left was forgotten: the run stops with an error naming the
rank, each operation and the line that runs it.  This is read at the end of the rank's
program, never when an object is garbage-collected, so it is deterministic.

Examples
--------
>>> import numpy as np, collsim
>>> def program(rank):
...     right, left = (rank.id + 1) % rank.size, (rank.id - 1) % rank.size
...     h = yield rank.isend(right, np.ones(2))
...     y = rank.recv(left)                  # built, never yielded: it never runs
...     return y
>>> collsim.Cluster(collsim.topology.ring(2)).run(program)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
collsim.errors.UnyieldedOperationError: rank 0 ended at t=0 s without yielding the operation...
  rank.recv(1), which the program returned: write `y = yield rank.recv(1)`
...
"""

import inspect
from typing import NamedTuple

from ..errors import CollsimError, UnyieldedOperationError
from .memory import MemoryBlock
from .ops import ANY, Compute, Exchange, Recv, Send, Start, Wait
from .process import attach_rank

__all__ = [
    "Made",
    "settle",
    "forget_program",
    "forgotten",
    "check_ended",
    "forgotten_by_rank",
    "first_unyielded_error",
    "unyielded_error",
    "not_an_operation",
    "forgotten_lines",
]

_RULE = (
    "an operation runs only when the rank program yields it, and a collective when "
    "the program runs it with `yield from`"
)


class Made(NamedTuple):
    """A collective a rank method returned (a generator of operations), not yet run."""

    call: str  # the method, as the user wrote it: "all_reduce"
    generator: object


def settle(made, op):
    """``op`` was yielded: take it off ``made``, and drop the collectives that have
    started (run with ``yield from`` or by ``rank.start``).  The engine calls this only
    when ``op`` is not simply the last operation made (then it pops it itself)."""
    for i in range(len(made) - 1, -1, -1):
        entry = made[i]
        if entry is op or (type(entry) is Made and _started(entry.generator)):
            del made[i]


def forget_program(made, program):
    """``rank.start(program)`` took ``program``: it runs, even if later (tasks on one
    stream run in order)."""
    made[:] = [e for e in made if not (type(e) is Made and e.generator is program)]


def forgotten(made):
    """What is left of ``made`` once started collectives are dropped."""
    made[:] = [e for e in made if not (type(e) is Made and _started(e.generator))]
    return list(made)


def check_ended(proc, made, returned, processes, now):
    """``proc`` ended (at ``now``, returning ``returned``) and its rank's ``made`` is not
    empty: raise the error, once no other process of the rank can still yield them (else
    the end of the run checks again)."""
    rank = proc.rank
    if not forgotten(made) or any(
        p.rank is rank and p is not proc and not p.handle.done for p in processes
    ):
        return
    error = unyielded_error(rank.id, list(made), now, returned)
    attach_rank(error, proc, now)
    raise error


def forgotten_by_rank(processes):
    """``{rank id: what it made and never yielded}`` at the end of a run."""
    made = {}
    for proc in processes:
        if proc.rank._unyielded and forgotten(proc.rank._unyielded):
            made[proc.rank.id] = proc.rank._unyielded
    return made


def first_unyielded_error(made, processes, now):
    """The error for the lowest rank of ``made`` (:func:`forgotten_by_rank`)."""
    rank_id = min(made)
    main = next(p for p in processes if p.rank.id == rank_id)
    error = unyielded_error(rank_id, made[rank_id], now, main.handle.value)
    attach_rank(error, main, now)
    return error


def _started(generator):
    return inspect.getgeneratorstate(generator) != inspect.GEN_CREATED


def _call_and_fix(entry):
    """``(how the call reads, the line that runs it)`` of a made operation.

    >>> _call_and_fix(Recv(3))
    ('rank.recv(3)', 'y = yield rank.recv(3)')
    >>> _call_and_fix(Made("all_reduce", None))
    ('rank.all_reduce(...)', 'y = yield from rank.all_reduce(...)')
    """
    if type(entry) is Made:
        call = f"rank.{entry.call}(...)"
        return call, f"y = yield from {call}"
    if isinstance(entry, Send):
        tag = "" if entry.tag == 0 else f", tag={entry.tag!r}"
        name = "send" if entry.blocking else "isend"
        call = f"rank.{name}({entry.dst}, ...{tag})"
        return call, ("yield " if entry.blocking else "h = yield ") + call
    if isinstance(entry, Recv):
        tag = "" if entry.tag == 0 else f", tag={entry.tag!r}"
        name = "recv" if entry.blocking else "irecv"
        call = f"rank.{name}({'ANY' if entry.src is ANY else entry.src}{tag})"
        return call, ("y = yield " if entry.blocking else "h = yield ") + call
    if isinstance(entry, Compute):
        call = f"rank.compute(seconds={entry.seconds:g})"
        return call, f"yield {call}"
    simple = {
        Wait: ("rank.wait(...)", "y = yield "),
        Exchange: ("rank.exchange(...)", "got = yield "),
        Start: ("rank.start(...)", "h = yield "),
    }
    call, head = simple.get(type(entry), (repr(entry), "yield "))
    return call, head + call


def unyielded_error(rank_id, made, now, returned, plain=False):
    """The :class:`~collsim.errors.UnyieldedOperationError` of a rank program that ended (at
    simulated second ``now``, returning ``returned``) leaving ``made`` never yielded;
    ``plain``: the program is a plain function, not a generator."""
    n = len(made)
    ops, them, they = ("operation", "it", "it") if n == 1 else (f"{n} operations", "them", "they")
    if plain:
        head = (
            f"rank {rank_id}'s program is a plain function (it has no `yield`), so the "
            f"{ops} it made never ran; make it a generator that yields {them}:"
        )
    else:
        head = (
            f"rank {rank_id} ended at t={now:.6g} s without yielding the {ops} it made, "
            f"so {they} never ran:"
        )
    lines = [head]
    for entry in made:
        call, fix = _call_and_fix(entry)
        own = entry is returned or (type(entry) is Made and entry.generator is returned)
        lines.append(f"  {call}{', which the program returned' if own else ''}: write `{fix}`")
    lines.append(_RULE)
    error = UnyieldedOperationError("\n".join(lines))
    if plain:  # no process to attach it to (attach_rank names the rank of the others)
        error.rank = rank_id
    return error


def forgotten_lines(made_by_rank):
    """The deadlock report's lines for ranks still holding operations they never
    yielded (``{rank: made}``): often why the others wait."""
    lines = []
    for rank_id, made in sorted(made_by_rank.items()):
        for entry in made:
            call, fix = _call_and_fix(entry)
            lines.append(
                f"rank {rank_id} made {call} and never yielded it, so it never ran: write `{fix}`"
            )
    return lines


def not_an_operation(rank_id, op, made):
    """The error of a program that yielded ``op``, which is not an operation."""
    collective = next((e for e in made if type(e) is Made and e.generator is op), None)
    if collective is not None:
        call, fix = _call_and_fix(collective)
        return UnyieldedOperationError(
            f"rank {rank_id} yielded {call} with `yield`: a collective is a generator of "
            f"operations, run with `yield from`: write `{fix}`"
        )
    hint = ""
    if isinstance(op, MemoryBlock):  # rank.alloc is called, never yielded
        hint = (
            "; rank.alloc, rank.free and rank.allocated take no simulated time: call "
            "them without yield"
        )
    elif inspect.isgenerator(op):
        hint = "; a generator (a collective or a program of your own) runs with `yield from`"
    return CollsimError(
        f"rank {rank_id} yielded {op!r}, which is not an operation: "
        "yield rank.send(...), rank.recv(...), rank.wait(...), rank.compute(...) "
        f"or use `yield from` for a collective{hint}"
    )
