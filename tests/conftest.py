"""Shared test settings: a bounded, deadline-free Hypothesis profile so CI is not flaky."""

import os

import matplotlib
from hypothesis import HealthCheck, settings

matplotlib.use("Agg")

settings.register_profile(
    "ci",
    deadline=None,
    max_examples=25,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=100)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# the lessons' hint ladder counts tries in the student's progress file
# (collsim/teach/progress.py): never the real ~/.collsim in a test run
if not os.environ.get("COLLSIM_PROGRESS"):
    import tempfile

    os.environ["COLLSIM_PROGRESS"] = os.path.join(tempfile.mkdtemp(), "progress.json")
