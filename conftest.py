"""Settings for every test and doctest: English feedback whatever the machine's locale.

``collsim.teach`` speaks Japanese under a ``ja`` locale (LANG=ja_JP.UTF-8); the English
tests and docstring examples assert English output, so they pin the language here. The
Japanese tests set their own environment for the lessons they run.
"""

import importlib.util
import os

os.environ["COLLSIM_LANG"] = "en"
# as the `collsim` command does (collsim/cli/__init__.py): one OpenBLAS thread, set before
# any test imports numpy, so tests run numpy as users' commands do
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# the torch backend's modules import torch (an optional extra, `pip install 'collsim[torch]'`):
# where it is not installed their docstrings are not collected; tests/test_torch_backend.py
# skips with that command as the reason
TORCH_MODULES = ["collsim/distributed/torch_backend.py", "collsim/distributed/torch_run.py"]
collect_ignore = [] if importlib.util.find_spec("torch") else TORCH_MODULES
# programs the tests run under `collsim exec` (and real mpirun or torch): data, not modules to
# import; a torch program would not even import where torch is not installed
collect_ignore_glob = ["tests/data/*"]
