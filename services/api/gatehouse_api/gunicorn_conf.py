"""gunicorn configuration of gatehouse-api; command-line options override these."""

from __future__ import annotations

import signal

from gunicorn.glogging import Logger

from gatehouse import logs, traces
from gatehouse.metrics import mark_process_dead
from gatehouse_api import root
from gatehouse_api.request_ids import HEADER

_settings = root.settings()

bind = _settings.api_bind
workers = _settings.api_workers
# gthread, except that a thread gets a request only once all of it has arrived:
# slow or stalled clients cost a buffer, never a thread (gatehouse_api.buffering).
worker_class = "gatehouse_api.buffering.BufferingWorker"
threads = _settings.api_threads
# Requests finish, then in-process consumers get the shutdown timeout; only then kill.
graceful_timeout = _settings.shutdown_timeout_ms // 1000 + 10
# Bodies are small JSON documents.
limit_request_line = 8190
# No runtime control socket: several instances share a host in tests and the
# root filesystem is read-only in the pods.
control_socket_disable = True
accesslog = "-"
errorlog = "-"
loglevel = _settings.log_level.lower()


class GatehouseLogger(Logger):
    """gunicorn's logs and the app's in LOG_FORMAT; the access line carries the request's id."""

    def setup(self, cfg) -> None:
        super().setup(cfg)
        logs.configure(_settings.log_format, _settings.log_level)  # the app's loggers (the root)
        logs.use_format(_settings.log_format, self.error_log, self.access_log)

    def access(self, resp, req, environ, request_time) -> None:
        # Written once the app has answered (its context is gone): the id is the one it answered.
        sent = next((value for name, value in resp.headers if name.lower() == HEADER.lower()), None)
        with logs.bound(request_id=sent):
            super().access(resp, req, environ, request_time)


logger_class = GatehouseLogger


def on_starting(server) -> None:
    # METRICS_PORT: one more listener of the same workers, added to whatever --bind says; the
    # app answers only /metrics there (gatehouse_api.metrics_port).
    if _settings.metrics_port:
        server.cfg.set("bind", [*server.cfg.bind, _settings.bind_on_api_host(_settings.metrics_port)])


def post_worker_init(worker) -> None:
    from gatehouse_api import app

    # Ctrl-C reaches every process of the group: let the master's graceful stop decide.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if app.PROCESS is not None:
        app.PROCESS.start_consumers()


def worker_exit(server, worker) -> None:
    from gatehouse_api import app

    if app.PROCESS is not None:
        app.PROCESS.stop()
    traces.shutdown()  # what is still batched, before the worker exits


def child_exit(server, worker) -> None:
    mark_process_dead(worker.pid, _settings.prometheus_multiproc_dir)
