"""What the job store runs for a jobs list: the tests of its query plans read the statement it sends."""

from __future__ import annotations

from gatehouse.db import Statements


def listed(gh, monkeypatch, **filters) -> tuple[str, dict, list]:
    """The statement ``gh.jobs.list_jobs(**filters)`` runs, its parameters, and its rows."""
    seen = []
    real = Statements.all

    def spy(self, sql, params, row):
        seen.append((sql, params))
        return real(self, sql, params, row)

    monkeypatch.setattr(Statements, "all", spy)
    rows = gh.jobs.list_jobs(**filters)
    monkeypatch.undo()
    ((sql, params),) = seen
    return sql, params, rows
