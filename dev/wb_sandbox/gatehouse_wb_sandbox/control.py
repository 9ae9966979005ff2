"""The sandbox's own endpoints under ``/__sandbox/`` (for tests; no token, never logged).

- ``GET /__sandbox/health``          -> ``{"Status": "OK"}``
- ``GET /__sandbox/config``          -> time scale, page size, rows per day, seed, anchor, limits in force
- ``GET /__sandbox/log[?seller=ID]`` -> the request log, oldest first; ``DELETE`` clears it
- ``GET /__sandbox/faults``          -> the fault switches; ``POST`` merges a JSON object into them
- ``POST /__sandbox/reset``          -> no faults, full buckets, empty log, generated bids
- ``POST /__sandbox/tokens``         -> ``{"token": "..."}``: mints a WB-shaped JWT from
  ``{"sid": "...", "categories": ["statistics", ...], "expiresInDays": N}``; ``categories``
  (``tokens.CATEGORY_BITS`` names) defaults to every category, ``expiresInDays`` (a number, may be
  negative: already expired) to no expiry. E.g. a token lacking Finance, or one expiring tomorrow::

      curl -s localhost:8081/__sandbox/tokens -d '{"sid": "42", "categories": ["statistics"]}'
"""

from __future__ import annotations

import json
import time
from typing import Any

from gatehouse_wb_sandbox.calls import Reply
from gatehouse_wb_sandbox.state import Sandbox
from gatehouse_wb_sandbox.tokens import make_token


def _bad(title: str, detail: str) -> Reply:
    return Reply(400, {"title": title, "detail": detail, "status": 400})


def _mint(raw: bytes) -> Reply:
    try:
        request: Any = json.loads(raw or b"{}")
    except ValueError:
        return _bad("invalid token request", "expected a JSON object")
    if not isinstance(request, dict) or set(request) - {"sid", "categories", "expiresInDays"}:
        return _bad("invalid token request", "expected an object with sid, categories, expiresInDays")
    sid, categories, days = request.get("sid"), request.get("categories"), request.get("expiresInDays")
    if not isinstance(sid, str) or not sid:
        return _bad("invalid token request", "sid: a non-empty string")
    if categories is not None and (
        not isinstance(categories, list) or not all(isinstance(c, str) for c in categories)
    ):
        return _bad("invalid token request", "categories: a list of category names")
    if days is not None and (isinstance(days, bool) or not isinstance(days, int | float)):
        return _bad("invalid token request", "expiresInDays: a number of days")
    exp = None if days is None else int(time.time() + days * 86_400)
    try:
        return Reply(200, {"token": make_token(sid, exp=exp, categories=categories)})
    except ValueError as exc:  # an unknown category
        return _bad("invalid token request", f"categories: {exc}")


def _config(sandbox: Sandbox) -> dict:
    config = sandbox.config
    return {
        "time_scale": config.time_scale,
        "page_size": config.page_size,
        "rows_per_day": config.rows_per_day,
        "seed": config.seed,
        "anchor": sandbox.spec.anchor.isoformat(),
        "history_days": sandbox.spec.history_days,
        "limits": {
            name: {"period_ms": lim.period_ms, "limit": lim.limit, "burst": lim.burst}
            for name, lim in sandbox.limits.items()
        },
    }


def handle(sandbox: Sandbox, method: str, path: str, query: dict[str, str], raw: bytes) -> Reply:
    match method, path:
        case "GET", "/__sandbox/health":
            return Reply(200, {"Status": "OK"})
        case "GET", "/__sandbox/config":
            return Reply(200, _config(sandbox))
        case "GET", "/__sandbox/log":
            return Reply(200, sandbox.log.entries(query.get("seller")))
        case "DELETE", "/__sandbox/log":
            sandbox.log.clear()
            return Reply(204)
        case "GET", "/__sandbox/faults":
            return Reply(200, sandbox.faults.snapshot())
        case "POST", "/__sandbox/faults":
            try:
                sandbox.faults.update(json.loads(raw or b"{}"))
            except ValueError as exc:  # not JSON, or a FaultError
                return Reply(400, {"title": "invalid faults", "detail": str(exc), "status": 400})
            return Reply(200, sandbox.faults.snapshot())
        case "POST", "/__sandbox/reset":
            sandbox.reset()
            return Reply(204)
        case "POST", "/__sandbox/tokens":
            return _mint(raw)
    return Reply(404, {"title": "not found", "detail": f"{method} {path}", "status": 404})
