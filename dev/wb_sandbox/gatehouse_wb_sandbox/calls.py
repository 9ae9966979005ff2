"""What an endpoint handler gets and gives: the call, its reply, and parameter parsing.

Parsers raise ``Invalid`` naming the parameter; the gateway turns it into a
400 in the shape of the route's service.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gatehouse_wb_sandbox import problems
from gatehouse_wb_sandbox.data import MSK, Dataset, dataset
from gatehouse_wb_sandbox.state import Sandbox


class Invalid(Exception):
    """A 400: the message is the detail, shaped by the route's service."""


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any = None  # None: no body (204)
    content_type: str = problems.JSON
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Call:
    """One authenticated WB call as a handler sees it."""

    sandbox: Sandbox
    seller: str
    query: dict[str, str]
    body: Any  # parsed JSON (None without a body)

    @property
    def data(self) -> Dataset:
        return dataset(self.sandbox.spec, self.seller)


def moment(value: Any, name: str) -> datetime:
    """A date or RFC3339 date-time as naive Moscow time (WB's statistics clock)."""
    if value is None or value == "":
        raise Invalid(f"{name}: field required")
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise Invalid(f"{name}: invalid date or date-time {value!r}") from None
    return parsed.astimezone(MSK).replace(tzinfo=None) if parsed.tzinfo else parsed


def integer(
    value: Any, name: str, *, default: int | None = None, low: int = 0, high: int | None = None
) -> int:
    if value is None or value == "":
        if default is None:
            raise Invalid(f"{name}: field required")
        return default
    try:
        number = int(value) if isinstance(value, str) else value
    except ValueError:
        number = None
    if isinstance(number, bool) or not isinstance(number, int):
        raise Invalid(f"{name}: must be an integer")
    if number < low or (high is not None and number > high):
        raise Invalid(f"{name}: must be between {low} and {high}" if high else f"{name}: must be >= {low}")
    return number


def id_list(value: Any, name: str, *, high: int, required: bool = False) -> list[int]:
    """Comma-separated ids (query) or a JSON list of ids (body)."""
    if value is None or value in ("", []):
        if required:
            raise Invalid(f"{name}: field required")
        return []
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list):
        raise Invalid(f"{name}: must be a list of ids")
    ids = [integer(item, name, low=-1) for item in items]
    if len(ids) > high:
        raise Invalid(f"{name}: at most {high} values")
    return ids


def body_object(call: Call) -> dict[str, Any]:
    if not isinstance(call.body, dict):
        raise Invalid("request body must be a JSON object")
    return call.body
