"""Accounts in tests: a new account comes with its account-verify job (gatehouse.handlers)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import text


def forget_account_checks(gh) -> None:
    """Delete the account-verify jobs that creating accounts wrote, for a test that counts or lists
    other jobs (tests/e2e/test_account_verify.py is where those jobs are the subject)."""
    with gh.engine.begin() as conn:
        conn.execute(text("DELETE FROM jobs WHERE type = 'account-verify'"))


def bare_account(gh, name: str, token: str = "token") -> uuid.UUID:
    """An account row without the account-verify job its creation through the handlers writes: for a
    test of other work on a worker with no WB behind it (tests/conftest.NO_WB), whose check would
    only fail there."""
    with gh.uow.begin() as tx:
        return gh.accounts.create(tx, name, token, now=datetime.now(UTC)).id
