"""``collsim verify``: train a parallel scheme on the cluster and on one device, side by side.

This sits above :mod:`collsim.parallel` (it builds models and runs the trainers) and below the
command line: the checks a user runs, not a way to train.

=================  ===============================================================
module             what it holds
=================  ===============================================================
:mod:`.problems`   the schemes: each one's model, data, sharding and defaults
:mod:`.config`     :class:`VerifyConfig`: one verification's options, checked once
:mod:`.checks`     what verify refuses before training; limits; the memory estimate
:mod:`.training`   one problem trained on one device and on the cluster; their report
:mod:`.run`        :func:`verify`: a scheme's problem, run, comparison and findings
:mod:`.compare`    the step-by-step comparison and its tolerance
:mod:`.expected`   the bytes each rank should send, by the collectives' closed forms
:mod:`.sharding`   zero, fsdp, hsdp: memory peaks and link bytes next to their formulas
:mod:`.context`    cp, nd: context parallelism, the N-D mesh (printed by ``context_report``)
:mod:`.report`     :class:`VerifyReport` and the printed report
=================  ===============================================================

>>> from collsim.verify import SCHEMES
>>> SCHEMES[:3]
('dp', 'tp-column', 'tp-row')
"""

from .checks import LIMITS, check_sharding, check_verify_sizes, estimate_memory
from .compare import TOLERANCE
from .config import VerifyConfig
from .expected import expected_bytes
from .problems import SCHEMES, default_batch, default_dp, default_tp, model_shape
from .report import VerifyReport, report_text
from .run import verify
from .training import single_device

__all__ = [
    "SCHEMES",
    "TOLERANCE",
    "LIMITS",
    "verify",
    "VerifyConfig",
    "single_device",
    "expected_bytes",
    "estimate_memory",
    "model_shape",
    "check_verify_sizes",
    "check_sharding",
    "default_dp",
    "default_tp",
    "default_batch",
    "VerifyReport",
    "report_text",
]
