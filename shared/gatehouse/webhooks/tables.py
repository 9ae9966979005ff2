"""Webhook tables (SQLModel declarations, for migrations and tests) and the records the store reads.

A delivery is one event to one endpoint. Its ``message_id`` (``msg_…``) is the
``webhook-id`` header on every attempt and every replay. Its attempts run as
jobs of the one job runtime (``webhook.deliver``): ``job_id`` is the job of
its current series (a replay starts a new one), and the job row says when the
next attempt is due.

Delivery status:

- ``pending``: no attempt made yet in this series (just raised, or replayed);
- ``delivering``: an attempt is in flight;
- ``failed``: the last attempt failed and another one is scheduled;
- ``delivered``: a 2xx came back in time;
- ``dead``: no attempt left (the 8th failed, the endpoint answered 410 Gone, or it
  is disabled or gone) — the dead letter, kept with its attempts, replayable.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ARRAY,
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    Index,
    String,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel

STATUSES = ("pending", "delivering", "failed", "delivered", "dead")
REPLAYABLE = ("delivered", "dead")


def _tz(nullable: bool = False) -> Any:
    if nullable:
        return Field(default=None, sa_column=Column(DateTime(timezone=True), nullable=True))
    return Field(sa_column=Column(DateTime(timezone=True), nullable=False, server_default=text("now()")))


class WebhookEndpoint(SQLModel, table=True):
    __tablename__ = "webhook_endpoints"
    __table_args__ = (
        Index("webhook_endpoints_by_created", "created_at", "id"),
        # An account's own endpoints (an account key manages them; they get only its events).
        Index("webhook_endpoints_by_account", "account_id", postgresql_where=text("account_id IS NOT NULL")),
    )

    id: uuid.UUID = Field(primary_key=True)
    # The seller account that owns it; NULL: an admin endpoint.
    account_id: uuid.UUID | None = Field(default=None, foreign_key="accounts.id", ondelete="CASCADE")
    url: str
    description: str = Field(default="", sa_column_kwargs={"server_default": ""})
    # The event types it receives; NULL: every type.
    event_types: list[str] | None = Field(default=None, sa_column=Column(ARRAY(String), nullable=True))
    enabled: bool = Field(default=True, sa_column_kwargs={"server_default": text("true")})
    disabled_reason: str | None = Field(default=None, nullable=True)
    disabled_at: datetime | None = _tz(nullable=True)
    # Deliveries beyond it wait, spending no attempt; NULL: no limit.
    rate_limit_per_second: int | None = Field(default=None, nullable=True)
    # Since when every attempt has failed (cleared by a success): past WEBHOOK_DISABLE_AFTER_MS
    # the endpoint is disabled as failing.
    failing_since: datetime | None = _tz(nullable=True)
    # whsec_… secrets, encrypted at rest (gatehouse.crypto, like WB tokens), each with the id of
    # the key that encrypted it. After a rotation the previous one also signs until
    # previous_secret_until; the hourly prune clears it then (gatehouse.retention).
    secret: str
    secret_key_id: str | None = Field(default=None, nullable=True)
    previous_secret: str | None = Field(default=None, nullable=True)
    previous_secret_key_id: str | None = Field(default=None, nullable=True)
    previous_secret_until: datetime | None = _tz(nullable=True)
    created_at: datetime = _tz()
    updated_at: datetime = _tz()


class WebhookDelivery(SQLModel, table=True):
    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        CheckConstraint(f"status IN {STATUSES}", name="webhook_deliveries_status_valid"),
        # The Deliveries view: newest first, all or one endpoint (replay-since walks one endpoint's).
        Index("webhook_deliveries_by_created", "created_at", "id"),
        Index("webhook_deliveries_by_endpoint", "endpoint_id", "created_at", "id"),
        Index("webhook_deliveries_by_message", "message_id"),
        # A run of a webhook.deliver job reads its batch: the deliveries of its series.
        Index("webhook_deliveries_by_job", "job_id"),
        # The dead letters: their count on the overview, an endpoint's "replay all dead since…".
        Index(
            "webhook_deliveries_dead",
            "endpoint_id",
            "created_at",
            postgresql_where=text("status = 'dead'"),
        ),
        # Retention: delivered and dead deliveries by when they became so (gatehouse.retention).
        Index(
            "webhook_deliveries_finished",
            "status",
            "updated_at",
            postgresql_where=text("status IN ('delivered', 'dead')"),
        ),
    )

    id: uuid.UUID = Field(primary_key=True)
    endpoint_id: uuid.UUID = Field(foreign_key="webhook_endpoints.id", ondelete="CASCADE")
    message_id: str
    event_type: str
    # The event as signed: the body is this JSON, serialized compactly.
    payload: dict[str, Any] = Field(sa_column=Column(JSONB, nullable=False))
    status: str = Field(default="pending", sa_column_kwargs={"server_default": "pending"})
    attempts: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    job_id: uuid.UUID | None = Field(default=None, nullable=True)
    created_at: datetime = _tz()
    updated_at: datetime = _tz()
    delivered_at: datetime | None = _tz(nullable=True)
    # Why a dead delivery died: {"attempt", "statusCode"?, "error"?, "byDeliveryId"?, "endpointDisabledAt"?}.
    dead_reason: dict[str, Any] | None = Field(default=None, sa_column=Column(JSONB, nullable=True))


class WebhookAttempt(SQLModel, table=True):
    """One HTTP attempt: written when it starts (so a crash mid-request shows), completed when it ends."""

    __tablename__ = "webhook_attempts"
    __table_args__ = (
        UniqueConstraint("delivery_id", "attempt", name="webhook_attempts_delivery_attempt_key"),
    )

    id: int | None = Field(default=None, sa_column=Column(BigInteger, primary_key=True, autoincrement=True))
    delivery_id: uuid.UUID = Field(foreign_key="webhook_deliveries.id", ondelete="CASCADE")
    # 1, 2, … over the delivery's whole life: a replay's first attempt follows the last one.
    attempt: int
    at: datetime = _tz()
    status_code: int | None = Field(default=None, nullable=True)
    # Why it failed without a usable answer (timeout, refused address, …); NULL when it answered.
    error: str | None = Field(default=None, nullable=True)
    duration_ms: int | None = Field(default=None, nullable=True)
    # The first RESPONSE_EXCERPT_MAX characters of the response body.
    response_excerpt: str | None = Field(default=None, nullable=True)


@dataclass(frozen=True)
class EndpointRecord:
    id: uuid.UUID
    account_id: uuid.UUID | None  # None: an admin endpoint
    url: str
    description: str
    event_types: list[str] | None
    enabled: bool
    disabled_reason: str | None
    disabled_at: datetime | None
    rate_limit_per_second: int | None
    failing_since: datetime | None
    created_at: datetime
    updated_at: datetime


ENDPOINT_COLUMNS = ", ".join(f.name for f in fields(EndpointRecord))


@dataclass(frozen=True)
class DeliveryRecord:
    id: uuid.UUID
    endpoint_id: uuid.UUID
    message_id: str
    event_type: str
    payload: dict[str, Any]
    status: str
    attempts: int
    job_id: uuid.UUID | None
    created_at: datetime
    updated_at: datetime
    delivered_at: datetime | None
    # Why it is dead (gatehouse.webhooks.store.dead_reason); NULL unless dead.
    dead_reason: dict[str, Any] | None
    # From the current series' job row: when the next attempt is due (NULL: none scheduled).
    next_attempt_at: datetime | None


DELIVERY_COLUMNS = ", ".join(f"d.{f.name}" for f in fields(DeliveryRecord) if f.name != "next_attempt_at")
# A delivery with the due time of its current job (only a job that waits has one).
DELIVERY_SELECT = (
    f"SELECT {DELIVERY_COLUMNS}, CASE WHEN j.state IN ('waiting', 'delayed') "
    "THEN coalesce(j.resume_at, j.created_at) END AS next_attempt_at "
    "FROM webhook_deliveries AS d LEFT JOIN jobs AS j ON j.id = d.job_id"
)


@dataclass(frozen=True)
class AttemptRecord:
    attempt: int
    at: datetime
    status_code: int | None
    error: str | None
    duration_ms: int | None
    response_excerpt: str | None


ATTEMPT_COLUMNS = ", ".join(f.name for f in fields(AttemptRecord))
