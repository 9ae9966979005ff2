"""The sandbox's own endpoints under ``/__sandbox/`` (for tests; no token, never logged).

- ``GET /__sandbox/health``          -> ``{"Status": "OK"}``
- ``GET /__sandbox/config``          -> time scale, page size, rows per day, seed, anchor, limits in force
- ``GET /__sandbox/log[?seller=ID]`` -> the request log, oldest first; ``DELETE`` clears it
- ``GET /__sandbox/faults``          -> the fault switches; ``POST`` merges a JSON object into them
- ``POST /__sandbox/reset``          -> no faults, full buckets, empty log, generated bids
"""

from __future__ import annotations

import json

from gatehouse_wb_sandbox.calls import Reply
from gatehouse_wb_sandbox.state import Sandbox


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
    return Reply(404, {"title": "not found", "detail": f"{method} {path}", "status": 404})
