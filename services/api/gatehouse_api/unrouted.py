"""Requests that no route serves: authenticated first under /v1, then a 404 that says what was not found.

Falcon answers such a request itself, before any middleware's ``process_resource``
runs, with a bare "404 Not Found": a wrong token on ``/v1/jobs/abc`` was told 404,
not 401, and nobody was told why. ``NoRoute`` is the app's sink for every path
no route matches: under /v1 it checks the bearer token as ``Authenticate`` does
(authentication comes before routing details), then names what was not found —
a path that would be a route but for an id that is not a UUID (``job 'abc' not
found: job ids are UUIDs``), or no route at all (``no route GET /v1/nope``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from typing import Any

import falcon

from gatehouse.errors import NotFound
from gatehouse_api.auth import Authenticate
from gatehouse_api.hygiene import is_v1
from gatehouse_api.openapi import FIELD

# How a path field's thing is called where its name alone would not say it.
THINGS = {
    "operation_id": "bulk operation",
    "endpoint_id": "webhook endpoint",
    "delivery_id": "webhook delivery",
    "rfq_id": "RFQ",
}
# A path or value quoted back at most this long.
QUOTE_MAX = 200


def _quoted(text: str) -> str:
    return text if len(text) <= QUOTE_MAX else text[:QUOTE_MAX] + "…"


def no_route(req: falcon.Request) -> NotFound:
    """The 404 of a path that no route serves."""
    return NotFound(f"no route {req.method} {_quoted(req.path)}")


class _Template:
    """A URI template matched with its UUID fields loosened to any segment."""

    def __init__(self, template: str) -> None:
        self.uuid_fields: list[str] = []
        pattern, last = "", 0
        for m in FIELD.finditer(template):
            pattern += re.escape(template[last : m.start()]) + f"(?P<{m[1]}>[^/]+)"
            if m[2] == "uuid":
                self.uuid_fields.append(m[1])
            last = m.end()
        self.regex = re.compile(pattern + re.escape(template[last:]))

    def not_a_uuid(self, path: str) -> tuple[str, str] | None:
        """(field, value) of the first UUID field whose value is not one, if ``path`` has this shape."""
        m = self.regex.fullmatch(path)
        if m is None:
            return None
        for name in self.uuid_fields:
            try:
                uuid.UUID(m[name])
            except ValueError:
                return name, m[name]
        return None


class NoRoute:
    """The sink of every path no route matches (``app.add_sink(NoRoute(…))``)."""

    def __init__(self, authenticate: Authenticate, templates: Iterable[str]) -> None:
        self.authenticate = authenticate
        self.templates = [_Template(t) for t in templates if ":uuid" in t]

    def __call__(self, req: falcon.Request, resp: falcon.Response, **params: Any) -> None:
        if is_v1(req):
            self.authenticate.check(req)
        for template in self.templates:
            if found := template.not_a_uuid(req.path):
                name, value = found
                thing = THINGS.get(name, name.removesuffix("_id").replace("_", " "))
                raise NotFound(f"{thing} '{_quoted(value)}' not found: {thing} ids are UUIDs")
        raise no_route(req)
