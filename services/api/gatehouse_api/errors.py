"""HTTP mapping of errors: everything leaves as application/problem+json with a stable code."""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from typing import Any

import falcon
import psycopg
import redis
import sqlalchemy.exc
from psycopg_pool import PoolTimeout

from gatehouse.db import cut_short
from gatehouse.errors import (
    ConfigurationError,
    Conflict,
    Forbidden,
    GatehouseError,
    NotFound,
    StoreUnavailable,
    TooManyAttempts,
    Unauthorized,
    ValidationFailed,
)
from gatehouse.modules import ModuleDisabled

log = logging.getLogger(__name__)
PROBLEM_JSON = "application/problem+json"

STATUS_OF: dict[type[GatehouseError], int] = {
    ValidationFailed: 422,
    NotFound: 404,
    Unauthorized: 401,
    Forbidden: 403,
    Conflict: 409,
    TooManyAttempts: 429,
    StoreUnavailable: 503,
    ConfigurationError: 500,
}
# A client that met a store outage (503 STORE_UNAVAILABLE) may try again after this many seconds.
RETRY_AFTER_S = 5
STORE_NAMES = {"postgresql": "PostgreSQL", "redis": "Redis"}
# What the store clients raise when their server is down, refusing or not answering in time.
REDIS_OUTAGES = (redis.ConnectionError, redis.TimeoutError)
POSTGRESQL_OUTAGES = (psycopg.OperationalError, PoolTimeout, sqlalchemy.exc.TimeoutError)
# A statement PostgreSQL cut short (gatehouse.db.cut_short) is no outage, but as passing: another
# writer holds the row or collided with this one, or the statement ran too long. A 503 with
# Retry-After, like an outage (every authenticated operation declares it, and a client already
# retries it), with its own code; not a 409, which asks the client to change its request.
CUT_SHORT = {
    "lock-timeout": ("RESOURCE_BUSY", "another change holds what this request writes; try again shortly", 1),
    "write-conflict": ("RESOURCE_BUSY", "a concurrent change collided with this one; try again shortly", 1),
    "statement-timeout": (
        "STATEMENT_TIMEOUT",
        "PostgreSQL took too long to answer this request",
        RETRY_AFTER_S,
    ),
}
# Codes for errors Falcon raises itself (routing, media parsing, size limits).
CODE_OF_STATUS = {
    400: "BAD_REQUEST",
    401: "UNAUTHORIZED",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    406: "NOT_ACCEPTABLE",
    409: "CONFLICT",
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
    extra: dict[str, Any] = {}
    headers: dict[str, str] | None = None
    if isinstance(exc, ModuleDisabled):
        # Disabled: the routes exist but are switched off (409); not installed: there are none (404).
        status = 409 if exc.installed else 404
        extra["module"] = exc.module
    elif isinstance(exc, ValidationFailed):
        extra["field"] = exc.field
        extra["errors"] = [{"field": field, "message": message} for field, message in exc.errors]
    elif isinstance(exc, Conflict):
        extra["field"] = exc.field
        extra.update(getattr(exc, "details", {}))  # e.g. TOKEN_SCOPE_MISSING's category
    elif isinstance(exc, StoreUnavailable):
        extra["store"] = exc.store
        headers = {"Retry-After": str(RETRY_AFTER_S)}
    elif isinstance(exc, TooManyAttempts):
        headers = {"Retry-After": str(exc.retry_after_s)}
    if status == 401:
        headers = {"WWW-Authenticate": "Bearer"}
    send_problem(resp, status, problem(status, exc.code, exc.detail, **extra), headers)


def store_outage(exc: BaseException) -> StoreUnavailable | None:
    """The outage a store client's exception means, or None when it is not one (a bug, a bad query)."""
    if isinstance(exc, StoreUnavailable):
        return exc
    if isinstance(exc, REDIS_OUTAGES):
        store = "redis"
    elif isinstance(exc, POSTGRESQL_OUTAGES) or (
        # SQLAlchemy wraps the driver's error: OperationalError (connection refused,
        # server gone, …) or any error that invalidated the connection.
        isinstance(exc, sqlalchemy.exc.DBAPIError)
        and (
            isinstance(exc, sqlalchemy.exc.OperationalError)
            or exc.connection_invalidated
            or isinstance(exc.orig, psycopg.OperationalError)
        )
    ):
        store = "postgresql"
    else:
        return None
    return StoreUnavailable(
        f"{STORE_NAMES[store]} is not answering ({type(exc).__name__}); try again in {RETRY_AFTER_S} s",
        store=store,
    )


def handle_store(req: falcon.Request, resp: falcon.Response, exc: Exception, params: Any) -> None:
    why = cut_short(exc)
    if why is not None:
        code, detail, retry_after = CUT_SHORT[why]
        log.warning("%s %s: PostgreSQL stopped a statement: %s", req.method, req.path, why)
        body = problem(503, code, detail, store="postgresql")
        send_problem(resp, 503, body, {"Retry-After": str(retry_after)})
        return
    outage = store_outage(exc)
    if outage is None:
        handle_unexpected(req, resp, exc, params)
        return
    # Expected during an outage: one line, no traceback.
    log.warning("%s %s: %s unavailable: %s: %s", req.method, req.path, outage.store, type(exc).__name__, exc)
    handle_domain(req, resp, outage, params)


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
    for outage in (*REDIS_OUTAGES, *POSTGRESQL_OUTAGES, sqlalchemy.exc.DBAPIError):
        app.add_error_handler(outage, handle_store)
