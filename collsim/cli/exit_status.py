"""The exit statuses every ``collsim`` command shares, and the --help lines that say them.

* 0: the command did what was asked, and its check (if it has one) passed;
* 1: a negative verdict: the outputs differ from numpy's, the cluster does not match one
  device, the plan is invalid, the script raised, the run stalled;
* 2: refused input, before any work: an unknown flag (argparse) or a value collsim refuses
  (a :class:`~collsim.errors.ConfigError`, printed as ``collsim: error: ...``).

Each command module may say what 0 and 1 mean for it in ``EXIT_STATUS``; every sub-command's
``--help`` ends with the three lines.

Examples
--------
>>> from collsim.errors import ConfigError, DeadlockError
>>> status_of(ConfigError("--ranks 0")), status_of(DeadlockError("rank 1 waits"))
(2, 1)
>>> print(epilog(Meaning(ok="the outputs equal numpy's", failed="they differ")))
exit status: 0 the outputs equal numpy's; 1 they differ; 2 refused input (an unknown flag or
a value collsim refuses, named after 'collsim: error:')
"""

import argparse
import textwrap
from typing import NamedTuple

from ..errors import ConfigError

__all__ = ["OK", "FAILED", "REFUSED", "Meaning", "DEFAULT", "status_of", "epilog", "annotate"]

OK, FAILED, REFUSED = 0, 1, 2  # REFUSED is argparse's own status for a usage error


class Meaning(NamedTuple):
    """What exit statuses 0 and 1 mean for one command (2 means the same everywhere)."""

    ok: str
    failed: str


# a command with no check of its own fails only when its run does
DEFAULT = Meaning(ok="done", failed="the run failed (a deadlock, a watchdog or a guard report)")


def status_of(error):
    """The exit status of a collsim error: refused input (2) or a failed run (1)."""
    return REFUSED if isinstance(error, ConfigError) else FAILED


def epilog(meaning=DEFAULT):
    """The ``exit status:`` paragraph of a command's --help."""
    text = (
        f"exit status: 0 {meaning.ok}; 1 {meaning.failed}; 2 refused input (an unknown "
        "flag or a value collsim refuses, named after 'collsim: error:')"
    )
    return textwrap.fill(text, 92)


def annotate(parser, meaning=DEFAULT):
    """Give ``parser`` and every sub-command under it the exit-status epilog, and mark each as
    the parser whose usage an unknown flag of it prints (``args._parser``)."""
    text = epilog(meaning)
    parser.epilog = f"{parser.epilog}\n\n{text}" if parser.epilog else text
    parser.set_defaults(_parser=parser)
    for action in parser._actions:  # argparse keeps sub-commands as a sub-parsers action
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases share one parser
                annotate(sub, meaning)
    return parser
