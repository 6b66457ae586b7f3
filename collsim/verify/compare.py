"""The comparison of a cluster run with the one-device oracle, step by step.

After every step the outputs, the gradient of the input, every parameter gradient and every
parameter are compared.  Everything is float64, so "match" means a relative difference
below :data:`TOLERANCE` (in practice ~1e-16).  A value that is nan or inf is never a match:
``max()`` would skip it, so it is named instead (a diverged run, a huge learning rate).

Examples
--------
>>> import numpy as np
>>> step = {"loss": 1.0, "output": np.ones(2), "input_grad": np.ones(2),
...         "grads": {"w": np.ones(2)}, "params": {"w": np.ones(2)}}
>>> near = {**step, "params": {"w": np.array([1.0, 1.0 + 1e-12])}}
>>> found = compare_steps([near], [step])
>>> found.max_abs_diff > 0, found.max_rel_diff < TOLERANCE, found.nonfinite
(True, True, [])
"""

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["TOLERANCE", "Comparison", "compare_steps"]

TOLERANCE = 1e-9  # relative: max |cluster - one device| / max |one device|, per array
COMPARED = ("output", "input_grad", "grads", "params")  # each step's arrays, in report order


@dataclass
class Comparison:
    """What :func:`compare_steps` found over a whole run."""

    per_step: list  # per step: losses and max |difference| of each kind
    max_abs_diff: float  # over all steps and arrays; nan when any value is non-finite
    max_rel_diff: float
    nonfinite: list  # where a nan or inf was seen: "step 2 params (cluster)"


def compare_steps(cluster_steps, oracle_steps):
    """Compare each step's arrays of the cluster run with the oracle's (dicts as
    :func:`~collsim.verify.single_device` returns)."""
    per_step, worst_abs, worst_rel, nonfinite = [], 0.0, 0.0, []
    for s, (mine, ref) in enumerate(zip(cluster_steps, oracle_steps)):
        row = {"step": s + 1, "loss_cluster": mine["loss"], "loss_single_device": ref["loss"]}
        for key in COMPARED:
            a, r = _diff(mine[key], ref[key])
            row[f"max_abs_diff_{key}"] = a
            runs = [
                who
                for who, values in (("cluster", mine[key]), ("one device", ref[key]))
                if _nonfinite(values)
            ]
            if runs:  # max() would skip a nan: say so, and never call it a match
                nonfinite.append(f"step {s + 1} {key} ({' and '.join(runs)})")
                worst_abs = worst_rel = math.nan
            elif not math.isnan(worst_abs):
                worst_abs, worst_rel = max(worst_abs, a), max(worst_rel, r)
        per_step.append(row)
    return Comparison(per_step, worst_abs, worst_rel, nonfinite)


def _nonfinite(array_or_dict):
    """True when any value is nan or inf (a diverged run compares as nan, which is no check)."""
    arrays = array_or_dict.values() if isinstance(array_or_dict, dict) else [array_or_dict]
    return any(not np.all(np.isfinite(np.asarray(a))) for a in arrays)


def _diff(a, b):
    """(max |a - b|, that divided by max |b|) over two arrays or two dicts of arrays.

    The scale is the largest reference value of the whole dict: a gradient that is 0 in
    exact arithmetic (the key bias's, say) is compared with its neighbours' size, not
    with its own rounding noise.
    """
    pairs = [(a[k], b[k]) for k in b] if isinstance(b, dict) else [(a, b)]
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: reported as non-finite
        return _worst(pairs)


def _worst(pairs):
    worst = max(float(np.max(np.abs(np.asarray(x) - y), initial=0.0)) for x, y in pairs)
    scale = max(float(np.max(np.abs(y), initial=0.0)) for _, y in pairs)
    return worst, worst / scale if scale else worst
