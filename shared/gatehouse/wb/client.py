"""The one Wildberries client (httpx): endpoints, headers, and what each answer means.

Every call goes through ``call``, over the process's one pooled client (``WbHttp``): a
``before_call(bucket)`` hook runs first
(the job's lease check and the per-account token bucket), then the request;
the answer becomes data or one of gatehouse.wb.errors. A 429's
``X-Ratelimit-Retry`` is parsed into ``WbRateLimited.retry_after_s``. Each
socket wait is bounded by WB_TIMEOUT_MS, and the whole call (connect to the
last byte) by WB_CALL_DEADLINE_MS (gatehouse.deadlines), or sooner by the
run's time limit: an answer that trickles is a WbTimeout, not a held account.
With traces on, a call is a span (its bucket, status and WB's retry-after).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from gatehouse import deadlines, metrics, traces
from gatehouse.wb.errors import (
    WbBadRequest,
    WbForbidden,
    WbRateLimited,
    WbScopeDenied,
    WbTimeout,
    WbUnauthorized,
    WbUnavailable,
)
from gatehouse.wb.hosts import CATEGORY_OF, HOST_LABELS, HOST_OF, Category


@dataclass(frozen=True)
class Endpoint:
    service: str  # a key of gatehouse.wb.hosts.HOST_LABELS
    method: str
    path: str  # as WB's OpenAPI gives it
    bucket: str  # WB's rate-limit group, per seller account (gatehouse.wb.limits)

    @property
    def category(self) -> Category | None:
        """The token category its host needs (None: any token)."""
        return CATEGORY_OF.get(self.service)


ORDERS = Endpoint("statistics", "GET", "/api/v1/supplier/orders", "orders")
SALES = Endpoint("statistics", "GET", "/api/v1/supplier/sales", "sales")
REPORT = Endpoint("finance", "POST", "/api/finance/v1/sales-reports/detailed", "report")
ADVERTS = Endpoint("advert", "GET", "/api/advert/v2/adverts", "adverts")
FULLSTATS = Endpoint("advert", "GET", "/adv/v3/fullstats", "fullstats")
STOCKS = Endpoint("analytics", "POST", "/api/analytics/v1/stocks-report/wb-warehouses", "inventory")
CARDS = Endpoint("content", "POST", "/content/v2/get/cards/list", "catalog")
SELLER_INFO = Endpoint("common", "GET", "/api/v1/seller-info", "seller_info")
# /ping answers on every host: is the token valid, and does it carry that host's category.
# WB limits it per host (3 per 30 s) and blocks it when it is called on a timer: account-verify only.
PING = {service: Endpoint(service, "GET", "/ping", f"ping:{HOST_LABELS[service]}") for service in CATEGORY_OF}
# Every call the client can make (tests/contract holds each to WB's OpenAPI).
ENDPOINTS = (ORDERS, SALES, REPORT, ADVERTS, FULLSTATS, STOCKS, CARDS, SELLER_INFO, *PING.values())


def ping_of(category: Category) -> Endpoint:
    return PING[HOST_OF[category]]


# WB's 401 detail when the token is fine but lacks the category of the host it called.
SCOPE_NOT_ALLOWED = "token scope not allowed"

JOB_HEADER = "X-Gatehouse-Job"  # lets the sandbox (and WB support) tie calls to a job
RUN_HEADER = "X-Gatehouse-Run"  # ...and to one run (claim) of it: a retry or resume is another run


class WbHttp:
    """The one pooled HTTP client of a process for every WB call of its threads.

    Building an ``httpx.Client`` builds an SSL context and loads the CA store (16–18 ms of CPU,
    half a WB job's) and a new client opens new TCP and TLS connections: so a process keeps one,
    with keep-alive connections per WB host, and each call sends its own token and job headers.
    It is made on first use and again in a forked child (a child never shares its parent's
    sockets). httpx's client is safe to share between threads.
    """

    def __init__(self, *, timeout_ms: int, transport: httpx.BaseTransport | None = None) -> None:
        self.timeout_s = timeout_ms / 1000
        self.transport = transport
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None
        self._pid = 0

    def client(self) -> httpx.Client:
        if self._client is None or self._pid != os.getpid():
            with self._lock:
                if self._client is None or self._pid != os.getpid():
                    self._client = deadlines.client(
                        httpx.Client(
                            headers={"Accept": "application/json"},
                            timeout=self.timeout_s,
                            transport=self.transport,
                        )
                    )
                    self._pid = os.getpid()
        return self._client

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None and self._pid == os.getpid():
            client.close()


class WbClient:
    """One job run's WB calls: its account's token, its job and run headers, its lease and bucket
    check before each call (``before_call``), over the process's pooled ``WbHttp``."""

    def __init__(
        self,
        http: WbHttp,
        host: Callable[[str], str],
        token: str,
        *,
        deadline_ms: int,
        job_id: str | None = None,
        run: int | None = None,
        before_call: Callable[[str], None] | None = None,
    ) -> None:
        self.pool = http
        self.host = host  # a WB service's base URL (Settings.wb_host)
        self.deadline_s = deadline_ms / 1000
        self.before_call = before_call or (lambda bucket: None)
        self.headers = {"Authorization": token}
        if job_id:
            self.headers[JOB_HEADER] = job_id
        if run is not None:
            self.headers[RUN_HEADER] = str(run)

    def call(self, endpoint: Endpoint, *, params: dict | None = None, body: dict | None = None) -> Any:
        """The decoded JSON answer, or None for 204 No Content."""
        with traces.span(f"WB {endpoint.method} {endpoint.path}", {"wb.bucket": endpoint.bucket}):
            return self._call(endpoint, params, body)

    def _call(self, endpoint: Endpoint, params: dict | None, body: dict | None) -> Any:
        self.before_call(endpoint.bucket)
        url = self.host(endpoint.service) + endpoint.path
        try:
            with deadlines.within(self.deadline_s):
                response = self.pool.client().request(
                    endpoint.method, url, params=params, json=body, headers=self.headers
                )
        except httpx.TimeoutException as exc:
            metrics.WB_CALLS.labels(bucket=endpoint.bucket, status="error").inc()
            raise WbTimeout(f"WB did not answer {endpoint.path} in time ({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            metrics.WB_CALLS.labels(bucket=endpoint.bucket, status="error").inc()
            raise WbUnavailable(f"WB is unreachable at {endpoint.path} ({exc})") from None
        metrics.WB_CALLS.labels(bucket=endpoint.bucket, status=str(response.status_code)).inc()
        return _answer(endpoint, response)


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return response.text[:200] or response.reason_phrase
    if isinstance(body, dict):
        return str(body.get("detail") or body.get("title") or body.get("errors") or body)[:200]
    return str(body)[:200]


def _seconds(response: httpx.Response, header: str) -> float | None:
    try:
        return float(response.headers[header])
    except (KeyError, ValueError):
        return None


def _answer(endpoint: Endpoint, response: httpx.Response) -> Any:
    status = response.status_code
    traces.note(
        {"http.response.status_code": status, "wb.retry_after_s": _seconds(response, "X-Ratelimit-Retry")}
    )
    if status == 204:
        return None
    if 200 <= status < 300:
        return response.json()
    where = f"{endpoint.method} {endpoint.path}"
    if status == 429:
        limit = _seconds(response, "X-Ratelimit-Limit")
        raise WbRateLimited(
            f"WB rate limit on {where}: {_detail(response)}",
            retry_after_s=_seconds(response, "X-Ratelimit-Retry") or 1.0,
            limit=int(limit) if limit is not None else None,
            reset_s=_seconds(response, "X-Ratelimit-Reset"),
        )
    if status == 401:
        detail = _detail(response)
        if endpoint.category and detail.strip().lower() == SCOPE_NOT_ALLOWED:
            raise WbScopeDenied(
                f"WB refused {where}: the token lacks its category (401: {SCOPE_NOT_ALLOWED})",
                category=endpoint.category,
            )
        raise WbUnauthorized(f"WB rejected the account's token on {where} (401: {detail})")
    if status == 403:
        raise WbForbidden(f"WB refused {where} for this token (403: {_detail(response)})")
    if 400 <= status < 500:
        raise WbBadRequest(f"WB rejected {where} ({status}: {_detail(response)})")
    raise WbUnavailable(f"WB failed on {where} ({status}: {_detail(response)})")
