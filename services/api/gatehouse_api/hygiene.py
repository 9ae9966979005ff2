"""What every request and /v1 answer shares: query parameters are validated like body fields, and
no /v1 answer is cached (some carry a new secret; any may carry tenant data)."""

from __future__ import annotations

from typing import Any

import falcon

from gatehouse.errors import ValidationFailed
from gatehouse_api.schemas import NO_NUL, PATTERN_RULES

V1 = "/v1"


def is_v1(req: falcon.Request) -> bool:
    return req.path == V1 or req.path.startswith(V1 + "/")


class Hygiene:
    """Falcon middleware: a NUL in a query parameter is a 422 naming it (PostgreSQL text cannot hold
    one, so it would otherwise fail deep in a filter's SQL); every /v1 answer, errors too, says
    ``Cache-Control: no-store``."""

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, params: dict
    ) -> None:
        for name, value in req.params.items():
            if "\x00" in name or any("\x00" in v for v in (value if isinstance(value, list) else [value])):
                raise ValidationFailed(f"{name}: {PATTERN_RULES[NO_NUL]}", field=name)

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, req_succeeded: bool
    ) -> None:
        if is_v1(req):
            resp.set_header("Cache-Control", "no-store")
