"""Liveness, readiness and metrics."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import falcon
from prometheus_client.registry import Collector
from redis import Redis
from sqlalchemy import Engine

from gatehouse import metrics
from gatehouse.db import ping
from gatehouse_api.errors import problem, send_problem
from gatehouse_api.openapi import contract


class Health:
    """Alive: the process answers. Never touches a store (a store outage is not a reason to restart)."""

    public = True

    @contract("Liveness", (200, None, "alive"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"status": "ok"}


class Probe:
    """One store check on a daemon thread, so a store that stopped answering cannot hang /readyz.

    At most one check per store runs at a time: a request that finds the last
    one still waiting waits for that one, never starts another (no thread pile-up).
    """

    def __init__(self, check: Callable[[], object]) -> None:
        self.check = check
        self.lock = threading.Lock()
        self.running: threading.Thread | None = None
        self.outcome: str = "down: not checked yet"

    def start(self) -> threading.Thread:
        with self.lock:
            if self.running is None or not self.running.is_alive():
                self.running = threading.Thread(target=self._run, name="readyz-probe", daemon=True)
                self.running.start()
            return self.running

    def _run(self) -> None:
        try:
            self.check()
            self.outcome = "ok"
        except Exception as exc:
            self.outcome = f"down: {type(exc).__name__}"


class StoreChecks:
    """PostgreSQL and Redis checked at once against one deadline (one check per store at a time)."""

    def __init__(self, engine: Engine, redis: Redis, *, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self.probes = {"postgresql": Probe(lambda: ping(engine)), "redis": Probe(redis.ping)}

    def __call__(self) -> dict[str, str]:
        started = {name: probe.start() for name, probe in self.probes.items()}
        deadline = time.monotonic() + self.timeout_ms / 1000
        checks = {}
        for name, thread in started.items():
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                checks[name] = f"down: no answer within {self.timeout_ms} ms"
            else:
                checks[name] = self.probes[name].outcome
        return checks


class Ready:
    """Ready: PostgreSQL and Redis both answer (within READY_TIMEOUT_MS); otherwise 503 naming what is down."""

    public = True

    def __init__(self, checks: StoreChecks) -> None:
        self.checks = checks

    @contract(
        "Readiness",
        (200, None, "PostgreSQL and Redis answer"),
        (503,),
        notes={503: "a store is down (named in `down`)"},
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        checks = self.checks()
        down = [name for name, state in checks.items() if state != "ok"]
        if not down:
            resp.media = {"status": "ready", "checks": checks}
            return
        detail = f"{' and '.join(down)} {'is' if len(down) == 1 else 'are'} down"
        send_problem(resp, 503, problem(503, "NOT_READY", detail, down=down, checks=checks))


class Metrics:
    public = True
    outside_contract = "Prometheus text exposition for a scraper, not JSON"

    def __init__(self, multiproc_dir: str | None, *live: Collector) -> None:
        self.multiproc_dir, self.live = multiproc_dir, live

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        body, content_type = metrics.exposition(self.multiproc_dir, *self.live)
        resp.data = body
        resp.content_type = content_type
