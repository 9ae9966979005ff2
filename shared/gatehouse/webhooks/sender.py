"""One HTTP attempt of a webhook delivery with httpx: POST, no redirects, a deadline, a capped read.

Success is a 2xx within WEBHOOK_TIMEOUT_MS, counted from connect to the last
byte read; a redirect, any other status, a timeout or a connection error is a
failure. A 429 or 503 may say how long to wait (``Retry-After``, seconds or an
HTTP date, capped at RETRY_AFTER_MAX_MS). Only the first READ_MAX bytes of the
answer are read.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx

from gatehouse.webhooks.store import Answer

READ_MAX = 64 * 1024
RETRY_AFTER_MAX_MS = 3_600_000
USER_AGENT = "Gatehouse-Webhooks/1"


def client() -> httpx.Client:
    """The one client of a worker process: its connection pool is shared by every delivery.

    It keeps no cookies: a ``Set-Cookie`` of one receiver must never ride along to another
    endpoint on the same host (nor back to it: a delivery carries its body and signature only).
    """
    return httpx.Client(
        follow_redirects=False,
        limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
        headers={"user-agent": USER_AGENT},
        cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
    )


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
    http: httpx.Client, url: httpx.URL | str, body: str, headers: dict[str, str], timeout_s: float
) -> Answer:
    start = time.monotonic()

    def elapsed_ms() -> int:
        return int((time.monotonic() - start) * 1000)

    try:
        with http.stream(
            "POST",
            url,
            content=body.encode(),
            headers={**headers, "content-type": "application/json"},
            timeout=httpx.Timeout(timeout_s),
        ) as response:
            read = bytearray()
            for chunk in response.iter_bytes():
                read += chunk
                if len(read) >= READ_MAX or time.monotonic() - start > timeout_s:
                    break
            code = response.status_code
            wait = retry_after_ms(response.headers.get("retry-after")) if code in (429, 503) else None
    except httpx.TimeoutException:
        return Answer(None, elapsed_ms(), error=f"timeout after {timeout_s:g} s")
    except httpx.HTTPError as exc:
        return Answer(None, elapsed_ms(), error=f"{type(exc).__name__}: {exc}"[:500])
    excerpt = bytes(read[:4096]).decode("utf-8", "replace")
    if time.monotonic() - start > timeout_s:
        return Answer(code, elapsed_ms(), error=f"timeout after {timeout_s:g} s", excerpt=excerpt)
    return Answer(code, elapsed_ms(), excerpt=excerpt, retry_after_ms=wait)
