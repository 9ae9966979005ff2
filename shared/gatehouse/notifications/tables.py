"""The notifications table (SQLModel declaration, for migrations and tests) and the record the store reads."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Column, DateTime, Index, text
from sqlmodel import Field, SQLModel


class Notification(SQLModel, table=True):
    """An in-app notification of a staff user; its e-mail is a ``notifications.email`` job."""

    __tablename__ = "notifications"
    __table_args__ = (
        # A user's notifications, newest first.
        Index("notifications_by_user", "user_id", "created_at", "id"),
        # Retention: the oldest first (gatehouse.retention).
        Index("notifications_by_created", "created_at"),
    )

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    user_id: uuid.UUID = Field(foreign_key="users.id", ondelete="CASCADE")
    # What it is about, e.g. "catalog.bulk_operation.completed".
    kind: str
    title: str
    body: str
    # Where the user reads more (a path of the API or the console), or none.
    link: str | None = Field(default=None, nullable=True)
    created_at: datetime = Field(
        sa_column=Column(DateTime(timezone=True), nullable=False, server_default=text("now()"))
    )
    read_at: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True), nullable=True))


@dataclass(frozen=True)
class NotificationRecord:
    id: uuid.UUID
    user_id: uuid.UUID
    kind: str
    title: str
    body: str
    link: str | None
    created_at: datetime
    read_at: datetime | None


COLUMNS = "id, user_id, kind, title, body, link, created_at, read_at"
