"""``gatehouse_http_request_duration_seconds{route,method,status}``: the first middleware, so it times the rest.

``route`` is the route's template (``/v1/jobs/{job_id:uuid}``), never the path itself, so
ids do not make series; a request no route took is ``unrouted``. ``status`` is the class
(``2xx``, ``4xx`` …).
"""

from __future__ import annotations

import time

import falcon

from gatehouse import metrics

UNROUTED = "unrouted"


class RequestMetrics:
    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.started = time.monotonic()

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        started = getattr(req.context, "started", None)
        if started is None:
            return
        metrics.HTTP_DURATION.labels(
            route=req.uri_template or UNROUTED,
            method=req.method,
            status=f"{resp.status_code // 100}xx",
        ).observe(time.monotonic() - started)
