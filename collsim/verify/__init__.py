"""``collsim verify``: train a parallel scheme on the cluster and on one device, side by side.

This sits above :mod:`collsim.parallel` (it builds models and runs the trainers) and below the
command line: the checks a user runs, not a way to train.

=================  ===============================================================
module             what it holds
=================  ===============================================================
:mod:`.schemes`    the schemes, their models, the run and the comparison (`verify`)
:mod:`.report`     the printed report
=================  ===============================================================

>>> from collsim.verify import SCHEMES
>>> SCHEMES[:3]
('dp', 'tp-column', 'tp-row')
"""

from .report import report_text
from .schemes import (
    LIMITS,
    SCHEMES,
    TOLERANCE,
    VerifyReport,
    check_verify_sizes,
    estimate_memory,
    expected_bytes,
    model_shape,
    single_device,
    verify,
)

__all__ = [
    "SCHEMES",
    "TOLERANCE",
    "LIMITS",
    "verify",
    "single_device",
    "expected_bytes",
    "estimate_memory",
    "model_shape",
    "check_verify_sizes",
    "VerifyReport",
    "report_text",
]
