"""WB's error bodies, which differ per service.

The API gateway (401, 429, gateway faults) answers ``application/problem+json``
with the same fields everywhere; a 400 comes from the service behind it and
has that service's shape.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

PROBLEM = "application/problem+json"
JSON = "application/json"


def _timestamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def gateway(status: int, title: str, detail: str, *, origin: str, request_id: str) -> dict[str, Any]:
    """The gateway's problem+json body (401, 429, forced faults)."""
    code = hashlib.sha256(request_id.encode()).hexdigest()
    return {
        "title": title,
        "detail": detail,
        "code": f"{code[:8]}--{code[8:20]}-[{code[20:31]}]",  # opaque, like WB's
        "requestId": request_id,
        "origin": origin,
        "status": status,
        "statusText": HTTPStatus(status).phrase,
        "timestamp": _timestamp(),
    }


def limited_by(bucket: str) -> str:
    """WB names the limiter that refused a call by a uuid; one stable uuid per bucket here."""
    return f"limited by {uuid.uuid5(uuid.NAMESPACE_URL, f'gatehouse-wb-sandbox/{bucket}')}"


def statistics_400(detail: str, request_id: str) -> dict[str, Any]:
    return {"errors": [detail]}  # statistics' legacy shape


def finance_400(detail: str, request_id: str) -> dict[str, Any]:  # sent as problem+json
    return {
        "status": 400,
        "title": "Bad Request",
        "detail": detail,
        "requestId": request_id,
        "origin": "finance-api",
    }


def advert_400(detail: str, request_id: str) -> dict[str, Any]:
    return {
        "detail": detail,
        "origin": "camp-api-public-cache",
        "request_id": request_id,
        "status": 400,
        "title": "invalid payload",
    }


def analytics_400(detail: str, request_id: str) -> dict[str, Any]:
    return {
        "title": "Invalid request parameters",
        "detail": detail,
        "requestId": request_id,
        "origin": "analytics-open-api",
        "status": 400,
        "statusText": "Bad Request",
        "timestamp": _timestamp(),
    }


def content_400(detail: str, request_id: str) -> dict[str, Any]:
    return {"data": None, "error": True, "errorText": detail, "additionalErrors": None}
