"""What a rank's operations accept: the checks :class:`~collsim.runtime.rank.Rank` runs on
its arguments before it builds an operation (a peer in range, a hashable tag, a payload
that can travel, a writeable ``out=``), each naming the rank and what is wrong in a
:class:`~collsim.errors.ConfigError`.

:class:`RankChecks` holds the checks that read the rank (its id and size), as methods
``Rank`` inherits; the functions below read only their arguments.  ``plain_send`` and
``plain_recv`` are the exact type tests that let :meth:`Rank.exchange
<collsim.runtime.rank.Rank.exchange>` post common entries as given.
"""

import numpy as np

from ..errors import ConfigError, shorten
from .ops import ANY, CountOnly, TagPrefix, is_payload

__all__ = ["RankChecks", "PAYLOADS", "check_label", "plain_send", "plain_recv", "exchange_entry"]


class RankChecks:
    """The argument checks of a :class:`~collsim.runtime.rank.Rank`'s methods (it reads
    ``self.id`` and ``self.size``; no state of its own)."""

    __slots__ = ()

    def _peer(self, peer, verb):
        if type(peer) is int and 0 <= peer < self.size:
            return peer
        whole = isinstance(peer, int | np.integer) and not isinstance(peer, bool | np.bool_)
        if not whole or not 0 <= peer < self.size:
            kind = "" if whole else f" (a {type(peer).__name__}, not an int)"
            raise ConfigError(
                f"rank {self.id} cannot {verb} rank {peer!r}{kind}: ranks are 0..{self.size - 1}"
            )
        return int(peer)

    def _source(self, src):
        return src if src is ANY else self._peer(src, "recv from")

    def _recv_tag(self, tag):
        return tag if tag is ANY or isinstance(tag, TagPrefix) else self._tag(tag)

    def _tag(self, tag):
        if type(tag) is int:
            return tag
        try:
            hash(tag)
        except TypeError:
            raise ConfigError(
                f"rank {self.id}: tag {tag!r} cannot be a message tag: tags are matched as "
                "dictionary keys, so use an int, a string or a tuple of them"
            ) from None
        return tag

    def _out(self, out, reduce):
        if reduce is not None and not (isinstance(reduce, np.ufunc) and reduce.nin == 2):
            raise ConfigError(
                f"rank {self.id}: recv(reduce={reduce!r}) must be a binary numpy ufunc such "
                "as np.add or np.maximum"
            )
        if out is None or isinstance(out, CountOnly):
            if reduce is not None and out is None:
                raise ConfigError(
                    f"rank {self.id}: recv(reduce={reduce.__name__}) reduces into a buffer: "
                    "pass out= as well"
                )
            return None
        if not isinstance(out, np.ndarray):
            raise ConfigError(
                f"rank {self.id}: recv(out={out!r}) must be a numpy array, "
                f"not a {type(out).__name__}"
            )
        if not out.flags.writeable:
            raise ConfigError(
                f"rank {self.id}: recv(out=...) got a read-only array (shape {out.shape}, "
                f"{out.dtype}): pass a writeable one, e.g. out.copy()"
            )
        return out

    def _payload(self, array, dst):
        if not is_payload(array):
            raise ConfigError(
                f"rank {self.id} tried to send {shorten(array)} (a {type(array).__name__}) to "
                f"rank {dst}: "
                "only numpy arrays (or CountOnly sizes) travel over the network"
            )
        return array


PAYLOADS = (CountOnly, np.ndarray)  # what travels, exactly (subclasses take the checks)


def check_label(label):
    if not isinstance(label, str):
        raise ConfigError(f"a label or name must be a string, got {label!r}")
    return label


def plain_send(entry, size):
    """Whether an exchange's send entry is ``(dst, payload, tag)`` with an int peer in
    range, an array or a size, and an int tag: posted as it is, without isend's checks."""
    return (
        type(entry) is tuple
        and len(entry) == 3
        and type(entry[0]) is int
        and 0 <= entry[0] < size
        and type(entry[2]) is int
        and type(entry[1]) in PAYLOADS
    )


def plain_recv(entry, size):
    """Whether an exchange's receive entry is ``(src, tag)`` with an int peer in range and
    an int tag: posted as it is, without irecv's checks."""
    return (
        type(entry) is tuple
        and len(entry) == 2
        and type(entry[0]) is int
        and 0 <= entry[0] < size
        and type(entry[1]) is int
    )


def exchange_entry(entry, where, form, least, most):
    """One ``exchange()`` entry as a tuple, checked for its length."""
    if not isinstance(entry, tuple | list) or not least <= len(entry) <= most:
        raise ConfigError(f"exchange({where}=...): each entry is {form}, got {entry!r}")
    return entry
