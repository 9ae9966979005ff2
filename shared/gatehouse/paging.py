"""Newest-first keyset pages: the one SQL shape every list of the stores uses."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from gatehouse.errors import ValidationFailed


def newest_first(
    select: str,
    filters: dict[str, Any],
    *,
    limit: int,
    before: tuple[datetime, uuid.UUID] | None,
    param: Callable[[str], str],
    compare: Mapping[str, str] | None = None,
    where: Sequence[str] = (),
) -> tuple[str, dict[str, Any]]:
    """``select`` narrowed by column = value for each filter that is not None, after the (created_at, id)
    ``before`` of the previous page, newest first: the SQL and its parameters.

    ``param`` writes a named placeholder in the caller's style (``:name`` for SQLAlchemy's
    ``text``, ``%(name)s`` for psycopg). ``compare`` gives a filter another left side than
    ``<name> =`` (e.g. ``"created_after": "created_at >="``, ``"phase": "progress->>'phase' ="``), or
    the whole condition with ``{}`` where the placeholder goes (``"ids": "id = ANY({})"``).
    ``where`` adds conditions written out with their constants, so the planner can match them to a
    partial index's predicate (a parameter would hide the value from a generic plan).
    """
    conditions, params = list(where), {"limit": limit}
    for column, value in filters.items():
        if value is not None:
            left = (compare or {}).get(column, f"{column} =")
            conditions.append(left.format(param(column)) if "{}" in left else f"{left} {param(column)}")
            params[column] = value
    if before:
        conditions.append(f"(created_at, id) < ({param('before_at')}, {param('before_id')})")
        params.update(before_at=before[0], before_id=before[1])
    sql = (
        select
        + (f" WHERE {' AND '.join(conditions)}" if conditions else "")
        + f" ORDER BY created_at DESC, id DESC LIMIT {param('limit')}"
    )
    return sql, params


def contains(part: str) -> str:
    """An ILIKE pattern of any text that contains ``part`` (its own %, _ and \\ taken literally)."""
    return "%" + re.sub(r"([\\%_])", r"\\\1", part) + "%"


def instant(raw: str | None, name: str) -> datetime | None:
    """An optional ISO 8601 time of a request or a job payload; without an offset it is UTC."""
    if raw is None:
        return None
    try:
        at = datetime.fromisoformat(raw)
    except ValueError:
        raise ValidationFailed(
            f"{name} must be an ISO 8601 time, e.g. 2026-12-01T10:00:00Z", field=name
        ) from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)
