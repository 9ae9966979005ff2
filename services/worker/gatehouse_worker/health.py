"""Worker liveness and metrics for orchestrators.

Each worker process touches ``<WORKER_ALIVE_DIR>/<pid>`` while all its
consumer and worker threads are alive. With WORKER_HEALTH_PORT set, a process
forked by the dramatiq CLI serves ``/healthz`` (503 once any worker process
stopped touching its file) and ``/metrics`` (all worker processes summed).
Without it the worker opens no port.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from dramatiq import Broker, Middleware

from gatehouse.settings import Settings, load_settings

log = logging.getLogger(__name__)


class ConsumerLiveness(Middleware):
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._stop = threading.Event()

    @property
    def forks(self) -> list:
        return [serve_health] if self.settings.worker_health_port and self.settings.worker_alive_dir else []

    def after_worker_boot(self, broker: Broker, worker: Any) -> None:
        if not self.settings.worker_alive_dir:
            return  # not started by an entry point (in-process tests, benchmarks)
        path = Path(self.settings.worker_alive_dir) / str(os.getpid())
        threading.Thread(target=self._touch, args=(worker, path), name="liveness", daemon=True).start()

    def before_worker_shutdown(self, broker: Broker, worker: Any) -> None:
        self._stop.set()

    def _touch(self, worker: Any, path: Path) -> None:
        interval = self.settings.worker_liveness_timeout_ms / 6000
        while True:
            threads = [*worker.consumers.values(), *worker.workers]
            if threads and all(t.is_alive() for t in threads):
                path.touch()
            if self._stop.wait(interval):
                return


def health(settings: Settings, now: float | None = None) -> tuple[int, dict]:
    files = list(Path(settings.worker_alive_dir or "/nonexistent").glob("*"))
    now = time.time() if now is None else now
    stale = [f.name for f in files if now - f.stat().st_mtime > settings.worker_liveness_timeout_ms / 1000]
    if not files:
        return 503, {"status": "starting", "processes": 0}
    if stale:
        return 503, {"status": "consumers not alive", "stale_pids": stale}
    return 200, {"status": "ok", "processes": len(files)}


def serve_health() -> int:
    """Fork process of the dramatiq CLI: serve /healthz and /metrics until SIGTERM."""
    from gatehouse import metrics

    settings = load_settings()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if self.path == "/healthz":
                status, body = health(settings)
                data, content_type = json.dumps(body).encode(), "application/json"
            elif self.path == "/metrics":
                status = 200
                data, content_type = metrics.exposition(settings.prometheus_multiproc_dir)
            else:
                status, data, content_type = 404, b"{}", "application/json"
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("0.0.0.0", settings.worker_health_port), Handler)
    log.info("worker health and metrics on :%d", settings.worker_health_port)
    server.serve_forever()
    return 0
