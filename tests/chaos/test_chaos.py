"""The chaos suite's short run in ``make test``: CHAOS_MINUTES (default 2) minutes; any broken invariant fails it."""

from __future__ import annotations

import os

import pytest

from tests.chaos.suite import Unavailable, run


@pytest.mark.timeout(420)
def test_chaos_run_keeps_every_invariant(tmp_path):
    minutes = float(os.environ.get("CHAOS_MINUTES", "2"))
    seed = int(os.environ["CHAOS_SEED"]) if os.environ.get("CHAOS_SEED") else None
    try:
        report = run(minutes, seed, tmp_path)
    except Unavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    print(report.table())
    where = (
        f"\nthe record (jobs, sandbox log, faults, deliveries): {tmp_path / 'record.json'}; logs: {tmp_path}"
    )
    assert not report.failed, "\n" + report.table() + where
