"""The audit log: who changed what, before and after, written in the transaction of the change.

Every domain store that changes a row on an actor's behalf calls ``record``
on the connection of that change, so a change and its audit row commit (or
roll back) together. ``before``/``after`` hold only the fields that changed.
Rows older than AUDIT_RETENTION are deleted by ``prune`` (gatehouse.retention), and only there.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Column, Connection, DateTime, Index, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel

# The actor of a change made with the bootstrap ADMIN_TOKEN (no user behind it).
ADMIN_ACTOR = "admin"


class AuditEntry(SQLModel, table=True):
    __tablename__ = "audit_log"
    __table_args__ = (
        Index("audit_log_by_entity", "entity", "entity_id", "id"),
        # Retention: the oldest first (gatehouse.retention).
        Index("audit_log_by_created", "created_at"),
        Index("audit_log_by_operation", "operation_id", postgresql_where=text("operation_id IS NOT NULL")),
    )

    id: int | None = Field(default=None, sa_column=Column(BigInteger, primary_key=True, autoincrement=True))
    # A staff user's id, or "admin" for the bootstrap token.
    actor: str
    # What was done, e.g. "product.update" or "attribute.update".
    action: str
    entity: str
    entity_id: str
    before: dict[str, Any] | None = Field(default=None, sa_column=Column(JSONB, nullable=True))
    after: dict[str, Any] | None = Field(default=None, sa_column=Column(JSONB, nullable=True))
    # The bulk operation that made this change, if one did (its revert reads these rows).
    operation_id: uuid.UUID | None = Field(default=None, nullable=True)
    created_at: datetime = Field(
        sa_column=Column(DateTime(timezone=True), nullable=False, server_default=text("now()"))
    )


INSERT = text(
    "INSERT INTO audit_log (actor, action, entity, entity_id, before, after) "
    "VALUES (:actor, :action, :entity, :entity_id, CAST(:before AS jsonb), CAST(:after AS jsonb))"
)


def record(
    conn: Connection,
    *,
    actor: str,
    action: str,
    entity: str,
    entity_id: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
) -> None:
    """Write one audit row on ``conn``: it commits with the change it describes."""
    conn.execute(
        INSERT,
        {
            "actor": actor,
            "action": action,
            "entity": entity,
            "entity_id": entity_id,
            "before": None if before is None else json.dumps(before),
            "after": None if after is None else json.dumps(after),
        },
    )


# Oldest first (index audit_log_by_created); ``= ANY(ARRAY(…))`` makes the delete a primary-key
# lookup per row, where ``IN (…)`` was planned as a hash join over a scan of the whole table.
_PRUNABLE = "created_at < now() - :age_ms * interval '1 millisecond'"
PRUNE = text(f"""
DELETE FROM audit_log WHERE id = ANY(ARRAY(
  SELECT id FROM audit_log WHERE {_PRUNABLE} ORDER BY created_at LIMIT :limit FOR UPDATE SKIP LOCKED))""")
PRUNABLE = text(f"SELECT count(*) FROM audit_log WHERE {_PRUNABLE}")


def prune(conn: Connection, *, age_ms: int, limit: int) -> int:
    """Delete up to ``limit`` audit rows older than ``age_ms`` on ``conn``; returns how many."""
    return conn.execute(PRUNE, {"age_ms": age_ms, "limit": limit}).rowcount


def prunable(conn: Connection, *, age_ms: int) -> int:
    """How many audit rows ``prune`` would delete now, in all its batches."""
    return conn.execute(PRUNABLE, {"age_ms": age_ms}).scalar_one()
