"""Accounts in tests: a new account comes with its account-verify job (gatehouse.handlers)."""

from __future__ import annotations

from sqlalchemy import text


def forget_account_checks(gh) -> None:
    """Delete the account-verify jobs that creating accounts wrote, for a test that counts or lists
    other jobs (tests/e2e/test_account_verify.py is where those jobs are the subject)."""
    with gh.engine.begin() as conn:
        conn.execute(text("DELETE FROM jobs WHERE type = 'account-verify'"))
