"""/metrics on its own listener (METRICS_PORT), and nothing else there.

gunicorn listens on METRICS_PORT too (gatehouse_api.gunicorn_conf), so the same
workers answer it and the multiprocess collector sums them all. Which listener a
request came in on is the socket's local port (gunicorn's SERVER_PORT, never a
header). /metrics on the public port, and any other path on the metrics port,
answer the 404 of a path with no route: the public port, reached through the
ingress, never shows metrics, and the metrics port, reached by Prometheus,
never reaches the API. Without METRICS_PORT no request gets /metrics.
"""

from __future__ import annotations

import falcon

from gatehouse_api.unrouted import no_route

METRICS_PATH = "/metrics"


class MetricsPort:
    def __init__(self, port: int | None) -> None:
        self.port = str(port) if port else None

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        if (req.env.get("SERVER_PORT") == self.port) != (req.path == METRICS_PATH):
            raise no_route(req)
