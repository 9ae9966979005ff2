"""One HTTP attempt of a webhook delivery with httpx: POST, no redirects, a deadline, a capped read.

Success is a 2xx within WEBHOOK_TIMEOUT_MS, counted from connect to the last
byte read (a total deadline, gatehouse.deadlines: a receiver that trickles its
answer is cut at it, whatever each read waits); a redirect, any other status,
a timeout, a connection error or a connection the SSRF guard refuses is a
failure. A 429 or 503 may say how long to
wait (``Retry-After``, seconds or an HTTP date, capped at RETRY_AFTER_MAX_MS).
Only the first READ_MAX bytes of the answer are read.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

from gatehouse import deadlines
from gatehouse.webhooks.pinning import PinnedBackend
from gatehouse.webhooks.safety import Guard, UrlRefused
from gatehouse.webhooks.store import Answer

READ_MAX = 64 * 1024
RETRY_AFTER_MAX_MS = 3_600_000
USER_AGENT = "Gatehouse-Webhooks/1"
LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)


def transport(guard: Guard) -> httpx.HTTPTransport:
    """The connection pool of a worker process, shared by every delivery: httpx's transport, no Client,
    whose sockets wait no longer than the attempt's deadline and connect only to addresses ``guard``
    checked for that connection (gatehouse.webhooks.pinning).

    A delivery follows no redirect and carries no cookie (a ``Set-Cookie`` of one receiver
    must never ride along to another endpoint on the same host), and the transport does
    neither by construction. It is also the cheaper way through httpx: a Client's redirect,
    auth, cookie and hook layers cost about half of a request's CPU (bench_webhooks prints both).
    """
    return deadlines.transport(lambda inner: PinnedBackend(inner, guard), limits=LIMITS)


def retry_after_ms(value: str | None, now: datetime | None = None) -> int | None:
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit() and len(value) <= 10:
        return min(int(value) * 1000, RETRY_AFTER_MAX_MS)
    try:
        at = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    wait = (at - (now or datetime.now(UTC))).total_seconds() * 1000
    return min(max(0, int(wait)), RETRY_AFTER_MAX_MS)


def post(
    http: httpx.BaseTransport, url: httpx.URL, body: str, headers: dict[str, str], timeout_s: float
) -> Answer:
    start = time.monotonic()

    def elapsed_ms() -> int:
        return int((time.monotonic() - start) * 1000)

    request = httpx.Request(
        "POST",
        url,
        content=body.encode(),
        headers={**headers, "content-type": "application/json", "user-agent": USER_AGENT},
        extensions={"timeout": httpx.Timeout(timeout_s).as_dict()},
    )
    try:
        with deadlines.within(timeout_s):
            response = http.handle_request(request)
            try:
                read = bytearray()
                for chunk in response.iter_raw():  # no Accept-Encoding was sent: the bytes as they come
                    read += chunk
                    if len(read) >= READ_MAX:
                        break
            finally:
                response.close()  # a body left unread closes the connection instead of pooling it
        code = response.status_code
        wait = retry_after_ms(response.headers.get("retry-after")) if code in (429, 503) else None
    except UrlRefused as exc:  # the host now resolves where it may not go: no connection was made
        return Answer(None, elapsed_ms(), error=f"refused: {exc}")
    except httpx.TimeoutException:
        return Answer(None, elapsed_ms(), error=f"timeout after {timeout_s:g} s")
    except httpx.HTTPError as exc:
        return Answer(None, elapsed_ms(), error=f"{type(exc).__name__}: {exc}"[:500])
    excerpt = bytes(read[:4096]).decode("utf-8", "replace")
    return Answer(code, elapsed_ms(), excerpt=excerpt, retry_after_ms=wait)
