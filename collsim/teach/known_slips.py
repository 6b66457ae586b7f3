"""Slips that recur across lessons, declared once: the quantities and alternative
definitions several exercises share, in the lesson's language.

Examples
--------
>>> slips = one_message_slips(alpha=2e-6, beta=25e9, nbytes=2**20, lang="en")
>>> [q.symbol for q in slips["given"]], slips["alternatives"][0].name
(['α', 'n/β'], '1 MB = 10^6 B in place of 1 MiB')
"""

from .diagnosis import Alternative, Quantity
from .messages import message

__all__ = ["one_message_slips"]


def one_message_slips(alpha, beta, nbytes, lang="en"):
    """``given`` and ``alternatives`` for a check of one message's time, α + n/β: the
    latency left out, the wire time left out, and a decimal megabyte for a MiB."""
    return {
        "given": [
            Quantity("α", alpha, message("meaning_latency", lang), "s"),
            Quantity("n/β", nbytes / beta, message("meaning_wire", lang), "s"),
        ],
        "alternatives": [
            Alternative(
                message("decimal_megabyte", lang),
                alpha + nbytes / 1.048576 / beta,
                message("decimal_megabyte_why", lang),
            )
        ],
    }
