"""The planner is laid out by concept, each importing only the concepts before it.

``collsim/plan/`` holds one module or subpackage per concept, in this order: the job
description (``config``), memory, cost, the rules (with the nearest valid choices),
the search, the report, and serving a trained model (``inference``: KV cache and the
roofline, for ``collsim infer --plan``).  An import from a later concept would close a circle at the
concept level (as ``plan/report.py`` and ``plan/text.py`` once did at the module level);
the modules stay short enough to read in one sitting.
"""

from pathlib import Path

import pytest
from test_layering import MODULES, imports_of

CONCEPTS = ("config", "memory", "cost", "rules", "search", "report", "inference")
PLAN = sorted(m for m in MODULES if m.startswith("collsim.plan."))
MAX_LINES = 320  # "about 300" (DESIGN.md): a module read in one sitting


def concept_of(module):
    """``collsim.plan.rules.checks`` -> ``"rules"``."""
    return module.split(".")[2]


def test_every_planner_module_belongs_to_a_concept():
    assert {concept_of(m) for m in PLAN} == set(CONCEPTS)


@pytest.mark.parametrize("module", PLAN)
def test_a_concept_imports_only_the_concepts_before_it(module):
    here = CONCEPTS.index(concept_of(module))
    later = [
        f"{edge.path}:{edge.line}: `{edge.statement}`"
        for edge in imports_of(module)
        if edge.target.startswith("collsim.plan.")
        and CONCEPTS.index(concept_of(edge.target)) > here
    ]
    assert not later, f"{concept_of(module)} imports a later concept:\n" + "\n".join(later)


@pytest.mark.parametrize("module", PLAN + ["collsim.plan"])
def test_modules_stay_short(module):
    lines = len(Path(MODULES[module]).read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{MODULES[module]} has {lines} lines"
