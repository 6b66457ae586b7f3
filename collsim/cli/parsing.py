"""The argparse pieces every command shares that load nothing heavy: the help formatter and
a negative value kept with its flag.  :func:`collsim.cli.main` uses them before it knows
which command runs, so ``collsim --version`` stays light (:mod:`.common` re-exports them).
"""

import argparse
import re

__all__ = ["Formatter", "join_negative_values"]


class Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Keep the description's line breaks (they carry examples); show each default once.

    A help text that already names its default ("(default 8)") is left alone, and so are
    flags without a meaningful default (None, or False for a switch).
    """

    def _get_help_string(self, action):
        text = action.help or ""
        if (
            "default" in text.lower()
            or action.default is None
            or action.default is False
            or action.default is argparse.SUPPRESS
        ):
            return text
        return super()._get_help_string(action)


# an option followed by a value that starts with "-" and a digit, ".", "inf" or "nan":
# argparse takes "-1us" for an unknown option and says only "expected one argument"
_NEGATIVE_VALUE = re.compile(r"^-(\d|\.\d|inf|nan)", re.IGNORECASE)


def join_negative_values(argv):
    """Write ``--latency -1us`` as ``--latency=-1us`` so argparse passes the value on and
    the command can reject it by name.

    >>> join_negative_values(["run", "--latency", "-1us", "-k", "-3", "--json"])
    ['run', '--latency=-1us', '-k=-3', '--json']
    """
    out, i = [], 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return out + list(argv[i:])
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if (
            token.startswith("-")
            and len(token) > 1
            and not _NEGATIVE_VALUE.match(token)
            and "=" not in token
            and nxt is not None
            and _NEGATIVE_VALUE.match(nxt)
        ):
            out.append(f"{token}={nxt}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out
