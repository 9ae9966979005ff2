"""HTTP mapping of errors: everything leaves as application/problem+json with a stable code."""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from typing import Any

import falcon

from gatehouse.errors import (
    ConfigurationError,
    Forbidden,
    GatehouseError,
    NotFound,
    Unauthorized,
    ValidationFailed,
)

log = logging.getLogger(__name__)
PROBLEM_JSON = "application/problem+json"

STATUS_OF: dict[type[GatehouseError], int] = {
    ValidationFailed: 422,
    NotFound: 404,
    Unauthorized: 401,
    Forbidden: 403,
    ConfigurationError: 500,
}
# Codes for errors Falcon raises itself (routing, media parsing, size limits).
CODE_OF_STATUS = {
    400: "BAD_REQUEST",
    401: "UNAUTHORIZED",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    406: "NOT_ACCEPTABLE",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
    422: "VALIDATION_ERROR",
    500: "INTERNAL_ERROR",
    503: "SERVICE_UNAVAILABLE",
}


def problem(status: int, code: str, detail: str, **extra: Any) -> dict[str, Any]:
    title = HTTPStatus(status).phrase
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail, "code": code}
    body.update({k: v for k, v in extra.items() if v is not None})
    return body


def send_problem(
    resp: falcon.Response, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> None:
    resp.status = status
    resp.content_type = PROBLEM_JSON
    resp.text = json.dumps(body)
    for name, value in (headers or {}).items():
        resp.set_header(name, value)


def handle_domain(req: falcon.Request, resp: falcon.Response, exc: GatehouseError, params: Any) -> None:
    status = next((s for cls, s in STATUS_OF.items() if isinstance(exc, cls)), 500)
    extra = {"field": exc.field} if isinstance(exc, ValidationFailed) else {}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    send_problem(resp, status, problem(status, exc.code, exc.detail, **extra), headers)


def handle_http(req: falcon.Request, resp: falcon.Response, exc: falcon.HTTPError, params: Any) -> None:
    status = exc.status_code
    detail = exc.description or exc.title or HTTPStatus(status).phrase
    code = getattr(exc, "code", None) or CODE_OF_STATUS.get(status, f"HTTP_{status}")
    send_problem(resp, status, problem(status, code, detail), dict(exc.headers or {}))


def handle_unexpected(req: falcon.Request, resp: falcon.Response, exc: Exception, params: Any) -> None:
    log.exception("unhandled error on %s %s", req.method, req.path)
    send_problem(
        resp, 500, problem(500, "INTERNAL_ERROR", "An unexpected error occurred; it has been logged.")
    )


def install(app: falcon.App) -> None:
    # Falcon picks the most specific registered class for an exception.
    app.add_error_handler(Exception, handle_unexpected)
    app.add_error_handler(falcon.HTTPError, handle_http)
    app.add_error_handler(GatehouseError, handle_domain)
