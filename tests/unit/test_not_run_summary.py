"""The closing summary of a run says what it skipped, and how to get it, one line per reason."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import tests.conftest as root
from tests.conftest import missing_tool, not_run

CHROMIUM = "no chromium — apt-get install chromium (or set GATEHOUSE_CHROMIUM to a Chromium binary)"
PODMAN = "no podman — `make images` installs them (apt-get, as root)"


def skipped(nodeid: str, reason: str) -> SimpleNamespace:
    return SimpleNamespace(nodeid=nodeid, longrepr=(nodeid.split("::")[0], 1, f"Skipped: {reason}"))


def test_skips_are_counted_by_reason_with_where_they_were():
    reports = [
        skipped("tests/e2e/console/test_console_pages.py::test_a", CHROMIUM),
        skipped("tests/e2e/console/test_console_bulk.py::test_b", CHROMIUM),
        skipped("tests/deploy/test_images.py::test_c", PODMAN),
    ]
    assert not_run(reports) == [
        f"skipped 2 tests (tests/e2e/console): {CHROMIUM}",
        f"skipped 1 test (tests/deploy): {PODMAN}",
    ]


def test_a_missing_tool_skips_here_and_fails_under_ci(monkeypatch):
    monkeypatch.setattr(root, "IN_CI", False)  # "here": a developer's machine, whatever this run is
    with pytest.raises(pytest.skip.Exception, match="no chromium"):
        missing_tool(CHROMIUM)
    monkeypatch.setattr(root, "IN_CI", True)
    with pytest.raises(pytest.fail.Exception, match="no chromium"):
        missing_tool(CHROMIUM)
