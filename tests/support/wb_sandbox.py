"""The WB sandbox in this process: the real HTTP server on a free port, served by a thread."""

from __future__ import annotations

import contextlib
import json
import ssl
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from gatehouse_wb_sandbox.server import SandboxServer, serve
from gatehouse_wb_sandbox.state import SandboxConfig
from gatehouse_wb_sandbox.tokens import make_token

TOKEN_CHECKS = ("/ping", "/api/v1/seller-info")
# Plain HTTP only; a bare context spares every client httpx's costly default one (~50 ms).
_PLAIN = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def http_client(base_url: str, **headers: str) -> httpx.Client:
    return httpx.Client(base_url=base_url, headers=headers, timeout=10, verify=_PLAIN, trust_env=False)


@dataclass
class RunningSandbox:
    url: str
    server: SandboxServer
    control: httpx.Client = field(init=False)  # for /__sandbox/…

    def __post_init__(self) -> None:
        self.control = http_client(self.url)

    def client(
        self,
        seller: str | None = None,
        *,
        token: str | None = None,
        host: str | None = None,
        categories: Iterable[str] | None = None,
        **headers: str,
    ) -> httpx.Client:
        """A client speaking for ``seller`` (a JWT with that sid and ``categories``, None: all) or sending
        ``token`` as it is; ``host`` (a WB host label) prefixes every path, as the WB client does."""
        auth = (
            token
            if token is not None
            else make_token(seller, categories=categories)
            if seller is not None
            else None
        )
        if auth is not None:
            headers["Authorization"] = auth
        return http_client(self.host_url(host) if host else self.url, **headers)

    def host_url(self, host: str) -> str:
        """The base URL standing in for WB's ``https://<host>.wildberries.ru``."""
        return f"{self.url}/{host}"

    def mint(
        self, sid: str, *, categories: list[str] | None = None, expires_in_days: float | None = None
    ) -> str:
        """A token from ``POST /__sandbox/tokens``."""
        request: dict[str, Any] = {"sid": sid}
        if categories is not None:
            request["categories"] = categories
        if expires_in_days is not None:
            request["expiresInDays"] = expires_in_days
        response = self.control.post("/__sandbox/tokens", json=request)
        response.raise_for_status()
        return response.json()["token"]

    def log(self, seller: str | None = None, *, checks: bool = True) -> list[dict[str, Any]]:
        """The calls, oldest first; ``checks=False`` leaves out the token checks a new account's
        account-verify job makes (``/ping``, seller-info) for a test about the other calls."""
        params = {"seller": seller} if seller is not None else {}
        entries = self.control.get("/__sandbox/log", params=params).json()
        return entries if checks else [e for e in entries if e["path"] not in TOKEN_CHECKS]

    def faults(self, **changes: Any) -> dict[str, Any]:
        """Merge ``changes`` into the fault switches (no argument: just read them)."""
        response = self.control.post("/__sandbox/faults", json=changes)
        response.raise_for_status()
        return response.json()

    def reset(self) -> None:
        self.control.post("/__sandbox/reset").raise_for_status()


@contextlib.contextmanager
def running_sandbox(**config: Any) -> Iterator[RunningSandbox]:
    """``with running_sandbox(time_scale=60, rows_per_day=2) as sandbox: ...`` (SandboxConfig fields)."""
    server = serve("127.0.0.1:0", SandboxConfig(**config))
    # A short poll interval makes shutdown() quick.
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="wb-sandbox", daemon=True)
    thread.start()
    running = RunningSandbox(f"http://127.0.0.1:{server.server_address[1]}", server)
    try:
        yield running
    finally:
        running.control.close()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def scaled_limits(time_scale: float) -> dict[str, str]:
    """Worker env whose token buckets match a sandbox running at ``time_scale``."""
    from gatehouse.wb.limits import WB_LIMITS

    limits = {name: {"period_ms": period / time_scale} for name, (period, _, _) in WB_LIMITS.items()}
    return {"WB_LIMITS": json.dumps(limits)}


def quiet_schedules() -> dict[str, str]:
    """Scheduler env whose ticks never come due in a test (Jan 1st): tests fire them through the admin API,
    and a per-account tick's jobs are due at once (unspread: the default is half a year's cadence here)."""
    from gatehouse.schedules import DEFAULTS

    return {
        "SCHEDULES": json.dumps(
            {s.name: {"cron": "0 0 1 1 *", **({"spread_ms": 0} if s.per_account else {})} for s in DEFAULTS}
        )
    }
