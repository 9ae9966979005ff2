"""Keyset paging of list endpoints: ``limit`` and an opaque ``cursor`` of (created_at, id)."""

from __future__ import annotations

import base64
import uuid
from datetime import datetime
from typing import Any

from gatehouse.errors import ValidationFailed

MAX_PAGE = 200


def encode_cursor(row: Any) -> str:
    """The cursor after ``row`` (anything with ``created_at`` and ``id``)."""
    return base64.urlsafe_b64encode(f"{row.created_at.isoformat()}|{row.id}".encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        created, _, row_id = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return datetime.fromisoformat(created), uuid.UUID(row_id)
    except ValueError:
        raise ValidationFailed("cursor is not a cursor returned by this endpoint", field="cursor") from None


def page_limit(raw: str | None) -> int:
    if raw is None:
        return 50
    # ASCII digits only (str.isdigit() also takes "²" or "٣", which int() refuses or reads),
    # and few of them (int() refuses thousands of digits).
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 10) or not 1 <= int(raw) <= MAX_PAGE:
        raise ValidationFailed(f"limit must be an integer from 1 to {MAX_PAGE}", field="limit")
    return int(raw)


def choice(raw: str | None, name: str, allowed: tuple[str, ...] | set[str]) -> str | None:
    """An optional query filter: absent is None; anything else (an empty value too) must be allowed."""
    if raw is not None and raw not in allowed:
        raise ValidationFailed(f"{name} must be one of {', '.join(sorted(allowed))}", field=name)
    return raw


def uuid_param(raw: str | None, name: str) -> uuid.UUID | None:
    """An optional id filter: absent is None; anything else must be a UUID."""
    if raw is None:
        return None
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise ValidationFailed(f"{name} must be a UUID", field=name) from None
