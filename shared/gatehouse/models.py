"""Database tables (SQLModel). PostgreSQL is the source of truth.

Schema changes go through Alembic (gatehouse/migrations); these classes and
the migrations must agree, which tests/integration/test_migrations.py checks.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, CheckConstraint, Column, DateTime, Index, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel

# BullMQ's state names, which the frontend already knows. They never change meaning.
WAITING, ACTIVE, DELAYED, COMPLETED, FAILED = "waiting", "active", "delayed", "completed", "failed"
STATES = (WAITING, ACTIVE, DELAYED, COMPLETED, FAILED)
LIVE_STATES = (WAITING, ACTIVE, DELAYED)
TERMINAL_STATES = (COMPLETED, FAILED)

TIERS = ("user", "scheduled")


def _tz(**kw: Any) -> Any:
    return Field(sa_column=Column(DateTime(timezone=True), **kw))


def _json(**kw: Any) -> Any:
    return Field(sa_column=Column(JSONB, **kw))


class Account(SQLModel, table=True):
    """A Wildberries seller account (кабинет)."""

    __tablename__ = "accounts"
    # The tokens not under the current key, by index ranges (gatehouse.crypto; migration 0022).
    __table_args__ = (
        Index(
            "accounts_wb_token_key",
            "wb_token_key_id",
            postgresql_where=text("wb_token_encrypted IS NOT NULL"),
        ),
    )

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    name: str
    # The seller's WB API token, Fernet-encrypted (gatehouse.crypto); never returned by the API.
    wb_token_encrypted: str | None = None
    # Which key encrypted it (gatehouse.crypto.key_id); NULL: written before key ids were kept.
    wb_token_key_id: str | None = None
    active: bool = Field(default=True, sa_column_kwargs={"server_default": text("true")})
    created_at: datetime = _tz(nullable=False, server_default=text("now()"))
    # WB rejected the token (401): {"since", "jobId", "status"}; cleared when a new token is set.
    token_invalid: dict[str, Any] | None = _json(nullable=True)
    # The token's categories as WB answered them ({"finance": "denied", …}; unnamed: unknown),
    # WB's seller-info of it, the JWT's exp, and when its coming expiry was announced.
    # A new token resets all four (gatehouse.wb.tokens; migration 0026).
    token_access: dict[str, str] | None = _json(nullable=True)
    seller: dict[str, Any] | None = _json(nullable=True)
    token_expires_at: datetime | None = _tz(nullable=True)
    token_expiry_warned_at: datetime | None = _tz(nullable=True)


class AccountDataset(SQLModel, table=True):
    """When a completed job last brought one dataset of an account up to date (its freshness)."""

    __tablename__ = "account_datasets"
    # The oldest per dataset across accounts, and the stale ones past a dataset's SLO.
    __table_args__ = (Index("account_datasets_by_age", "dataset", "last_synced_at"),)

    account_id: uuid.UUID = Field(foreign_key="accounts.id", ondelete="CASCADE", primary_key=True)
    dataset: str = Field(primary_key=True)
    last_synced_at: datetime = _tz(nullable=False)
    last_job_id: uuid.UUID | None = None


class ApiKey(SQLModel, table=True):
    """An account-scoped API key: ``ghk_<id>_<secret>``, shown once, stored as SHA-256 of the secret."""

    __tablename__ = "api_keys"

    id: str = Field(primary_key=True)
    account_id: uuid.UUID = Field(foreign_key="accounts.id", ondelete="CASCADE", index=True)
    secret_sha256: str
    created_at: datetime = _tz(nullable=False, server_default=text("now()"))
    # Past it the key answers 401; None: it never expires.
    expires_at: datetime | None = _tz(nullable=True)
    # Updated at most once a minute (gatehouse.accounts.TOUCH_EVERY), not on every request.
    last_used_at: datetime | None = _tz(nullable=True)


class Job(SQLModel, table=True):
    """One row per job; the Dramatiq message carries only ``id`` and ``message_number``.

    The job store (gatehouse.jobs) reads and writes it with plain SQL; this
    class is the table's one declaration (migrations, tests, admin reads).

    ``message_number`` numbers the job's messages: every move to waiting/delayed
    bumps it and the new message carries it, so only the newest message can claim
    the row (an early-woken job's stale delayed copy is a no-op).
    """

    __tablename__ = "jobs"
    __table_args__ = (
        CheckConstraint(f"state IN {STATES}", name="jobs_state_valid"),
        CheckConstraint(f"tier IN {TIERS}", name="jobs_tier_valid"),
        # One live job per (account, type): the race-free basis of alreadyRunning.
        Index(
            "jobs_one_live_per_account_type",
            "account_id",
            "type",
            unique=True,
            postgresql_where=text(f"state IN {LIVE_STATES}"),
        ),
        # NULL account ids never collide above: a system job (scheduled, no account: a sweep)
        # is one live per type by this one (gatehouse.jobs, SQL_CREATE_SYSTEM).
        Index(
            "jobs_one_live_system_job",
            "type",
            unique=True,
            postgresql_where=text(f"account_id IS NULL AND tier = 'scheduled' AND state IN {LIVE_STATES}"),
        ),
        Index("jobs_live_by_state", "state", postgresql_where=text(f"state IN {LIVE_STATES}")),
        Index("jobs_by_account", "account_id", "created_at", "id"),
        # Dead-worker recovery asks which workers have running jobs.
        Index("jobs_active_by_worker", "worker", postgresql_where=text("state = 'active'")),
        # The jobs list (GET /v1/admin/jobs, the console), newest first, whatever it is filtered by.
        Index("jobs_newest", text("created_at DESC"), text("id DESC")),
        # Failed in the last 24 h (the console's overview): finished_at of failed rows only.
        Index("jobs_failed_by_finished", "finished_at", postgresql_where=text("state = 'failed'")),
        # Retention (gatehouse.retention): the oldest finished rows of a type.
        Index(
            "jobs_finished_by_type",
            "type",
            "state",
            "finished_at",
            "id",
            postgresql_where=text(f"state IN {TERMINAL_STATES}"),
        ),
        # The jobs list filtered by state=failed, newest first: retention keeps failed rows longest,
        # so they sit behind every newer completed row in jobs_newest.
        Index(
            "jobs_failed_newest",
            text("created_at DESC"),
            text("id DESC"),
            postgresql_where=text("state = 'failed'"),
        ),
    )

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    type: str
    queue: str
    account_id: uuid.UUID | None = Field(default=None, foreign_key="accounts.id", ondelete="CASCADE")
    tier: str = Field(default="user", sa_column_kwargs={"server_default": "user"})
    state: str = Field(default=WAITING, sa_column_kwargs={"server_default": WAITING})
    message_number: int = Field(default=1, sa_column_kwargs={"server_default": "1"})
    # Bumped by every claim: a fencing token, so a worker that lost its lease
    # to a requeue can no longer write the row.
    claims: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    attempt: int = Field(default=1, sa_column_kwargs={"server_default": "1"})
    max_attempts: int = Field(default=1, sa_column_kwargs={"server_default": "1"})
    # {"phase", "resumeAt", "reason"}; the Russian message is rendered when read.
    progress: dict[str, Any] | None = _json(nullable=True)
    payload: dict[str, Any] = _json(nullable=False, server_default=text("'{}'::jsonb"))
    result: dict[str, Any] | None = _json(nullable=True)
    error: dict[str, Any] | None = _json(nullable=True)
    # Where a paused or retried job resumes (e.g. a report's rrdId); kept across runs.
    checkpoint: dict[str, Any] | None = _json(nullable=True)
    # When a delayed job becomes eligible again (its message's eta).
    resume_at: datetime | None = _tz(nullable=True)
    # Until when the active job's worker holds it; past this any live worker requeues it.
    lease_until: datetime | None = _tz(nullable=True)
    # The worker process running the active job (gatehouse.workers); its death requeues the job.
    worker: str | None = None
    created_at: datetime = _tz(nullable=False, server_default=text("now()"))
    updated_at: datetime = _tz(nullable=False, server_default=text("now()"))
    started_at: datetime | None = _tz(nullable=True)
    finished_at: datetime | None = _tz(nullable=True)
    # An operator asked an active job to stop (POST /v1/jobs/{id}/cancel): the body stops at its
    # next checkpoint or WB call and the run ends failed with "cancelled".
    cancel_requested_at: datetime | None = _tz(nullable=True)
    cancel_requested_by: str | None = Field(default=None, nullable=True)


class JobAttempt(SQLModel, table=True):
    """One run of a job, written by the runtime (through the job store): when it started and
    ended, on which worker, and how it ended. The console's attempt history reads it."""

    __tablename__ = "job_attempts"
    __table_args__ = (Index("job_attempts_by_job", "job_id", "started_at"),)

    id: int | None = Field(default=None, sa_column=Column(BigInteger, primary_key=True, autoincrement=True))
    job_id: uuid.UUID = Field(foreign_key="jobs.id", ondelete="CASCADE")
    attempt: int
    worker: str | None = None
    started_at: datetime = _tz(nullable=False)
    # NULL while it runs (or if its worker died mid-run).
    finished_at: datetime | None = _tz(nullable=True)
    # completed | failed | retry | parked | skipped | lost; NULL while it runs.
    outcome: str | None = None
    error_code: str | None = None
    error_message: str | None = None


class OperatorPause(SQLModel, table=True):
    """An operator's hold: a queue whose consumers stop taking messages, or an account whose WB
    jobs park (POST /v1/admin/queues/{queue}/pause, /v1/admin/accounts/{id}/pause)."""

    __tablename__ = "operator_pauses"
    __table_args__ = (CheckConstraint("kind IN ('queue', 'account')", name="operator_pauses_kind_valid"),)

    kind: str = Field(primary_key=True)
    # The queue's name or the account's id.
    target: str = Field(primary_key=True)
    paused_by: str
    paused_at: datetime = _tz(nullable=False, server_default=text("now()"))
