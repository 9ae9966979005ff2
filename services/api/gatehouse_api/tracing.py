"""One trace per request, with traces on (gatehouse.traces).

OpenTelemetry's WSGI middleware opens the request's server span around the Falcon
app (continuing a caller's ``traceparent``), current while the request runs, so the
messages it sends carry it. ``RouteNames`` names the span by its route, as the
semantic conventions ask (``POST /v1/jobs/{job_id}/retry``, not one name per id).
(The falcon instrumentation cannot be used: it fails on an int ``resp.status``,
which Falcon 4 allows and every resource here sets.)
"""

from __future__ import annotations

from typing import Any

import falcon

from gatehouse import traces

# Answered often and to machines (probes, Prometheus): no trace of their own.
UNTRACED = frozenset({"/healthz", "/readyz", "/metrics"})


def traced(app: falcon.App) -> Any:
    """``app`` under the server span of each request but the untraced ones."""
    from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware

    spans = OpenTelemetryMiddleware(app)

    def serve(environ: dict[str, Any], start_response: Any) -> Any:
        return (app if environ.get("PATH_INFO") in UNTRACED else spans)(environ, start_response)

    return serve


class RouteNames:
    """The request's span is named by its route (a path no route matched: its method alone)."""

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, ok: bool
    ) -> None:
        route = req.uri_template
        traces.rename(f"{req.method} {route}" if route else req.method, {"http.route": route})
