"""WB's API gateway in front of the endpoints: routing, identity, faults, rate limits, the contract, the log.

A call goes: latency fault -> route by (host, method, path) (404/405) -> token
(401; 401 ``token scope not allowed`` when it lacks the host's category) ->
forced statuses, forced 429s, random 5xx -> the seller's bucket on that host
(429) -> the request checked against WB's operation (400 in the service's
shape, naming the violation) -> the endpoint (200/204/400). Every call after
the token check that is not a 429 carries ``X-Ratelimit-Remaining``.

Log entry: ts, seller, host, method, path (WB's, without the host prefix),
bucket, status, job, run, requestId, params, contractErrors.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, replace
from http import HTTPStatus
from typing import Any

from gatehouse_wb_sandbox import contract, problems
from gatehouse_wb_sandbox.calls import Call, Invalid, Reply
from gatehouse_wb_sandbox.limits import seconds_header
from gatehouse_wb_sandbox.routes import ROUTES, Route, locate, served_methods
from gatehouse_wb_sandbox.state import Sandbox
from gatehouse_wb_sandbox.tokens import SCOPE_NOT_ALLOWED, Identity, TokenError, identify

# Request fields the log keeps, from the query or the JSON body.
LOGGED_PARAMS = ("dateFrom", "dateTo", "flag", "rrdId", "limit", "offset", "ids", "beginDate", "endDate")
_UNREADABLE = object()


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # as sent: with or without a leading host label
    query: dict[str, str]
    body: bytes
    authorization: str | None
    job: str | None  # X-Gatehouse-Job: which of our jobs made the call
    run: str | None = None  # X-Gatehouse-Run: which run (claim) of that job
    content_type: str | None = None


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


def too_many(route: Route, request_id: str, retry_s: float, reset_s: float, burst: int, exact: bool) -> Reply:
    headers = {
        "X-Ratelimit-Retry": seconds_header(retry_s, exact=exact),
        "X-Ratelimit-Limit": str(burst),
        "X-Ratelimit-Reset": seconds_header(reset_s, exact=exact),
    }
    return _problem(
        429, "too many requests", problems.limited_by(route.bucket), route.origin, request_id, headers
    )


def bad_request(route: Route, detail: str, request_id: str) -> Reply:
    """A 400 in the shape the route's service documents."""
    if route.error is None:  # the operation documents no 400; the gateway answers
        return _problem(400, "bad request", detail, route.origin, request_id)
    return Reply(400, route.error(detail, request_id), route.error_type)


@dataclass
class _Outcome:
    reply: Reply
    contract_errors: list[str]


def _answer(
    sandbox: Sandbox,
    request: Request,
    route: Route,
    body: Any,
    identity: Identity,
    request_id: str,
) -> _Outcome:
    seller = identity.seller
    if route.category is not None and route.category not in identity.categories:
        return _Outcome(_problem(401, "unauthorized", SCOPE_NOT_ALLOWED, route.origin, request_id), [])
    fault = sandbox.faults.decide(seller, route.bucket)
    if fault is not None and fault.retry_s is not None:
        burst = sandbox.limits[route.bucket].burst
        return _Outcome(too_many(route, request_id, fault.retry_s, fault.retry_s, burst, exact=True), [])
    if fault is not None:
        remaining = str(sandbox.buckets.remaining(seller, route.bucket))
        title = HTTPStatus(fault.status).phrase.lower()
        detail = f"sandbox fault: {fault.reason}"
        headers = {"X-Ratelimit-Remaining": remaining}
        return _Outcome(_problem(fault.status, title, detail, route.origin, request_id, headers), [])
    verdict = sandbox.buckets.take(seller, route.bucket)
    if not verdict.allowed:
        reply = too_many(
            route, request_id, verdict.retry_s, verdict.reset_s, verdict.burst, sandbox.exact_headers
        )
        return _Outcome(reply, [])
    errors = contract.check_request(
        route.host,
        route.method,
        route.path,
        request.query,
        request.body,
        request.authorization,
        (request.content_type or problems.JSON).split(";")[0].strip(),
    )
    if errors:
        reply = bad_request(route, "request breaks WB's contract: " + "; ".join(errors), request_id)
    else:
        try:
            if body is _UNREADABLE:
                raise Invalid("can not deserialize request body")
            reply = route.handler(Call(sandbox, seller, request.query, body))
        except Invalid as exc:
            reply = bad_request(route, str(exc), request_id)
    reply = replace(reply, headers={**reply.headers, "X-Ratelimit-Remaining": str(verdict.remaining)})
    return _Outcome(reply, errors)


def handle(sandbox: Sandbox, request: Request) -> Reply:
    """Answer one WB call and log it."""
    arrived = time.time()
    request_id = uuid.uuid4().hex
    host, path = locate(request.path)
    route = ROUTES.get((host, request.method, path)) if host else None
    body = _json(request.body) if route is None or route.method != "GET" else None
    identity: Identity | None = None
    why, logged_seller = "", None
    try:
        identity = identify(request.authorization)
        logged_seller = identity.seller
    except TokenError as exc:
        why, logged_seller = str(exc), exc.seller
    latency_ms = sandbox.faults.latency_ms
    if latency_ms:
        time.sleep(latency_ms / 1000)
    errors: list[str] = []
    if route is None:
        status = HTTPStatus.METHOD_NOT_ALLOWED if served_methods(host, path) else HTTPStatus.NOT_FOUND
        detail = f"{request.method} {path}"
        reply = _problem(status, status.phrase.lower(), detail, "s2s-api-auth", request_id)
    elif identity is None:
        reply = _problem(401, "unauthorized", why, route.origin, request_id)
    else:
        outcome = _answer(sandbox, request, route, body, identity, request_id)
        reply, errors = outcome.reply, outcome.contract_errors
    sandbox.log.append(
        {
            "ts": arrived,
            "seller": logged_seller,
            "host": host,
            "method": request.method,
            "path": path,
            "bucket": route.bucket if route else None,
            "status": reply.status,
            "job": request.job,
            "run": request.run,
            "requestId": request_id,
            "params": summary(request.query, body),
            "contractErrors": errors,
        }
    )
    return reply
