"""`make lint` as a test, so CI holds the code to it."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.processes import BIN, REPO


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]], ids=["check", "format"])
def test_ruff(args):
    result = subprocess.run([str(BIN / "ruff"), *args], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
