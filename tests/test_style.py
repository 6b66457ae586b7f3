"""Ruff (lint and format) is part of the test command: style drift fails the suite."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "args", [["check", "."], ["format", "--check", "."]], ids=["ruff-check", "ruff-format"]
)
def test_ruff(args):
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, f"ruff {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
