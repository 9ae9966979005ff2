"""The rules of a digitization import (feeds or report): the period it reads.

WB has nothing after today, so a period that starts after today (UTC) would be
accepted and then complete with no rows: it is refused up front instead.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

from gatehouse.errors import ValidationFailed


def today_utc() -> date:
    return datetime.now(UTC).date()


def check_period(date_from: date, date_to: date, *, today: date) -> None:
    """``dateFrom`` not after ``today`` nor after ``dateTo``; every broken rule is reported."""
    errors: list[tuple[str | None, str]] = []
    if date_from > today:
        errors.append(
            (
                "dateFrom",
                f"dateFrom: {date_from} is in the future (today is {today} UTC); nothing to import yet",
            )
        )
    if date_from > date_to:
        errors.append(("dateTo", "dateTo: must not be before dateFrom"))
    if errors:
        raise ValidationFailed.of(errors)
