"""HTTP methods: HEAD wherever GET is served, and 405 (not 400) for methods Falcon does not know."""

from __future__ import annotations

from typing import Any

import falcon
from falcon.constants import COMBINED_METHODS
from falcon.routing import map_http_methods


def with_head(resource: Any) -> Any:
    """Serve HEAD as GET: Falcon sends the status and headers and drops the body."""
    if hasattr(resource, "on_get") and not hasattr(resource, "on_head"):
        resource.on_head = resource.on_get
    return resource


def allowed_methods(resource: Any) -> list[str]:
    """What the route answers, as Falcon's own 405 and OPTIONS list it."""
    return [*sorted(m for m in map_http_methods(resource) if m not in ("OPTIONS", "WEBSOCKET")), "OPTIONS"]


class UnknownMethods:
    """Falcon middleware: a method outside HTTP and WebDAV answers 405 with Allow, like DELETE on a GET route.

    Falcon itself answers such a method with 400. Placed after authentication,
    so an unknown method is treated exactly like a known one the route lacks.
    """

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, params: dict
    ) -> None:
        if resource is not None and req.method not in COMBINED_METHODS:
            raise falcon.HTTPMethodNotAllowed(
                allowed_methods(resource), description=f"{req.method} is not a method of this resource"
            )
