"""WB's API gateway in front of the endpoints: identity, faults, rate limits, the request log.

A call goes: latency fault -> route (404/405) -> token (401) -> forced
statuses, forced 429s, random 5xx -> the seller's bucket (429) -> the endpoint
(200/204/400). Every call after the token check that is not a 429 carries
``X-Ratelimit-Remaining``.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

from gatehouse_wb_sandbox import problems
from gatehouse_wb_sandbox.calls import Call, Invalid, Reply
from gatehouse_wb_sandbox.limits import seconds_header
from gatehouse_wb_sandbox.routes import ROUTES, Route
from gatehouse_wb_sandbox.state import Sandbox
from gatehouse_wb_sandbox.tokens import TokenError, seller_of

# Request fields the log keeps, from the query or the JSON body.
LOGGED_PARAMS = ("dateFrom", "dateTo", "flag", "rrdId", "limit", "offset", "ids", "beginDate", "endDate")
_UNREADABLE = object()


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: bytes
    authorization: str | None
    job: str | None  # X-Gatehouse-Job: which of our jobs made the call
    run: str | None = None  # X-Gatehouse-Run: which run (claim) of that job


def _json(raw: bytes) -> Any:
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return _UNREADABLE


def summary(query: dict[str, str], body: Any) -> dict[str, Any]:
    """The paging-relevant parameters of a call, for the log."""
    params: dict[str, Any] = {}
    for source in (query, body if isinstance(body, dict) else {}):
        params |= {key: source[key] for key in LOGGED_PARAMS if key in source}
        if "rrdid" in source:
            params["rrdId"] = source["rrdid"]
    if isinstance(body, dict):
        settings = body.get("settings")
        if isinstance(settings, dict) and "cursor" in settings:
            params["cursor"] = settings["cursor"]
        if "advert_id" in body:
            params["ids"] = [body["advert_id"]]
        if isinstance(body.get("bids"), list):
            params["ids"] = [item.get("advert_id") for item in body["bids"] if isinstance(item, dict)]
    return params


def _problem(
    status: int, title: str, detail: str, origin: str, request_id: str, headers: dict[str, str] | None = None
) -> Reply:
    body = problems.gateway(int(status), title, detail, origin=origin, request_id=request_id)
    return Reply(int(status), body, problems.PROBLEM, headers or {})


def _too_many(
    route: Route, request_id: str, retry_s: float, reset_s: float, burst: int, exact: bool
) -> Reply:
    headers = {
        "X-Ratelimit-Retry": seconds_header(retry_s, exact=exact),
        "X-Ratelimit-Limit": str(burst),
        "X-Ratelimit-Reset": seconds_header(reset_s, exact=exact),
    }
    return _problem(
        429, "too many requests", problems.limited_by(route.bucket), route.origin, request_id, headers
    )


def _answer(
    sandbox: Sandbox, request: Request, body: Any, seller: str | None, why: str, request_id: str
) -> Reply:
    route = ROUTES.get((request.method, request.path))
    if route is None:
        known = any(path == request.path for _, path in ROUTES)
        status = HTTPStatus.METHOD_NOT_ALLOWED if known else HTTPStatus.NOT_FOUND
        detail = f"{request.method} {request.path}"
        return _problem(status, status.phrase.lower(), detail, "s2s-api-auth", request_id)
    if seller is None:
        return _problem(401, "unauthorized", why, route.origin, request_id)
    fault = sandbox.faults.decide(seller, route.bucket)
    if fault is not None and fault.retry_s is not None:
        burst = sandbox.limits[route.bucket].burst
        return _too_many(route, request_id, fault.retry_s, fault.retry_s, burst, exact=True)
    if fault is not None:
        remaining = str(sandbox.buckets.remaining(seller, route.bucket))
        title = HTTPStatus(fault.status).phrase.lower()
        detail = f"sandbox fault: {fault.reason}"
        return _problem(
            fault.status, title, detail, route.origin, request_id, {"X-Ratelimit-Remaining": remaining}
        )
    verdict = sandbox.buckets.take(seller, route.bucket)
    if not verdict.allowed:
        return _too_many(
            route, request_id, verdict.retry_s, verdict.reset_s, verdict.burst, sandbox.exact_headers
        )
    try:
        if body is _UNREADABLE:
            raise Invalid("can not deserialize request body")
        reply = route.handler(Call(sandbox, seller, request.query, body))
    except Invalid as exc:
        reply = Reply(400, route.error(str(exc), request_id))
    return replace(reply, headers={**reply.headers, "X-Ratelimit-Remaining": str(verdict.remaining)})


def handle(sandbox: Sandbox, request: Request) -> Reply:
    """Answer one WB call and log it."""
    arrived = time.time()
    request_id = uuid.uuid4().hex
    body = _json(request.body)
    seller: str | None = None
    why = ""
    try:
        seller = logged_seller = seller_of(request.authorization)
    except TokenError as exc:
        why, logged_seller = str(exc), exc.seller
    if request.method == "GET" and request.path == "/ping":  # the health check: no token, no faults
        reply = Reply(200, {"TS": datetime.now(UTC).isoformat(), "Status": "OK"})
    else:
        latency_ms = sandbox.faults.latency_ms
        if latency_ms:
            time.sleep(latency_ms / 1000)
        reply = _answer(sandbox, request, body, seller, why, request_id)
    route = ROUTES.get((request.method, request.path))
    sandbox.log.append(
        {
            "ts": arrived,
            "seller": logged_seller,
            "method": request.method,
            "path": request.path,
            "bucket": route.bucket if route else None,
            "status": reply.status,
            "job": request.job,
            "run": request.run,
            "requestId": request_id,
            "params": summary(request.query, body),
        }
    )
    return reply
