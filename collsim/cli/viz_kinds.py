"""The registry of ``collsim viz`` kinds: one :class:`Kind` per figure, added by :func:`kind`.

Each kind is one function decorated with :func:`kind` in :mod:`.viz_collectives` or
:mod:`.viz_training`: it receives the parsed flags and returns a matplotlib Figure;
saving, the format check and the message are shared (:mod:`.viz`).  ``arguments`` adds
the kind's flags, ``example`` is the line its ``--help`` shows, and ``movie(args)``
(the kinds that change over time) returns its :class:`~collsim.viz.animation.Animation`,
which ``--out x.gif``, ``--out x.html`` and ``--frames DIR`` write.
"""

from dataclasses import dataclass

from ..errors import ConfigError

__all__ = ["Kind", "KINDS", "kind", "FORMATS", "ANIMATED", "positive_number"]

FORMATS = ("png", "svg", "pdf")
ANIMATED = ("gif", "html")  # for kinds with a ``movie`` function


@dataclass(frozen=True)
class Kind:
    name: str
    help: str  # one line for `collsim viz --help`
    description: str  # what the figure teaches, for `collsim viz NAME --help`
    arguments: object  # function(parser) that adds the kind's flags, or None
    draw: object  # function(args) -> matplotlib Figure
    example: str = "--params 7B --world-size 8 --out out.svg"  # flags for the --help example
    movie: object = None  # function(args) -> collsim.viz.animation.Animation


KINDS = {}  # name -> Kind, in the order `collsim viz --help` lists them


def kind(name, help, description, arguments=None, **extra):
    """Register the decorated ``draw(args) -> Figure`` as ``collsim viz NAME``
    (``extra``: ``example=``, ``movie=``)."""

    def register_kind(draw):
        KINDS[name] = Kind(name, help, description, arguments, draw, **extra)
        return draw

    return register_kind


def positive_number(text, flag, high, example):
    """A positive finite number flag (``--fps``), named as typed when it is refused."""
    from ..viz.limits import check_rate

    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: not a number; give e.g. {flag} {example}") from None
    return check_rate(value, flag, high, example, shown=repr(text))
