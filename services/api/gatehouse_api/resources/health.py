"""Liveness, readiness and metrics."""

from __future__ import annotations

import falcon

from gatehouse import metrics
from gatehouse.composition import Gatehouse
from gatehouse.db import ping
from gatehouse_api.errors import problem, send_problem


class Health:
    """Alive: the process answers. Never touches a store (a store outage is not a reason to restart)."""

    public = True

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"status": "ok"}


class Ready:
    """Ready: PostgreSQL and Redis both answer; otherwise 503 naming what is down."""

    public = True

    def __init__(self, gh: Gatehouse) -> None:
        self.gh = gh

    def _checks(self) -> dict[str, str]:
        checks = {}
        for name, probe in (("postgresql", lambda: ping(self.gh.engine)), ("redis", self.gh.redis.ping)):
            try:
                probe()
                checks[name] = "ok"
            except Exception as exc:
                checks[name] = f"down: {type(exc).__name__}"
        return checks

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        checks = self._checks()
        down = [name for name, state in checks.items() if state != "ok"]
        if not down:
            resp.media = {"status": "ready", "checks": checks}
            return
        detail = f"{' and '.join(down)} {'is' if len(down) == 1 else 'are'} down"
        send_problem(resp, 503, problem(503, "NOT_READY", detail, down=down, checks=checks))


class Metrics:
    public = True

    def __init__(self, multiproc_dir: str | None) -> None:
        self.multiproc_dir = multiproc_dir

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        body, content_type = metrics.exposition(self.multiproc_dir)
        resp.data = body
        resp.content_type = content_type
