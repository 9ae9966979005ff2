"""The notifications' SQL: ``notify`` writes a notification and its e-mail job in the caller's unit of work.

A domain change and the notification it causes commit (or roll back)
together: ``notify`` runs in the caller's transaction (``tx``, gatehouse.uow)
and writes both the notification and the job row of its e-mail
(``notifications.email``, through the job store), whose message the unit of
work sends after the commit; if the process dies in between, reconciliation
sends it.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Engine, text

from gatehouse.db import one_or_404
from gatehouse.errors import ValidationFailed
from gatehouse.job_types import NOTIFICATION_EMAIL
from gatehouse.jobs import JobStore
from gatehouse.notifications.tables import COLUMNS, NotificationRecord

if TYPE_CHECKING:
    from gatehouse.uow import Tx

log = logging.getLogger(__name__)

TITLE_MAX = 200
BODY_MAX = 10_000
LINK_MAX = 2_000


@dataclass(frozen=True)
class EmailOf:
    """What the e-mail of a notification needs: the notification and its user's address."""

    notification: NotificationRecord
    email: str
    name: str


INSERT = text(
    f"INSERT INTO notifications (id, user_id, kind, title, body, link) "
    f"VALUES (:id, :user_id, :kind, :title, :body, :link) RETURNING {COLUMNS}"
)


def _check(kind: str, title: str, body: str, link: str | None) -> None:
    for name, value, most in (("kind", kind, 100), ("title", title, TITLE_MAX), ("body", body, BODY_MAX)):
        if not value.strip() or len(value) > most or "\x00" in value:
            raise ValidationFailed(f"{name} must be 1 to {most} characters without NUL", field=name)
    if link is not None and (len(link) > LINK_MAX or "\x00" in link):
        raise ValidationFailed(f"link must be at most {LINK_MAX} characters without NUL", field="link")


# Retention (gatehouse.retention): notifications older than NOTIFICATION_RETENTION, read or not,
# oldest first (index notifications_by_created), each deleted by its primary key (``= ANY(ARRAY(…))``;
# ``IN (…)`` may be planned as a scan of the whole table).
_PRUNABLE = "created_at < now() - :age_ms * interval '1 millisecond'"
PRUNE = text(f"""
DELETE FROM notifications WHERE id = ANY(ARRAY(
  SELECT id FROM notifications WHERE {_PRUNABLE} ORDER BY created_at LIMIT :limit FOR UPDATE SKIP LOCKED))""")
PRUNABLE = text(f"SELECT count(*) FROM notifications WHERE {_PRUNABLE}")


class NotificationStore:
    def __init__(self, engine: Engine, jobs: JobStore) -> None:
        self.engine = engine
        self.jobs = jobs

    def notify(
        self, tx: Tx, *, user_id: uuid.UUID, kind: str, title: str, body: str, link: str | None = None
    ) -> uuid.UUID:
        """Write a notification of ``user_id`` and its e-mail job in ``tx``; returns the notification's id.

        A rollback leaves neither row. An unknown user raises (the foreign key).
        """
        _check(kind, title, body, link)
        notification_id = uuid.uuid4()
        tx.conn.execute(
            INSERT,
            {
                "id": notification_id,
                "user_id": user_id,
                "kind": kind,
                "title": title,
                "body": body,
                "link": link,
            },
        )
        # An e-mail job has no account, so the live-job index (account, type) never refuses it.
        self.jobs.create(tx, NOTIFICATION_EMAIL, payload={"notificationId": str(notification_id)})
        return notification_id

    def notify_staff(self, tx: Tx, *, kind: str, title: str, body: str, link: str | None = None) -> int:
        """``notify`` every staff user (not removed) in ``tx``; returns how many were notified."""
        staff = (
            tx.conn.execute(text("SELECT id FROM users WHERE removed_at IS NULL ORDER BY id")).scalars().all()
        )
        for user_id in staff:
            self.notify(tx, user_id=user_id, kind=kind, title=title, body=body, link=link)
        return len(staff)

    def list_for_user(self, user_id: uuid.UUID, *, limit: int = 50) -> list[NotificationRecord]:
        """The user's notifications, newest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"SELECT {COLUMNS} FROM notifications WHERE user_id = :user_id "
                    "ORDER BY created_at DESC, id DESC LIMIT :limit"
                ),
                {"user_id": user_id, "limit": limit},
            )
            return [NotificationRecord(*row) for row in rows]

    def mark_read(self, tx: Tx, user_id: uuid.UUID, notification_id: uuid.UUID) -> NotificationRecord:
        """Mark the user's notification read (the first read time is kept); another user's is not found."""
        sql = text(
            "UPDATE notifications SET read_at = coalesce(read_at, now()) "
            f"WHERE id = :id AND user_id = :user_id RETURNING {COLUMNS}"
        )
        params = {"id": notification_id, "user_id": user_id}
        return NotificationRecord(*one_or_404(tx.conn, sql, params, f"notification {notification_id}"))

    def email_of(self, notification_id: uuid.UUID) -> EmailOf | None:
        """The notification and its user's address, or None when it is gone (its user was deleted)."""
        cols = ", ".join(f"n.{c.strip()}" for c in COLUMNS.split(","))
        with self.engine.connect() as conn:
            row = conn.execute(
                text(
                    f"SELECT {cols}, u.email, u.name FROM notifications n "
                    "JOIN users u ON u.id = n.user_id WHERE n.id = :id"
                ),
                {"id": notification_id},
            ).one_or_none()
        if row is None:
            return None
        return EmailOf(NotificationRecord(*row[:-2]), row[-2], row[-1])

    def prune(self, tx: Tx, *, age_ms: int, limit: int) -> int:
        """Delete up to ``limit`` notifications older than ``age_ms``; returns how many."""
        return tx.conn.execute(PRUNE, {"age_ms": age_ms, "limit": limit}).rowcount

    def prunable(self, *, age_ms: int) -> int:
        """How many ``prune`` would delete now, in all its batches."""
        with self.engine.connect() as conn:
            return conn.execute(PRUNABLE, {"age_ms": age_ms}).scalar_one()
